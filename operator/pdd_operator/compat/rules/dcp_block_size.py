"""Decode context parallelism across the NIXL transfer: the block sizes both sides must share."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.versions import fmt

#: The first release whose handshake refuses any logical block size difference under DCP ("DCP requires matching
#: P/D logical block sizes": nixl/base_worker.py add_remote_agent, 0.34.0 line 2829; absent from 0.33.0).
DCP_LOGICAL_BLOCKS_SINCE = (0, 34, 0)
#: The first release with the narrower refusal "DCP region pulls require matching logical and physical block
#: sizes" (0.31.0-0.34.0), which fires only where the two sides' cache groups differ and a side splits its logical
#: block into kernel blocks: neither shows in a manifest.
DCP_REGION_PULLS_SINCE = (0, 31, 0)


@rule(
    id="dcp-block-size-hetero", family="block-size-mismatch", severity="error",
    fields=("spec.prefill.blockSize", "spec.decode.blockSize", "spec.decode.extraArgs"),
    source=("vllm nixl/base_worker.py add_remote_agent: NotImplementedError 'DCP requires matching P/D logical block "
            "sizes' where either side's DCP > 1 and block_size x physical_blocks_per_logical_kv_block (the --block-size "
            "given) differs (0.34.0 lines 2823-2829); NotImplementedError 'DCP region pulls require matching logical "
            "and physical block sizes' where the cache groups differ and a side splits kernel blocks (0.31.0-0.34.0)"),
    since=DCP_REGION_PULLS_SINCE,
    example="prefill: --block-size 64, decode: --block-size 128 --decode-context-parallel-size 8, an MLA model",
    needs=("--block-size", "--decode-context-parallel-size"),
)
def check_dcp_block_size(pair: PDPair) -> list[Violation]:
    """With decode context parallelism on either side, both sides use the same --block-size.

    ``(prefill block size, decode block size, DCP sizes)``: DCP shards tokens across ranks at the logical block
    size and pairs blocks by logical position, so vLLM 0.34+ refuses the handshake for any difference (error);
    0.31-0.33 refuse it only where the cache groups differ and a side splits its blocks into kernel blocks, which
    the manifest does not show (warning). Block sizes given on one side only are ``block-size-partial``'s.
    """
    dcps = (pair.prefill.dcp or 1, pair.decode.dcp or 1)
    bp, bd = pair.prefill.block_size, pair.decode.block_size
    if max(dcps) == 1 or bp is None or bd is None or bp == bd:
        return []
    fix = fix_for(pair, "Give both roles the same blockSize when decode context parallelism is on.",
                  "Give the prefill and decode containers the same --block-size when "
                  "--decode-context-parallel-size is above 1.")
    what = f"decode context parallelism (prefill DCP {dcps[0]}, decode DCP {dcps[1]}) with block sizes {bp} and {bd}"
    if pair.at_least(DCP_LOGICAL_BLOCKS_SINCE):
        return [(f"NIXL with {what}: vLLM {fmt(pair.version)} pairs DCP-sharded blocks by logical position and "
                 "raises 'DCP requires matching P/D logical block sizes' at the handshake; every request fails.", fix)]
    return [(f"NIXL with {what}: vLLM {fmt(pair.version)} raises 'DCP region pulls require matching logical and "
             "physical block sizes' where the two sides' KV cache groups differ and a side splits its blocks into "
             "kernel blocks (not shown in the manifest); 0.34.0 refuses every difference.", fix, "warning")]
