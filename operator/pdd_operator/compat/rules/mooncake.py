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
only a pair whose two roles run MooncakeConnector, and what it cannot decide is left "not checked". Within
:data:`MOONCAKE_JUDGED` (the releases whose connector was read) a Mooncake pair is judged like a NIXL pair by the
engine-alone rules and these (:func:`judged_mooncake_pair`, ``compat.engine.evaluate``): where none fails it is
ok; outside it :func:`pdd_operator.compat.engine._foreign_connector` reports their errors and nothing else.

The 0.13.0-0.19.0 connector has neither check (0.19.0's mooncake_connector.py and kv_connector/utils.py are the
0.19.1 files byte for byte, so the 0.19.1 rules hold from 0.19.0): ``_send_blocks`` pushes with the prefill's own
``block_len`` for the local and the remote addresses alike (``block_len = self.block_len``: 0.13.0 lines 612-660,
0.14.0/0.14.1 the same function, 0.16.0-0.18.1 lines 836-882) and copies raw bytes, so a decode whose blocks differ
in length or element format receives KV at wrong offsets (``mooncake-hetero-tp-unsupported``,
``mooncake-kv-region-length``). 0.15.x was not read (no sdist unpacked here): the rules' bounds cover it where
0.14.1 and 0.16.0 agree, and it is left "not checked" where they differ.

Not read here: ``_sync_block_size_with_kernel`` (0.20.0 lines 851-866) lowers a role's block size to its attention
kernel's where that one is smaller; the region rule takes the written block size as the registered one on both roles.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import NOT_CHECKED, SCRIPT_KIND, Violation, rule
from pdd_operator.vllm.kv_replication import kv_replicated
from pdd_operator.vllm.kv_transfer_config import third_party_module
from pdd_operator.vllm.versions import UPSTREAM_REPOSITORIES, fmt, image_repository

