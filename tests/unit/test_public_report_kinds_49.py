"""Variants of what the forty-ninth public-report set (tests/unit/data/public_reports_49) taught, with negative
controls: a published recipe's ``--attention-config`` holds fields of the release it was written for.

vLLM builds ``AttentionConfig(**attention_config)`` from the flag's JSON object, and from 0.16.0 its config classes
forbid extra fields: a key the release does not define (``use_prefill_query_quantization`` before 0.17.0,
``use_trtllm_ragged_deepseek_prefill`` from 0.22.0, ``use_prefill_decode_attention`` from 0.29.0) stops the engine
while its arguments are read (``engine-args-invalid``, :mod:`pdd_operator.vllm.attention_config`). Up to 0.14.x
unknown keys were dropped; an unknown version or one between releases that disagree is a warning.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.config_fields import ATTENTION_CONFIG, PASS_CONFIG, refusals
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


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


def _messages(out: dict, rule: str) -> list[str]:
    return [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule]


# --- the field table, as a pure function ------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "version", "expected"), [
    ("use_prefill_query_quantization", (0, 16, 0), "error"),     # first in 0.17.0; 0.16.0 forbids extra fields
    ("use_prefill_query_quantization", (0, 17, 0), None),
    ("use_prefill_query_quantization", (0, 14, 1), None),        # 0.14.x drops unknown keys
    ("use_prefill_query_quantization", (0, 15, 1), "warning"),   # 0.15.x not read: 0.14.1 ignores, 0.16.0 refuses
    ("use_prefill_query_quantization", None, None),              # the newest release read has it
    ("use_trtllm_ragged_deepseek_prefill", (0, 21, 0), None),
    ("use_trtllm_ragged_deepseek_prefill", (0, 21, 1), "warning"),  # between 0.21.0 (has) and 0.22.0 (removed)
    ("use_trtllm_ragged_deepseek_prefill", (0, 22, 0), "error"),
    ("use_trtllm_ragged_deepseek_prefill", (0, 36, 0), "error"),  # a removed field stays removed
    ("use_trtllm_ragged_deepseek_prefill", None, "warning"),      # unknown version: recent releases refuse it
    ("use_fp4_indexer_cache", (0, 29, 0), None),
    ("use_fp4_indexer_cache", (0, 30, 0), "error"),
    ("use_prefill_decode_attention", (0, 28, 0), None),
    ("use_prefill_decode_attention", (0, 29, 0), "error"),
    ("mla_prefill_backend", (0, 20, 0), "error"),
    ("mla_prefill_backend", (0, 20, 1), "error"),                # 0.20.1 read (set 66): no mla_prefill_backend
    ("mla_prefill_backend", (0, 20, 3), "warning"),              # unread, between 0.20.2 (without) and 0.21.0
    ("bakend", (0, 24, 0), "error"),                             # a misspelt field: no release read has it
    ("bakend", (0, 36, 0), "warning"),                           # a later release may add a field
    ("backend", (0, 13, 0), None),
])
def test_the_fields_per_release(key, version, expected):
    found = refusals(ATTENTION_CONFIG, {key: True}, version)
    assert [("error" if f.certain else "warning") for f in found] == ([expected] if expected else [])


@pytest.mark.parametrize(("key", "version", "expected"), [
    ("enable_fusion", (0, 12, 0), None),           # 0.12.0 holds the old names next to the fuse_* ones
    ("enable_fusion", (0, 13, 0), "error"),        # 0.13.0 dropped them and forbids extra fields
    ("enable_fusion", (0, 11, 0), None),           # up to 0.12.0 unknown keys are dropped
    ("enable_noop", (0, 20, 0), "error"),
    ("fuse_allreduce_rms", (0, 11, 1), None),      # not there yet, but dropped silently
    ("fuse_allreduce_rms", (0, 21, 0), None),
    ("enable_sp", (0, 31, 0), None),
    ("enable_sp", (0, 32, 0), "error"),
    ("fuse_minimax_qk_norm", (0, 24, 0), "error"),
    ("fuse_minimax_qk_norm", (0, 19, 0), "error"),    # 0.19.0 read (set 66): not yet there (first in 0.19.1)
    ("fuse_minimax_qk_norm", (0, 23, 1), "warning"),  # unread, between 0.23.0 (with) and 0.24.0 (without)
])
def test_the_pass_config_fields_per_release(key, version, expected):
    found = refusals(PASS_CONFIG, {key: True}, version)
    assert [("error" if f.certain else "warning") for f in found] == ([expected] if expected else [])


@pytest.mark.parametrize("table", [ATTENTION_CONFIG, PASS_CONFIG])
def test_the_tables_are_bounded_by_the_releases_read(table):
    assert table.read == tuple(sorted(table.read))
    for key, (first, last) in table.fields.items():
        assert first in table.read and last in table.read and first <= last, key
    assert table.ignores_extra_until < table.forbids_extra_since
    assert refusals(table, [], (0, 20, 0)) == [] and refusals(table, {}, (0, 20, 0)) == []


# --- engine-args-invalid on manifests ---------------------------------------------------------------------------


def test_a_removed_field_on_a_later_image_is_refused(tmp_path, capsys):
    # DeepSeek-V3 MLA prefill tuned with 0.28's use_prefill_decode_attention, run on v0.29.0 (field removed)
    docs = _pair("deepseek-ai/DeepSeek-V3", "vllm/vllm-openai:v0.29.0",
                 p_extra=_ac(use_prefill_decode_attention=True))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out
    assert "use_prefill_decode_attention" in _messages(out, "engine-args-invalid")[0]


def test_the_same_field_on_its_own_release_passes(tmp_path, capsys):
    docs = _pair("deepseek-ai/DeepSeek-V3", "vllm/vllm-openai:v0.28.0",
                 p_extra=_ac(use_prefill_decode_attention=True))
    code, out = check(tmp_path, capsys, *docs)
    assert "engine-args-invalid" not in rules(out), out


def test_a_field_before_its_release_is_refused_on_the_decode_too(tmp_path, capsys):
    # Llama on a Hopper decode tuned with FlexAttention block sizes (first in 0.22.0) on v0.21.0
    docs = _pair("meta-llama/Llama-3.3-70B-Instruct", "vllm/vllm-openai:v0.21.0",
                 d_extra=_ac(backend="FLEX_ATTENTION", flex_attn_block_m=64))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out
    assert _messages(out, "engine-args-invalid")[0].startswith("decode:")


def test_old_releases_drop_unknown_keys(tmp_path, capsys):
    # 0.14.0: AttentionConfig is a pydantic dataclass without extra='forbid'; the key is ignored
    docs = _pair("deepseek-ai/DeepSeek-V3", "vllm/vllm-openai:v0.14.0",
                 p_extra=_ac(use_prefill_query_quantization=True))
    code, out = check(tmp_path, capsys, *docs)
    assert "engine-args-invalid" not in rules(out), out


def test_an_unknown_version_with_a_removed_field_is_a_warning(tmp_path, capsys):
    docs = _pair("deepseek-ai/DeepSeek-V3", "registry.example.com/team/vllm:custom",
                 p_extra=_ac(use_cudnn_prefill=True))
    code, out = check(tmp_path, capsys, *docs)
    assert "engine-args-invalid" in rules(out, "warning") and "engine-args-invalid" not in rules(out, "error"), out


def test_a_dynamo_worker_on_its_runtime_release(tmp_path, capsys):
    # Dynamo's vllm-runtime:1.1.0 ships vLLM 0.19.0: use_prefill_query_quantization (0.17.0+) is fine, and
    # use_cudnn_prefill still exists (removed in 0.22.0)
    c = {"name": "main", "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0", "command": ["python3", "-m", "dynamo.vllm"],
         "args": ["--model", "Qwen/Qwen3-32B", "--disaggregation-mode", "prefill", "--kv-transfer-config", KV,
                  *_ac(use_prefill_query_quantization=True, use_cudnn_prefill=True)],
         "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    d = dict(c, args=["--model", "Qwen/Qwen3-32B", "--disaggregation-mode", "decode", "--kv-transfer-config", KV])
    dgd = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "q"},
           "spec": {"backendFramework": "vllm", "services": {
               "prefill": {"componentType": "worker", "subComponentType": "prefill", "replicas": 1,
                           "extraPodSpec": {"mainContainer": c}},
               "decode": {"componentType": "worker", "subComponentType": "decode", "replicas": 1,
                          "extraPodSpec": {"mainContainer": d}}}}}
    code, out = check(tmp_path, capsys, dgd)
    assert "engine-args-invalid" not in rules(out), out
    c["image"] = d["image"] = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0"   # vLLM 0.23.0
    code, out = check(tmp_path, capsys, dgd)
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out
    assert "use_cudnn_prefill" in _messages(out, "engine-args-invalid")[0]


def test_a_pddeployment_with_the_field_in_extra_args(tmp_path, capsys):
    spec = {"model": {"name": "deepseek-ai/DeepSeek-V3"}, "engine": {"image": "vllm/vllm-openai:v0.23.0"},
            "prefill": {"replicas": 1, "tensorParallelSize": 8,
                        "extraArgs": list(_ac(use_trtllm_ragged_deepseek_prefill=True))},
            "decode": {"replicas": 1, "tensorParallelSize": 8}}
    doc = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "p"}, "spec": spec}
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out


# --- --compilation-config pass_config -----------------------------------------------------------------------------


def _cc(**pass_config) -> tuple[str, str]:
    return ("--compilation-config", json.dumps({"pass_config": pass_config, "custom_ops": ["+rms_norm"]}))


def test_an_old_recipes_fusion_pass_names_on_a_later_image_are_refused(tmp_path, capsys):
    # a 0.10-era recipe's pass_config {"enable_fusion": true, "enable_noop": true} on v0.13.0 (the names became
    # fuse_norm_quant/fuse_act_quant and eliminate_noops in 0.12.0; 0.13.0 dropped the old ones)
    docs = _pair("Qwen/Qwen3-32B", "vllm/vllm-openai:v0.13.0", p_extra=_cc(enable_fusion=True, enable_noop=True),
                 d_extra=_cc(enable_fusion=True, enable_noop=True), gpus=4)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out
    assert any("pass_config sets enable_fusion" in m for m in _messages(out, "engine-args-invalid"))


def test_the_same_recipe_on_its_own_release_passes(tmp_path, capsys):
    docs = _pair("Qwen/Qwen3-32B", "vllm/vllm-openai:v0.11.0", p_extra=_cc(enable_fusion=True, enable_noop=True),
                 d_extra=_cc(enable_fusion=True, enable_noop=True), gpus=4)
    code, out = check(tmp_path, capsys, *docs)
    assert "engine-args-invalid" not in rules(out), out


def test_the_new_fusion_names_pass(tmp_path, capsys):
    docs = _pair("deepseek-ai/DeepSeek-V3", "vllm/vllm-openai:v0.21.0",
                 p_extra=_cc(fuse_attn_quant=True, fuse_allreduce_rms=True),
                 d_extra=_cc(fuse_attn_quant=True, fuse_allreduce_rms=True))
    code, out = check(tmp_path, capsys, *docs)
    assert "engine-args-invalid" not in rules(out), out


def test_sequence_parallelism_in_pass_config_after_its_removal(tmp_path, capsys):
    docs = _pair("meta-llama/Llama-3.3-70B-Instruct", "vllm/vllm-openai:v0.32.0", d_extra=_cc(enable_sp=True))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out


def test_the_short_options_are_read_too(tmp_path, capsys):
    # -cc and -ac are the short options of --compilation-config and --attention-config (arg_utils.py, 0.14+)
    docs = _pair("Qwen/Qwen3-32B", "vllm/vllm-openai:v0.20.0", gpus=4,
                 p_extra=("-cc", json.dumps({"pass_config": {"enable_noop": True}})),
                 d_extra=("-ac", json.dumps({"use_prefill_decode_attention": True, "mla_prefill_backend": "x"})))
    code, out = check(tmp_path, capsys, *docs)
    messages = _messages(out, "engine-args-invalid")
    assert code == 1 and len(messages) == 2, out
    assert "enable_noop" in messages[0] and "mla_prefill_backend" in messages[1]
