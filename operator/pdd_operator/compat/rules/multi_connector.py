"""Connectors wrapped next to NIXL in a ``MultiConnector``: one request's ``kv_transfer_params`` from two children, the
child's engine_id, and the NIXL child's handshake listener."""

from __future__ import annotations

from pdd_operator.compat.dynamo_engine_defaults import dynamo_release
from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import NOT_CHECKED, Violation, rule
from pdd_operator.vllm.kv_transfer_config import multi_connector_children, third_party_module
from pdd_operator.vllm.versions import Version, fmt

#: Connectors that may return ``kv_transfer_params`` from ``request_finished`` next to NIXL's. Before
#: :data:`PARAMS_MERGED_SINCE` vLLM's ``MultiConnector`` (kv_connector/v1/multi_connector.py
#: ``_aggregate_request_finished``: 0.19.1 and 0.20.2 line 455, 0.21.0 line 465, 0.22.0 line 474, 0.23.0 lines
#: 480-500, 0.24.0 line 498) raises ``RuntimeError("Only one connector can produce KV transfer params")`` when a second
#: child returns params that are not ``None``, and NixlConnector returns them for every request the prefill finishes
#: for a remote decode (0.23.0 nixl/scheduler.py lines 599-668: the dict at line 664; ``None`` for a decode's
#: ``do_remote_prefill`` request, lines 609-623, unless bidirectional transfer is on). Which ``LMCacheMPConnector``
#: runs, by release (factory.py registers ``vllm...v1.lmcache_mp_connector.LMCacheMPConnector`` in every one from
#: 0.12.0: 0.18.1 lines 170-174, 0.23.0 lines 176-181):
#:
#: - 0.12.0-0.19.1 (:data:`OWN_CLASS_EMPTY_PARAMS_SINCE` excluded): vLLM's own class, whose ``request_finished``
#:   returns ``True, None`` (lmcache_mp_connector.py 0.12.0 and 0.13.0 line 751, 0.14.x and 0.16.0 line 769, 0.17.x
#:   line 781, 0.18.x and 0.19.x lines 852-876): no second producer, nothing fails;
#: - 0.20.0-0.21.0: vLLM's own class, which returns ``{}`` (not ``None``) for every request that carries
#:   ``kv_transfer_params`` (0.20.0, 0.20.1, 0.20.2 and 0.21.0 line 935, returned at line 957): every P/D request the prefill
#:   finishes raises, whatever LMCache package is installed;
#: - 0.22.0-0.24.x (:data:`PACKAGE_CLASS_PREFERRED_SINCE`): the module binds ``LMCacheMPConnector`` to the lmcache
#:   package's class where ``lmcache.integration.vllm.lmcache_mp_connector`` imports, to vLLM's builtin one (the
#:   ``{}`` above: 0.23.0 lines 464 and 936) only where it does not or ``LMCACHE_USE_UPSTREAM_MP`` is set
#:   (``_resolve_lmcache_mp_connector``, 0.22.0, 0.22.1, 0.23.0 and 0.24.0 lines 1194-1226): whether the prefill fails depends
#:   on the LMCache package in the image (its class returned an empty dict until LMCache/LMCache#3866 and returns
#:   cache statistics after it), which a manifest does not show, unless that variable forces the builtin class.
#:
#: A child with a ``kv_connector_module_path`` outside vLLM loads that package's class on every release (factory.py
#: "External module path takes priority"): it depends on that package.
PARAMS_PRODUCERS: tuple[str, ...] = ("LMCacheMPConnector",)
#: The first release whose own ``LMCacheMPConnector.request_finished`` returns ``{}`` for a request with
#: ``kv_transfer_params`` (0.19.1 returns ``None``; 0.20.1 line 935 ``{}``).
OWN_CLASS_EMPTY_PARAMS_SINCE: Version = (0, 20, 0)
#: The first release whose ``lmcache_mp_connector`` module prefers the lmcache package's class (0.22.0 lines 1194-1226;
#: 0.21.0 has no such resolver).
PACKAGE_CLASS_PREFERRED_SINCE: Version = (0, 22, 0)
#: The first release that registers ``LMCacheMPConnector`` among the releases read (0.12.0 factory.py lines 164-168).
LMCACHE_MP_READ_SINCE: Version = (0, 12, 0)
#: The variable that makes 0.22.0-0.24.x bind vLLM's builtin class (``os.environ.get("LMCACHE_USE_UPSTREAM_MP")``:
#: any non-empty value).
FORCE_BUILTIN_ENV = "LMCACHE_USE_UPSTREAM_MP"
#: The first release whose ``MultiConnector._aggregate_request_finished`` merges the children's
#: ``kv_transfer_params`` (vllm-project/vllm#46777) and raises only for a key two children both return ("Key clash
#: in kv_transfer_params from multiple connectors": 0.25.0 line 498 ... 0.33.0 line 577, 0.34.0 line 610).
#: LMCacheMPConnector's keys (an empty dict; ``num_lmcache_extra_cached_tokens`` in vLLM's own
#: lmcache_mp_connector.py 0.33.0 lines 929-952, ``cached_token_stats`` in LMCache's after LMCache/LMCache#3402)
#: are none of NixlConnector's (``do_remote_prefill``, ``remote_block_ids``, ``remote_engine_id``, ...), so from
#: here the pair is not refused for them.
PARAMS_MERGED_SINCE: Version = (0, 25, 0)
#: Why a connector that is not vLLM's NixlConnector is not judged: the one wording of the whole pair's "not checked"
#: (:func:`pdd_operator.compat.engine.evaluate`) and of a MultiConnector child's (:func:`check_multi_connector_child`).
NOT_DESCRIBED = "these rules describe NixlConnector prefill/decode only"