MOONCAKE = "MooncakeConnector"
#: First release with the sender's region-length validation (0.19.0 and 0.19.1 sdists, the same file; 0.18.1 has none).
MOONCAKE_CHECKS_SINCE = (0, 19, 0)
#: The first release registering the V1 MooncakeConnector (kv_connector/factory.py 0.13.0 lines 194-196; 0.9.0-0.10.0
#: register the name for the V0 SimpleConnector, 0.10.1-0.12.0 not at all) and the first whose connector was not read:
#: a pair of both roles on MooncakeConnector is judged in between (read: 0.13.0, 0.14.0, 0.14.1, 0.16.0-0.20.1, 0.24.0;
#: 0.25.0-0.28.0 have 0.24.0's ``_get_tp_ratio``, ``_validate_asymmetric_region_lengths`` (0.25.0 line 251,
#: identical text), ``local_replicates_kv_cache`` (kv_connector/utils.py 0.28.0 line 575) and
#: ``handshake_target_ranks`` (identical text), and build the same per-layer ``kv_block_len`` for non-MLA attention
#: (0.25.0 lines 1697-1706); 0.29.0 changes ``handshake_target_ranks``' signature and 0.30.0 caps the TP sizes by the
#: KV heads in the length check, so they are not in this range).
MOONCAKE_JUDGED = ((0, 13, 0), (0, 29, 0))
#: The releases after :data:`MOONCAKE_JUDGED` whose connector was read for pairs without pipeline parallelism (read:
#: the 0.29.0-0.34.0 sdists). Equal TP: the sender still validates the registered region lengths
#: (``_validate_asymmetric_region_lengths``, 0.30.0 line 250, 0.34.0 line 334: equal lengths at equal TP) and asserts
#: the TP ratio (``_get_tp_ratio``, 0.34.0 line 169). Unequal TP (set 96): the connector forces the head-major LBHNC
#: layout on non-MLA models (``get_required_kvcache_layout``, 0.29.0 lines 475-490, 0.31.0 lines 515-530), pairs a
#: rank with ``TransferTopology.handshake_target_ranks`` (kv_connector/utils.py 0.29.0 line 550, 0.31.0 lines 554-577,
#: 0.34.0 line 608; asserting divisibility: ``mooncake-tp-indivisible``), checks remote ``kv_block_len`` == local x
#: the TP ratio (0.29.0 lines 229-280 with the raw ratio: ``mooncake-decode-kv-replicated``; 0.30.0-0.34.0 with both
#: TP sizes capped at the model's KV heads, 0.31.0 lines 253-309, 0.34.0 lines 334-390) and writes each rank's heads
#: at their offset (``_compute_sender_transfer_plan``, 0.29.0 lines 176-210, 0.34.0 lines 263-315); 0.30.0 on refuse
#: re-sharding heads of an NVFP4 KV cache (``_validate_head_resharding_layout``, 0.30.0 line 2142, 0.34.0 line 3259:
#: ``mooncake-hetero-tp-nvfp4-kv``) or of padded pages (hybrid layouts, not judged here). What is not read: pipeline
#: parallelism (0.30.0 aligns regions by layer across PP sizes, lines 1256-1268, and handles a remote PP size, lines
#: 1428-1442), decode/prefill context parallelism with unequal TP (``handshake_target_ranks``' DCP branch) and KV
#: formats with their own per-token layout (TurboQuant forces LBNHC from 0.34.0): such a pair stays "not checked".
MOONCAKE_JUDGED_NO_PP = ((0, 29, 0), (0, 34, 1))
#: The KV element width classes (:func:`pdd_operator.vllm.kv_cache_dtypes.width`) whose per-rank region length is
#: heads x block x head size x width, so that the head re-sharding of :data:`MOONCAKE_JUDGED_NO_PP` is read for them.
_PLAIN_WIDTHS = ("16/32-bit", "1-byte")
#: 0.16.0 first maps a decode rank to its prefill ranks (``TpKVTopology.get_target_remote_ranks``, kv_connector/utils.py
#: 0.16.0 lines 457-472, asserting divisibility in ``tp_ratio`` lines 404-416; called by ``send_kv_to_decode`` line 687
#: and ``receive_kv`` line 1151); 0.13.0-0.14.1 send decode rank i's request to the prefill's port base + i
#: (``group_kv_pull``, 0.13.0 line 857, 0.14.0 line 850). 0.15.x not read.
MOONCAKE_TOPOLOGY_SINCE = (0, 16, 0)
_RANK_PORT_UNTIL = (0, 15, 0)
#: The first release whose requirements/kv_connectors.txt (installed into vllm/vllm-openai: docker/Dockerfile
#: INSTALL_KV_CONNECTORS, true in .buildkite/release-pipeline.yaml) lists mooncake-transfer-engine (0.17.0; absent in
#: 0.13.0-0.16.0, where mooncake_connector.py raises ImportError('Please install mooncake ...') as it is imported,
#: 0.13.0 lines 40-47).
MOONCAKE_IN_IMAGE = (0, 17, 0)
#: Role settings that change a Mooncake pair's block layout, which the connector exchanges nowhere (no compatibility
#: hash) and these rules do not derive: a pair differing in one of them is not judged.
_UNREAD_FACTORS = ("model", "dtype", "block_size")
_SOURCE = ("vllm distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py send_kv_to_decode, "
           "_validate_asymmetric_region_lengths, _get_tp_ratio (0.20.0 lines 84-102, 189-239, 958-1016, 1527-1534; the "
           "same checks in the 0.19.1, 0.20.1 and 0.24.0 sdists); kv_connector/utils.py TpKVTopology")


#: Connectors a ``MultiConnector`` may hold beside its one ``MooncakeConnector`` while the pair stays a Mooncake pair
#: for these rules: they return no ``kv_transfer_params`` for a finished request, so the Mooncake child's P/D params
#: are the only ones (``MooncakeStoreConnector`` answers ``(delay_free, None)``: mooncake/store/scheduler.py 0.24.0 lines
#: 364-379, store/connector.py 0.28.0 lines 232-239, 0.33.0 lines 267-274, 0.34.0 lines 298-309), and each child gets
#: its own ``KVTransferConfig`` built from its dict alone (multi_connector.py 0.34.0 lines 274-279), so the Mooncake
#: child registers and moves the KV cache as a bare MooncakeConnector does. vLLM 0.34.0's MooncakeStoreConnector
#: guide pairs them this way for P/D (docs/features/mooncake_store_connector_usage.md, "disaggregated prefill-decode
#: mode").
MOONCAKE_COMPANIONS: tuple[str, ...] = ("MooncakeStoreConnector",)


