"""An NVFP4 KV cache across the NIXL transfer: which TP pairs can move it."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.compat.rules.must_match import _kv_cache_dtype
from pdd_operator.vllm.versions import fmt

#: The first release whose NIXL handshake refuses KV-head re-sharding of an NVFP4 KV cache (read in the 0.33.0
#: and 0.34.0 sdists; 0.32.0's nixl package has no such check).
NVFP4_RESHARD_REFUSED_SINCE = (0, 33, 0)


@rule(
    id="nvfp4-kv-hetero-tp", family="hetero-tp", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.kvCache.dtype",
            "spec.model.numKvHeads"),
    source=("vllm nixl/base_worker.py add_remote_agent: RuntimeError 'NIXL KV-head re-sharding is not supported for "
            "NVFP4 KV cache' where not MLA, local physical heads != max(1, total_num_kv_heads // remote_tp_size) and "
            "a layer's spec is NVFP4 ('NVFP4 pages store all heads' data before all heads' scales, so a head's bytes "
            "are not a contiguous slice of the page'; 0.33.0 lines 2862-2876, 0.34.0); vllm#44455 review thread"),
    example="prefill: {tensorParallelSize: 2}, decode: {tensorParallelSize: 4}, --kv-cache-dtype nvfp4",
    needs=("--kv-cache-dtype",),
)
def check_nvfp4_hetero_tp(pair: PDPair) -> list[Violation]:
    """An NVFP4 KV cache moves only between engines holding the same KV heads per rank.

    ``(prefill TP, decode TP, KV heads)``: each rank holds ``max(1, heads // TP)`` KV heads; where the two sides'
    counts differ, vLLM 0.33+ refuses the handshake for an NVFP4 (``nvfp4``, ``nvfp4_4over6``) cache of a non-MLA
    model (error). Earlier releases do not check and slice the page by heads as if each head's bytes were
    contiguous (warning: not verified on a GPU). With the heads unknown, a TP difference is a warning.
    """
    dtypes = {_kv_cache_dtype(pair, r) for r in pair.roles}
    if pair.mla or not any(d.startswith("nvfp4") and d != "nvfp4_ds_mla" for d in dtypes):
        return []
    if pair.tps is None or min(pair.tps) < 1 or not pair.hetero_tp:
        return []
    p, d = pair.tps
    heads = pair.num_kv_heads
    if heads is not None and max(1, heads // p) == max(1, heads // d):
        return []  # both sides replicate down to one head per rank: whole pages move
    fix = ("Use the same tensor parallel size on both roles for an NVFP4 KV cache, or an fp8 KV cache "
           "(--kv-cache-dtype fp8) with heterogeneous TP.")
    per_rank = (f" ({max(1, heads // p)} KV heads per prefill rank, {max(1, heads // d)} per decode rank)"
                if heads is not None else "")
    if pair.version is not None and pair.version >= NVFP4_RESHARD_REFUSED_SINCE and heads is not None:
        return [(f"NVFP4 KV cache with prefill TP {p} and decode TP {d}{per_rank}: vLLM {fmt(pair.version)}'s NIXL "
                 "handshake refuses KV-head re-sharding of NVFP4 pages ('NIXL KV-head re-sharding is not supported "
                 "for NVFP4 KV cache'); every request fails.", fix)]
    why = ("the model's KV heads are not known, so whether the ranks hold different heads cannot be told"
           if heads is None else
           f"vLLM {fmt(pair.version) if pair.version else '(version unknown)'} does not check it, and 0.33.0 refuses it "
           "because an NVFP4 page stores all heads' data before all heads' scales (a head is not a contiguous slice)")
    return [(f"NVFP4 KV cache with prefill TP {p} and decode TP {d}{per_rank}: the transfer re-shards KV heads; {why}.",
             fix, "warning")]