def wrapped_children(wrapper: str | None) -> list[str]:
    """The child connector names of a wrapper description (``MultiConnector[NixlConnector, LMCacheMPConnector]``
    -> ``["NixlConnector", "LMCacheMPConnector"]``, as :func:`pdd_operator.compat.pair.unwrap_connector` writes it);
    ``[]`` for ``None`` or a description without brackets."""
    if not wrapper or "[" not in wrapper or not wrapper.endswith("]"):
        return []
    return [c.strip() for c in wrapper[wrapper.index("[") + 1:-1].split(",") if c.strip()]


def params_producer_class(version: Version | None, module_path: str | None, env: dict) -> str:
    """Which ``LMCacheMPConnector.request_finished`` a MultiConnector child runs and what it returns for a request
    with ``kv_transfer_params`` (see :data:`PARAMS_PRODUCERS`): ``"none"`` (vLLM's own class returns ``None``),
    ``"empty"`` (vLLM's own class returns ``{}``), ``"package"`` (the lmcache package's class, or one from
    ``module_path``: not known here) or ``"unknown"`` (the release is unknown or not read). ``version``: the engine's
    vLLM release; ``module_path``: the child's ``kv_connector_module_path`` outside vLLM, if any; ``env``: the engine's
    environment. Pure."""
    if module_path:
        return "package"
    if version is None or version < LMCACHE_MP_READ_SINCE:
        return "unknown"
    if version < OWN_CLASS_EMPTY_PARAMS_SINCE:
        return "none"
    if version < PACKAGE_CLASS_PREFERRED_SINCE or str(env.get(FORCE_BUILTIN_ENV) or ""):
        return "empty"
    return "package"


