"""Whether a block-quantized FP8 checkpoint's experts load at a given tensor-parallel split, per vLLM release.

A checkpoint whose ``quantization_config`` is ``quant_method: fp8`` with ``weight_block_size [block_n, block_k]``
stores one scale per block. ``Fp8MoEMethod.create_weights`` shards each expert's intermediate dimension over the MoE
TP group (``intermediate_size_per_partition = intermediate_size // tp_size``, fused_moe/config.py 0.28.0 l.1344;
without expert parallel the group is TP x DP x PCP flattened, ``flatten_tp_across_dp_and_pcp`` l.1117-1125 and
l.1208-1235; with ``--enable-expert-parallel`` it is 1, l.1237-1252) and, up to 0.28.x, raises ``ValueError``
where the shard is not a multiple of ``block_n`` ("The output_size of gate's and up's weight = N is not divisible by
weight quantization block_n = 128.") or, at TP > 1, of ``block_k`` (quantization/fp8.py 0.9.0 l.491-500, 0.11.0
l.507-520, 0.24.0 l.561-574, 0.28.0 l.534-546). From 0.29.0 the block scales are refined to ``gcd(block_n,
block_k, shard, hidden_size)`` where that is at least 32 (fused_moe/oracle/fp8.py 0.29.0 l.286-303,
``refine_fp8_moe_block_shape``; 0.34.0 l.298-327) and the same ``ValueError`` stays for a smaller one
(quantization/fp8.py 0.29.0 l.566-584, 0.34.0 ``validate_fp8_block_shape_moe`` utils/fp8_utils.py l.1347-1373).
"""

from __future__ import annotations

import math

from pdd_operator.vllm.versions import Version

#: The first release that refines FP8 MoE block scales to fit a TP shard (``refine_fp8_moe_block_shape``, absent
#: from the 0.28.0 sdist, present in 0.29.0).
MOE_BLOCK_REFINE_SINCE: Version = (0, 29, 0)
#: The smallest refined block vLLM accepts (``refine < 32: return None``).
MIN_REFINED_BLOCK = 32


def moe_block_refusal(shape: tuple[int, int, int, int], moe_tp: int, version: Version) -> str | None:
    """Why vLLM ``version`` refuses to load a block-quantized FP8 checkpoint's experts split over ``moe_tp`` ranks,
    else ``None``.

    ``shape``: ``(expert intermediate size, hidden size, block_n, block_k)`` from config.json; ``moe_tp``: the MoE
    layer's TP size (TP x DP x PCP without expert parallel, 1 with it). Pure."""
    size, hidden, block_n, block_k = shape
    shard = size // moe_tp
    bad = [f"block_n = {block_n}"] if shard % block_n else []
    if moe_tp > 1 and shard % block_k:
        bad.append(f"block_k = {block_k}")
    if not bad:
        return None
    refine = math.gcd(block_n, block_k, shard, hidden)
    if version >= MOE_BLOCK_REFINE_SINCE and refine >= MIN_REFINED_BLOCK:
        return None
    why = (f"the experts' intermediate size {size} split over {moe_tp} ranks is {shard} rows a rank, not a multiple "
           f"of the checkpoint's FP8 weight block ({' and '.join(bad)})")
    if version >= MOE_BLOCK_REFINE_SINCE:
        why += f", and the block cannot be refined to fit (gcd {refine} is below {MIN_REFINED_BLOCK})"
    return why
