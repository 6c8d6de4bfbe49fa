"""Block-quantized FP8 checkpoints whose experts an engine's parallel layout cannot split (the engine never loads)."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.vllm.fp8_block import MOE_BLOCK_REFINE_SINCE, moe_block_refusal
from pdd_operator.vllm.versions import NEWEST_KNOWN, OLDEST_KNOWN, fmt


def moe_tp_size(r: RoleConfig) -> int | None:
    """The MoE layer's TP group of engine ``r``: 1 with ``--enable-expert-parallel`` (where TP x DP x PCP > 1), else
    TP x DP x PCP (vLLM's ``FusedMoEParallelConfig.make``); ``None`` where a size or the flag is not a literal."""
    sizes = (r.tp, r.dp, r.pcp)
    if any(not isinstance(s, int) or s < 1 for s in sizes):
        return None
    world = r.tp * r.dp * r.pcp
    ep = dict(r.moe_flags).get("--enable-expert-parallel")
    if ep is not None and not isinstance(ep, bool):
        return None
    return 1 if ep and world > 1 else world


@rule(
    id="fp8-moe-block-tp-indivisible", family="parallelism", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.model.configMapRef"),
    source=("vllm/model_executor/layers/quantization/fp8.py Fp8MoEMethod.create_weights: ValueError 'The output_size "
            "of gate's and up's weight = N is not divisible by weight quantization block_n' / 'The input_size of "
            "down's weight ...' (0.9.0 l.491-500, 0.11.0 l.507-520, 0.24.0 l.561-574, 0.28.0 l.534-546); from 0.29.0 "
            "only where refine_fp8_moe_block_shape finds no block of at least 32 (fused_moe/oracle/fp8.py 0.29.0 "
            "l.286-303, 0.34.0 l.298-327; quantization/fp8.py 0.29.0 l.566-584); the MoE TP group "
            "(fused_moe/config.py 0.28.0 FusedMoEParallelConfig.make l.1208-1252: TP x DP x PCP, 1 with expert "
            "parallel); DeepSeek V4's routed experts are MXFP4 unless expert_dtype is fp8 (models/deepseek_v4.py "
            "0.20.0 l.120-158, 0.21.0 l.197-212; models/deepseek_v4/quant_config.py 0.22.0 l.132-160, 0.34.0 "
            "l.209-230); pdd_operator.vllm.fp8_block"),
    without_connector=True, one_engine=True,
    example="MiniMaxAI/MiniMax-M2 (FP8 blocks [128, 128], intermediate_size 1536) at --tensor-parallel-size 8 on vLLM "
            "0.28.0: 192 rows a rank",
)
def check_fp8_moe_block(pair: PDPair) -> list[Violation]:
    """Each engine splits a block-quantized FP8 checkpoint's experts along whole weight blocks (else vLLM refuses to
    load it).

    Judged where the model's config.json is known (given, or a well-known checkpoint's: ``quantization_config`` fp8
    with ``weight_block_size``, the expert intermediate size and hidden size) and the engine's TP, DP, PCP and expert
    parallel flag are literals. DeepSeek V4 checkpoints (``expert_dtype`` fp4 or none) keep FP8 blocks for their
    linear layers only: vLLM loads their routed experts as MXFP4 (padded per rank, no block check), so they are not
    judged here; with ``expert_dtype: fp8`` they are, from 0.20.1. Up to 0.28.x the expert shard must be a multiple
    of ``block_n`` (and of ``block_k`` at TP > 1); from 0.29.0 vLLM refines the blocks down to a common divisor of at
    least 32. Where the release is unknown and only the older rule refuses, a warning."""
    shape = pair.model.fp8_moe_shape
    if shape is None:
        return []
    out: list[Violation] = []
    for r in pair.roles:
        moe_tp = moe_tp_size(r)
        if moe_tp is None or moe_tp == 1:
            continue
        version = r.version
        if version is not None and pair.model.fp8_moe_since is not None and version < pair.model.fp8_moe_since:
            continue  # that release's experts of this checkpoint are not FP8 (DeepSeek V4 on 0.20.0: MXFP4)
        why = moe_block_refusal(shape, moe_tp, version or NEWEST_KNOWN)
        old_why = moe_block_refusal(shape, moe_tp, version or OLDEST_KNOWN)
        fix = (f"On the {r.role} engine, use a TP (x DP) size that splits the experts along whole FP8 blocks, or "
               "--enable-expert-parallel (each expert stays whole)"
               + (f", or vLLM {fmt(MOE_BLOCK_REFINE_SINCE)} or newer (it refines the blocks)" if why is None else "")
               + ".")
        if why:
            out.append((f"{r.role}: {r.model or 'the model'}: {why}; vLLM {fmt(version) if version else 'of any release'} "
                        "raises ValueError while creating the expert weights, so this engine never loads the model.",
                        fix))
        elif old_why and version is None:
            out.append((f"{r.role}: {r.model or 'the model'}: {old_why}. vLLM up to 0.28 refuses to load it, from "
                        f"{fmt(MOE_BLOCK_REFINE_SINCE)} it refines the blocks; the vLLM version is not known here.",
                        fix, "warning"))
    return out
