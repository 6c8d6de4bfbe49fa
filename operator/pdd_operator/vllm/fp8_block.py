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

DeepSeek V4 checkpoints (``model_type`` ``deepseek_v4``) say ``quant_method: fp8`` with a ``weight_block_size`` for
their linear layers, but vLLM's ``DeepseekV4FP8Config.get_quant_method`` gives the routed experts
``Mxfp4MoEMethod`` (or ModelOpt NVFP4 with ``moe_quant_algo: NVFP4``) unless ``expert_dtype`` is ``"fp8"`` (missing
means ``"fp4"``): 0.20.0 models/deepseek_v4.py l.120-158 (always MXFP4), 0.20.1 l.193-204 and 0.21.0 l.197-212
(``expert_dtype`` dispatch), 0.22.0 models/deepseek_v4/quant_config.py l.132-160, 0.28.0 l.173-200, 0.34.0
l.209-230 (and models/deepseek_v41/quant_config.py l.164-191, l.221: model types ``deepseek_v4_text``,
``deepseek_v41``, ``deepseek_v41_text``). The MXFP4 path rounds the per-rank intermediate size up
(``mxfp4_round_up_hidden_size_and_intermediate_size``, quantization/mxfp4.py 0.20.0 l.495-503) and raises no
block-divisibility error, so those experts are not judged here (:func:`fp8_expert_since`).
"""

from __future__ import annotations

import math

from pdd_operator.vllm.versions import Version

#: The first release that refines FP8 MoE block scales to fit a TP shard (``refine_fp8_moe_block_shape``, absent
#: from the 0.28.0 sdist, present in 0.29.0).
MOE_BLOCK_REFINE_SINCE: Version = (0, 29, 0)
#: The smallest refined block vLLM accepts (``refine < 32: return None``).
MIN_REFINED_BLOCK = 32


#: The config.json ``model_type`` values vLLM's ``DeepseekV4FP8Config.override_quantization_method`` claims
#: (0.20.0 models/deepseek_v4.py l.136-148: ``deepseek_v4``; 0.34.0 models/deepseek_v41/quant_config.py l.180-189 adds
#: ``deepseek_v4_text``, ``deepseek_v41``, ``deepseek_v41_text``).
DEEPSEEK_V4_MODEL_TYPES = frozenset({"deepseek_v4", "deepseek_v4_text", "deepseek_v41", "deepseek_v41_text"})
#: The first release whose DeepSeek V4 quant config honours ``expert_dtype: fp8`` (0.20.0 gives every routed expert
#: ``Mxfp4MoEMethod``; 0.20.1 models/deepseek_v4.py l.66 ``_DEEPSEEK_V4_EXPERT_DTYPES`` and l.201-204).
DEEPSEEK_V4_FP8_EXPERTS_SINCE: Version = (0, 20, 1)


def fp8_expert_since(config: dict, text: dict) -> Version | None | bool:
    """Whether an FP8-block checkpoint's routed experts are FP8 in vLLM: ``True`` for every release (any model but
    DeepSeek V4), the first release that makes them FP8 (DeepSeek V4 with ``expert_dtype: fp8``:
    :data:`DEEPSEEK_V4_FP8_EXPERTS_SINCE`), or ``False`` (DeepSeek V4 whose experts are MXFP4 / NVFP4: ``expert_dtype``
    ``fp4`` or missing; not judged by the FP8 block rule).

    ``config``: the parsed config.json; ``text``: its language-model part. ``expert_dtype`` is read at the top level
    (``hf_config.expert_dtype``), and for the ``deepseek_v41`` types also from ``quantization_config`` (0.34.0
    transformers_utils/configs/deepseek_v41.py l.49-50). Pure."""
    model_type = str(text.get("model_type") or config.get("model_type") or "")
    if model_type not in DEEPSEEK_V4_MODEL_TYPES:
        return True
    dtype = text.get("expert_dtype", config.get("expert_dtype"))
    quant = config.get("quantization_config") or text.get("quantization_config") or {}
    if dtype is None and model_type.startswith("deepseek_v41") and isinstance(quant, dict):
        dtype = quant.get("expert_dtype")
    return DEEPSEEK_V4_FP8_EXPERTS_SINCE if dtype == "fp8" else False


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
