"""The NIXL worker's kernel block size: its split in vLLM 0.11.1 and 0.11.2, and no size at all for a hybrid KV cache
manager's smallest group in 0.20.0-0.29.0 (the facts: :mod:`pdd_operator.vllm.kernel_block`)."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.compat.rules.must_match import hma_disabled
from pdd_operator.vllm.attention_backends import selected_backend
from pdd_operator.vllm.block_size import PLAIN_ATTENTION, gpu_platform
from pdd_operator.vllm.kernel_block import (
    CUDA_DEFAULTS,
    HMA_MIN_BLOCK_FIXED_IN,
    HMA_MIN_BLOCK_SINCE,
    SPLIT_SINCE,
    SUPPORTED_KERNEL_BLOCK_SIZES,
    TOPOLOGY_FIXED_IN,
    hma_nixl_kernel_refusal,
    kernel_block_size,
)
from pdd_operator.vllm.versions import fmt


@rule(
    id="block-size-kernel-split", family="block-size-mismatch", severity="error",
    fields=("spec.decode.blockSize", "spec.prefill.blockSize", "spec.engine.image"),
    source=("vllm v1/worker/gpu_model_runner.py select_common_block_size and the backends' "
            "supported_kernel_block_sizes (FLASH_ATTN, FLASHINFER: 16, 32, 64) from 0.11.1; nixl_connector.py "
            "register_kv_caches moves self.block_size to the kernel size while TpKVTopology keeps the logical one "
            "(0.11.1, 0.11.2), so block_size_ratio is wrong and the handshake fails; fixed in 0.12.0 "
            "(vllm#28925, after #28677)"),
    since=SPLIT_SINCE, until=TOPOLOGY_FIXED_IN,
    example="--block-size 128 on FLASH_ATTN with NixlConnector, vLLM 0.11.1",
    needs=("--block-size", "--attention-backend", "--attention-config", "VLLM_ATTENTION_BACKEND"),
)
def check_kernel_block_split(pair: PDPair) -> list[Violation]:
    """On vLLM 0.11.1-0.11.2 the decode's NIXL block size is one its attention backend runs as is (no kernel split).

    Judged on CUDA (:func:`~pdd_operator.vllm.block_size.gpu_platform`); on a script's engine that names neither
    image nor GPU resource but shows an NVIDIA host (``RoleConfig.platform_hint``) the same judgement is a warning.
    Judged for a model whose KV cache is plain attention (``ModelTraits.kv_family`` dense or MoE, as the block-size
    rules read it: a multimodal checkpoint whose language model is plain counts, its vision encoder holds no KV
    cache); MLA and hybrid models get sizes the CUDA platform forces (:mod:`pdd_operator.vllm.kernel_block`).
    """
    d = pair.decode
    if not d.nixl or d.block_size is None or pair.model.kv_family not in PLAIN_ATTENTION:
        return []
    platform = gpu_platform(d.image, d.resources)
    if platform is None and d.platform_hint:
        # a script's likely CUDA host: what holds on CUDA is said as a warning, never an error from a guess
        return [(f"{message} The GPUs are taken as NVIDIA's ({d.platform_hint}); the script names no image or "
                 "GPU resource that says so.", fix, "warning")
                for message, fix, *_ in _kernel_split(pair)]
    if platform != "cuda":
        return []
    return _kernel_split(pair)


def _kernel_split(pair: PDPair) -> list[Violation]:
    """:func:`check_kernel_block_split` on CUDA."""
    d = pair.decode
    named = selected_backend(d.attention_backend, d.env, d.version)
    backends = (named,) if named else CUDA_DEFAULTS
    kernels = {b: kernel_block_size(d.block_size, b) for b in backends}
    split = {b: k for b, k in kernels.items() if k is not None and k != d.block_size}
    fix = fix_for(pair, f"Use blockSize 64, 32 or 16 on both roles, or vLLM >= {fmt(TOPOLOGY_FIXED_IN)}.",
                  f"Use --block-size 64 (or 32, 16) on both engines, or vLLM >= {fmt(TOPOLOGY_FIXED_IN)}.")
    why = (f"vLLM {fmt(d.version)}'s NIXL worker then publishes the kernel size while its transfer topology keeps "
           f"{d.block_size}, so the decode computes a wrong block-size ratio and the handshake fails (vllm#28925, fixed "
           f"in {fmt(TOPOLOGY_FIXED_IN)})")
    if named and named.upper() not in SUPPORTED_KERNEL_BLOCK_SIZES:
        return [(f"decode: attention backend {named} is not described for vLLM {fmt(d.version)}'s kernel block "
                 f"sizes; if it does not take {d.block_size}-token blocks as they are, {why}.", fix, "warning")]
    if not split:
        return []
    kernel = ", ".join(f"{b} {k}" for b, k in split.items())
    if named:
        return [(f"decode: --block-size {d.block_size} runs on {split[named]}-token kernel blocks on {named} "
                 f"(supported kernel sizes 16, 32, 64); {why}.", fix)]
    return [(f"decode: --block-size {d.block_size} runs on smaller kernel blocks on the backend vLLM picks on "
             f"Ampere or newer GPUs ({kernel}; older GPUs get a backend that takes multiples of 16); if so, {why}.",
             fix, "warning")]


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
    needs=("--model", "--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size",
           "--distributed-executor-backend", "--disable-hybrid-kv-cache-manager"),
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
        if platform not in (None, "cuda") or r.executor not in (None, "uni"):
            continue
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
            ("the parallel sizes are not known", None in sizes)) if bad]
        if unsure:
            out.append((f"{message} Not certain: {'; '.join(unsure)}.", fix, "warning"))
        else:
            out.append((message, fix))
    return out