@rule(
    id="multi-connector-params-producers", family="multi-connector", severity="error",
    fields=("spec.prefill.kvTransfer", "spec.decode.kvTransfer"),
    source=("vllm kv_connector/v1/multi_connector.py MultiConnector._aggregate_request_finished (0.9.0-0.24.0; 0.23.0 "
            "lines 480-500, 0.24.0 line 498): RuntimeError 'Only one connector can produce KV transfer params'; "
            "v1/lmcache_mp_connector.py request_finished: None up to 0.19.1 (0.18.1 lines 852-876), {} for a request "
            "with kv_transfer_params from 0.20.0 (0.20.1 and 0.21.0 line 935, 0.23.0 line 936); 0.22.0-0.24.0 lines "
            "1194-1226 prefer the lmcache package's class (LMCache/LMCache#3866) unless LMCACHE_USE_UPSTREAM_MP is set; "
            "nixl/scheduler.py request_finished returns the prefill's params (0.23.0 lines 599-668). From 0.25.0 "
            "(vllm-project/vllm#46777; 0.25.0-0.34.0 sdists) the children's params are merged and only a key clash "
            "raises, which LMCacheMPConnector's keys never make"),
    until=PARAMS_MERGED_SINCE,
    example="MultiConnector[NixlConnector, LMCacheMPConnector] on the prefill (vLLM 0.21.0)",
)
def check_multi_connector_params(pair: PDPair) -> list[Violation]:
    """No second connector that returns kv_transfer_params next to NIXL inside a prefill's MultiConnector (vLLM
    releases before :data:`PARAMS_MERGED_SINCE`, which merge the children's params instead of refusing a second
    producer).

    Each role on its own, on its own release (:func:`params_producer_class`): an error where vLLM's own
    LMCacheMPConnector returns ``{}`` (0.20.0-0.21.x; 0.22.0-0.24.x with ``LMCACHE_USE_UPSTREAM_MP`` set), a warning
    where the class is the lmcache package's or the release is unknown, nothing where vLLM's own class returns
    ``None`` (0.12.0-0.19.x). A decode's NIXL child returns no params (unless bidirectional or push transfer is on),
    so only the prefill side is judged.
    """
    out: list[Violation] = []
    for r in pair.roles:
        others = [c for c in wrapped_children(r.wrapper) if c in PARAMS_PRODUCERS]
        version = r.version or pair.version
        if not r.nixl or not others or (version is not None and version >= PARAMS_MERGED_SINCE):
            continue
        if r.role == "decode" and not r.push and not r.extra.get("bidirectional_kv_xfer"):
            continue  # the decode's NixlConnector returns None for its do_remote_prefill requests
        child = next((c for c in multi_connector_children(r.kv_transfer_written) if c.get("kv_connector") in others), {})
        module = third_party_module(child)
        found = params_producer_class(version, module, r.env)
        if found == "none":
            continue
        where = (f"vLLM {fmt(version)}'s MultiConnector" if version is not None else
                 f"the MultiConnector of a vLLM release before {fmt(PARAMS_MERGED_SINCE)} (this one's is not known; "
                 "later ones merge the children's params)")
        fix = (f"Use a vLLM release from {fmt(PARAMS_MERGED_SINCE)} on (it merges both connectors' params), or move the "
               f"KV offload out of the {r.role}'s MultiConnector.")
        if found == "empty":
            why = (f"{FORCE_BUILTIN_ENV} is set, so vLLM {fmt(version)} binds its builtin class"
                   if version is not None and version >= PACKAGE_CLASS_PREFERRED_SINCE else
                   f"vLLM {fmt(version)} runs its own class")
            out.append((
                f"{r.role}: {r.wrapper} wraps {others[0]} next to the NIXL connector; {why}, whose request_finished "
                "returns an empty dict (not None) for every request that carries kv_transfer_params, while the NIXL "
                f"connector returns the prefill's handshake params: {where} raises \"Only one connector can produce KV "
                "transfer params\" for every prefill/decode request.", fix))
            continue
        which = (f"the class of {module}" if module else
                 "the lmcache package's class where the image's LMCache ships lmcache.integration.vllm."
                 f"lmcache_mp_connector (vLLM {fmt(version)} prefers it; its builtin one returns an empty dict)"
                 if found == "package" else f"{others[0]}")
        out.append((
            f"{r.role}: {r.wrapper} wraps {others[0]} next to the NIXL connector; it runs {which}, and when that also "
            "returns kv_transfer_params for a finished request (LMCacheMPConnector returned an empty dict before "
            f"LMCache#3866 and returns cache statistics after it), {where} raises \"Only one connector "
            "can produce KV transfer params\" and the request fails.",
            f"Use an LMCache release whose {others[0]} returns None for kv_transfer_params in P/D setups, or " + fix[0].lower()
            + fix[1:],
            "warning",
        ))
    return out


