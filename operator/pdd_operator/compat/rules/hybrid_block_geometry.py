"""Hybrid SSM models with heterogeneous TP past the KV heads: the two roles get different KV cache block sizes.

For a hybrid attention + Mamba model vLLM raises the attention block size until one attention page holds a Mamba
state page (``Platform._align_hybrid_block_size``): ``block = align * cdiv(mamba_page, align *
attention_page_per_token)``, where ``align`` is the larger of the attention backend's smallest kernel block and
``--block-size`` (16 until 0.33, 64 from 0.34: config/cache.py ``DEFAULT_BLOCK_SIZE``). The Mamba (or GDN) state
page of a rank shrinks with TP (conv dim and heads divided by TP, model_executor/layers/mamba/mamba_utils.py
``MambaStateShapeCalculator``), and so does the attention page per token, until TP exceeds the KV heads: from there
each rank holds one replicated KV head and its per-token page stops shrinking. So while both TP sizes are within the
KV heads both roles get the same block size, and past them the role with the larger TP gets the smaller block.

The NIXL handshake then compares kernel blocks (``_sync_block_size_with_kernel``: the block the backend runs, v1/worker
``select_common_block_size``) and asserts that the decode's is a multiple of the prefill's
(``block_size_ratio`` of the TP/KV topology in kv_connector/utils.py: "Local block size ... is not divisible by remote
block size"; lines 517-523 of 0.22.0, 540-546 of 0.26.0, 542-548 of 0.27.0, 504-510 of 0.31.0, 516 of 0.32.0, 543 of
0.33.0, 560 of 0.34.0). Up to 0.26 the Mamba descriptors also assert a ratio of exactly 1 ("Mamba 3-read transfer with
block_size_ratio != 1 is not tested": nixl/worker.py lines 1021-1024 of 0.22.0, nixl/base_worker.py lines 1284-1287 of
0.26.0; gone from 0.27.0, which reads heterogeneous blocks where the decode's is a multiple).

Which kernel block runs depends on the attention backend, hence on the GPU: a backend taking any multiple of 16
runs the logical block itself (:func:`~pdd_operator.vllm.kernel_block.runs_logical_block`: TRITON_ATTN and
FLEX_ATTENTION in every release read, FLASH_ATTN with FlashAttention 2/3 from 0.25.0, ``MultipleOf(16)``, e.g.
flash_attn.py lines 357-367 of 0.34.0; in 0.22.0-0.24.0 FLASH_ATTN runs fixed 16/32/64 pages for a hybrid model
with a float32 Mamba cache, NemotronH's default: flash_attn.py lines 77-94), so the roles' kernel blocks differ: up to
0.26 the handshake fails in either direction, from 0.27 where the decode has the larger TP (its block is smaller and
cannot be a multiple) and a prefill-TP-larger pair passes only where the rounding keeps an exact multiple. A backend
with fixed pages (FLASHINFER 16/32/64, FlashAttention 4's 128-token page for head size 256 on Blackwell from 0.29.0)
may run equal kernel blocks on both. The GPU is not in a manifest: an error where ``--attention-backend`` pins a
backend that certainly runs the logical block on both roles for the release and head size, and no ``--block-size``
is given, in the directions above; else a warning. An explicit ``--block-size`` at or above vLLM's hybrid alignment
on both roles gives both the same block, which the model's Mamba page (not read here) decides: a warning then.

With prefix caching on decode, ``hybrid-prefix-caching`` judges the pair where it reports (an error or a warning), and
this rule stays silent there; it is silent for backends that run the logical block with the larger prefill TP (no
kernel page count differs), and this rule still speaks for those (before 0.27 their Mamba descriptors assert a ratio
of 1: an error).

Read in the 0.22.0, 0.26.0, 0.27.0-0.31.0 (handshake) and 0.32.0, 0.33.0, 0.34.0 sdists (also
platforms/interface.py ``_align_hybrid_block_size`` lines 939-1116, 940-1128, 950-1140 of 0.32.0-0.34.0; from line
509 of 0.22.0). Not described: releases before 0.22 (GDN from 0.22.0, Mamba2 heterogeneous TP from 0.20.0).

Hybrid MLA models (Kimi Linear: KDA linear attention + MLA; :attr:`~pdd_operator.compat.pair.PDPair.hybrid_mla`): the
MLA page per token is one latent replicated on every rank and never shrinks with TP, so their blocks differ at any
heterogeneous TP (:attr:`~pdd_operator.compat.pair.PDPair.page_kv_heads` is 1). From 0.27.0 the NIXL worker has a
path of its own for them: the regions are kernel-granularity views of the Mamba-unified page and it asserts "Hybrid
MLA kernel-granularity block lengths must match between P and D (block_size_ratio=...)" (nixl/base_worker.py 0.27.0
l.1809, 0.28.0 l.1819, 0.30.0 l.2352, 0.32.0 l.2557, 0.34.0 l.2953), after the same ``block_size_ratio`` assert, so
the rule reads them as above. 0.22.0-0.26.x have no such path (nixl/worker.py 0.22.0 l.1434 and base_worker.py 0.26.0
l.1693 only skip the replication assert for MLA or Mamba): their heterogeneous-TP geometry is not checked.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import NOT_CHECKED, Violation, fix_for, rule
from pdd_operator.compat.rules.hybrid_ssm import check_hybrid_prefix_caching
from pdd_operator.vllm.kernel_block import runs_logical_block
from pdd_operator.vllm.versions import Version, fmt

#: The first release read whose handshake compares the roles' kernel blocks as described (0.22.0 sdist).
_SINCE: Version = (0, 22, 0)
#: The first release whose NIXL worker has the hybrid MLA + SSM path (Kimi Linear; nixl/base_worker.py 0.27.0 l.1809).
_HYBRID_MLA_SINCE: Version = (0, 27, 0)
#: The first release that reads heterogeneous blocks of a hybrid model (the decode's a multiple of the prefill's);
#: before it the Mamba descriptors assert a block size ratio of exactly 1.
_HETERO_BLOCKS_SINCE: Version = (0, 27, 0)
#: First release where ``hybrid-prefix-caching`` judges a pair whose decode has prefix caching on (0.22.0 and later):
#: where it reports, this rule stays silent; where it does not (both roles run the logical block and the prefill has
#: the larger TP), this rule still speaks.
_PREFIX_CACHING_RULE_SINCE: Version = (0, 22, 0)


def _logical_kernel_on_both(pair: PDPair) -> bool:
    """Both roles pin an attention backend that certainly runs the logical block as its kernel block for this model
    and release (:func:`~pdd_operator.vllm.kernel_block.runs_logical_block`, the definition ``hybrid-prefix-caching``
    reads too)."""
    return all(runs_logical_block(r.attention_backend, pair.version, pair.model.head_size) for r in pair.roles)


@rule(
    id="hybrid-hetero-tp-block-geometry", family="hybrid-ssm", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.model.numKvHeads"),
    source=("vllm platforms/interface.py _align_hybrid_block_size (the attention block holds a Mamba page: both shrink "
            "with TP until TP exceeds the KV heads); nixl/base_worker.py _sync_block_size_with_kernel and "
            "kv_connector/utils.py TransferTopology.block_size_ratio: 'Local block size ... is not divisible by remote "
            "block size' (0.22.0-0.34.0 sdists), and up to 0.26 nixl worker 'Mamba 3-read transfer with "
            "block_size_ratio != 1 is not tested'; flash_attn.py get_supported_kernel_block_sizes MultipleOf(16) except "
            "FlashAttention 4's pages"),
    since=_SINCE,
)
def check_hybrid_hetero_tp_block_geometry(pair: PDPair) -> list[Violation]:
    """Hybrid SSM with heterogeneous TP past the KV heads: the roles' block sizes differ (kernel-dependent)."""
    if not (pair.hybrid_ssm and pair.hetero_tp):
        return []
    if pair.at_least(_PREFIX_CACHING_RULE_SINCE) and check_hybrid_prefix_caching(pair):
        return []  # hybrid-prefix-caching refuses the pair (or warns where the KV heads are unknown)
    heads = pair.page_kv_heads
    p_tp, d_tp = pair.tps
    if heads is not None and max(p_tp, d_tp) <= heads:
        return []
    if pair.hybrid_mla and not pair.at_least(_HYBRID_MLA_SINCE):
        return [(f"a hybrid MLA model (KDA + MLA, as Kimi Linear) with heterogeneous TP {p_tp}/{d_tp}: its MLA page "
                 "per token does not shrink with TP while its linear-attention state does, so the roles' blocks "
                 f"differ; vLLM {fmt(pair.version) if pair.version else 'of this release'}'s NIXL worker has no "
                 "hybrid MLA path (first in 0.27.0), so how it pairs them is not read here.",
                 fix_for(pair, "Use equal prefill and decode TP, or vLLM >= 0.27.0.",
                         "Use equal prefill and decode tensor-parallel sizes, or a vLLM >= 0.27.0 image."),
                 NOT_CHECKED)]
    past = (f"TP {p_tp}/{d_tp}, whose MLA page per token does not shrink with TP at all" if pair.hybrid_mla else
            f"TP {p_tp}/{d_tp} past the model's {heads} KV heads" if heads is not None else
            f"TP {p_tp}/{d_tp} (the KV heads are not known here; past them")
    closing = "" if heads is not None else ")"
    why = (f"a hybrid SSM model with heterogeneous {past}{closing}: vLLM sizes each role's attention block to hold its "
           "Mamba state page, which shrinks with TP while the per-token attention page stops shrinking at one KV "
           "head per rank, so the larger-TP role gets the smaller block. The NIXL handshake asserts the decode's "
           "kernel block is a multiple of the prefill's ('Local block size ... is not divisible by remote block "
           "size')")
    fix = fix_for(pair, "Use equal prefill and decode TP, or TP sizes within the model's KV heads.",
                  "Use equal prefill and decode tensor-parallel sizes, or sizes within the model's KV heads.")
    either_way = not pair.at_least(_HETERO_BLOCKS_SINCE)
    certain = (heads is not None and (d_tp > p_tp or either_way) and _logical_kernel_on_both(pair)
               and pair.prefill.block_size is None and pair.decode.block_size is None)
    if certain:
        which = ("and this release's Mamba descriptors assert equal blocks ('Mamba 3-read transfer with "
                 "block_size_ratio != 1 is not tested')" if either_way else
                 "and the decode's (larger TP) is smaller than the prefill's")
        return [(f"{why}; with --attention-backend {pair.decode.attention_backend} the kernel block is the logical "
                 f"block, {which}: the handshake fails.", fix)]
    return [(f"{why}. Whether it holds depends on the attention kernel of the GPU: backends that run the logical "
             "block (FlashAttention 2/3 on Hopper and older, TRITON_ATTN) fail it where the decode's block is not a "
             "multiple of the prefill's (always when the decode TP is the larger, and before 0.27 whenever they "
             "differ); fixed-page kernels (FLASHINFER, "
             "FlashAttention 4's head-size-256 pages on Blackwell) may run equal kernel blocks.", fix, "warning")]
