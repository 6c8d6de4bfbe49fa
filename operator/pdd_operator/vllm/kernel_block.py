"""The kernel block size an attention backend runs a KV cache block size with, in the vLLM releases where the NIXL
connector mistook it (0.11.1 and 0.11.2).

From 0.11.1 an attention backend lists ``supported_kernel_block_sizes`` and ``GPUModelRunner.select_common_block_size``
(v1/worker/gpu_model_runner.py) keeps the KV cache manager's (logical) block size when every backend supports it,
else picks the largest supported integer size that divides it: ``--block-size 128`` on FLASH_ATTN or FLASHINFER
(``[16, 32, 64]``, v1/attention/backends/flash_attn.py, flashinfer.py) runs on 64-token kernel blocks, two per
logical block. 0.11.0's backends list no sizes and the tensors use the logical size.

``NixlConnectorWorker.register_kv_caches`` then reads the kernel size off the KV tensors, sets ``self.block_size`` to
it and publishes it in ``NixlAgentMetadata``, but the ``TpKVTopology`` built in ``__init__`` keeps the logical size
(0.11.1 and 0.11.2 nixl_connector.py: ``block_size=self.block_size`` at construction, never updated): a decode that
splits computes ``block_size_ratio`` = logical / kernel against a prefill that publishes the kernel size, and the
handshake's descriptor set-up fails (vLLM PR #28925: "hangs on main due to an exception being raised during the
handshake"). 0.12.0 stores the kernel size in ``_block_size[engine_id]``, which ``TpKVTopology.block_size`` reads.

Read in the 0.11.0, 0.11.1, 0.11.2 (wheel) and 0.12.0 sources. Only the backends of plain-attention models are
listed: MLA backends and hybrid models get their sizes forced by ``platforms/cuda.py`` and are not described.
"""

from __future__ import annotations

from pdd_operator.vllm.versions import Version

#: The first release whose backends split a logical block into kernel blocks (``supported_kernel_block_sizes``).
SPLIT_SINCE: Version = (0, 11, 1)
#: The first release whose NIXL connector keeps its topology on the kernel size (vLLM PR #28925).
TOPOLOGY_FIXED_IN: Version = (0, 12, 0)

#: ``supported_kernel_block_sizes`` of the plain-attention backends in 0.11.1 / 0.11.2, by the name
#: ``VLLM_ATTENTION_BACKEND`` takes: a tuple of sizes, or an int ``n`` for ``MultipleOf(n)``. FLEX_ATTENTION lists none
#: (the base class's ``MultipleOf(1)``, attention/backends/abstract.py).
SUPPORTED_KERNEL_BLOCK_SIZES: dict[str, tuple[int, ...] | int] = {
    "FLASH_ATTN": (16, 32, 64),
    "FLASHINFER": (16, 32, 64),
    "TRITON_ATTN": 16,
    "XFORMERS": 16,
    "TREE_ATTN": 16,
    "ROCM_AITER_FA": 16,
    "FLEX_ATTENTION": 1,
}

#: The backends vLLM 0.11.1 picks for a plain-attention model on CUDA without ``VLLM_ATTENTION_BACKEND``:
#: FLASH_ATTN (compute capability 8.x/9.x) or FLASHINFER (10.x); older GPUs get a backend taking any multiple of 16.
CUDA_DEFAULTS = ("FLASH_ATTN", "FLASHINFER")


def kernel_block_size(logical: int, backend: str) -> int | None:
    """The kernel block size in tokens a KV cache of ``logical``-token blocks runs with on ``backend`` (a
    ``VLLM_ATTENTION_BACKEND`` name, any case) in vLLM 0.11.1 / 0.11.2 (``select_common_block_size`` for one
    backend: ``logical`` itself when supported, else the largest supported size dividing it).

    Returns ``None`` when the backend is not in :data:`SUPPORTED_KERNEL_BLOCK_SIZES` or no supported size divides
    ``logical`` (vLLM raises ``ValueError("No common block size ...")`` there).
    """
    sizes = SUPPORTED_KERNEL_BLOCK_SIZES.get(backend.upper())
    if sizes is None:
        return None
    if isinstance(sizes, int):
        return logical if logical % sizes == 0 else None
    if logical in sizes:
        return logical
    return next((s for s in sorted(sizes, reverse=True) if logical % s == 0), None)


#: Attention backends whose ``get_supported_kernel_block_sizes`` is ``[MultipleOf(16)]`` for a hybrid attention + Mamba
#: model, from the release given to 0.34.0: TRITON_ATTN and FLEX_ATTENTION in every release read (triton_attn.py,
#: flex_attention.py of the 0.22.0, 0.26.0, 0.27.0, 0.29.0 and 0.34.0 sdists); FLASH_ATTN from 0.25.0 (0.22.0-0.24.0
#: flash_attn.py lines 77-94 return ``[16, 32, 64]`` for a hybrid model whose Mamba cache dtype is float32, NemotronH's
#: default: model_executor/models/config.py ``NemotronHForCausalLMConfig``; 0.25.0 line 76 ``[MultipleOf(16)]``).
#: ``select_common_block_size`` (v1/worker/utils.py) then keeps the logical block, which ``_align_hybrid_block_size``
#: makes a multiple of the backend's smallest size: one kernel block per logical block.
LOGICAL_KERNEL_SINCE: dict[str, Version] = {
    "TRITON_ATTN": (0, 22, 0), "FLEX_ATTENTION": (0, 22, 0), "FLASH_ATTN": (0, 25, 0),
}
#: FLASH_ATTN's fixed FlashAttention 4 pages by head size, from the release given: 128 tokens for head size 256 on
#: compute capability 10.x/11.x from 0.29.0 (flash_attn.py ``_get_fa4_hd256_block_size``), 64 for an fp8 KV cache with
#: head size 512 on 9.x from 0.31.0 (``_get_sm90_fa4_fp8_kv_block_size``; lines 357-367 of 0.34.0).
FA4_PAGE_HEAD_SIZES: dict[int, Version] = {256: (0, 29, 0), 512: (0, 31, 0)}