#: vLLM's P/D connectors whose scheduler returns the prefill's handshake as ``kv_transfer_params`` from
#: ``request_finished`` with the same keys (``do_remote_prefill``, ``do_remote_decode``, ``remote_block_ids``,
#: ``remote_engine_id``, ``remote_host``, ``tp_size``, ...): NIXL's pull and push schedulers (nixl/pull_scheduler.py
#: 0.25.0 lines 265-275, 0.34.0 line 281; nixl/push_scheduler.py 0.25.0 line 279, 0.34.0 line 281; nixl_connector.py
#: before the split) and MoRIIOConnector (moriio/moriio_connector.py 0.25.0 line 756, 0.34.0 line 1688).
#: MooncakeConnector returns ``None`` (mooncake/mooncake_connector.py ``request_finished``: ``return
#: delay_free_blocks, None`` in the 0.25.0, 0.28.0, 0.31.0 and 0.34.0 sdists), so it clashes with none of them.
HANDSHAKE_PARAMS_CONNECTORS: tuple[str, ...] = ("NixlConnector", "NixlPullConnector", "NixlPushConnector",
                                                "MoRIIOConnector")


@rule(
    id="multi-connector-params-clash", family="multi-connector", severity="error",
    fields=("spec.prefill.kvTransfer",),
    source=("vllm kv_connector/v1/multi_connector.py MultiConnector.request_finished: 0.9.0-0.24.0 RuntimeError "
            "'Only one connector can produce KV transfer params' (0.24.0 line 498); 0.25.0-0.34.0 "
            "'Key clash in kv_transfer_params from multiple connectors' (0.25.0 line 498, 0.28.0 line 507, 0.34.0 "
            "line 610); the children's keys: HANDSHAKE_PARAMS_CONNECTORS (NIXL pull/push, MoRIIO; Mooncake returns "
            "None)"),
    example="MultiConnector[NixlConnector, NixlConnector] (or NixlConnector with MoRIIOConnector) on the prefill",
)
def check_multi_connector_params_clash(pair: PDPair) -> list[Violation]:
    """A prefill's MultiConnector holds at most one connector that returns the P/D handshake params.

    Two such children both answer every P/D request the prefill finishes (``do_remote_decode`` set) with the same
    keys, which vLLM's MultiConnector refuses on every release: before :data:`PARAMS_MERGED_SINCE` any second
    producer, from it any key both return. The request fails at its end on the prefill."""
    r = pair.prefill
    producers = [c for c in wrapped_children(r.wrapper) if c in HANDSHAKE_PARAMS_CONNECTORS]
    if len(producers) < 2:
        return []
    version = r.version or pair.version
    raised = ("\"Only one connector can produce KV transfer params\"" if version is not None
              and version < PARAMS_MERGED_SINCE else "\"Key clash in kv_transfer_params from multiple connectors: "
              "{'do_remote_prefill', 'remote_block_ids', ...}\"")
    return [(
        f"prefill: {r.wrapper} holds {producers[0]} and {producers[1]}, which both return the P/D handshake "
        f"(do_remote_prefill, remote_block_ids, remote_engine_id, ...) as kv_transfer_params for every request the "
        f"prefill finishes; {f'vLLM {fmt(version)}' if version else 'vLLM'}'s MultiConnector raises {raised} and the "
        "request fails.",
        f"Keep one of {producers[0]} and {producers[1]} in the prefill's MultiConnector (a second KV path such as "
        "MooncakeConnector or OffloadingConnector returns no params).",
    )]