def runs_mooncake(r: RoleConfig) -> bool:
    """Engine ``r`` moves its P/D KV with vLLM's MooncakeConnector: as its ``--kv-transfer-config`` connector, or as
    the one ``MooncakeConnector`` child of a ``MultiConnector`` whose other children are :data:`MOONCAKE_COMPANIONS`
    (a MultiConnector of other connectors, or nested wrappers, is not). A class of that name loaded from a module
    outside vLLM (``kv_connector_module_path``: :func:`~pdd_operator.vllm.kv_transfer_config.third_party_module`, the
    mooncake wheel's ``mooncake.mooncake_connector_v1``) is not vLLM's connector."""
    if r.third_party_connector:
        return False
    if r.connector == MOONCAKE and not r.wrapper:
        return True
    written = r.kv_transfer_written or r.kv_transfer
    if written.get("kv_connector") != "MultiConnector" or r.connector != "MultiConnector":
        return False
    extra = written.get("kv_connector_extra_config")
    children = (extra or {}).get("connectors") if isinstance(extra, dict) else None
    if not isinstance(children, list) or not all(isinstance(c, dict) for c in children):
        return False
    names = [c.get("kv_connector") for c in children]
    if any(third_party_module(c) for c in children):
        return False
    return names.count(MOONCAKE) == 1 and all(n == MOONCAKE or n in MOONCAKE_COMPANIONS for n in names)


def _mooncake_pair(pair: PDPair) -> bool:
    return all(runs_mooncake(r) for r in pair.roles)


def judged_mooncake_pair(pair: PDPair) -> bool:
    """Both roles run vLLM's V1 MooncakeConnector (:func:`runs_mooncake`: bare, or beside a Mooncake store in a
    MultiConnector) on a known release of :data:`MOONCAKE_JUDGED` (or of :data:`MOONCAKE_JUDGED_NO_PP` with PP 1 on
    both roles, and where the TP sizes differ no context parallelism and a plain KV element format on both:
    :func:`_later_shape_read`), whose connector's refusals these rules describe: such a pair is judged (ok where no
    rule fails), not "not checked".

    Not a model that needs the hybrid KV cache manager (hybrid SSM / linear-attention layers: the connector's worker
    takes one attention backend for all layers, set 4's Qwen3.5 GDN case) nor a role that asks for that manager
    (--no-disable-hybrid-kv-cache-manager): no rule here reads how the connector moves such caches. Nor an upstream
    vLLM image older than :data:`MOONCAKE_IN_IMAGE`, which lacks the ``mooncake`` package the connector imports
    (whether the container installs it is not read). Nor a pair whose roles differ in what no rule here compares
    (:data:`_UNREAD_FACTORS`: the model, --dtype, --block-size, which the connector does not check and whose
    block lengths these rules do not derive). A script's engines run in the environment its own ``pip
    install`` lines build (read for vLLM's version only), as a NIXL script pair's do."""
    version = pair.version
    return (_mooncake_pair(pair) and version is not None
            and (MOONCAKE_JUDGED[0] <= version < MOONCAKE_JUDGED[1]
                 or (MOONCAKE_JUDGED_NO_PP[0] <= version < MOONCAKE_JUDGED_NO_PP[1] and _later_shape_read(pair)))
            and not pair.hybrid_ssm and not pair.model.needs_hma and not any(r.hma is True for r in pair.roles)
            and all(getattr(pair.prefill, k) == getattr(pair.decode, k) for k in _UNREAD_FACTORS)
            and not any(version < MOONCAKE_IN_IMAGE and r.workload_kind != SCRIPT_KIND
                        and image_repository(r.image) in UPSTREAM_REPOSITORIES for r in pair.roles))


def _later_shape_read(pair: PDPair) -> bool:
    """The pair's shape is one whose transfer was read in :data:`MOONCAKE_JUDGED_NO_PP`'s releases: PP 1 on both
    roles, and where the TP sizes differ, no decode or prefill context parallelism and a plain KV element format
    (:data:`_PLAIN_WIDTHS`) on both roles."""
    p, d = pair.prefill, pair.decode
    if not p.pp == d.pp == 1:
        return False
    if p.tp == d.tp:
        return True
    return (all(r.dcp == 1 and r.pcp == 1 for r in pair.roles)
            and all(_width(pair, r) in _PLAIN_WIDTHS for r in pair.roles))


