"""Issue 9, "no false refusals": ``--dtype auto`` on one role against ``float16``/``bfloat16`` on the other is judged
as vLLM resolves auto (``vllm/config/model.py`` ``_get_and_verify_dtype`` / ``_resolve_auto_dtype``, read 0.9.0 to
0.34.0; :mod:`pdd_operator.vllm.dtype`): from the checkpoint's config.json ``torch_dtype`` (given with
``--model-config`` or ``spec.model.configMapRef``, or a well-known id) an error or a pass; without it a warning naming
both values, never an error. ``--kv-cache-dtype auto`` is not the model dtype: the NIXL hash takes the raw string
(``"auto"``), except that from 0.14 auto becomes a ModelOpt checkpoint's KV quantization (``fp8_e4m3``).

Variants: a Deployment pair, a LeaderWorkerSet pair, a Dynamo graph, a PDDeployment (``extraArgs``).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.dtype import auto_dtype, checkpoint_dtype_of, checkpoint_kv_cache_dtype, config_dtype
from tests.unit.test_turn2_variants import KV, check, container, pd

UNKNOWN_MODEL = "acme/private-13b"   # no config.json given, not a well-known id
RULE = "dtype-mismatch"


def _severity(out, rule=RULE) -> set[str]:
    return {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == rule}


def _config(tmp_path, **fields) -> list[str]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "num_key_value_heads": 8, **fields}))
    return ["--model-config", str(path)]


# --- Deployment pairs --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("other", ["float16", "bfloat16", "half"])
def test_auto_against_a_16_bit_dtype_without_the_checkpoint_is_a_warning_naming_both(tmp_path, capsys, other):
    docs = pd("m", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV, "--dtype", other], model=UNKNOWN_MODEL,
              image="vllm/vllm-openai:v0.33.0")
    code, out = check(tmp_path, capsys, *docs)
    assert _severity(out) == {"warning"} and code == 0, out
    message = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == RULE)
    assert "'auto'" in message and repr(other.replace("half", "float16")) in message, message


def test_auto_never_resolves_to_float32(tmp_path, capsys):
    docs = pd("m", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV, "--dtype", "float32"],
              model=UNKNOWN_MODEL, image="vllm/vllm-openai:v0.33.0")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and _severity(out) == {"error"}, out


@pytest.mark.parametrize("torch_dtype, other, severity", [
    ("bfloat16", "bfloat16", None), ("bfloat16", "float16", "error"),
    ("float16", "float16", None), ("float16", "bfloat16", "error"),
    ("float32", "bfloat16", None), ("float32", "float16", "error"), ("float32", "float32", "error"),
])
def test_auto_is_resolved_from_the_model_config(tmp_path, capsys, torch_dtype, other, severity):
    docs = pd("m", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV, "--dtype", other], model=UNKNOWN_MODEL,
              image="vllm/vllm-openai:v0.33.0")
    code, out = check(tmp_path, capsys, *docs, extra=_config(tmp_path, torch_dtype=torch_dtype))
    assert _severity(out) == ({severity} if severity else set()), out


def test_before_0_10_a_float32_checkpoint_runs_float16(tmp_path, capsys):
    # 0.9.x: "Following common practice, we use float16 for float32 models"; 0.10 on: the platform's preferred dtype
    for image, severity in (("vllm/vllm-openai:v0.9.2", None), ("vllm/vllm-openai:v0.33.0", "error")):
        docs = pd("m", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV, "--dtype", "float16"],
                  model=UNKNOWN_MODEL, image=image)
        code, out = check(tmp_path, capsys, *docs, extra=_config(tmp_path, torch_dtype="float32"))
        assert _severity(out) == ({severity} if severity else set()), (image, out)


@pytest.mark.parametrize("model, other, severity", [
    ("deepseek-ai/DeepSeek-V2-Lite-Chat", "float16", "error"), ("Qwen/Qwen3-0.6B", "bfloat16", None),
    ("facebook/opt-125m", "float16", None), ("facebook/opt-125m", "bfloat16", "error"),
])
def test_a_well_known_checkpoint_needs_no_config(tmp_path, capsys, model, other, severity):
    docs = pd("m", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV, "--dtype", other], model=model,
              image="vllm/vllm-openai:v0.33.0")
    code, out = check(tmp_path, capsys, *docs)
    assert _severity(out) == ({severity} if severity else set()), out


# --- other formats -----------------------------------------------------------------------------------------------------


def _lws(role, args):
    c = container([UNKNOWN_MODEL, "--kv-transfer-config", KV, *args], image="vllm/vllm-openai:v0.30.0")
    labels = {"app": "m", "llm-d.ai/role": role}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": f"m-{role}", "labels": labels},
            "spec": {"leaderWorkerTemplate": {"size": 1, "workerTemplate": {
                "metadata": {"labels": labels}, "spec": {"containers": [c]}}}}}


def test_leaderworkerset_auto_against_float16_is_a_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _lws("prefill", ["--dtype", "auto"]), _lws("decode", ["--dtype", "float16"]))
    assert _severity(out) == {"warning"}, out


def _dynamo(model, p_extra, d_extra):
    def worker(sub, extra):
        args = ["--model", model, "--disaggregation-mode", sub, "--kv-transfer-config", KV, *extra]
        return {"componentType": "worker", "subComponentType": sub, "replicas": 1, "resources": {"limits": {"gpu": "1"}},
                "extraPodSpec": {"mainContainer": {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1",
                                                   "command": ["python3", "-m", "dynamo.vllm"], "args": args}}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"services": {"VllmPrefillWorker": worker("prefill", p_extra),
                                  "VllmDecodeWorker": worker("decode", d_extra)}}}


@pytest.mark.parametrize("model, severity", [(UNKNOWN_MODEL, "warning"), ("meta-llama/Llama-3.1-8B-Instruct", "error")])
def test_dynamo_auto_against_float16(tmp_path, capsys, model, severity):
    code, out = check(tmp_path, capsys, _dynamo(model, [], ["--dtype", "float16"]))
    assert _severity(out) == {severity}, out


def _pdd(model, decode_args, config_map=None):
    spec = {"model": {"name": model, "hfArchitecture": "LlamaForCausalLM",
                      **({"configMapRef": {"name": "cfg", "key": "config.json"}} if config_map else {})},
            "engine": {"image": "vllm/vllm-openai:v0.33.0"},
            "prefill": {"replicas": 1}, "decode": {"replicas": 1, "extraArgs": decode_args}}
    docs = [{"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "l"}, "spec": spec}]
    if config_map:
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
                     "data": {"config.json": json.dumps(config_map)}})
    return docs


@pytest.mark.parametrize("config_map, severity", [
    (None, "warning"),
    ({"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"}, "error"),
    ({"architectures": ["LlamaForCausalLM"], "torch_dtype": "float16"}, None),
])
def test_pddeployment_extra_args_dtype_against_the_rendered_auto(tmp_path, capsys, config_map, severity):
    code, out = check(tmp_path, capsys, *_pdd(UNKNOWN_MODEL, ["--dtype", "float16"], config_map))
    assert _severity(out) == ({severity} if severity else set()), out


# --- kv cache dtype ------------------------------------------------------------------------------------------------------


def test_kv_cache_auto_is_hashed_as_auto_not_the_model_dtype(tmp_path, capsys):
    # 0.33 nixl/metadata.py hashes str(cache_config.cache_dtype); auto stays "auto" (resolve_kv_cache_dtype_string)
    docs = pd("m", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV, "--kv-cache-dtype", "bfloat16"],
              model=UNKNOWN_MODEL, image="vllm/vllm-openai:v0.33.0")
    code, out = check(tmp_path, capsys, *docs, extra=_config(tmp_path, torch_dtype="bfloat16"))
    assert _severity(out, "kv-cache-dtype-mismatch") == {"error"}, out


MODELOPT = {"quant_method": "modelopt", "kv_cache_quant_algo": "FP8"}


@pytest.mark.parametrize("image, config, severity", [
    ("vllm/vllm-openai:v0.33.0", {"quantization_config": MODELOPT}, None),   # auto -> fp8_e4m3 from 0.14
    ("vllm/vllm-openai:v0.13.0", {"quantization_config": MODELOPT}, "error"),  # not yet resolved: "auto"
    ("vllm/vllm-openai:v0.33.0", {}, "error"),                                 # not a ModelOpt checkpoint
    ("vllm/vllm-openai:v0.33.0", None, "warning"),                             # config not known
])
def test_kv_cache_auto_of_a_modelopt_fp8_checkpoint(tmp_path, capsys, image, config, severity):
    docs = pd("m", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV, "--kv-cache-dtype", "fp8_e4m3"],
              model=UNKNOWN_MODEL, image=image)
    extra = _config(tmp_path, torch_dtype="bfloat16", **config) if config is not None else ()
    code, out = check(tmp_path, capsys, *docs, extra=extra)
    assert _severity(out, "kv-cache-dtype-mismatch") == ({severity} if severity else set()), out


# --- the pieces ------------------------------------------------------------------------------------------------------


def test_config_dtype_reads_torch_dtype_dtype_and_nested_configs():
    assert config_dtype({"torch_dtype": "bfloat16"}) == "bfloat16"
    assert config_dtype({"dtype": "float16"}) == "float16"
    assert config_dtype({"text_config": {"torch_dtype": "bfloat16"}}) == "bfloat16"
    assert config_dtype({"architectures": ["X"]}) == "float32"      # vLLM's default where the config names none
    assert config_dtype(None) is None and config_dtype({"torch_dtype": "int8"}) is None


def test_auto_dtype_per_version():
    assert auto_dtype("float32", (0, 9, 2)) == "float16" and auto_dtype("float32", (0, 10, 0)) == "bfloat16"
    assert auto_dtype("float16", (0, 33, 0)) == "float16" and auto_dtype(None, (0, 33, 0)) is None


def test_checkpoint_tables():
    assert checkpoint_dtype_of("Qwen/Qwen3-8B") == "bfloat16" and checkpoint_dtype_of("Qwen/Qwen3-8B-FP8") is None
    assert checkpoint_kv_cache_dtype({"quantization_config": MODELOPT}) == "fp8_e4m3"
    assert checkpoint_kv_cache_dtype({"quantization_config": {"quant_method": "modelopt", "kv_cache_scheme": {
        "type": "float", "num_bits": 8, "dynamic": False}}}) == "fp8_e4m3"
    assert checkpoint_kv_cache_dtype({"quantization_config": {"quant_method": "fp8"}}) is None