@rule(
    id="multi-connector-child-not-checked", family="multi-connector", severity="warning",
    fields=("spec.prefill.kvTransfer", "spec.decode.kvTransfer"),
    source=("vllm kv_connector/v1/multi_connector.py MultiConnector (0.9.0-0.34.0): every child runs beside NIXL "
            "(its own request_finished / kv_transfer_params, register_kv_caches, handshake); a child that is not one of "
            "vLLM's registered connectors (kv_connector/factory.py register_connector, connector_registry "
            "UPSTREAM_NAMES) is loaded from kv_connector_module_path, code these rules never read"),
    example="MultiConnector[NixlConnector, PegaKVConnector] (kv_connector_module_path pegaflow.connector)",
)
def check_multi_connector_child(pair: PDPair) -> list[Violation]:
    """A third-party or unknown connector inside a NIXL role's MultiConnector is named as not checked.

    The NIXL child is judged as a bare NixlConnector would be; the other child gets the note a bare third-party
    connector's pair gets (:data:`NOT_DESCRIBED`), as a warning: a pair is not refused for code nobody read. A vLLM
    name in another case is ``kv-connector-unregistered``'s (vLLM refuses it).
    """
    # imported here as connector_mix does: the rules' registration order
    from pdd_operator.compat.rules.connector_registry import UPSTREAM_NAMES, miscased

    out: list[Violation] = []
    for r in pair.roles:
        unknown = [c for c in wrapped_children(r.wrapper) if c not in UPSTREAM_NAMES and not miscased(c)]
        if not r.nixl or not unknown:
            continue
        out.append((
            f"{r.role}: not checked: {r.wrapper} wraps {', '.join(unknown)} next to the NIXL connector, not one of "
            f"vLLM's connectors ({NOT_DESCRIBED}): what it does beside NIXL (kv_transfer_params it returns, KV memory "
            "it registers, its own handshake) was not judged; the NIXL child was.",
            f"Review {', '.join(unknown)} against the NIXL connector of the {r.role} by hand (its own documentation "
            "for P/D with NIXL), or run the NIXL connector alone.",
        ))
    return out


#: The first release whose ``MultiConnector`` gives each child the engine's own ``engine_id`` unless the child names
#: one (``KVTransferConfig(**ktc, engine_id=ktc.get("engine_id", <the engine's>))``, multi_connector.py 0.10.0 lines
#: 50-53, vllm-project/vllm#20613's fix). Before it (0.9.0 line 49, 0.9.1 and 0.9.2 line 50) each child is
#: ``KVTransferConfig(**ktc)``, whose ``__post_init__`` draws a fresh ``uuid4`` when ``engine_id`` is None
#: (vllm/config.py 0.9.0 line 3570, 0.9.1 line 3706, 0.9.2 lines 3814-3815), once per connector instance.
CHILD_ENGINE_ID_SINCE: Version = (0, 10, 0)
#: The oldest release read with a ``MultiConnector`` and the ``KVTransferConfig(**ktc)`` child (0.9.0 sdist).
CHILD_ENGINE_ID_FROM: Version = (0, 9, 0)


@rule(
    id="multi-connector-nixl-engine-id", family="multi-connector", severity="error",
    fields=("spec.prefill.kvTransfer",),
    source=("vllm kv_connector/v1/multi_connector.py MultiConnector.__init__ KVTransferConfig(**ktc) (0.9.0 line 49, "
            "0.9.1-0.9.2 line 50: a fresh uuid engine_id per connector instance, vllm/config.py 0.9.2 lines "
            "3814-3815); nixl_connector.py remote_engine_id=self.engine_id from the scheduler (0.9.1 line 311, 0.9.2 "
            "line 332) and the worker's lookups by it (0.9.0 line 746 dst_xfer_side_handles, 0.9.1 line ~900 and "
            "0.9.2 lines 972-973 self._tp_size[dst_engine_id]): KeyError; fixed in 0.10.0 (lines 50-53, "
            "vllm-project/vllm#20613)"),
    example='MultiConnector[NixlConnector, LMCacheConnectorV1] on the prefill, no engine_id in the NIXL child '
    '(vLLM 0.9.2)',
)
def check_multi_connector_nixl_engine_id(pair: PDPair) -> list[Violation]:
    """A prefill whose NIXL connector is a MultiConnector child names the child's engine_id (vLLM 0.9.x).

    Before :data:`CHILD_ENGINE_ID_SINCE` every instance of the child (the scheduler's, each worker's) draws its own
    engine_id, so the prefill scheduler hands the decode a ``remote_engine_id`` that no prefill worker announces in the
    handshake; the decode worker's lookups by it raise KeyError and no KV moves. Only the prefill's child matters (the
    decode reads by the id the prefill handed out); a child that names ``engine_id`` keeps it in every instance. The
    engine-level ``engine_id`` does not reach the child on these releases.

    Judged only where the release is known to be 0.9.x (no ``since``/``until``, so an unknown release is not probed
    at 0.9.x: a MultiConnector pair of an unknown, almost always later, release is not made "not checked" for it)."""
    v = pair.version
    if v is None or not CHILD_ENGINE_ID_FROM <= v < CHILD_ENGINE_ID_SINCE:
        return []
    r = pair.prefill
    if not r.nixl or not r.wrapper or not r.wrapper.startswith("MultiConnector[") or r.kv_transfer.get("engine_id"):
        return []
    return [(
        f"prefill: {r.wrapper} without an engine_id in its NixlConnector child: vLLM {fmt(pair.version)}'s "
        "MultiConnector builds the child's config by KVTransferConfig(**child), which draws a new engine_id for "
        "each instance (scheduler and every worker), so the decode is handed a remote_engine_id no prefill worker "
        "registered and fails with KeyError reading the KV (fixed in 0.10.0).",
        f"Add \"engine_id\": \"<a name unique to this prefill>\" to the prefill's NixlConnector child inside "
        f"kv_connector_extra_config.connectors, or run vLLM >= {fmt(CHILD_ENGINE_ID_SINCE)}.",
    )]


