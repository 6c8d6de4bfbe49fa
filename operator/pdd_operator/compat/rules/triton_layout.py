"""Attention backends whose KV block the NIXL connector splits by heads wrongly under heterogeneous TP: TRITON_ATTN's
cache laid out NHD while the connector splits heads as HND (up to 0.19.x), and FlashInfer's joint K/V block before
the connector learnt to split it into K and V (up to 0.10.1.1).

TRITON_ATTN:

The NIXL connector asks for the HND layout (``NixlConnector.get_required_kvcache_layout`` returns ``"HND"`` for a
non-MLA model; 0.19.1 sdist nixl_connector.py lines 373-390), and its worker takes the layout it splits by from
``get_kv_cache_layout()`` (line 1214), i.e. that same ``"HND"``: under heterogeneous TP it reads or writes each
block's head slice as a byte range of an HND block (``add_remote_agent``, lines 1926-2024). The worker compares only
the layouts the two sides *report* (``_validate_remote_agent_handshake``, lines 2096-2117), so nothing refuses.
But ``TritonAttentionBackend.get_kv_cache_stride_order`` ignores the layout and returns the NHD order
``(0, 1, 2, 3, 4)`` in the 0.14.0, 0.16.0, 0.17.0, 0.18.0 and 0.19.1 sdists (v1/attention/backends/triton_attn.py,
0.19.1 lines 306-316), and 0.11.1 and 0.13.0 have no such method (the model runner then allocates the logical NHD
shape: v1/worker/gpu_model_runner.py, 0.11.1 lines 4832-4835, 0.13.0 lines 5189-5192), so a TRITON_ATTN engine's
cache is NHD in memory and the head slices carry other heads' data: wrong output, no error (vllm#35444, gsm8k 0.0
with TP 1 -> 2 on ROCm; the same class of bug as vllm#37703 / vllm#37333). From 0.20.0 the backend follows
``get_kv_cache_layout()`` (0.20.0 lines 332-350; 0.21.0, 0.22.0, 0.24.0, 0.25.0 and 0.28.0 read alike).

Not judged here: the backend vLLM picks by default (ROCm's priority list changed across releases; on CUDA
TRITON_ATTN is not the first choice), so only a backend named on the command line (or ``VLLM_ATTENTION_BACKEND``
where vLLM still reads it: 0.9.0-0.14.1, :func:`pdd_operator.vllm.attention_backends.backend_env_read`) is reported.
"""

from __future__ import annotations

from pdd_operator.compat.gpu_product import pinned_gpu_major
from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.compat.rules.kv_layout import default_layout
from pdd_operator.vllm.attention_backends import selected_backend
from pdd_operator.vllm.versions import Version, fmt

#: The first release whose TRITON_ATTN lays its cache out as ``get_kv_cache_layout()`` says (0.20.0 sdist).
TRITON_FOLLOWS_LAYOUT_SINCE: Version = (0, 20, 0)


def _named_backend(pair: PDPair, r: RoleConfig) -> str | None:
    """The backend ``r`` names, upper-cased (:func:`~pdd_operator.vllm.attention_backends.selected_backend`:
    ``VLLM_ATTENTION_BACKEND`` counts where ``pair``'s release reads it or may), or ``None``."""
    named = selected_backend(r.attention_backend, r.env, pair.version)
    return named.upper() if isinstance(named, str) else None


@rule(
    id="triton-attn-hetero-tp-layout", family="hetero-tp", severity="warning",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.prefill.tensorParallelSize",
            "spec.decode.tensorParallelSize"),
    source=("vllm#35444; v1/attention/backends/triton_attn.py get_kv_cache_stride_order returns NHD whatever the "
            "layout (0.14.0-0.19.1 sdists; none before 0.14: the logical NHD shape), follows get_kv_cache_layout() "
            "from 0.20.0; nixl_connector.py get_required_kvcache_layout 'HND' and the head-sliced hetero-TP "
            "descriptors (0.19.1 lines 373-390, 1926-2024), which compare only the reported layouts"),
    needs=("--attention-backend", "--attention-config", "VLLM_ATTENTION_BACKEND", "VLLM_KV_CACHE_LAYOUT"),
    example="prefill: {tensorParallelSize: 1}, decode: {tensorParallelSize: 2}, extraArgs: [--attention-backend, "
            "TRITON_ATTN], vLLM 0.19.1",
)
def check_triton_hetero_tp_layout(pair: PDPair) -> list[Violation]:
    """A TRITON_ATTN engine under heterogeneous TP before vLLM 0.20.0 transfers the wrong heads (a warning).

    Per pair: TPs differ, the model is not MLA (its cache has no head dimension to split), a role names TRITON_ATTN,
    and the layout it reports is HND (``VLLM_KV_CACHE_LAYOUT`` unset or HND; with NHD both the report and the
    memory are NHD). A release before 0.20.0 or an unknown one is reported; vLLM raises nothing, the output is wrong.
    """
    if not pair.hetero_tp or pair.mla:
        return []
    if pair.version is not None and pair.version >= TRITON_FOLLOWS_LAYOUT_SINCE:
        return []
    roles = [r for r in pair.roles if _named_backend(pair, r) == "TRITON_ATTN" and default_layout(pair, r)[0] == "LBHNC"]
    if not roles:
        return []
    p, d = pair.tps or (None, None)
    when = (f"vLLM {fmt(pair.version)}" if pair.version is not None
            else f"vLLM before {fmt(TRITON_FOLLOWS_LAYOUT_SINCE)} (this release is not known)")
    who = " and ".join(r.role for r in roles)
    return [(
        f"{who}: TRITON_ATTN with prefill TP {p} and decode TP {d}: on {when} the Triton backend keeps its KV cache "
        "NHD in memory while the NIXL connector, told HND, moves each block's head slice as an HND byte range, so "
        "decode attends over other heads' keys and values: wrong output, no error (vllm#35444).",
        f"Use vLLM >= {fmt(TRITON_FOLLOWS_LAYOUT_SINCE)}, another attention backend (FLASH_ATTN on CUDA), or equal "
        "tensorParallelSize on both roles.",
    )]


