"""KServe LLMInferenceService(Config) ``main`` containers without a command: KServe's config template supplies
the command (config/llmisvcconfig/config-llm-template.yaml: ``vllm serve /mnt/models``; other releases a shell
script), not the image's entrypoint, so the engine is "not checked" instead of read as ``vllm serve <args>``.
"""

from __future__ import annotations

import pytest

from pdd_operator.compat.manifests import scan

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _main(image="vllm/vllm-openai:v0.28.0", command=None, args=("--kv-transfer-config", KV), env=()):
    c = {"name": "main", "image": image, "args": list(args), "env": list(env)}
    if command:
        c["command"] = command
    return c


def _svc(kind, decode, prefill=None, worker=None):
    spec = {"template": {"containers": [decode]}}
    if prefill is not None:
        spec["prefill"] = {"template": {"containers": [prefill]}}
    if worker is not None:
        spec["worker"] = {"containers": [worker]}
    return {"kind": kind, "metadata": {"name": "svc"}, "spec": spec}


@pytest.mark.parametrize("kind", ["LLMInferenceService", "LLMInferenceServiceConfig"])
@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.28.0", "ghcr.io/llm-d/llm-d-cuda:v0.4.0",
                                   "quay.io/acme/vllm:0.30.1"])
def test_args_without_command_are_not_read_through_the_image_entrypoint(kind, image):
    engines, unreadable = scan(_svc(kind, _main(image), _main(image)))
    assert engines == []
    assert sorted(u.where.split(" ", 1)[1] for u in unreadable) == [
        "spec.prefill.template.containers(main)", "spec.template.containers(main)"]
    assert all("KServe's LLMInferenceServiceConfig templates" in u.reason for u in unreadable)


def test_kv_args_without_prefill_section_are_not_checked_either():
    engines, unreadable = scan(_svc("LLMInferenceService", _main()))
    assert engines == [] and len(unreadable) == 1


def test_worker_template_without_command_is_reported():
    _, unreadable = scan(_svc("LLMInferenceService", _main(command=["vllm", "serve", "m"]),
                              _main(command=["vllm", "serve", "m"]), worker=_main()))
    assert [u.where.split(" ", 1)[1] for u in unreadable] == ["spec.worker.containers(main)"]


def test_explicit_command_is_read():
    cmd = ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    engines, unreadable = scan(_svc("LLMInferenceService", _main(command=cmd), _main(command=cmd)))
    assert unreadable == [] and sorted(e.role for e in engines) == ["decode", "prefill"]


def test_aggregated_service_without_kv_transfer_stays_silent():
    engines, unreadable = scan(_svc("LLMInferenceService", _main(args=("--max-model-len", "8192"))))
    assert engines == [] and unreadable == []


def test_a_plain_deployment_still_runs_the_vllm_image_entrypoint():
    doc = {"kind": "Deployment", "metadata": {"name": "m-prefill"},
           "spec": {"template": {"spec": {"containers": [
               _main(args=("meta-llama/Llama-3.1-8B-Instruct", "--kv-transfer-config",
                           KV.replace("kv_both", "kv_producer")))]}}}}
    engines, unreadable = scan(doc)
    assert unreadable == [] and [e.role for e in engines] == ["prefill"]