#: The first release whose NIXL handshake listener is started only by ``NixlConnectorScheduler.set_xfer_handshake_metadata``
#: (nixl_connector.py 0.11.1 lines 389-418, 0.12.0 lines 387-416, 0.13.0 lines 499-528, 0.14.1 lines 512-541), which
#: ``EngineCore`` calls with what the workers' ``connector.get_handshake_metadata()`` return (v1/worker/gpu_worker.py
#: 0.11.1 line 377, 0.13.0 line 393, 0.14.1 line 376; v1/engine/core.py 0.11.1 line 169, 0.13.0 line 171, 0.14.1 line
#: 175). In 0.11.0 the worker starts the listener itself (no ``set_xfer_handshake_metadata`` in its nixl_connector.py).
LISTENER_VIA_CONNECTOR_SINCE: Version = (0, 11, 1)
#: The first release read whose ``MultiConnector`` forwards ``get_handshake_metadata`` / ``set_xfer_handshake_metadata``
#: to its children (multi_connector.py 0.16.0 lines 352-371: "This is needed to start the NIXL listener thread for
#: NixlConnector"). The 0.11.1-0.14.1 sdists' MultiConnector overrides neither: ``KVConnectorBase_V1`` returns ``None``
#: and does nothing (base.py 0.11.1 lines 353 and 522, 0.13.0 lines 390 and 559, 0.14.1 lines 400 and 569).
MULTI_FORWARDS_HANDSHAKE_SINCE: Version = (0, 16, 0)
#: The newest release read without the forwarding (0.14.1 sdist); 0.15.x was not read (its sdists could not be fetched).
MULTI_WITHOUT_FORWARDING_UNTIL: Version = (0, 15, 0)