def _heads_per_rank(pair: PDPair, tp: int) -> int | None:
    """KV heads one TP rank stores (vLLM's ``ModelConfig.get_num_kv_heads``: ``max(1, total // tp)``; 1 latent head for
    MLA), ``None`` where the model's KV heads are not known."""
    if pair.mla:
        return 1
    return None if pair.num_kv_heads is None else max(1, pair.num_kv_heads // tp)


def _width(pair: PDPair, r: RoleConfig) -> str:
    """The KV element width class of a role (:func:`pdd_operator.compat.rules.must_match._kv_width`) of what its
    --kv-cache-dtype becomes (``auto`` resolved from a ModelOpt checkpoint's KV quantization where known)."""
    from pdd_operator.compat.rules.must_match import _kv_cache_dtype, _kv_width

    return _kv_width(_kv_cache_dtype(pair, r))


#: The newest release whose MooncakeConnector was read for :func:`check_mooncake_tp_ratio` (0.16.0-0.34.0 sdists).
MOONCAKE_TP_READ_UNTIL = (0, 34, 1)
#: The first release whose topology class is ``TransferTopology`` with ``handshake_target_ranks`` (0.20.0; 0.16.0-0.19.1
#: have ``TpKVTopology.get_target_remote_ranks`` / ``get_target_remote_ranks_from_engine_id``).
_HANDSHAKE_TARGETS_SINCE = (0, 20, 0)
_TP_RATIO_SOURCE = (
    "vllm kv_connector/v1/mooncake/mooncake_connector.py receive_kv (decode: 0.16.0 line 1146-1151, 0.19.1 lines "
    "1462-1467, 0.20.0 lines 1596-1601, 0.24.0 lines 1740-1745, 0.30.0 lines 2030-2035, 0.34.0 _select_remote_workers "
    "lines 2860-2866 called by receive_kv line 2891) and send_kv_to_decode (prefill: 0.16.0 line 687, 0.20.0 line 982, "
    "0.30.0 line 1225, 0.34.0 line 1759) map ranks through kv_connector/utils.py TpKVTopology.tp_ratio (0.16.0 lines "
    "392-416, 0.19.1 line 403) / TransferTopology.tp_ratio via handshake_target_ranks (0.20.0 lines 567-584 and 609, "
    "0.30.0 lines 487-503 and 556, 0.34.0 lines 539-556 and 608), which assert that one TP size divides the other; "
    "receive_kv runs in _start_load_kv on the receiver loop (run_coroutine_threadsafe, 0.16.0 line 1232, 0.30.0 line "
    "2129, 0.34.0 line 3039), whose future nobody reads")


@rule(
    id="mooncake-tp-indivisible", family="hetero-tp", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize"),
    source=_TP_RATIO_SOURCE,
    example='MooncakeConnector kv_producer TP 2 and kv_consumer TP 3 on v0.20.0',
    since=MOONCAKE_TOPOLOGY_SINCE, until=MOONCAKE_TP_READ_UNTIL, without_connector=True,
)
def check_mooncake_tp_ratio(pair: PDPair) -> list[Violation]:
    """In a MooncakeConnector pair one role's TP size divides the other's (vLLM 0.16.0-0.34.0).

    Re-derived per release from the connector's code: before the decode asks the prefill for any KV, its
    ``receive_kv`` maps its rank to the prefill ranks it pulls from, through ``TpKVTopology.tp_ratio`` (0.16.0-0.19.1,
    ``get_target_remote_ranks_from_engine_id``) or ``TransferTopology.tp_ratio`` (0.20.0-0.34.0,
    ``handshake_target_ranks``), which asserts divisibility. The ``AssertionError`` ends the receiver loop's coroutine
    (``_start_load_kv``, whose future nobody reads; on first contact the ``handle_new_engine_id`` task): no pull
    request is sent, no KV moves, and the decode's requests wait for KV that never comes. The prefill's
    ``send_kv_to_decode`` asserts the same way were it asked (its ERROR response is logged by the decode). 0.19.0 on
    also assert in ``_get_tp_ratio`` when planning regions, after that. Errors on 0.16.0-0.34.0; a release after the
    newest read (:data:`MOONCAKE_TP_READ_UNTIL`) is not judged here (such a Mooncake pair is "not checked":
    :func:`judged_mooncake_pair`). 0.13.0-0.14.1 fail otherwise (``mooncake-hetero-tp-unsupported``); 0.15.x was not
    read."""
    p, d = pair.prefill, pair.decode
    if not _mooncake_pair(pair) or not p.tp or not d.tp or max(p.tp, d.tp) % min(p.tp, d.tp) == 0:
        return []
    version = pair.version
    topology = ("TransferTopology.tp_ratio (handshake_target_ranks)"
                if version is not None and version >= _HANDSHAKE_TARGETS_SINCE
                else "TpKVTopology.tp_ratio (get_target_remote_ranks_from_engine_id)")
    message = (
        f"MooncakeConnector pair with prefill TP {p.tp} and decode TP {d.tp}, neither dividing the other: vLLM "
        f"{fmt(version)}'s Mooncake connector asserts that one TP size divides the other when the decode maps its ranks "
        f"to the prefill's ({topology}, in receive_kv) before it sends any pull request, so no KV moves and the "
        "decode's requests wait for KV that never comes (the assertion ends the receiver coroutine; the prefill's "
        "send_kv_to_decode asserts the same way).")
    return [(message, "Give the prefill and decode tensor parallel sizes where one divides the other (1 and 4, 2 and 4).")]


@rule(
    id="mooncake-kv-region-length", family="kv-cache-dtype-mismatch", severity="error",
    fields=("spec.kvTransfer", "spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize"),
    in_manifest=("args",),
    source=_SOURCE + "; element widths as vllm/config/cache.py CacheDType",
    example='MooncakeConnector with --kv-cache-dtype fp8 on the decode only, the same --block-size, on v0.20.0',
    since=MOONCAKE_JUDGED[0], without_connector=True,
)
def check_mooncake_region_lengths(pair: PDPair) -> list[Violation]:
    """In a MooncakeConnector pair both roles store KV elements of one width (--kv-cache-dtype), so the registered
    regions have the lengths the TP ratio asks for.

    0.13.0-0.18.x (no length check): the prefill copies its own blocks' raw bytes to the decode's block addresses
    (``_send_blocks`` with the local ``block_len``, 0.13.0 lines 612-660, 0.16.0 lines 836-882), so any difference of
    width writes bytes the decode reads as another dtype and at other offsets, whatever the model, block size or TP;
    an ``auto`` whose resolution is not known is not decided. From 0.19.0 judged where the model and --block-size are
    the same on both roles and the prefill's cache is known not to be replicated (not MLA, its TP at most the model's
    KV heads; from 0.30.0, whose sender caps both TP sizes at the KV heads and checks replicated caches too, whatever the
    prefill's TP): there each region's length is block size x heads per rank x head size x element width, and only
    the width differs. An ``auto`` on one side whose resolution is not known (a
    ModelOpt checkpoint's own KV quantization turns it into fp8 from 0.14.0; the model's config.json, given or in the
    known table, says whether it has one) is not decided."""
    p, d = pair.prefill, pair.decode
    if not _mooncake_pair(pair) or _width(pair, p) == _width(pair, d):
        return []
    if pair.version is not None and pair.version < MOONCAKE_CHECKS_SINCE:
        return _raw_copy_width(pair)
    if p.model != d.model or p.block_size != d.block_size:
        return []  # other region lengths: what they come to is not read here
    capped = pair.version is not None and pair.version >= MOONCAKE_RAW_RATIO[1]  # 0.30.0 on: checked when replicated
    if (pair.mla or pair.num_kv_heads is None or not p.tp
            or (kv_replicated(p.tp, pair.num_kv_heads, pair.version) is not False and not capped)):
        return [("MooncakeConnector roles with KV caches of different element widths "
                 f"({p.kv_cache_dtype or 'auto'} / {d.kv_cache_dtype or 'auto'}): the Mooncake sender skips its "
                 "region-length check where the prefill's cache is replicated (MLA, or TP above the model's KV heads; "
                 "at them too on 0.19.x), which the model's config.json decides.",
                 "Give the model's config.json (pdd check --model-config).", NOT_CHECKED)]
    if _auto_unknown(pair):
        return [_AUTO_UNKNOWN]
    return [(
        f"MooncakeConnector pair whose KV caches differ in element width (prefill --kv-cache-dtype "
        f"{p.kv_cache_dtype or 'auto'}, decode {d.kv_cache_dtype or 'auto'}): with the same model and block size the "
        f"registered KV regions differ in length beyond the TP ratio ({p.tp}:{d.tp}), which vLLM {fmt(pair.version)}'s "
        "Mooncake sender checks before each transfer (_validate_asymmetric_region_lengths) and answers every pull with "
        "an error, so no KV moves.",
        "Use the same --kv-cache-dtype on the prefill and decode containers.",
    )]


#: The "not checked" finding where :func:`_auto_unknown` holds.
_AUTO_UNKNOWN: Violation = (
    "One role's --kv-cache-dtype is auto, which a checkpoint with its own KV cache quantization resolves to fp8; the "
    "checkpoint's config.json is not known here.", "Give the model's config.json (pdd check --model-config).", NOT_CHECKED)


def _auto_unknown(pair: PDPair) -> bool:
    """One role's --kv-cache-dtype is ``auto`` and the checkpoint's own KV quantization (fp8 from 0.14.0) is not known."""
    p, d = pair.prefill, pair.decode
    return "auto" in ((p.kv_cache_dtype or "auto"), (d.kv_cache_dtype or "auto")) and (
        "config.json" not in pair.model.source and pair.checkpoint_kv_cache_dtype is None)


def _raw_copy_width(pair: PDPair) -> list[Violation]:
    """:func:`check_mooncake_region_lengths` on 0.13.0-0.18.x, whose sender copies raw bytes with its own block_len."""
    p, d = pair.prefill, pair.decode
    if _auto_unknown(pair):
        return [_AUTO_UNKNOWN]
    return [(
        f"MooncakeConnector pair whose KV caches differ in element width (prefill --kv-cache-dtype "
        f"{p.kv_cache_dtype or 'auto'}, decode {d.kv_cache_dtype or 'auto'}): vLLM {fmt(pair.version)}'s Mooncake "
        "sender copies the prefill's raw KV bytes with its own block length to the decode's block addresses "
        "(_send_blocks) without comparing the two caches, so the decode reads them as another dtype at wrong offsets "
        "and its blocks are overrun or left half written: the KV it decodes from is corrupt.",
        "Use the same --kv-cache-dtype on the prefill and decode containers.",
    )]


@rule(
    id="mooncake-hetero-tp-unsupported", family="hetero-tp", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize"),
    source=("vllm distributed/kv_transfer/kv_connector/v1/mooncake_connector.py (0.13.0-0.14.1) and "
            "v1/mooncake/mooncake_connector.py (0.16.0-0.18.1): _send_blocks pushes with the prefill's own block_len "
            "for local and remote addresses (0.13.0 lines 612-660, 0.16.0 lines 836-882); group_kv_pull sends decode "
            "rank i to the prefill port base + i (0.13.0 line 857, 0.14.0 line 850; 60 s RCVTIMEO, receive_kv lines "
            "804-845); kv_connector/utils.py TpKVTopology.get_target_remote_ranks (0.16.0 lines 457-472)"),
    example="MooncakeConnector kv_producer TP 2 and kv_consumer TP 1 serving Qwen2.5-7B on v0.13.0",
    since=MOONCAKE_JUDGED[0], until=MOONCAKE_CHECKS_SINCE, without_connector=True,
)
def check_mooncake_hetero_tp(pair: PDPair) -> list[Violation]:
    """A MooncakeConnector pair of vLLM 0.13.0-0.18.x gives both roles KV blocks of one length per TP rank.

    These releases have no heterogeneous-TP transfer: the prefill pushes its blocks with its own ``block_len`` to the
    decode's addresses, so where a rank's KV heads differ (``max(1, kv_heads // TP)``: TP sizes that split the heads
    differently) the decode's blocks are written at wrong offsets with part of the heads. In 0.13.0-0.14.1 a decode
    rank also asks only the prefill rank of its own index: with the decode's TP above the prefill's, ranks without a
    prefill peer time out and their requests never receive KV (whatever the heads). Where the model's KV heads are
    not known the per-rank length is not decided; indivisible TP sizes from 0.16.0 are ``mooncake-tp-indivisible``'s."""
    p, d = pair.prefill, pair.decode
    version = pair.version
    if not _mooncake_pair(pair) or not p.tp or not d.tp or p.tp == d.tp or version is None:
        return []
    rank_port = version < _RANK_PORT_UNTIL
    if rank_port and d.tp > p.tp:
        return [(
            f"MooncakeConnector pair with prefill TP {p.tp} and decode TP {d.tp}: vLLM {fmt(version)}'s decode rank i "
            f"sends its KV request to the prefill's side-channel port base + i only (group_kv_pull), so decode ranks "
            f"{p.tp}-{d.tp - 1} ask ports no prefill rank listens on, time out after 60 s and their requests never "
            "receive KV (this release's MooncakeConnector supports homogeneous TP only).",
            "Give the prefill and decode the same --tensor-parallel-size, or use vLLM 0.19.0 or later, whose "
            "MooncakeConnector transfers between TP sizes where one divides the other.",
        )]
    if version >= MOONCAKE_TOPOLOGY_SINCE and max(p.tp, d.tp) % min(p.tp, d.tp):
        return []  # mooncake-tp-indivisible
    heads_p, heads_d = _heads_per_rank(pair, p.tp), _heads_per_rank(pair, d.tp)
    if heads_p is None or heads_d is None:
        return [(f"MooncakeConnector pair with prefill TP {p.tp} and decode TP {d.tp}: vLLM {fmt(version)} transfers "
                 "between them only where a rank of each holds the same KV heads, which the model's KV head count "
                 "decides.", "Give the model's config.json (pdd check --model-config).", NOT_CHECKED)]
    if not rank_port and version < MOONCAKE_TOPOLOGY_SINCE and d.tp > p.tp:
        return [(f"MooncakeConnector pair with prefill TP {p.tp} and decode TP {d.tp} on vLLM {fmt(version)}, whose "
                 "connector was not read (0.14.1 maps decode rank i to prefill rank i only, 0.16.0 to rank "
                 "i // ratio).", "", NOT_CHECKED)] if heads_p == heads_d else _hetero_heads(pair, heads_p, heads_d)
    if heads_p == heads_d:
        return []
    return _hetero_heads(pair, heads_p, heads_d)


def _hetero_heads(pair: PDPair, heads_p: int, heads_d: int) -> list[Violation]:
    """The finding of :func:`check_mooncake_hetero_tp` where a prefill rank and a decode rank hold different KV heads."""
    p, d = pair.prefill, pair.decode
    return [(
        f"MooncakeConnector pair with prefill TP {p.tp} ({heads_p} KV heads per rank) and decode TP {d.tp} "
        f"({heads_d} per rank): vLLM {fmt(pair.version)}'s Mooncake sender pushes each block with the prefill's own "
        "block length to the decode's block addresses (_send_blocks, no heterogeneous-TP layout), so the decode's "
        "blocks are written at wrong offsets with part of their KV heads: the KV it decodes from is corrupt.",
        "Give the prefill and decode the same --tensor-parallel-size, or use vLLM 0.19.0 or later, whose "
        "MooncakeConnector transfers between TP sizes where one divides the other.",
    )]


#: The releases whose Mooncake sender checks the registered region lengths against the raw TP ratio, with no cap by
#: the KV heads (``_validate_asymmetric_region_lengths``: the same text in 0.19.0-0.23.0 and again 0.24.0-0.29.0;
#: 0.30.0 first replaces each TP size by ``min(tp, total_num_kv_heads)``, 0.30.0 line 250).
MOONCAKE_RAW_RATIO = (MOONCAKE_CHECKS_SINCE, (0, 30, 0))


@rule(
    id="mooncake-decode-kv-replicated", family="hetero-tp", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.model.numKvHeads"),
    source=("vllm v1/mooncake/mooncake_connector.py send_kv_to_decode -> _validate_asymmetric_region_lengths "
            "('Mooncake source KV region length does not match the consumer TP ratio'; 0.20.0 lines 189-239 and call "
            "line 1008, 0.24.0 call line 1119, 0.28.0 call line 1243), skipped only where the prefill's cache is "
            "replicated (local_replicates_kv_cache: MLA or prefill TP > KV heads, kv_connector/utils.py 0.20.0 line "
            "607, 0.28.0 line 575; 0.19.x _producer_cache_is_replicated, mooncake_connector.py line 1559: MLA or "
            "prefill TP >= KV heads, utils.py line 462); vLLM ModelConfig.get_num_kv_heads max(1, heads // tp)"),
    example="MooncakeConnector prefill TP 8, decode TP 16, Llama-3.1-8B (8 KV heads) on v0.24.0",
    since=MOONCAKE_RAW_RATIO[0], until=MOONCAKE_RAW_RATIO[1], without_connector=True,
)
def check_mooncake_decode_replicated(pair: PDPair) -> list[Violation]:
    """A MooncakeConnector pair of 0.19-0.29 has no decode TP above both the prefill's and the model's KV heads.

    The prefill's sender compares each registered region's length with the decode's times the TP ratio: a prefill
    rank holds ``heads // P`` KV heads, a decode rank past the heads holds one (replicated), so ``heads // P`` must
    equal ``D // P``, which fails for every decode TP ``D`` above the heads. The sender then answers every pull with an
    error and no KV moves. Judged where the model and --block-size are the same on both roles, the model is not MLA,
    the prefill's cache is not replicated (TP below the heads, or at them from 0.20.0: 0.19.x counts TP == heads as
    replicated, :func:`~pdd_operator.vllm.kv_replication.kv_replicated`, and skips the check) and one TP divides the other
    (``mooncake-tp-indivisible``); KV heads unknown: not judged."""
    p, d = pair.prefill, pair.decode
    heads = pair.num_kv_heads
    if (not _mooncake_pair(pair) or pair.mla or pair.hybrid_ssm or heads is None or not p.tp or not d.tp
            or d.tp <= p.tp or d.tp % p.tp or kv_replicated(p.tp, heads, pair.version) is not False or d.tp <= heads
            or p.model != d.model or p.block_size != d.block_size):
        return []
    return [(
        f"MooncakeConnector pair with prefill TP {p.tp} ({heads // p.tp} KV heads per rank) and decode TP {d.tp} "
        f"above the model's {heads} KV heads (1 replicated head per rank): vLLM {fmt(pair.version)}'s Mooncake sender "
        f"requires the prefill's KV regions to be {d.tp // p.tp}x the decode's (the TP ratio, not capped by the heads: "
        "_validate_asymmetric_region_lengths) and answers every pull with an error, so no KV moves.",
        f"Use a decode TP of at most {heads} (the model's KV heads), or vLLM 0.30.0 or later, which caps the ratio by "
        "the KV heads.",
    )]


#: The releases whose Mooncake sender refuses to re-shard KV heads of an NVFP4 cache (``_validate_head_resharding_layout``:
#: 0.30.0 line 2142, 0.31.0 line 2212, 0.32.0 line 2730, 0.33.0 line 2935, 0.34.0 line 3259; absent in 0.29.0).
MOONCAKE_NVFP4_RESHARD_REFUSED = ((0, 30, 0), MOONCAKE_TP_READ_UNTIL)


def _nvfp4(kv_cache_dtype: str) -> bool:
    """``--kv-cache-dtype`` whose layers vLLM quantizes in ``KVQuantMode.NVFP4`` (``get_kv_quant_mode``: a value
    starting with ``nvfp4`` other than ``nvfp4_ds_mla``; v1/kv_cache_interface.py 0.30.0 lines 84-103, 0.34.0 lines
    115-135)."""
    return kv_cache_dtype.startswith("nvfp4") and kv_cache_dtype != "nvfp4_ds_mla"


@rule(
    id="mooncake-hetero-tp-nvfp4-kv", family="hetero-tp", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.kvTransfer"),
    in_manifest=("args",),
    source=("vllm kv_connector/v1/mooncake/mooncake_connector.py send_kv_to_decode -> _prepare_transfer_regions -> "
            "_validate_head_resharding_layout ('Mooncake KV-head re-sharding is not supported for NVFP4 KV cache.', "
            "0.30.0 lines 2142-2165, 0.34.0 lines 3259-3282), answered as MooncakeXferResponseStatus.ERROR (0.34.0 "
            "lines 1806-1815); v1/kv_cache_interface.py get_kv_quant_mode"),
    example="MooncakeConnector prefill TP 2, decode TP 1, --kv-cache-dtype nvfp4 on both, Llama-3.1-8B on v0.31.0",
    since=MOONCAKE_NVFP4_RESHARD_REFUSED[0], until=MOONCAKE_NVFP4_RESHARD_REFUSED[1], without_connector=True,
)
def check_mooncake_nvfp4_reshard(pair: PDPair) -> list[Violation]:
    """A MooncakeConnector pair of 0.30.0-0.34.0 whose ranks hold different KV heads keeps no NVFP4 KV cache on the
    prefill.

    Before each transfer the prefill's sender compares the TP sizes capped at the model's KV heads; where they differ
    (a rank of one side holds other heads than a rank of the other) it refuses to split or gather heads of a layer
    quantized in NVFP4 (packed values and block scales) and answers every pull with an error: no KV moves. Not for MLA
    (one latent head, never re-sharded) nor hybrid SSM models (the check skips them). The model's KV heads unknown:
    "not checked" where the TP sizes differ."""
    p, d = pair.prefill, pair.decode
    from pdd_operator.compat.rules.must_match import _kv_cache_dtype

    if (not _mooncake_pair(pair) or pair.mla or pair.hybrid_ssm or not p.tp or not d.tp or p.tp == d.tp
            or max(p.tp, d.tp) % min(p.tp, d.tp) or not _nvfp4(_kv_cache_dtype(pair, p))):
        return []
    heads = pair.num_kv_heads
    if heads is None:
        return [(f"MooncakeConnector pair with prefill TP {p.tp} and decode TP {d.tp} and an NVFP4 KV cache: vLLM "
                 f"{fmt(pair.version)}'s Mooncake sender refuses to re-shard NVFP4 KV heads, which happens unless both "
                 "TP sizes reach the model's KV heads.", "Give the model's config.json (pdd check --model-config).",
                 NOT_CHECKED)]
    if min(p.tp, heads) == min(d.tp, heads):
        return []
    return [(
        f"MooncakeConnector pair with prefill TP {p.tp} and decode TP {d.tp} ({heads} KV heads) and the prefill's KV "
        f"cache in NVFP4 (--kv-cache-dtype {_kv_cache_dtype(pair, p)}): vLLM {fmt(pair.version)}'s Mooncake sender "
        "refuses to re-shard KV heads of an NVFP4 cache ('Mooncake KV-head re-sharding is not supported for NVFP4 KV "
        "cache.', _validate_head_resharding_layout) and answers every pull with an error, so no KV moves.",
        "Give the prefill and decode the same --tensor-parallel-size, or a KV cache dtype other than NVFP4 (fp8).",
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
        if not runs_mooncake(r):
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