def runs_logical_block(backend: str | None, version: Version | None, head_size: int | None) -> bool:
    """Whether ``backend`` (an ``--attention-backend`` name, any case) certainly runs a hybrid attention + Mamba model's
    logical KV block as its kernel block on every GPU in vLLM ``version`` (0.22.0-0.34.0), so the NIXL worker's
    ``_physical_blocks_per_logical_kv_block`` is 1 (nixl worker ``_sync_block_size_with_kernel``).

    False where it is not certain: no backend or version given, a backend with fixed pages (FLASHINFER's 16/32/64, more
    on Blackwell), FLASH_ATTN before 0.25.0, or FLASH_ATTN where FlashAttention 4's pages may apply to the head size
    (:data:`FA4_PAGE_HEAD_SIZES`; an unknown head size counts as such from 0.29.0).
    """
    if backend is None or version is None:
        return False
    name = backend.upper()
    since = LOGICAL_KERNEL_SINCE.get(name)
    if since is None or version < since:
        return False
    if name != "FLASH_ATTN":
        return True
    if head_size is None:
        return version < min(FA4_PAGE_HEAD_SIZES.values())
    paged_since = FA4_PAGE_HEAD_SIZES.get(head_size)
    return paged_since is None or version < paged_since


#: The releases whose NIXL worker takes its block size from ``cache_config.block_size`` after the engine core has set it
#: to the smallest KV cache group's block size under the hybrid KV cache manager (first: the first release serving
#: DeepSeek-V4, 0.20.0; the engine core's ``block_size = min(g.kv_cache_spec.block_size ...)``: v1/engine/core.py
#: 0.20.0 l.276, 0.24.0 l.309, 0.26.0 l.311-314, 0.27.0 l.319, 0.28.0 l.322, 0.29.0 l.336; the worker's
#: ``self.block_size = vllm_config.cache_config.block_size`` then ``_sync_block_size_with_kernel()`` in ``__init__``:
#: nixl/worker.py 0.20.0 l.306, 331, nixl/base_worker.py 0.24.0 l.456, 484, 0.26.0 l.494, 522, 0.27.0 l.506, 534,
#: 0.28.0 l.512, 540, 0.29.0 l.589, 620). 0.30.0 sizes the worker's block as the least common multiple of the
#: transfer groups' block sizes instead (nixl/base_worker.py l.431-441), which the backends take.
HMA_MIN_BLOCK_SINCE: Version = (0, 20, 0)
HMA_MIN_BLOCK_FIXED_IN: Version = (0, 30, 0)

#: Per Hugging Face architecture: the block size in tokens of its smallest KV cache group under the hybrid KV cache
#: manager, and the kernel block sizes its CUDA attention backend takes, in 0.20.0-0.29.0. DeepSeek-V4: every
#: checkpoint interleaves compress-ratio-4 and -128 layers (config.json ``compress_ratios``; models/deepseek_v4/
#: attention.py 0.26.0 l.188, 313); the ratio-4 compressor state's group has 4-token blocks, the ratio-128 one 8
#: (model_executor/layers/deepseek_compressor.py 0.20.0 l.155-158, 0.20.1 l.154-157; models/deepseek_v4/compressor.py
#: 0.22.0 l.151, 0.26.0 l.159-165, 0.27.0 l.185, 0.29.0 l.163); the sparse MLA backends take 256-token kernel blocks only
#: (v1/attention/backends/mla/flashmla_sparse.py 0.20.0 l.152-153; models/deepseek_v4/nvidia/flashmla.py 0.22.0 l.82;
#: models/deepseek_v4/sparse_mla.py 0.24.0 l.56, 0.26.0 l.53-54, 0.29.0 l.55; nvidia/flashinfer_sparse.py 0.26.0
#: l.81, 0.29.0 l.110). ``select_common_block_size`` (v1/worker/utils.py) then finds no size: ``ValueError("No
#: common block size for 4")`` (0.20.0 l.326, 0.26.0 l.282-348, 0.27.0 l.332, 0.28.0 l.367, 0.29.0 l.376).
HMA_SMALLEST_GROUP: dict[str, tuple[int, tuple[int, ...]]] = {
    "DeepseekV4ForCausalLM": (4, (256,)),
}


def hma_nixl_kernel_refusal(architecture: str | None, version: Version | None) -> tuple[int, tuple[int, ...]] | None:
    """Where vLLM's NIXL worker finds no kernel block size for the smallest KV cache group's block size of a model
    served with the hybrid KV cache manager on CUDA: ``(smallest group block size, the backend's kernel block sizes)``
    in tokens, for ``architecture`` (config.json ``architectures[0]``) on ``version`` within
    [:data:`HMA_MIN_BLOCK_SINCE`, :data:`HMA_MIN_BLOCK_FIXED_IN`); ``None`` for another architecture or release, or
    where the smallest size is one of those sizes' multiples (no refusal). Source: :data:`HMA_SMALLEST_GROUP`.
    """
    sizes = HMA_SMALLEST_GROUP.get(architecture or "")
    if sizes is None or version is None or not HMA_MIN_BLOCK_SINCE <= version < HMA_MIN_BLOCK_FIXED_IN:
        return None
    smallest, kernel = sizes
    return None if any(smallest % k == 0 for k in kernel) else sizes
