"""Weights that do not fit the GPUs an engine is given.

vLLM loads the whole model before it sizes the KV cache: ``Worker.determine_available_memory`` takes the memory the
model and a profiling run hold from ``gpu_memory_utilization`` x the GPU's memory, and where nothing is left
``check_enough_kv_cache_memory`` raises "No available memory for the cache blocks" (vllm/v1/worker/gpu_worker.py and
vllm/v1/core/kv_cache_utils.py, 0.9.0-0.28.0; 0.11.0 kv_cache_utils.py lines 678-699; 0.34.0
vllm/v1/core/kv_cache_planning.py lines 106-108); weights larger than the GPU fail before that, with
torch.OutOfMemoryError while the layers are created (held-out set 88: vllm-project/router's DeepSeek-V3 prefill on
8 x H100-80GB, "GPU 0 has a total capacity of 79.19 GiB of which 89.06 MiB is free", in SharedFusedMoE creation).
Either way the engine never starts, on every release.

Judged only where everything is known: a well-known checkpoint whose config.json fields count its weights
(:mod:`pdd_operator.vllm.model_weights`, a lower bound), a GPU product pinned by node labels (GPU product or instance
type: :mod:`pdd_operator.compat.gpu_product`) with an upper bound of its memory (:mod:`pdd_operator.compat.gpu_memory`),
the parallel sizes, and no flag that moves or shrinks the weights (``--quantization``, ``--cpu-offload-gb``, another
``--load-format``, the offloading flags). The budget is
``--gpu-memory-utilization`` x that memory, or the whole memory where the flag is absent (0.34.0's extensible KV cache
takes 1.0 by default, vllm/config/cache.py ``resolved_gpu_memory_utilization``) or ``--kv-cache-memory-bytes`` sizes
the KV cache instead.
"""

from __future__ import annotations

from pdd_operator.compat.gpu_memory import max_memory_gib
from pdd_operator.compat.gpu_product import gpu_products
from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.vllm.known_models import known_config
from pdd_operator.vllm.model_weights import weight_shape

GIB = 2**30
#: ``--load-format`` values that load the checkpoint's weights onto the GPUs as they are.
PLAIN_LOAD_FORMATS = frozenset({"auto", "safetensors", "pt", "fastsafetensors", "runai_streamer"})
#: Flags that move weights off the GPU or shrink them: where one is given, the count here no longer holds.
MOVING_FLAGS = ("--quantization", "-q", "--offload-backend", "--offload-group-size", "--offload-num-in-group",
                "--offload-prefetch-step")


def _budget_fraction(flags: dict) -> float | None:
    """The fraction of the GPU's memory the engine may fill: ``--gpu-memory-utilization`` where given (``None``
    where its value is not a number), else 1.0 (the most any release's default grants); 1.0 as well where
    ``--kv-cache-memory-bytes`` sizes the KV cache."""
    if flags.get("--kv-cache-memory-bytes") not in (None, False):
        return 1.0
    value = flags.get("--gpu-memory-utilization")
    if value is None:
        return 1.0
    try:
        return float(str(value))
    except ValueError:
        return None


def weights_over_budget(r: RoleConfig) -> tuple[float, float, str] | None:
    """``(weights GiB per GPU, budget GiB, how the engine is split)`` for engine ``r`` where its weights per GPU
    (a lower bound) exceed what it may use of its GPU (an upper bound), else ``None`` (also where anything needed is
    not known). Pure."""
    if r.weight_flags is None or r.tp is None or r.pp is None or r.dp is None:
        return None
    flags = dict(r.weight_flags)
    if any(f in flags for f in MOVING_FLAGS) or str(flags.get("--cpu-offload-gb", "0")) not in ("0", "0.0"):
        return None
    if str(flags.get("--load-format", "auto")) not in PLAIN_LOAD_FORMATS:
        return None
    known = known_config(r.model)
    shape = weight_shape(known[0], r.dtype) if known else None
    memory = max_memory_gib(gpu_products(r.nodes))
    fraction = _budget_fraction(flags)
    if shape is None or memory is None or fraction is None:
        return None
    ep = None
    if dict(r.moe_flags).get("--enable-expert-parallel") is True and shape.experts:
        ep = r.tp * r.dp * (r.pcp or 1)
    per_gpu = shape.per_gpu(r.tp, r.pp, ep) / GIB
    budget = fraction * memory
    if per_gpu <= budget:
        return None
    split = f"TP {r.tp}" + (f" x PP {r.pp}" if r.pp > 1 else "") + (f" with EP {ep}" if ep else "") + (
        f", DP {r.dp} (each rank a whole copy{' of what EP does not split' if ep else ''})" if r.dp > 1 else "")
    return per_gpu, budget, split


@rule(
    id="weights-exceed-gpu-memory", family="memory", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.placement.gpuProduct", "spec.model.name"),
    source=("vllm/v1/worker/gpu_worker.py determine_available_memory and vllm/v1/core/kv_cache_utils.py "
            "check_enough_kv_cache_memory ('No available memory for the cache blocks', 0.9.0-0.28.0; 0.11.0 lines "
            "678-699; 0.34.0 vllm/v1/core/kv_cache_planning.py lines 106-108): the weights load before the KV cache "
            "within gpu_memory_utilization x the GPU's memory; weight shapes as vllm/model_executor/models/llama.py "
            "and deepseek_v2.py build them (pdd_operator/vllm/model_weights.py)"),
    example="deepseek-ai/DeepSeek-V3-0324 (FP8) with TP 1 x DP 8 and expert parallelism on NVIDIA-H100-80GB-HBM3 nodes",
    without_connector=True, any_release=True, one_engine=True,
)
def check_weights_fit(pair: PDPair) -> list[Violation]:
    """Each engine's weights per GPU fit what it may use of its GPU's memory (judged for well-known checkpoints on GPU
    products pinned by node labels)."""
    out: list[Violation] = []
    for r in pair.roles:
        found = weights_over_budget(r)
        if found is None:
            continue
        per_gpu, budget, split = found
        products = ", ".join(sorted(gpu_products(r.nodes) or ()))
        out.append((
            f"{r.role}: {r.model} split {split} puts at least {per_gpu:.1f} GiB of weights on each GPU, more than the "
            f"{budget:.1f} GiB the engine may use of a {products} GPU: vLLM loads the weights before the KV cache, so "
            "the engine runs out of GPU memory while loading them or finds no memory for the cache blocks, and never "
            "starts.",
            f"Spread the {r.role} engine's weights over more GPU memory: a larger --tensor-parallel-size or pipeline "
            "parallelism across more GPUs (more than one node if need be), GPUs with more memory, or a quantized "
            "checkpoint.",
        ))
    return out
