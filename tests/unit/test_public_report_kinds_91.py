"""Variants of what the ninety-first public-report set (tests/unit/data/public_reports_91) taught, with negative
controls.

A KServe ``LLMInferenceService`` (or ``LLMInferenceServiceConfig``) whose ``main`` containers have no command runs
KServe's template line, which is not in the user's files, so its engines stay "not checked"; two more pair faults lie
wholly in what the user writes and are judged all the same
(:data:`pdd_operator.compat.templated.TEMPLATE_FREE_RULES`):

1. The two roles' images name different vLLM releases: the image is the container's own field (the template's
   applies only where the container names none), and NIXL's compatibility hash includes ``vllm_version`` (0.20.0
   nixl/metadata.py l.105, 0.23.0 l.108), so the decode refuses the handshake (``vllm-version-mismatch``).
2. One role names NixlConnector in its ``VLLM_ADDITIONAL_ARGS`` and the other no connector at all: no template of
   kserve v0.15.0-v0.20.0 names a P/D connector (``${KV_TRANSFER_ARGS}`` of v0.20.0 renders an OffloadingConnector
   from ``kvCacheOffloading`` and "" without it, config_merge.go l.641-648), so that role runs without one
   (``kv-connector-missing``). With ``kvCacheOffloading`` set on that role, or another connector named, it stays
   "not checked".
"""

from __future__ import annotations

import pytest

from tests.unit.test_turn2_variants import POD_IP, check, rules

NIXL = {"kv_producer": "--kv_transfer_config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_producer\"}'",
        "kv_consumer": "--kv_transfer_config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_consumer\"}'"}


def _main(args: str | None, image: str | None = None) -> dict:
    env = [POD_IP] + ([{"name": "VLLM_ADDITIONAL_ARGS", "value": args}] if args is not None else [])
    c = {"name": "main", "env": env, "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {**c, "image": image} if image else c


def _llmisvc(prefill: dict, decode: dict, model: str = "Qwen/Qwen2.5-7B-Instruct", api: str = "v1alpha1",
             kind: str = "LLMInferenceService", prefill_extra: dict | None = None) -> dict:
    return {"apiVersion": f"serving.kserve.io/{api}", "kind": kind, "metadata": {"name": "svc"},
            "spec": {"model": {"uri": f"hf://{model}", "name": model}, "replicas": 1,
                     "router": {"scheduler": {}, "route": {}},
                     "template": {"containers": [decode]},
                     "prefill": {"replicas": 2, "template": {"containers": [prefill]}, **(prefill_extra or {})}}}


# --- 1. the two roles' images name different vLLM releases ---------------------------------------------------------


@pytest.mark.parametrize(("p_image", "d_image"), [
    ("ghcr.io/llm-d/llm-d-cuda:v0.9.0", "ghcr.io/llm-d/llm-d-cuda:v0.8.0"),  # vLLM 0.26.0 against 0.23.0
    ("vllm/vllm-openai:v0.19.0", "vllm/vllm-openai:v0.20.0"),
    ("vllm/vllm-openai:v0.22.0", "ghcr.io/llm-d/llm-d-cuda:v0.9.0"),       # 0.22.0 against 0.26.0
])
@pytest.mark.parametrize("kind", ["LLMInferenceService", "LLMInferenceServiceConfig"])
@pytest.mark.parametrize("model", ["Qwen/Qwen2.5-7B-Instruct", "RedHatAI/gpt-oss-20b"])
def test_templated_roles_on_different_vllm_releases_are_refused(tmp_path, capsys, p_image, d_image, kind, model):
    svc = _llmisvc(_main(NIXL["kv_producer"], p_image), _main(NIXL["kv_consumer"], d_image), model, "v1alpha2", kind)
    code, out = check(tmp_path, capsys, svc)
    assert code == 1 and "vllm-version-mismatch" in rules(out, "error")
    assert out["notChecked"]  # the rest of the engine lines stays unread


@pytest.mark.parametrize(("p_image", "d_image"), [
    ("ghcr.io/llm-d/llm-d-cuda:v0.8.0", "ghcr.io/llm-d/llm-d-cuda:v0.8.0"),   # one release on both
    ("ghcr.io/llm-d/llm-d-cuda:v0.8.0", "vllm/vllm-openai:v0.23.0"),          # the same vLLM in two images
    ("ghcr.io/llm-d/llm-d-cuda:v0.9.0", None),                                # the decode's image is the preset's
    (None, None),
])
def test_templated_roles_on_one_or_an_unknown_release_stay_not_checked(tmp_path, capsys, p_image, d_image):
    code, out = check(tmp_path, capsys, _llmisvc(_main(NIXL["kv_producer"], p_image), _main(NIXL["kv_consumer"], d_image)))
    assert code == 3 and not rules(out, "error") and out["notChecked"]


# --- 2. one role names NixlConnector, the other no connector -------------------------------------------------------


@pytest.mark.parametrize(("prefill_args", "decode_args"), [
    (None, NIXL["kv_consumer"]),                       # the prefill template drops its VLLM_ADDITIONAL_ARGS
    ("--max-model-len 8192", NIXL["kv_consumer"]),     # ... keeps other flags but not the kv_transfer_config
    (NIXL["kv_producer"], "--gpu-memory-utilization 0.9"),  # the decode drops it
])
@pytest.mark.parametrize("image", [None, "ghcr.io/llm-d/llm-d-cuda:v0.8.0", "vllm/vllm-openai:v0.20.0"])
@pytest.mark.parametrize("api", ["v1alpha1", "v1alpha2"])
def test_templated_role_without_a_connector_beside_nixl_is_refused(tmp_path, capsys, prefill_args, decode_args,
                                                                    image, api):
    svc = _llmisvc(_main(prefill_args, image), _main(decode_args, image), api=api)
    code, out = check(tmp_path, capsys, svc)
    assert code == 1 and "kv-connector-missing" in rules(out, "error")


def test_templated_role_without_a_connector_but_with_kv_cache_offloading_stays_not_checked(tmp_path, capsys):
    """The v0.20.0 template renders an OffloadingConnector line from the role's ``kvCacheOffloading``."""
    svc = _llmisvc(_main(None), _main(NIXL["kv_consumer"]), api="v1alpha2",
                   prefill_extra={"kvCacheOffloading": {"cpu": "20Gi"}})
    code, out = check(tmp_path, capsys, svc)
    assert code == 3 and not rules(out, "error") and out["notChecked"]


@pytest.mark.parametrize(("prefill_args", "decode_args"), [
    (None, None),                                                     # neither names KV transfer
    ("--kv_transfer_config '{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"}'", NIXL["kv_consumer"]),
    (NIXL["kv_producer"], NIXL["kv_consumer"]),
])
def test_templated_pairs_without_a_connector_fault_stay_not_checked(tmp_path, capsys, prefill_args, decode_args):
    code, out = check(tmp_path, capsys, _llmisvc(_main(prefill_args), _main(decode_args)))
    assert code == 3 and not rules(out, "error") and out["notChecked"]


def test_templated_role_whose_additional_args_come_from_a_configmap_stays_not_checked(tmp_path, capsys):
    prefill = _main(None)
    prefill["env"].append({"name": "VLLM_ADDITIONAL_ARGS",
                           "valueFrom": {"configMapKeyRef": {"name": "vllm-args", "key": "prefill"}}})
    code, out = check(tmp_path, capsys, _llmisvc(prefill, _main(NIXL["kv_consumer"])))
    assert code == 3 and not rules(out, "error") and out["notChecked"]
