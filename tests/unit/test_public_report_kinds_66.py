"""Variants of what the sixty-sixth public-report set (tests/unit/data/public_reports_66) taught, with negative
controls: a config-field table must read every release in its range, patch releases included.

InferenceX's Kimi-K2.6 recipe passes ``--attention-config {"mla_prefill_backend": "TRTLLM_RAGGED"}``, a field
``AttentionConfig`` has from 0.21.0. Run on vLLM 0.20.1 (an older image, or Dynamo's vllm-runtime:1.2.0), the prefill
stops while its arguments are read: 0.20.1's ``AttentionConfig`` (vllm/config/attention.py) has no such field and
``@config`` classes forbid extra fields (vllm/config/utils.py line 69; arg_utils.py line 689 builds
``AttentionConfig(**attention_config)``). The table (:mod:`pdd_operator.vllm.config_fields`) had read 0.20.0 and
0.21.0 but not 0.20.1, so it judged 0.20.1 by both and only warned. Every patch release with a sdist is now read
(0.10.2, 0.11.2 for ``PassConfig``; 0.17.1, 0.18.1, 0.19.0, 0.20.1, 0.20.2, 0.22.1, 0.25.1, 0.27.1 for both); each
holds the fields of the minor release before it. 0.15.x stays unread and keeps its warning.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.config_fields import ATTENTION_CONFIG, PASS_CONFIG, refusals
from pdd_operator.vllm.versions import KNOWN_RELEASES
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})

#: The releases in the tables' range with no sdist to read (pip has none for 0.15.0 and 0.15.1 here).
UNREAD = {(0, 15, 0), (0, 15, 1)}


def _pair(model, image, p_extra=(), d_extra=(), gpus=8):
    docs = []
    for role, extra in (("prefill", p_extra), ("decode", d_extra)):
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": [model, "--tensor-parallel-size", str(gpus), "--kv-transfer-config", KV, *extra],
             "env": [POD_IP], "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
        docs.append(workload(f"m-{role}", role, c, app="m"))
    return docs


def _ac(**fields) -> tuple[str, str]:
    return ("--attention-config", json.dumps(fields))


def _cc(**pass_config) -> tuple[str, str]:
    return ("--compilation-config", json.dumps({"pass_config": pass_config}))


# --- the tables ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("table", [ATTENTION_CONFIG, PASS_CONFIG], ids=["AttentionConfig", "PassConfig"])
def test_every_known_release_in_a_tables_range_is_read(table):
    in_range = {r for r in KNOWN_RELEASES if table.read[0] <= r <= table.read[-1]}
    assert sorted(in_range - set(table.read) - UNREAD) == []


@pytest.mark.parametrize(("key", "version", "expected"), [
    ("mla_prefill_backend", (0, 20, 1), "error"),         # the set's entry: 0.20.1 has no mla_prefill_backend
    ("mla_prefill_backend", (0, 20, 2), "error"),
    ("use_non_causal", (0, 20, 2), "error"),              # also first in 0.21.0
    ("backend_per_kind", (0, 25, 1), "error"),            # first in 0.26.0; 0.25.1 read
    ("sparse_mla_force_mqa", (0, 25, 1), "error"),
    ("use_trtllm_ragged_deepseek_prefill", (0, 20, 2), None),   # removed only in 0.22.0
    ("use_prefill_query_quantization", (0, 17, 1), None),
    ("mla_prefill_backend", (0, 15, 1), "warning"),       # 0.15.x unread: 0.14.1 drops it, 0.16.0 refuses it
])
def test_patch_releases_are_judged_by_what_they_hold(key, version, expected):
    found = refusals(ATTENTION_CONFIG, {key: True}, version)
    assert [("error" if f.certain else "warning") for f in found] == ([expected] if expected else [])


def test_an_unread_release_between_disagreeing_ones_still_warns():
    # 0.15.x: 0.14.1 drops unknown keys, 0.16.0 refuses them
    found = refusals(ATTENTION_CONFIG, {"use_prefill_query_quantization": True}, (0, 15, 1))
    assert [f.certain for f in found] == [False]


@pytest.mark.parametrize(("key", "version", "expected"), [
    ("fuse_minimax_qk_norm", (0, 18, 1), "error"),        # first in 0.19.1; 0.18.1 and 0.19.0 read without it
    ("fuse_minimax_qk_norm", (0, 19, 0), "error"),
    ("fuse_minimax_qk_norm", (0, 19, 1), None),
    ("fuse_allreduce_rms", (0, 20, 2), None),
])
def test_pass_config_patch_releases(key, version, expected):
    found = refusals(PASS_CONFIG, {key: True}, version)
    assert [("error" if f.certain else "warning") for f in found] == ([expected] if expected else [])


# --- engine-args-invalid on manifests ---------------------------------------------------------------------------


def _dgd(image, prefill_extra=()):
    def svc(mode, extra):
        return {"componentType": "worker", "subComponentType": mode, "replicas": 1,
                "resources": {"limits": {"gpu": "4"}},
                "extraPodSpec": {"mainContainer": {
                    "image": image, "command": ["python3", "-m", "dynamo.vllm"],
                    "args": ["--model", "deepseek-ai/DeepSeek-R1-0528", "--disaggregation-mode", mode,
                             "--kv-transfer-config", KV, "--data-parallel-size", "4", "--enable-expert-parallel",
                             *extra]}}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "r1"},
            "spec": {"backendFramework": "vllm", "services": {"prefill": svc("prefill", prefill_extra),
                                                              "decode": svc("decode", ())}}}


def test_a_dynamo_runtime_on_a_patch_release_refuses_the_newer_field(tmp_path, capsys):
    # vllm-runtime:1.2.0 ships vLLM 0.20.1; mla_prefill_backend came with 0.21.0 (vllm-runtime:1.3.0-dev.1 and later)
    dgd = _dgd("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.0", _ac(mla_prefill_backend="TRTLLM_RAGGED"))
    code, out = check(tmp_path, capsys, dgd)
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out


def test_the_same_dynamo_graph_on_a_runtime_with_the_field_passes(tmp_path, capsys):
    dgd = _dgd("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0", _ac(mla_prefill_backend="TRTLLM_RAGGED"))
    code, out = check(tmp_path, capsys, dgd)
    assert "engine-args-invalid" not in rules(out), out


def test_a_deployment_pair_on_v0202_with_the_field_is_refused(tmp_path, capsys):
    docs = _pair("deepseek-ai/DeepSeek-V3", "vllm/vllm-openai:v0.20.2", p_extra=_ac(mla_prefill_backend="FLASHINFER"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out


def test_a_pddeployment_on_v0251_with_a_v026_field_is_refused(tmp_path, capsys):
    spec = {"model": {"name": "deepseek-ai/DeepSeek-V3"}, "engine": {"image": "vllm/vllm-openai:v0.25.1"},
            "prefill": {"replicas": 1, "tensorParallelSize": 8},
            "decode": {"replicas": 1, "tensorParallelSize": 8,
                       "extraArgs": list(_ac(sparse_mla_force_mqa=True))}}
    doc = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "p"}, "spec": spec}
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out


def test_a_pass_config_field_on_the_patch_release_before_it(tmp_path, capsys):
    docs = _pair("MiniMaxAI/MiniMax-M2", "vllm/vllm-openai:v0.19.0", d_extra=_cc(fuse_minimax_qk_norm=True))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out
    docs = _pair("MiniMaxAI/MiniMax-M2", "vllm/vllm-openai:v0.19.1", d_extra=_cc(fuse_minimax_qk_norm=True))
    code, out = check(tmp_path, capsys, *docs)
    assert "engine-args-invalid" not in rules(out), out