@rule(
    id="multi-connector-nixl-listener", family="multi-connector", severity="error",
    fields=("spec.prefill.kvTransfer",),
    source=("vllm kv_connector/v1/nixl_connector.py NixlConnectorScheduler.set_xfer_handshake_metadata starts the "
            "handshake listener (0.11.1 lines 389-418, 0.13.0 lines 499-528, 0.14.1 lines 512-541); "
            "multi_connector.py overrides neither get_handshake_metadata nor set_xfer_handshake_metadata in "
            "0.11.1-0.14.1 (base.py 0.13.0 lines 390, 559: None / no-op) and forwards both from 0.16.0 (lines "
            "352-371); vllm-project/vllm#33061"),
    example="MultiConnector[NixlConnector, ExampleConnector] on the prefill (vLLM 0.13.0, vLLM's disagg_prefill.md)",
)
def check_multi_connector_nixl_listener(pair: PDPair) -> list[Violation]:
    """A prefill whose NIXL connector is a ``MultiConnector`` child serves its NIXL handshake (not on vLLM 0.11.1-0.14.x).

    From :data:`LISTENER_VIA_CONNECTOR_SINCE` the NIXL side channel is opened only when EngineCore hands the connector
    the workers' handshake metadata; before :data:`MULTI_FORWARDS_HANDSHAKE_SINCE` a ``MultiConnector`` passes neither
    the metadata up from its NIXL child nor the call down to it, so the child's listener never starts and every decode
    handshake with this prefill fails: no KV moves. Only the prefill's listener is asked (the decode's worker opens the
    handshake), so a MultiConnector on the decode alone is no fault. 0.15.x, not read, is "not checked". Judged only
    where the prefill's release is known (no ``since``/``until``, as :func:`check_multi_connector_nixl_engine_id`).
    Returns ``[(message, fix)]``, or ``[(message, fix, NOT_CHECKED)]`` on 0.15.x."""
    r = pair.prefill
    v = r.version or pair.version
    if (v is None or not LISTENER_VIA_CONNECTOR_SINCE <= v < MULTI_FORWARDS_HANDSHAKE_SINCE or not r.nixl
            or not (r.wrapper or "").startswith("MultiConnector[")):
        return []
    fix = (f"On the prefill run vLLM >= {fmt(MULTI_FORWARDS_HANDSHAKE_SINCE)} (its MultiConnector forwards the "
           "handshake metadata to the NIXL child), or give the prefill a plain NixlConnector --kv-transfer-config "
           "without the MultiConnector around it.")
    if v >= MULTI_WITHOUT_FORWARDING_UNTIL:
        return [(f"prefill: whether vLLM {fmt(v)}'s MultiConnector starts its NIXL child's handshake listener was not "
                 f"read (0.14.1's does not, 0.16.0's does; {r.wrapper}).", fix, NOT_CHECKED)]
    return [(
        f"prefill: {r.wrapper} on vLLM {fmt(v)}: the NIXL handshake listener starts only when EngineCore passes the "
        "workers' handshake metadata to the connector (set_xfer_handshake_metadata), and this release's "
        "MultiConnector neither returns its NIXL child's metadata nor passes the call on, so the prefill never serves "
        "its NIXL side channel: every decode handshake with it fails and no KV moves (fixed in 0.16.0).",
        fix,
    )]


#: The first KVBM release whose ``PdConnector`` (``kvbm/vllm_integration/connector/pd_connector.py``) takes vLLM's
#: ``kv_cache_config`` and forwards ``get_handshake_metadata`` (from its NIXL child) and ``set_xfer_handshake_metadata``
#: (to both children): kvbm 0.8.0 lines 56-64, 93-125 (ai-dynamo/dynamo#4957, "PdConnector was missing the
#: get_handshake_metadata() method override ... the handshake listener [started] with an empty encoded_data",
#: 2025-12-15), also 0.8.1, 0.9.0, 0.9.1, 1.0.0-1.0.2, 1.1.0, 1.3.1, 1.6.1 (0.9.0 on check for vLLM 0.13's
#: ``NixlHandshakePayload``, ai-dynamo/dynamo#5351). The 0.7.0, 0.7.0.post1 and 0.7.1 wheels' PdConnector has neither
#: (``__init__(vllm_config, role)`` calling ``MultiConnector.__init__(vllm_config=..., role=...)``). KVBM ships in
#: Dynamo's vllm-runtime image of the same release (ai-dynamo 0.7.x pins vLLM 0.11.0, 0.8.x 0.12.0, 0.9.x 0.14.1).
KVBM_PD_FORWARDS_SINCE: Version = (0, 8, 0)
#: The first vLLM release after those that Dynamo shipped beside KVBM of both kinds (0.11.x with 0.7.x, 0.12.0 with
#: 0.8.x): from vLLM 0.13 the Dynamo releases' KVBM (0.9.0 on) forwards, so an unknown KVBM is not warned about there.
#: On vLLM 0.11.0 (Dynamo 0.7.x's pin) the old PdConnector works: ``MultiConnector.__init__(vllm_config, role)``
#: (multi_connector.py 0.11.0 line 85) and the worker starts the NIXL listener itself.
KVBM_UNKNOWN_JUDGED_UNTIL: Version = (0, 13, 0)


def _kvbm_release(image: str) -> Version | None:
    """The KVBM release of a role's image: the Dynamo release of a Dynamo vllm-runtime image (KVBM is built from the
    same tree: :func:`~pdd_operator.compat.dynamo_engine_defaults.dynamo_release`), else ``None`` (not known)."""
    return dynamo_release(image)


