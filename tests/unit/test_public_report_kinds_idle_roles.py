"""Variants of the kind of fault the hundred-and-seventeenth public-report set (tests/unit/data/public_reports_117)
found: an orchestrator resource that declares prefill and decode roles whose containers only idle (``sleep 3600``,
``sleep infinity``, ``tail -f /dev/null``) starts no engine, so it is nothing to check (exit 4), not a P/D
deployment left unchecked (exit 3). Negative controls: roles that run their image's entrypoint (no ``command``), a
role that idles beside one that does not, a sleep that precedes an engine, and idle roles whose manifest still
configures KV transfer stay "not checked"."""

from __future__ import annotations

import copy

import pytest

from pdd_operator.compat.manifests import idle_container
from tests.unit.test_turn2_variants import check

IDLE = (["sh", "-c", "sleep 3600"], ["sleep", "infinity"], ["/bin/bash", "-c", "tail -f /dev/null"],
        ["sh", "-c", "while true; do sleep 30; done"], ["bash", "-lc", "exec sleep 1d"])


def _storm(prefill: dict, decode: dict) -> dict:
    """An AIBrix StormService with one prefill and one decode role whose pods hold ``prefill``/``decode``."""
    def role(name: str, container: dict) -> dict:
        return {"name": name, "replicas": 1, "podGroupSize": 2, "stateful": True,
                "template": {"metadata": {"labels": {"model.aibrix.ai/engine": "vllm"}},
                             "spec": {"containers": [{"name": name, **container}]}}}
    return {"apiVersion": "orchestration.aibrix.ai/v1alpha1", "kind": "StormService", "metadata": {"name": "pd"},
            "spec": {"replicas": 1, "template": {"spec": {"roles": [role("prefill", prefill), role("decode", decode)]}}}}


def _model_serving(container: dict) -> dict:
    """A kthena ModelServing whose prefill and decode roles' entry pods hold ``container`` (an init container that
    downloads the model beside it)."""
    def role(name: str) -> dict:
        return {"name": name, "replicas": 1, "workerReplicas": 0, "entryTemplate": {"spec": {
            "initContainers": [{"name": "downloader", "image": "ghcr.io/volcano-sh/downloader:latest",
                                "args": ["--source", "Qwen/Qwen3-8B"]}],
            "containers": [{"name": name, **copy.deepcopy(container)}]}}}
    return {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing", "metadata": {"name": "pd"},
            "spec": {"replicas": 1, "template": {"roles": [role("prefill"), role("decode")]}}}


@pytest.mark.parametrize("command", IDLE, ids=[" ".join(c) for c in IDLE])
def test_idle_prefill_and_decode_roles_are_nothing_to_check(tmp_path, capsys, command):
    busy = {"image": "busybox:1.36", "command": command}
    code, out = check(tmp_path, capsys, _storm(busy, busy))
    assert code == 4 and not out["notChecked"] and not out["results"]


def test_idle_roles_of_a_vllm_image_in_a_model_serving_are_nothing_to_check(tmp_path, capsys):
    # The vLLM image with an explicit sleep command: the command replaces the image's entrypoint.
    code, out = check(tmp_path, capsys, _model_serving({"image": "vllm/vllm-openai:v0.20.0",
                                                        "command": ["sleep", "infinity"]}))
    assert code == 4 and not out["notChecked"]


def test_roles_running_their_images_entrypoint_stay_not_checked(tmp_path, capsys):
    entry = {"image": "registry.example.com/qwen3-pd:1.0"}
    code, out = check(tmp_path, capsys, _storm(entry, entry))
    assert code == 3 and "declares prefill and decode roles" in out["notChecked"][0]["reason"]


def test_one_idle_role_beside_an_entrypoint_role_stays_not_checked(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _storm({"image": "busybox:1.36", "command": ["sh", "-c", "sleep 3600"]},
                                               {"image": "registry.example.com/qwen3-pd:1.0"}))
    assert code == 3 and out["notChecked"]


def test_idle_roles_whose_manifest_configures_kv_transfer_stay_not_checked(tmp_path, capsys):
    busy = {"image": "busybox:1.36", "command": ["sh", "-c", "sleep 3600"],
            "env": [{"name": "KV_TRANSFER_CONFIG", "value": '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'}]}
    code, out = check(tmp_path, capsys, _storm(busy, busy))
    assert code == 3 and out["notChecked"]


@pytest.mark.parametrize("container", [
    {"command": ["sh", "-c", "sleep 10 && vllm serve Qwen/Qwen3-8B"]},  # a sleep before an engine
    {"command": ["sleep"], "args": ["$(DELAY)"]},  # not a literal duration
    {"args": ["sleep", "3600"]},  # args alone: the image's entrypoint receives them
    {"command": ["/scripts/run.sh"]},  # a script not in the file
    {"image": "busybox"},  # no command: the image's entrypoint
])
def test_containers_that_do_more_than_idle_are_not_idle(container):
    assert not idle_container(container)
