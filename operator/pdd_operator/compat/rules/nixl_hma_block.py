"""The NIXL worker finds no kernel block size for the hybrid KV cache manager's smallest group in vLLM 0.20.0-0.29.0
(DeepSeek-V4; the facts: :func:`pdd_operator.vllm.kernel_block.hma_nixl_kernel_refusal`)."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.compat.rules.must_match import hma_disabled
from pdd_operator.vllm.block_size import gpu_platform
from pdd_operator.vllm.kernel_block import HMA_MIN_BLOCK_FIXED_IN, HMA_MIN_BLOCK_SINCE, hma_nixl_kernel_refusal
from pdd_operator.vllm.versions import fmt

#: ``--distributed-executor-backend`` values whose workers run outside the engine core's process
#: (config/parallel.py 0.26.0 l.35 ``DistributedExecutorBackend``).
_OWN_PROCESS_EXECUTORS = frozenset({"mp", "ray"})


@rule(
    id="nixl-hma-block-size-no-kernel", family="block-size-mismatch", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.engine.image", "spec.model.name"),
    source=("vllm v1/engine/core.py (0.20.0 l.276 ... 0.26.0 l.311-314, 0.27.0 l.319, 0.29.0 l.336) sets "
            "cache_config.block_size to the smallest KV cache group's under the hybrid KV cache manager (DeepSeek-V4: "
            "4, its compress-ratio-4 state, models/deepseek_v4/compressor.py); with world size 1 the uni executor's "
            "worker shares that config and NixlConnector's worker calls select_common_block_size on it in __init__ "
            "(nixl/base_worker.py 0.26.0 l.494, 522, 546-548; 0.27.0 l.506, 534), which raises 'No common block "
            "size for 4' against the sparse MLA backend's [256] (v1/worker/utils.py 0.26.0 l.282-348); 0.30.0 uses "
            "the lcm of the groups' sizes (nixl/base_worker.py l.431-441); vllm-project/vllm#50714"),
    since=HMA_MIN_BLOCK_SINCE, until=HMA_MIN_BLOCK_FIXED_IN,
    example="deepseek-ai/DeepSeek-V4-Flash, TP 1, NixlConnector, hybrid KV cache manager on, vLLM 0.26.0",
    # the parallel sizes and executor are read as None / "<unknown:...>" where not in the files: a warning, never held
    needs=("--model", "--disable-hybrid-kv-cache-manager"),
)
def check_nixl_hma_block_size(pair: PDPair) -> list[Violation]:
    """Each NIXL engine of a model whose smallest hybrid KV cache group has a block size no CUDA kernel of its
    attention backend takes (:func:`~pdd_operator.vllm.kernel_block.hma_nixl_kernel_refusal`: DeepSeek-V4, 4 tokens
    against 256, vLLM 0.20.0-0.29.0) runs with the hybrid KV cache manager off or in more than one process.

    vLLM's engine core writes the smallest group's block size into its ``cache_config`` after profiling
    (v1/engine/core.py 0.26.0 l.311-314). Only a worker in the engine core's own process sees it: the ``uni``
    executor vLLM picks for tensor x pipeline x data parallel size 1 (config/parallel.py 0.20.0 l.794, 0.26.0
    l.883-928); ``mp`` workers keep their own copy of the config, whose block size the backends take. There the
    NIXL worker's ``_sync_block_size_with_kernel`` raises ``ValueError("No common block size for 4")`` when the
    KV cache is registered (nixl/base_worker.py 0.26.0 l.522, 546-548; v1/worker/utils.py 0.26.0 l.348): the engine
    stops. The hybrid manager is on as :func:`~pdd_operator.compat.rules.must_match.hma_disabled` reads it (only with
    ``--no-disable-hybrid-kv-cache-manager`` up to 0.21). An error on CUDA (image or GPU resource); a warning where
    the platform or the parallel sizes are not known; nothing on ROCm, whose DeepSeek-V4 backends were not read.
    An architecture not in :data:`~pdd_operator.vllm.kernel_block.HMA_SMALLEST_GROUP` is not judged.
    """
    out: list[Violation] = []
    for r in pair.roles:
        version = r.version or pair.version
        refused = hma_nixl_kernel_refusal(pair.hf_architecture, version)
        if not r.nixl or refused is None or version is None or hma_disabled(r, version):
            continue
        smallest, kernel = refused
        platform = gpu_platform(r.image, r.resources)
        if platform not in (None, "cuda") or r.executor in _OWN_PROCESS_EXECUTORS:
            continue  # ROCm's backends not read; workers in their own processes keep the configured block size
        executor_unknown = r.executor not in (None, "uni")  # a value not in the files (or one vLLM refuses)
        sizes = (r.tp, r.pp, r.dp)
        if any(n is not None and n > 1 for n in sizes):
            continue  # mp or ray workers: their config keeps the block size the backends take
        kernels = ", ".join(str(k) for k in kernel)
        message = (f"{r.role}: vLLM {fmt(version)} with the hybrid KV cache manager sets the block size to this "
                   f"model's smallest KV cache group's ({smallest} tokens, {pair.hf_architecture}); with tensor, "
                   f"pipeline and data parallel size 1 the NIXL worker shares that setting and finds no attention "
                   f"kernel block size for it (the backend takes {kernels}): ValueError 'No common block size for "
                   f"{smallest}' when the KV cache is registered, and the engine stops (vllm#50714; fixed in "
                   f"{fmt(HMA_MIN_BLOCK_FIXED_IN)}).")
        fix = fix_for(pair, f"Use vLLM >= {fmt(HMA_MIN_BLOCK_FIXED_IN)} (spec.engine.image) on both roles.",
                      f"Use vLLM >= {fmt(HMA_MIN_BLOCK_FIXED_IN)} on both engines (the image or vllm install), whose "
                      "NIXL worker sizes its blocks as a multiple of every group's.")
        unsure = [why for why, bad in (
            (f"the GPUs are taken as NVIDIA's{f' ({r.platform_hint})' if r.platform_hint else ''}", platform is None),
            ("the parallel sizes are not known", None in sizes),
            ("the executor backend is not known", executor_unknown)) if bad]
        if unsure:
            out.append((f"{message} Not certain: {'; '.join(unsure)}.", fix, "warning"))
        else:
            out.append((message, fix))
    return out
