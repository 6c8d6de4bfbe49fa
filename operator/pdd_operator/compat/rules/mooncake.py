"""What vLLM's MooncakeConnector refuses on every transfer of a prefill/decode pair: the sender's checks of the TP ratio
and of the registered KV region lengths (vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py,
read in the 0.19.1, 0.20.0, 0.20.1 and 0.24.0 sdists).

Before each transfer the prefill's sender (``send_kv_to_decode``, 0.20.0 lines 968-1016) computes the decode ranks it
pairs with (``TpKVTopology.handshake_target_ranks``, kv_connector/utils.py) and validates the regions both sides
registered (``_validate_asymmetric_region_lengths``, lines 189-239): with equal TP every region's ``kv_block_len`` must
be equal, with prefill TP below decode TP the prefill's must be the decode's x the ratio, and the other way round;
``_get_tp_ratio`` (lines 84-102) and ``TpKVTopology.tp_ratio`` (utils.py lines 567-584, called at line 982) assert
that one TP size divides the other. A failed check answers
``MooncakeXferResponseStatus.ERROR`` (an exception in the sender worker does the same, lines 958-970), which the decode
logs ("Error happens during transferring kvcache", lines 1527-1534) before giving up the pull: no KV moves for any
request. The checks are skipped where the prefill's cache is replicated (``local_replicates_kv_cache``: an MLA model or
TP above the model's KV heads, utils.py lines 604-607).

These rules run as engine-alone rules (``without_connector``) so that they hold where the rest of a Mooncake pair is
"not checked" (:func:`pdd_operator.compat.engine._foreign_connector` reports their errors and nothing else); each judges
only a pair whose two roles run MooncakeConnector, and what it cannot decide is left "not checked". The 0.18.0
connector has neither check (it copies its own ``block_len``); releases before 0.19.1 are not judged.

Not read here: ``_sync_block_size_with_kernel`` (0.20.0 lines 851-866) lowers a role's block size to its attention
kernel's where that one is smaller; the region rule takes the written block size as the registered one on both roles.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import NOT_CHECKED, Violation, rule
from pdd_operator.vllm.versions import fmt

MOONCAKE = "MooncakeConnector"
#: First release read with the sender's region-length validation (0.19.1 sdist; 0.18.0 has none; 0.19.0 not read).
MOONCAKE_CHECKS_SINCE = (0, 19, 1)
_SOURCE = ("vllm distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py send_kv_to_decode, "
           "_validate_asymmetric_region_lengths, _get_tp_ratio (0.20.0 lines 84-102, 189-239, 958-1016, 1527-1534; the "
           "same checks in the 0.19.1, 0.20.1 and 0.24.0 sdists); kv_connector/utils.py TpKVTopology")


def _mooncake_pair(pair: PDPair) -> bool:
    return all(r.connector == MOONCAKE and not r.wrapper for r in pair.roles)


def _width(pair: PDPair, r: RoleConfig) -> str:
    """The KV element width class of a role (:func:`pdd_operator.compat.rules.must_match._kv_width`) of what its
    --kv-cache-dtype becomes (``auto`` resolved from a ModelOpt checkpoint's KV quantization where known)."""
    from pdd_operator.compat.rules.must_match import _kv_cache_dtype, _kv_width

    return _kv_width(_kv_cache_dtype(pair, r))


@rule(
    id="mooncake-tp-indivisible", family="hetero-tp", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize"),
    source=_SOURCE,
    example='MooncakeConnector kv_producer TP 2 and kv_consumer TP 3 on v0.20.0',
    since=MOONCAKE_CHECKS_SINCE, without_connector=True,
)
def check_mooncake_tp_ratio(pair: PDPair) -> list[Violation]:
    """In a MooncakeConnector pair one role's TP size divides the other's."""
    p, d = pair.prefill, pair.decode
    if not _mooncake_pair(pair) or not p.tp or not d.tp or max(p.tp, d.tp) % min(p.tp, d.tp) == 0:
        return []
    return [(
        f"MooncakeConnector pair with prefill TP {p.tp} and decode TP {d.tp}, neither dividing the other: vLLM "
        f"{fmt(pair.version)}'s Mooncake sender asserts that one TP size divides the other (_get_tp_ratio) before each "
        "transfer and answers every pull with an error, so no KV moves and the decode recomputes each prompt.",
        "Give the prefill and decode tensor parallel sizes where one divides the other (1 and 4, 2 and 4).",
    )]


@rule(
    id="mooncake-kv-region-length", family="kv-cache-dtype-mismatch", severity="error",
    fields=("spec.kvTransfer", "spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize"),
    in_manifest=("args",),
    source=_SOURCE + "; element widths as vllm/config/cache.py CacheDType",
    example='MooncakeConnector with --kv-cache-dtype fp8 on the decode only, the same --block-size, on v0.20.0',
    since=MOONCAKE_CHECKS_SINCE, without_connector=True,
)
def check_mooncake_region_lengths(pair: PDPair) -> list[Violation]:
    """In a MooncakeConnector pair both roles store KV elements of one width (--kv-cache-dtype), so the registered
    regions have the lengths the TP ratio asks for.

    Judged where the model and --block-size are the same on both roles and the prefill's cache is known not to be
    replicated (not MLA, its TP at most the model's KV heads): there each region's length is block size x heads per rank
    x head size x element width, and only the width differs. An ``auto`` on one side whose resolution is not known (a
    ModelOpt checkpoint's own KV quantization turns it into fp8 from 0.14.0; the model's config.json, given or in the
    known table, says whether it has one) is not decided."""
    p, d = pair.prefill, pair.decode
    if not _mooncake_pair(pair) or _width(pair, p) == _width(pair, d):
        return []
    if p.model != d.model or p.block_size != d.block_size:
        return []  # other region lengths: what they come to is not read here
    if pair.mla or pair.num_kv_heads is None or not p.tp or p.tp > pair.num_kv_heads:
        return [("MooncakeConnector roles with KV caches of different element widths "
                 f"({p.kv_cache_dtype or 'auto'} / {d.kv_cache_dtype or 'auto'}): the Mooncake sender skips its "
                 "region-length check where the prefill's cache is replicated (MLA, or TP above the model's KV heads), "
                 "which the model's config.json decides.",
                 "Give the model's config.json (pdd check --model-config).", NOT_CHECKED)]
    if "auto" in ((p.kv_cache_dtype or "auto"), (d.kv_cache_dtype or "auto")) and (
            "config.json" not in pair.model.source and pair.checkpoint_kv_cache_dtype is None):
        return [("One role's --kv-cache-dtype is auto, which a checkpoint with its own KV cache quantization resolves "
                 "to fp8; the checkpoint's config.json is not known here.",
                 "Give the model's config.json (pdd check --model-config).", NOT_CHECKED)]
    return [(
        f"MooncakeConnector pair whose KV caches differ in element width (prefill --kv-cache-dtype "
        f"{p.kv_cache_dtype or 'auto'}, decode {d.kv_cache_dtype or 'auto'}): with the same model and block size the "
        f"registered KV regions differ in length beyond the TP ratio ({p.tp}:{d.tp}), which vLLM {fmt(pair.version)}'s "
        "Mooncake sender checks before each transfer (_validate_asymmetric_region_lengths) and answers every pull with "
        "an error, so no KV moves.",
        "Use the same --kv-cache-dtype on the prefill and decode containers.",
    )]


#: The releases whose MooncakeConnectorWorker refuses pipeline parallelism: read in the 0.16.0, 0.17.0, 0.18.0, 0.19.1,
#: 0.20.0, 0.21.0, 0.22.0 and 0.23.0 sdists; the 0.13.0 and 0.14.0 connector (one module, no PP handling) and the
#: 0.24.0 one (PP layer mapping) have no such check.
MOONCAKE_PP_REFUSED = ((0, 16, 0), (0, 24, 0))


@rule(
    id="mooncake-pp-unsupported", family="pipeline-parallel-unsupported", severity="error",
    fields=("spec.prefill.pipelineParallelSize", "spec.decode.pipelineParallelSize"),
    source=("vllm distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py MooncakeConnectorWorker."
            "__init__: ValueError('Mooncake Transfer Engine does not support pipeline parallelism yet.') when "
            "pipeline_parallel_size > 1 (0.22.0 lines 791-794; the same in the 0.16.0-0.23.0 sdists, gone in 0.24.0)"),
    example="MooncakeConnector kv_producer with --pipeline-parallel-size 2 on v0.22.0",
    since=MOONCAKE_PP_REFUSED[0], until=MOONCAKE_PP_REFUSED[1], without_connector=True,
)
def check_mooncake_pipeline_parallel(pair: PDPair) -> list[Violation]:
    """A MooncakeConnector engine of vLLM 0.16-0.23 runs without pipeline parallelism.

    The engine's workers build the connector's worker side as they start; in these releases its constructor raises
    for a pipeline-parallel size above 1, so that engine never serves (whatever its peer runs). A PP size that is not
    a literal integer is left "not checked"."""
    out: list[Violation] = []
    for r in pair.roles:
        if r.connector != MOONCAKE or r.wrapper:
            continue
        if r.pp is None:
            out.append((f"{r.role}: its --pipeline-parallel-size is not in the manifest, and vLLM "
                        f"{fmt(pair.version)}'s MooncakeConnector refuses any above 1.", "", NOT_CHECKED))
        elif r.pp > 1:
            out.append((
                f"{r.role}: MooncakeConnector with --pipeline-parallel-size {r.pp}: vLLM {fmt(pair.version)}'s "
                "MooncakeConnectorWorker raises 'Mooncake Transfer Engine does not support pipeline parallelism yet.' "
                "as the workers start, so this engine never serves.",
                f"Run the {r.role} with --pipeline-parallel-size 1 (tensor parallelism instead), or use vLLM 0.24.0 or "
                "later, whose MooncakeConnector maps pipeline stages.",
            ))
    return out
