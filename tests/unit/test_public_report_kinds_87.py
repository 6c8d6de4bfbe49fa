"""Variants of what the eighty-seventh public-report set (tests/unit/data/public_reports_87) taught, with negative
controls.

1. The model's config hook decides the hashed KV cache dtype. vLLM runs the ``verify_and_update_config`` of the
   architecture's ``MODELS_CONFIG_MAP`` entry from ``VllmConfig.__post_init__`` (vllm/config/vllm.py 0.34.0 l.1483,
   l.2816-2845), before the NIXL compatibility hash reads ``cache_config.cache_dtype`` (nixl/metadata.py 0.34.0
   l.201). ``DeepseekV32ForCausalLM`` rewrites ``bfloat16`` to ``auto`` (vllm/model_executor/models/config.py 0.18.0
   l.39-41, 0.34.0 l.91-93), and before 0.18.0 also every ``fp8*`` to ``fp8_ds_mla`` (0.11.0 l.418-425, 0.16.0
   l.555-562, 0.17.1 l.595-602), ``auto`` too in 0.11.0 only (0.11.1 l.478-479 tests ``startswith("fp8")`` alone:
   corrected by set 99); ``MistralLarge4ForCausalLM`` rewrites ``bfloat16`` to ``auto`` from 0.34.0
   (l.151-152). Other architectures keep the written string (GLM-5's ``GlmMoeDsaForCausalLM`` hook only touches
   ``auto`` on SM10x), so their ``bfloat16`` against ``auto`` is refused.

2. The checkpoint's FP8 weight blocks decide which TP an engine loads at. ``Fp8MoEMethod.create_weights`` shards
   each expert over the MoE TP group (TP x DP x PCP, 1 with expert parallel) and, up to 0.28.x, raises ValueError
   where the shard is not a multiple of the weight block (quantization/fp8.py 0.28.0 l.534-546: MiniMax-M2's 1536
   rows over 8 ranks are 192, not a multiple of 128); from 0.29.0 vLLM refines the blocks to the common divisor where
   it is at least 32 (fused_moe/oracle/fp8.py 0.29.0 l.286-303), and refuses only below that.
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
    # before 0.18.0 the hook makes every fp8 spelling fp8_ds_mla; 0.11.0 turns auto into it too (set 99)
    ("deepseek-ai/DeepSeek-V3.2-Exp", "vllm/vllm-openai:v0.11.0", (), ("--kv-cache-dtype", "fp8")),
    ("deepseek-ai/DeepSeek-V3.2", "vllm/vllm-openai:v0.13.0", ("--kv-cache-dtype", "fp8_e4m3"), ("--kv-cache-dtype", "fp8")),
    # from 0.11.1 auto stays auto and bfloat16 becomes auto (0.16.0 l.557-561)
    ("deepseek-ai/DeepSeek-V3.2", "vllm/vllm-openai:v0.16.0", (), ("--kv-cache-dtype", "bfloat16")),
])
def test_dsv32_config_hook_makes_the_written_dtypes_one(tmp_path, capsys, model, image, p_kv, d_kv):
    code, out = check(tmp_path, capsys, *_pair(model, image, p_kv, d_kv))
    assert not _kv_dtype_findings(out), out
    assert code == 0, out


@pytest.mark.parametrize(("model", "image", "p_kv", "d_kv", "said"), [
    # 0.11.0: unset is fp8_ds_mla, bfloat16 is auto; 0.11.1-0.17.1: unset stays auto, fp8 is fp8_ds_mla (set 99)
    ("deepseek-ai/DeepSeek-V3.2-Exp", "vllm/vllm-openai:v0.11.0", (), ("--kv-cache-dtype", "bfloat16"), "'fp8_ds_mla'"),
    ("deepseek-ai/DeepSeek-V3.2-Exp", "vllm/vllm-openai:v0.16.0", (), ("--kv-cache-dtype", "fp8"), "'fp8_ds_mla'"),
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


@pytest.mark.parametrize("d_kv", [("--kv-cache-dtype", "bfloat16"),   # one from 0.18.0, two before
                                  ("--kv-cache-dtype", "fp8")])       # one (fp8_ds_mla) before 0.18.0, two after
def test_an_unknown_release_is_a_warning_where_old_and_new_hooks_disagree(tmp_path, capsys, d_kv):
    code, out = check(tmp_path, capsys, *_pair("deepseek-ai/DeepSeek-V3.2", "vllm/vllm-openai:latest", (), d_kv))
    found = _kv_dtype_findings(out)
    assert found and {f["severity"] for f in found} == {"warning"}, out
    assert "0.18.0" in found[0]["message"]
    assert "kv-cache-dtype-mismatch" not in rules(out, "error")


MINIMAX = "MiniMaxAI/MiniMax-M2"            # known through MiniMax-M2.5's config.json: 1536 x 3072, blocks [128, 128]


def _engines(model, image, p_args, d_args, gpus=(4, 8)):
    docs = []
    for role, kv, own, n in (("prefill", KV_P, p_args, gpus[0]), ("decode", KV_D, d_args, gpus[1])):
        c = container([model, *own, "--kv-transfer-config", kv], image=image, gpus=n)
        docs.append(workload(f"mm-{role}", role, c, app="mm"))
    return docs


def _block_findings(out):
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == "fp8-moe-block-tp-indivisible"]


@pytest.mark.parametrize(("image", "d_args", "gpus"), [
    ("vllm/vllm-openai:v0.28.0", ("--tensor-parallel-size", "8"), (4, 8)),
    ("vllm/vllm-openai:v0.20.1", ("--tensor-parallel-size", "8"), (4, 8)),
    ("vllm/vllm-openai:v0.11.0", ("--tensor-parallel-size", "8"), (4, 8)),
    # data parallel without expert parallel shards the experts over TP x DP as well
    ("vllm/vllm-openai:v0.24.0", ("--data-parallel-size", "8"), (4, 8)),
])
def test_fp8_experts_that_do_not_split_along_blocks_are_refused_before_029(tmp_path, capsys, image, d_args, gpus):
    code, out = check(tmp_path, capsys, *_engines(MINIMAX, image, ("--tensor-parallel-size", "4"), d_args, gpus))
    found = _block_findings(out)
    assert code == 1 and found and found[0]["severity"] == "error", out
    assert "192" in found[0]["message"] and "decode" in found[0]["message"]


@pytest.mark.parametrize(("image", "d_args"), [
    ("vllm/vllm-openai:v0.29.0", ("--tensor-parallel-size", "8")),        # refined to 64 x 64
    ("vllm/vllm-openai:v0.34.0", ("--tensor-parallel-size", "8")),
    ("vllm/vllm-openai:v0.28.0", ("--tensor-parallel-size", "8", "--enable-expert-parallel")),  # experts stay whole
    ("vllm/vllm-openai:v0.28.0", ("--tensor-parallel-size", "4")),        # 384 rows a rank
])
def test_controls_fp8_experts_that_load(tmp_path, capsys, image, d_args):
    code, out = check(tmp_path, capsys, *_engines(MINIMAX, image, ("--tensor-parallel-size", "4"), d_args))
    assert not _block_findings(out), out
    assert code == 0, out


def test_a_block_too_fine_to_refine_is_refused_on_the_newest_release(tmp_path, capsys):
    config = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "kv_lora_rank": 512,
              "num_attention_heads": 64, "num_key_value_heads": 64, "hidden_size": 4096, "num_hidden_layers": 40,
              "n_routed_experts": 64, "moe_intermediate_size": 1280, "torch_dtype": "bfloat16",
              "max_position_embeddings": 65536,
              "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    # 1280 / 16 = 80 rows: gcd(128, 128, 80, 4096) = 16 < 32, so 0.34.0 cannot refine; at TP 8 (160) it can (32)
    docs = _engines("/models/house-moe-fp8", "vllm/vllm-openai:v0.34.0", ("--tensor-parallel-size", "8"),
                    ("--tensor-parallel-size", "16"), gpus=(8, 16))
    code, out = check(tmp_path, capsys, *docs, extra=("--model-config", str(path)))
    found = _block_findings(out)
    assert len(found) == 1 and "decode" in found[0]["message"] and "80" in found[0]["message"], out
    assert code == 1


def test_fp8_block_split_on_an_unknown_release_is_a_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_engines(MINIMAX, "vllm/vllm-openai:latest", ("--tensor-parallel-size", "4"),
                                                  ("--tensor-parallel-size", "8")))
    found = _block_findings(out)
    assert found and {f["severity"] for f in found} == {"warning"}, out
    assert "fp8-moe-block-tp-indivisible" not in rules(out, "error")


def test_a_lone_engine_that_cannot_split_its_fp8_experts_is_refused(tmp_path, capsys):
    # one engine, no counterpart: the rule judges it by its own argv and image (one_engine)
    c = container([MINIMAX, "--tensor-parallel-size", "8", "--kv-transfer-config", KV_D],
                  image="vllm/vllm-openai:v0.28.0", gpus=8)
    code, out = check(tmp_path, capsys, workload("mm-decode", "decode", c, app="mm"))
    assert code == 1 and "fp8-moe-block-tp-indivisible" in rules(out, "error"), out


def test_a_pddeployment_at_tp_8_on_028_is_refused(tmp_path, capsys):
    spec = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "mm"},
            "spec": {"model": {"name": MINIMAX}, "engine": {"image": "vllm/vllm-openai:v0.28.0"},
                     "prefill": {"tensorParallelSize": 4}, "decode": {"tensorParallelSize": 8}}}
    code, out = check(tmp_path, capsys, spec)
    assert code == 1 and "fp8-moe-block-tp-indivisible" in rules(out, "error"), out