@rule(
    id="kvbm-pd-connector-listener", family="multi-connector", severity="error",
    fields=("spec.prefill.kvTransfer", "spec.decode.kvTransfer"),
    source=("kvbm (ai-dynamo) vllm_integration/connector/pd_connector.py: 0.7.0-0.7.1 wheels PdConnector.__init__"
            "(vllm_config, role) with neither get_handshake_metadata nor set_xfer_handshake_metadata; 0.8.0 on "
            "(lines 56-64, 93-125) both (ai-dynamo/dynamo#4957). vllm kv_connector/factory.py 0.11.1-0.20.0 line 79 "
            "(old two-argument signature: connector_cls(config, role)), 0.22.0-0.34.0 line 75 (three arguments); "
            "multi_connector.py MultiConnector.__init__ requires kv_cache_config (0.11.1 lines 113-121 ... 0.34.0 "
            "line 176): TypeError; NIXL listener only through set_xfer_handshake_metadata from 0.11.1 "
            "(LISTENER_VIA_CONNECTOR_SINCE)"),
    example="PdConnector[DynamoConnector, NixlConnector] with kvbm 0.7.1 on vLLM 0.12.0",
)
def check_kvbm_pd_connector_listener(pair: PDPair) -> list[Violation]:
    """A role whose NIXL connector sits in Dynamo KVBM's ``PdConnector`` runs a KVBM release built for its vLLM.

    kvbm before :data:`KVBM_PD_FORWARDS_SINCE` wrote PdConnector for vLLM 0.11.0: on vLLM from
    :data:`LISTENER_VIA_CONNECTOR_SINCE` its two-argument constructor reaches ``MultiConnector.__init__`` without the
    ``kv_cache_config`` that release requires (TypeError: the engine never starts), and even past it the NIXL
    child's handshake listener would never start (no forwarding of the handshake metadata). An error where the
    role's KVBM release is known (a Dynamo vllm-runtime image) and older, and its vLLM release is known and not
    older; a warning where the KVBM release cannot be told and the vLLM is 0.11.1-0.12.x, the releases that ran beside
    KVBM builds of both kinds; nothing on vLLM 0.11.0 and before (the worker starts the listener itself) or where
    the vLLM release is unknown."""
    out: list[Violation] = []
    for r in pair.roles:
        v = r.version or pair.version
        if not r.nixl or not (r.wrapper or "").startswith("PdConnector[") or v is None \
                or v < LISTENER_VIA_CONNECTOR_SINCE:
            continue
        kvbm = _kvbm_release(r.image)
        if kvbm is not None and kvbm >= KVBM_PD_FORWARDS_SINCE:
            continue
        fix = (f"Run the {r.role} on a Dynamo vllm-runtime image of {fmt(KVBM_PD_FORWARDS_SINCE)} or later (its "
               f"KVBM PdConnector takes kv_cache_config and forwards the NIXL handshake), or install kvbm >= "
               f"{fmt(KVBM_PD_FORWARDS_SINCE)} beside vLLM {fmt(v)}.")
        if kvbm is not None:
            out.append((
                f"{r.role}: {r.wrapper} comes from KVBM {fmt(kvbm)} (the Dynamo release of {r.image}), whose "
                f"PdConnector was written for vLLM 0.11.0: on vLLM {fmt(v)} its constructor calls "
                "MultiConnector.__init__ without kv_cache_config and raises TypeError, and it forwards no NIXL "
                "handshake metadata, so the NIXL handshake listener would never start: the engine does not come up "
                f"and no KV moves (fixed in KVBM {fmt(KVBM_PD_FORWARDS_SINCE)}, ai-dynamo/dynamo#4957).", fix))
        elif v < KVBM_UNKNOWN_JUDGED_UNTIL:
            out.append((
                f"{r.role}: {r.wrapper} on vLLM {fmt(v)}, whose NIXL listener starts only when the connector forwards "
                f"the workers' handshake metadata; the KVBM release inside {r.image or 'this image'} is not known: "
                f"KVBM before {fmt(KVBM_PD_FORWARDS_SINCE)} (Dynamo 0.7.x) neither takes kv_cache_config nor forwards "
                "the handshake (TypeError at startup, or a listener that never starts), later releases do "
                "(ai-dynamo/dynamo#4957).", fix, "warning"))
    return out
