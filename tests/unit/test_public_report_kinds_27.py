"""Variants of what the twenty-seventh public-report set (tests/unit/data/public_reports_27) taught, with negative
controls.

- UCX on AWS EFA (``nixl-backend-fabric-mismatch``): an error only from vLLM 0.17.0 on, where the reports see the
  cross-node handshake fail (vllm-project/vllm#41814 on 0.17.1, aws-samples/awsome-inference#72 on 0.19.1); a warning
  for an earlier or unknown release, where the KV was seen moving over UCX's software path, slowly (ai-dynamo/nixl#909,
  ai-dynamo/dynamo#4185 on 0.11 builds). Disjoint backends stay an error in every release.
- A second kv_transfer_params producer next to NIXL in a ``MultiConnector`` (``multi-connector-params-producers``, a
  warning): vLLM's MultiConnector.request_finished raises "Only one connector can produce KV transfer params"
  before 0.25.0 (which merges the children's params: tests/unit/test_rule_scopes_30.py);
  LMCacheMPConnector returned {} until LMCache#3866 and returns cache statistics after it
  (:mod:`pdd_operator.compat.rules.multi_connector`).
"""

from __future__ import annotations

import json

from pdd_operator.compat.rules.multi_connector import wrapped_children
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

FABRIC, MULTI = "nixl-backend-fabric-mismatch", "multi-connector-params-producers"


def _kv(role, connector="NixlConnector", **extra):
    return json.dumps({"kv_connector": connector, "kv_role": role, **extra})


def _pair(model, image, kv_p, kv_d, env=(), resources=None, kind="Deployment", gpus=1, args=()):
    docs = []
    for role, kv in (("prefill", kv_p), ("decode", kv_d)):
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": [model, *args, "--kv-transfer-config", kv], "env": [POD_IP, *env],
             "resources": {"limits": {"nvidia.com/gpu": str(gpus), **(resources or {})}},
             "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}
        docs.append(workload(f"m-{role}", role, c, kind=kind, app="m"))
    return docs


# --- UCX on AWS EFA, by release ------------------------------------------------------------------------------------

EFA = {"vpc.amazonaws.com/efa": "4"}


def test_ucx_on_efa_on_v011_is_a_warning_not_an_error(tmp_path, capsys):
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.11.0", _kv("kv_both"), _kv("kv_both"),
                 resources=EFA)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and FABRIC in rules(out, "warning") and FABRIC not in rules(out, "error")
    finding = next(f for r in out["results"] for f in r["findings"] if f["rule"] == FABRIC)
    assert "41814" in finding["message"]


def test_ucx_on_efa_on_an_unknown_release_is_a_warning(tmp_path, capsys):
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", "registry.example.com/ml/vllm-efa:prod", _kv("kv_both"),
                 _kv("kv_both"), resources=EFA)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and FABRIC in rules(out, "warning") and FABRIC not in rules(out, "error")


def test_ucx_on_efa_from_v017_is_still_an_error(tmp_path, capsys):
    for image in ("vllm/vllm-openai:v0.17.1", "vllm/vllm-openai:v0.19.1"):
        docs = _pair("meta-llama/Llama-3.1-8B-Instruct", image, _kv("kv_both"), _kv("kv_both"), resources=EFA)
        code, out = check(tmp_path, capsys, *docs)
        assert code == 1 and FABRIC in rules(out, "error"), image


def test_disjoint_backends_on_efa_are_an_error_on_v011_too(tmp_path, capsys):
    lf = {"kv_connector_extra_config": {"backends": ["LIBFABRIC"]}}
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.11.0", _kv("kv_both"),
                 _kv("kv_both", **lf), resources=EFA)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and FABRIC in rules(out, "error")


# --- a second kv_transfer_params producer next to NIXL in a MultiConnector -----------------------------------------

def _multi(role, *children):
    return json.dumps({"kv_connector": "MultiConnector", "kv_role": role, "kv_connector_extra_config": {
        "connectors": [{"kv_connector": c, "kv_role": role if c == "NixlConnector" else "kv_both"} for c in children]}})


def test_lmcache_mp_before_nixl_on_the_prefill_only_fails_the_prefill(tmp_path, capsys):
    # 0.20.2 runs vLLM's own LMCacheMPConnector, which returns {} for every request with kv_transfer_params
    # (lmcache_mp_connector.py line 935): an error since fixE (tests/unit/test_public_report_kinds_fixE.py)
    docs = _pair("meta-llama/Llama-3.1-70B-Instruct", "vllm/vllm-openai:v0.20.2",
                 _multi("kv_producer", "LMCacheMPConnector", "NixlConnector"), _kv("kv_consumer"),
                 gpus=4, args=("--tensor-parallel-size", "4"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and MULTI in rules(out, "error")
    messages = [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == MULTI]
    assert len(messages) == 1 and messages[0].startswith("prefill:")


def test_nixl_with_the_offloading_connector_or_alone_says_nothing(tmp_path, capsys):
    docs = _pair("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.33.0", _multi("kv_producer", "NixlConnector", "OffloadingConnector"),
                 _multi("kv_consumer", "NixlConnector", "OffloadingConnector"))
    _, out = check(tmp_path, capsys, *docs)
    assert MULTI not in rules(out)
    _, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.33.0", _kv("kv_producer"),
                                            _kv("kv_consumer")))
    assert MULTI not in rules(out)


def test_wrapped_children_reads_the_wrapper_description():
    assert wrapped_children("MultiConnector[NixlConnector, LMCacheMPConnector]") == ["NixlConnector",
                                                                                   "LMCacheMPConnector"]
    assert wrapped_children(None) == [] and wrapped_children("MultiConnector") == []
