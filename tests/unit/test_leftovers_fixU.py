"""Leftovers of the held-out sets about what the checker knows (model configs, images), branch i9-fixU.

1. Block-quantized FP8 MoE checkpoints keep their ``weight_block_size`` in the known-config table. The snapshots of
   Qwen/Qwen3-235B-A22B-FP8, Qwen/Qwen3-30B-A3B-FP8 and zai-org/GLM-5{,.1,.2}-FP8 had their ``quantization_config``
   reduced to its scalar fields, which dropped the ``[128, 128]`` list, so ``fp8-moe-block-tp-indivisible`` could not
   judge them. Re-snapshotted from ai-dynamo/aiconfigurator ``aic-core/src/aiconfigurator_core/model_configs/
   <org>--<name>_config.json`` at 095f58a51c4c (the Hugging Face config.json copies: ``"weight_block_size": [128,
   128]`` in each), with ``modules_to_not_convert`` still dropped.
"""

from __future__ import annotations

import json

import pytest

from dev.gen_known_model_configs import HERE
from pdd_operator.vllm.known_models import known_config
from pdd_operator.vllm.model_config import facts_from_config
from tests.unit.test_leftover_kinds_27 import pair
from tests.unit.test_turn2_variants import check, rules

# --- 1. FP8 weight blocks of the well-known MoE checkpoints -----------------------------------------------------


def _experts(config: dict) -> bool:
    text = config.get("text_config") or config
    return any(text.get(k) or config.get(k) for k in ("num_experts", "num_local_experts", "n_routed_experts"))


def test_every_fp8_moe_snapshot_keeps_its_weight_blocks():
    # an fp8 checkpoint whose experts are FP8 too (no moe_quant_algo naming another format for them) must keep the
    # block size the experts are split along; trimming the list away silences the rule
    for path in sorted((HERE / "snapshots").glob("*.json")):
        config = json.loads(path.read_text())
        quant = config.get("quantization_config") or (config.get("text_config") or {}).get("quantization_config")
        if not (isinstance(quant, dict) and quant.get("quant_method") == "fp8" and _experts(config)):
            continue
        if quant.get("moe_quant_algo"):
            continue
        assert quant.get("weight_block_size") == [128, 128], path.name


@pytest.mark.parametrize(("model_id", "expert_size", "hidden"), [
    ("Qwen/Qwen3-235B-A22B-FP8", 1536, 4096),
    ("Qwen/Qwen3-30B-A3B-FP8", 768, 2048),
    ("zai-org/GLM-5-FP8", 2048, 6144),
    ("zai-org/GLM-5.1-FP8", 2048, 6144),
    ("zai-org/GLM-5.2-FP8", 2048, 6144),
    ("deepseek-ai/DeepSeek-V3", 2048, 7168),
    ("moonshotai/Kimi-K2-Instruct", 2048, 7168),
    ("MiniMaxAI/MiniMax-M2", 1536, 3072),
])
def test_known_fp8_moe_checkpoints_give_their_expert_block_shape(model_id, expert_size, hidden):
    config, _ = known_config(model_id)
    assert config["quantization_config"]["weight_block_size"] == [128, 128]
    assert facts_from_config(config).fp8_moe_shape == (expert_size, hidden, 128, 128)


@pytest.mark.parametrize(("model_id", "tp", "version", "severity"), [
    # 1536 / 8 = 192 rows a rank: not a multiple of 128 up to 0.28; from 0.29 refined to gcd(128, 192, 4096) = 64
    ("Qwen/Qwen3-235B-A22B-FP8", 8, "0.28.0", "error"),
    ("Qwen/Qwen3-235B-A22B-FP8", 4, "0.28.0", None),
    ("Qwen/Qwen3-235B-A22B-FP8", 8, "0.29.0", None),
    # 768 / 4 = 192
    ("Qwen/Qwen3-30B-A3B-FP8", 4, "0.24.0", "error"),
    ("Qwen/Qwen3-30B-A3B-FP8", 2, "0.24.0", None),
    # 2048 / 8 = 256: whole blocks
    ("zai-org/GLM-5-FP8", 8, "0.28.0", None),
])
def test_fp8_moe_block_rule_judges_the_known_checkpoints(tmp_path, capsys, model_id, tp, version, severity):
    _, out = check(tmp_path, capsys, *pair(model_id, version, p_tp=tp, d_tp=tp))
    assert ("fp8-moe-block-tp-indivisible" in rules(out, severity or "error")) == (severity is not None)
