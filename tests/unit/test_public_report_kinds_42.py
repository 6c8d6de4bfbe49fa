"""Variants of what the forty-second public-report set (tests/unit/data/public_reports_42) taught, with negative
controls: vLLM's MultiConnector keeps the hybrid KV cache manager (HMA) only when every child connector subclasses
``SupportsHMA`` (vllm#41847; ``KVConnectorFactory.supports_hma_config`` -> ``MultiConnector.all_children_support_hma``),
read in the 0.22.0-0.34.0 releases, the 0.33.0 and 0.34.0 sdists included (the set's misses were all on 0.34.0).

- With no HMA flag, a MultiConnector with LMCacheConnectorV1, ExampleConnector or FlexKVConnectorV1 turns HMA off: a
  hybrid SSM model then fails the NIXL worker's ``assert self._is_hma_required`` (``hybrid-hma-disabled``), and a
  plain NixlConnector peer (HMA on) hashes ``is_hma_enabled`` differently (``hma-flag-mismatch``).
- With ``--no-disable-hybrid-kv-cache-manager`` the factory raises "Connector MultiConnector does not support HMA but
  HMA is enabled" (``hma-explicit-forced-off``), whatever the model.
"""

from __future__ import annotations

import json

from pdd_operator.compat.connector_hma import multi_children_without_hma
from pdd_operator.compat.pair import RoleConfig
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
OFFLOAD = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
           "kv_connector_extra_config": {"block_size": 64, "cpu_bytes_to_use": 8000000000}}
DS = {"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}
NEMOTRON = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8"


def _multi(*children):
    return json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both",
                       "kv_connector_extra_config": {"connectors": [NIXL, *children]}})


def _child(name):
    return {"kv_connector": name, "kv_role": "kv_both"}


def _pair(model, image, kv_p, kv_d, args=(), env=(), kind="StatefulSet"):
    docs = []
    for role, kv in (("prefill", kv_p), ("decode", kv_d)):
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": [model, *args, "--kv-transfer-config", kv], "env": [POD_IP, *env],
             "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        docs.append(workload(f"m-{role}", role, c, kind=kind, app="m"))
    return docs


def test_hybrid_ssm_under_a_multiconnector_with_a_non_hma_child_is_refused(tmp_path, capsys):
    kv = _multi(_child("ExampleConnector"))
    code, out = check(tmp_path, capsys, *_pair(NEMOTRON, "vllm/vllm-openai:v0.33.0", kv, kv,
                                               args=("--trust-remote-code", "--no-enable-prefix-caching"), env=(DS,)))
    assert code == 1 and "hybrid-hma-disabled" in rules(out, "error")


def test_hybrid_ssm_under_a_multiconnector_whose_children_all_support_hma_is_not(tmp_path, capsys):
    kv = json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both",
                     "kv_connector_extra_config": {"connectors": [NIXL, OFFLOAD]}})
    code, out = check(tmp_path, capsys, *_pair(NEMOTRON, "vllm/vllm-openai:v0.33.0", kv, kv,
                                               args=("--trust-remote-code", "--no-enable-prefix-caching"), env=(DS,)))
    assert "hybrid-hma-disabled" not in rules(out)


def test_explicit_hma_with_a_non_hma_multiconnector_child_is_refused_on_new_releases(tmp_path, capsys):
    kv = _multi(_child("FlexKVConnectorV1"))
    code, out = check(tmp_path, capsys, *_pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.33.0", kv, kv,
                                               args=("--no-disable-hybrid-kv-cache-manager",), kind="Deployment"))
    assert code == 1 and "hma-explicit-forced-off" in rules(out, "error")


def test_explicit_hma_with_hma_children_or_children_not_read_is_not(tmp_path, capsys):
    both = json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both",
                       "kv_connector_extra_config": {"connectors": [NIXL, OFFLOAD]}})
    code, out = check(tmp_path, capsys, *_pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.34.0", both,
                                               both, args=("--no-disable-hybrid-kv-cache-manager",)))
    assert "hma-explicit-forced-off" not in rules(out)
    lmc = _multi(_child("LMCacheConnectorV1"))  # 0.21.x: the children's classes were not read
    code, out = check(tmp_path, capsys, *_pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.21.0", lmc,
                                               lmc, args=("--no-disable-hybrid-kv-cache-manager",)))
    assert "hma-explicit-forced-off" not in rules(out)


def test_plain_nixl_prefill_with_a_multiconnector_decode_mismatches_the_hma_hash_on_0_34(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("openai/gpt-oss-20b", "vllm/vllm-openai:v0.34.0", json.dumps(NIXL),
                                               _multi(_child("LMCacheConnectorV1"))))
    assert code == 1 and "hma-flag-mismatch" in rules(out, "error")
    kv = _multi(_child("LMCacheConnectorV1"))
    code, out = check(tmp_path, capsys, *_pair("openai/gpt-oss-20b", "vllm/vllm-openai:v0.34.0", kv, kv))
    assert "hma-flag-mismatch" not in rules(out)


def test_multi_children_without_hma_by_release():
    def role(version, wrapper):
        return RoleConfig(role="decode", version=version, wrapper=wrapper)
    wrapper = "MultiConnector[NixlConnector, LMCacheConnectorV1, OffloadingConnector]"
    assert multi_children_without_hma(role((0, 34, 0), wrapper)) == ["LMCacheConnectorV1"]
    assert multi_children_without_hma(role((0, 22, 0), wrapper)) == ["LMCacheConnectorV1"]
    assert multi_children_without_hma(role((0, 21, 0), wrapper)) == []
    assert multi_children_without_hma(role((0, 35, 0), wrapper)) == []
    assert multi_children_without_hma(role(None, wrapper)) == []
    assert multi_children_without_hma(role((0, 34, 0), "PdConnector[DynamoConnector, NixlConnector]")) == []
