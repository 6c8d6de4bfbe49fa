"""The kernel block split under NIXL in vLLM 0.11.1 and 0.11.2 (the facts: :mod:`pdd_operator.vllm.kernel_block`)."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.attention_backends import selected_backend
from pdd_operator.vllm.block_size import PLAIN_ATTENTION, gpu_platform
from pdd_operator.vllm.kernel_block import (
    CUDA_DEFAULTS,
    SPLIT_SINCE,
    SUPPORTED_KERNEL_BLOCK_SIZES,
    TOPOLOGY_FIXED_IN,
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
