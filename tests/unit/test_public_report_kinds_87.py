"""Variants of what the eighty-seventh public-report set (tests/unit/data/public_reports_87) taught, with negative
controls.

1. The model's config hook decides the hashed KV cache dtype. vLLM runs the ``verify_and_update_config`` of the
   architecture's ``MODELS_CONFIG_MAP`` entry from ``VllmConfig.__post_init__`` (vllm/config/vllm.py 0.34.0 l.1483,
   l.2816-2845), before the NIXL compatibility hash reads ``cache_config.cache_dtype`` (nixl/metadata.py 0.34.0
   l.201). ``DeepseekV32ForCausalLM`` rewrites ``bfloat16`` to ``auto`` (vllm/model_executor/models/config.py 0.18.0
   l.39-41, 0.34.0 l.91-93), and before 0.18.0 also ``auto`` and every ``fp8*`` to ``fp8_ds_mla`` (0.11.0 l.418-425,
   0.16.0 l.555-562, 0.17.1 l.595-602); ``MistralLarge4ForCausalLM`` rewrites ``bfloat16`` to ``auto`` from 0.34.0
   (l.151-152). Other architectures keep the written string (GLM-5's ``GlmMoeDsaForCausalLM`` hook only touches
   ``auto`` on SM10x), so their ``bfloat16`` against ``auto`` is refused.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import check, container, rules, workload

KV_P = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_producer"})
KV_D = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_consumer"})
DSV32_CONFIG = {"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32", "index_topk": 2048,
                "kv_lora_rank": 512, "num_attention_heads": 128, "num_key_value_heads": 128, "hidden_size": 7168,
                "num_hidden_layers": 61, "n_routed_experts": 256, "torch_dtype": "bfloat16",
                "max_position_embeddings": 163840, "quantization_config": {"quant_method": "fp8"}}
MISTRAL_L4_CONFIG = {**DSV32_CONFIG, "architectures": ["MistralLarge4ForCausalLM"], "model_type": "mistral_large_4"}


def _pair(model, image, p_kv=(), d_kv=()):
    docs = []
    for role, kv, own in (("prefill", KV_P, p_kv), ("decode", KV_D, d_kv)):
        c = container([model, *own, "--kv-transfer-config", kv], image=image)
        docs.append(workload(f"m-{role}", role, c, app="m"))
    return docs


def _kv_dtype_findings(out):
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == "kv-cache-dtype-mismatch"]


@pytest.mark.parametrize(("model", "image", "p_kv", "d_kv"), [
    ("deepseek-ai/DeepSeek-V3.2", "vllm/vllm-openai:v0.34.0", (), ("--kv-cache-dtype", "bfloat16")),
    ("deepseek-ai/DeepSeek-V3.2-Exp", "vllm/vllm-openai:v0.24.0", ("--kv-cache-dtype", "bfloat16"), ()),
    ("deepseek-ai/DeepSeek-V3.2", "vllm/vllm-openai:v0.18.0", ("--kv-cache-dtype", "auto"), ("--kv-cache-dtype", "bfloat16")),
    # before 0.18.0 the hook makes auto and every fp8 spelling fp8_ds_mla
    ("deepseek-ai/DeepSeek-V3.2-Exp", "vllm/vllm-openai:v0.16.0", (), ("--kv-cache-dtype", "fp8")),
    ("deepseek-ai/DeepSeek-V3.2", "vllm/vllm-openai:v0.13.0", ("--kv-cache-dtype", "fp8_e4m3"), ("--kv-cache-dtype", "fp8")),
])
def test_dsv32_config_hook_makes_the_written_dtypes_one(tmp_path, capsys, model, image, p_kv, d_kv):
    code, out = check(tmp_path, capsys, *_pair(model, image, p_kv, d_kv))
    assert not _kv_dtype_findings(out), out
    assert code == 0, out


@pytest.mark.parametrize(("model", "image", "p_kv", "d_kv", "said"), [
    # 0.11-0.17: unset is fp8_ds_mla, bfloat16 is auto
    ("deepseek-ai/DeepSeek-V3.2", "vllm/vllm-openai:v0.16.0", (), ("--kv-cache-dtype", "bfloat16"), "'fp8_ds_mla'"),
    ("deepseek-ai/DeepSeek-V3.2-Exp", "vllm/vllm-openai:v0.34.0", (), ("--kv-cache-dtype", "fp8"), "'fp8'"),
    # no hook maps bfloat16 for these architectures
    ("zai-org/GLM-5-FP8", "vllm/vllm-openai:v0.34.0", (), ("--kv-cache-dtype", "bfloat16"), "'bfloat16'"),
    ("moonshotai/Kimi-K2-Instruct", "vllm/vllm-openai:v0.34.0", (), ("--kv-cache-dtype", "bfloat16"), "'bfloat16'"),
    ("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.24.0", ("--kv-cache-dtype", "bfloat16"), (), "'bfloat16'"),
])
def test_controls_the_handshake_still_refuses(tmp_path, capsys, model, image, p_kv, d_kv, said):
    code, out = check(tmp_path, capsys, *_pair(model, image, p_kv, d_kv))
    found = _kv_dtype_findings(out)
    assert code == 1 and found and found[0]["severity"] == "error", out
    assert said in found[0]["message"]


@pytest.mark.parametrize(("config", "image", "refused"), [
    (DSV32_CONFIG, "vllm/vllm-openai:v0.34.0", False),
    (MISTRAL_L4_CONFIG, "vllm/vllm-openai:v0.34.0", False),
    (MISTRAL_L4_CONFIG, "vllm/vllm-openai:v0.33.0", True),   # the Mistral Large 4 hook is new in 0.34.0
])
def test_the_hook_is_read_from_a_given_config_json(tmp_path, capsys, config, image, refused):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    docs = _pair("/models/house-sparse-mla", image, (), ("--kv-cache-dtype", "bfloat16"))
    code, out = check(tmp_path, capsys, *docs, extra=("--model-config", str(path)))
    assert bool(_kv_dtype_findings(out)) == refused, out
    assert (code == 1) == refused, out


def test_an_unknown_release_is_a_warning_where_old_and_new_hooks_disagree(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("deepseek-ai/DeepSeek-V3.2", "vllm/vllm-openai:latest", (),
                                               ("--kv-cache-dtype", "bfloat16")))
    found = _kv_dtype_findings(out)
    assert found and {f["severity"] for f in found} == {"warning"}, out
    assert "0.18.0" in found[0]["message"]
    assert "kv-cache-dtype-mismatch" not in rules(out, "error")