#: The first release whose NIXL connector splits heterogeneous TP reads by heads (v1/nixl_connector.py
#: ``add_remote_agent``'s ``tp_ratio`` and ``rank_offset``: 0.9.1 lines 685-724; 0.9.0 has no heterogeneous TP).
NIXL_HETERO_TP_SINCE: Version = (0, 9, 1)
#: The first release that registers FlashInfer's joint ``[2, H, block, D]`` block as two virtual K and V regions of
#: half length, so a decode rank reads its heads of K and of V (vllm#20189; v1/nixl_connector.py 0.10.2 lines
#: 765-801, ``get_backend_aware_kv_block_len``; absent from the 0.10.1.1 sdist).
FLASHINFER_KV_SPLIT_SINCE: Version = (0, 10, 2)
#: The first release whose CUDA platform picks FlashInfer by default on compute capability 10.x when no backend is
#: named ("Prefer FlashInfer for Blackwell GPUs": platforms/cuda.py 0.9.2 line 266, 0.10.0 line 265, 0.10.1.1 line
#: 300; absent from 0.9.1).
FLASHINFER_BLACKWELL_DEFAULT_SINCE: Version = (0, 9, 2)


def _flashinfer(pair: PDPair, r: RoleConfig) -> str | None:
    """Why ``r`` runs FlashInfer on ``pair``'s release (a phrase for the message), or ``None``: ``VLLM_ATTENTION_BACKEND``
    FLASHINFER (the V1 engine maps it to FLASHINFER_VLLM_V1), or no backend named on nodes pinned to compute
    capability 10.x from :data:`FLASHINFER_BLACKWELL_DEFAULT_SINCE`."""
    named = _named_backend(pair, r)
    if named is not None:
        return "VLLM_ATTENTION_BACKEND=FLASHINFER" if named.removesuffix("_VLLM_V1") == "FLASHINFER" else None
    cap = pinned_gpu_major(r.nodes)
    if cap == 10 and pair.at_least(FLASHINFER_BLACKWELL_DEFAULT_SINCE):
        return "FlashInfer, vLLM's default on its Blackwell (10.x) GPUs"
    return None


@rule(
    id="flashinfer-hetero-tp-kv-split", family="hetero-tp", severity="warning",
    fields=("spec.engine.env", "spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize"),
    source=("vllm#20189; v1/nixl_connector.py add_remote_agent: rank_offset = tp_rank % tp_ratio * block_len over "
            "FlashInfer's one joint K/V region per layer (0.9.1 lines 685-724, 0.10.1.1 lines 926-975; the size asserts "
            "pass), the virtual K/V split from 0.10.2 (lines 765-801); v1/attention/backends/flashinfer.py "
            "get_kv_cache_shape (num_blocks, 2, block_size, H, D), 0.10.1.1 lines 82-101"),
    needs=("VLLM_ATTENTION_BACKEND",),
    example="env VLLM_ATTENTION_BACKEND=FLASHINFER on both roles, prefill TP 1, decode TP 2, vLLM 0.10.1.1",
)
def check_flashinfer_hetero_tp_split(pair: PDPair) -> list[Violation]:
    """FlashInfer under heterogeneous TP on vLLM 0.9.1-0.10.1.1 hands each decode rank K or V, not its heads (a warning).

    FlashInfer keeps K and V of a block next to each other (``(num_blocks, 2, block_size, H, D)``) and NIXL registers
    it as one region per layer; before 0.10.2 a decode rank of ``tp_ratio`` reads the ``tp_rank``-th of ``tp_ratio``
    equal byte slices of the prefill's block, so with decode TP 2 rank 0 gets every head's K and rank 1 every head's V.
    Per pair: decode TP a multiple above prefill TP (the only direction these releases run), a non-MLA model, the
    prefill's TP below the model's KV heads (or the heads unknown: at or past them the whole block is read), and
    FlashInfer on a role (:func:`_flashinfer`). vLLM raises nothing: the output is wrong.
    """
    if pair.version is None or not NIXL_HETERO_TP_SINCE <= pair.version < FLASHINFER_KV_SPLIT_SINCE:
        return []
    if not pair.hetero_tp or pair.mla or pair.tps is None or not all(r.nixl for r in pair.roles):
        return []
    p, d = pair.tps
    heads = pair.page_kv_heads
    if d <= p or d % p or (heads is not None and p >= heads):
        return []
    why = [(r.role, w) for r in pair.roles if (w := _flashinfer(pair, r)) is not None]
    if not why:
        return []
    who = "; ".join(f"{role}: {w}" for role, w in why)
    return [(
        f"FlashInfer with prefill TP {p} and decode TP {d} on vLLM {fmt(pair.version)} ({who}): FlashInfer keeps each "
        f"block's K and V side by side, and before {fmt(FLASHINFER_KV_SPLIT_SINCE)} the NIXL connector hands decode "
        f"rank i the i-th 1/{d // p} of the prefill's block, so the first rank reads every head's K and the next every "
        "head's V instead of their own heads of both: wrong output, no error (vllm#20189).",
        f"Use vLLM >= {fmt(FLASHINFER_KV_SPLIT_SINCE)}, FLASH_ATTN on both roles, or equal tensorParallelSize.",
    )]
