"""Sleep mode (``--enable-sleep-mode``) on an engine whose KV connector vLLM says cannot sleep.

From 0.33.0 ``VllmConfig`` asks the connector class of an engine with sleep mode on
(``KVConnectorFactory.get_connector_class(kv_transfer_config).supports_sleep_mode(kv_transfer_config)``) and raises
"{kv_connector} does not support sleep mode." where it answers False (vllm/config/vllm.py 0.33.0 lines 1254-1268,
0.34.0 lines 1212-1225). ``KVConnectorBase_V1.supports_sleep_mode`` answers True (v1/base.py 0.33.0 lines 209-212,
0.34.0 lines 227-230); the classes that override it, read in the 0.33.0 and 0.34.0 sdists:

- ``NixlBaseConnector`` False, so ``NixlPushConnector`` never sleeps; ``NixlPullConnector`` (``NixlConnector``) only
  with ``kv_connector_extra_config.backends`` exactly ``["UCX"]`` (nixl/connector.py 0.33.0 lines 143-146 and
  371-374, 0.34.0 lines 158-161 and 386-389);
- ``MooncakeConnector`` only with ``mooncake_protocol`` ``rdma`` (the default) and none of ``MC_FORCE_MNNVL``,
  ``MC_INTRANODE_NVLINK``, ``MC_USE_TENT``, ``MC_USE_TEV1`` in the engine's environment
  (mooncake/mooncake_connector.py 0.33.0 lines 823-837, 0.34.0 lines 903-917);
- ``MoRIIOConnector`` never (moriio/moriio_connector.py 0.33.0 lines 274-276, 0.34.0 lines 286-288);
- ``MooncakeStoreConnector`` never in 0.33.0 (mooncake/store/connector.py lines 130-132); in 0.34.0 it reads its
  Mooncake config file (``MooncakeStoreConfig.load_from_config``, lines 144-159: protocol rdma, a device name,
  ``MC_MS_AUTO_DISC`` and ``MC_USE_TENT``/``MC_USE_TEV1`` unset, else it raises itself), which the manifest does not hold;
- ``MultiConnector`` only where it has children and every child does (multi_connector.py 0.33.0 lines 223-232,
  0.34.0 lines 253-262).

The 0.32.0 wheel has no such check (no ``supports_sleep_mode`` anywhere under vllm/), so an older engine starts.
"""

from __future__ import annotations

from pdd_operator.compat.pair import NIXL_CONNECTORS, PDPair, RoleConfig
from pdd_operator.compat.rules.base import NOT_CHECKED, Violation, rule
from pdd_operator.vllm import nixl_backends
from pdd_operator.vllm.transfer_mode import transfer_mode
from pdd_operator.vllm.versions import Version, fmt

#: First vLLM release whose config/vllm.py refuses ``--enable-sleep-mode`` with a KV connector that does not
#: support it ("{kv_connector} does not support sleep mode.", ../shared/docs/vllm-nixl-facts.md section 4.11,
#: read in 0.33.0). The 0.32.0 wheel has no such check (no ``supports_sleep_mode`` anywhere under vllm/), so an
#: older engine starts.
SLEEP_MODE_REFUSED_SINCE: Version = (0, 33, 0)
#: Environment variables whose presence (any value: ``v in os.environ``) makes ``MooncakeConnector`` refuse sleep
#: mode: "Sleep mode is only validated over RDMA, not NVLink or TENT" (mooncake_connector.py 0.33.0 lines 826-834,
#: 0.34.0 lines 906-914).
MOONCAKE_SLEEP_ENV: tuple[str, ...] = ("MC_FORCE_MNNVL", "MC_INTRANODE_NVLINK", "MC_USE_TENT", "MC_USE_TEV1")
#: First release whose ``MooncakeStoreConnector.supports_sleep_mode`` reads its config file instead of answering
#: False (mooncake/store/connector.py 0.34.0 lines 144-159; 0.33.0 lines 130-132 return False).
STORE_SLEEP_READ_SINCE: Version = (0, 34, 0)

#: ``(severity, why, fix)`` of one connector's answer; severity ``error``, ``warning`` or :data:`NOT_CHECKED`.
Refusal = tuple[str, str, str]


def connector_sleep_refusal(config: dict, env: dict[str, str], version: Version | None) -> Refusal | None:
    """Why a KV connector configured as ``config`` (one ``--kv-transfer-config`` object, or one MultiConnector
    child) answers False to vLLM 0.33+'s sleep-mode check on an engine with environment ``env`` and release
    ``version``, as ``(severity, why, fix)``; ``None`` where it answers True (vLLM's base class, every connector that
    does not override it: LMCache, Offloading, P2pNccl, third-party ones).

    Severity ``error`` where the class answers False; :data:`NOT_CHECKED` where its answer reads a file the manifest
    does not hold (0.34.0's MooncakeStoreConnector); ``warning`` for a NIXL connector inside Dynamo KVBM's
    ``PdConnector``, whose own answer was not read. Never raises."""
    name = config.get("kv_connector")
    extra = config.get("kv_connector_extra_config")
    extra = extra if isinstance(extra, dict) else {}
    if name in NIXL_CONNECTORS:
        if transfer_mode(name, extra, version) == "push":
            return ("error", f"{name} pushes KV, and vLLM's push connector never supports sleep mode",
                    "use the pull connector (NixlConnector) with the default UCX backend where the engine must sleep")
        backends = nixl_backends.effective(extra.get("backends"), version)
        if backends != ["UCX"]:
            return ("error", (f"the pull connector supports sleep mode only with kv_connector_extra_config.backends "
                              f"[\"UCX\"], and this engine has {backends}"),
                    "leave kv_connector_extra_config.backends out (the default [\"UCX\"]) where the engine must sleep")
        return None
    if name == "MooncakeConnector":
        present = [v for v in MOONCAKE_SLEEP_ENV if v in env]
        if present:
            return ("error", (f"MooncakeConnector supports sleep mode only over RDMA (not NVLink or TENT), and "
                              f"{present[0]} is set in the engine's environment"),
                    f"unset {', '.join(present)} where the engine must sleep")
        protocol = extra.get("mooncake_protocol", "rdma")
        if protocol != "rdma":
            return ("error", (f"MooncakeConnector supports sleep mode only with mooncake_protocol rdma, and this "
                              f"engine has {protocol!r}"),
                    "run Mooncake over RDMA (drop mooncake_protocol or set it to rdma) where the engine must sleep")
        return None
    if name == "MoRIIOConnector":
        return ("error", "MoRIIOConnector never supports sleep mode",
                "run the engine without sleep mode, or with a connector that supports it")
    if name == "MooncakeStoreConnector":
        if version is not None and version < STORE_SLEEP_READ_SINCE:
            return ("error", f"vLLM {fmt(version)}'s MooncakeStoreConnector never supports sleep mode",
                    "run the engine without sleep mode, or vLLM 0.34.0 or later with the store over RDMA")
        return (NOT_CHECKED, ("MooncakeStoreConnector supports sleep mode only where its Mooncake config file "
                              "(MOONCAKE_CONFIG_PATH) names protocol rdma and a device, which these files do not hold"),
                "check the store's Mooncake config file: protocol rdma and device_name set")
    if name in ("MultiConnector", "PdConnector"):
        children = [c for c in extra.get("connectors") or () if isinstance(c, dict)]
        if name == "PdConnector":
            if any(c.get("kv_connector") in NIXL_CONNECTORS for c in children):
                return ("warning", ("inside PdConnector, whose answer to vLLM's sleep-mode check (Dynamo KVBM's "
                                    "class) was not read here"), "check Dynamo KVBM's PdConnector for sleep mode")
            return None
        if not children:
            return ("error", "a MultiConnector without child connectors never supports sleep mode",
                    "list the child connectors in kv_connector_extra_config.connectors")
        answers = [a for c in children if (a := connector_sleep_refusal(c, env, version))]
        for severity in ("error", NOT_CHECKED, "warning"):
            for a in answers:
                if a[0] == severity:
                    return (a[0], f"MultiConnector sleeps only where every child does, and its child {a[1]}", a[2])
    return None


def sleep_mode_refusal(r: RoleConfig, version: Version | None = None) -> Refusal | None:
    """Why vLLM 0.33+ refuses sleep mode on engine ``r`` (of release ``version``, else its own), as
    ``(severity, why, fix)`` from :func:`connector_sleep_refusal` on the ``--kv-transfer-config`` as written
    (a wrapper's own, children included); ``None`` where sleep mode is off, no connector is given, or the connector
    supports it."""
    if "--enable-sleep-mode" not in r.cumem_flags:
        return None
    written = r.kv_transfer_written or r.kv_transfer
    if not written.get("kv_connector"):
        return None
    return connector_sleep_refusal(written, r.env, version or r.version)


@rule(
    id="sleep-mode-unsupported", family="sleep-mode-with-nixl", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.kvTransfer.connector"),
    since=SLEEP_MODE_REFUSED_SINCE, without_connector=True, one_engine=True,
    source=("vllm/config/vllm.py (0.33.0 lines 1254-1268, 0.34.0 lines 1212-1225): '{kv_connector} does not support "
            "sleep mode.' at startup; supports_sleep_mode of NixlBaseConnector / NixlPullConnector (push never, pull "
            "only with backends ['UCX']), MooncakeConnector (rdma, no MC_FORCE_MNNVL / MC_INTRANODE_NVLINK / "
            "MC_USE_TENT / MC_USE_TEV1), MoRIIOConnector (never), MooncakeStoreConnector (never in 0.33.0, its config "
            "file in 0.34.0) and MultiConnector (every child); absent from the 0.32.0 wheel"),
    example="--enable-sleep-mode on both roles of a NixlPushConnector pair (vLLM 0.33.0)",
)
def check_sleep_mode(pair: PDPair) -> list[Violation]:
    """No --enable-sleep-mode on an engine whose KV connector does not support sleep mode.

    Refused: NIXL push, NIXL pull with a backend list other than ["UCX"], MooncakeConnector off RDMA,
    MoRIIOConnector, 0.33.0's MooncakeStoreConnector, a MultiConnector with such a child.

    Each role on its own: the role given the flag fails while its config is built and never starts. Where the
    connector's answer reads a file the manifest does not hold, the engine is "not checked".
    """
    out: list[Violation] = []
    for r in pair.roles:
        version = r.version or pair.version
        refusal = sleep_mode_refusal(r, version)
        if refusal is None:
            continue
        severity, why, fix = refusal
        top = (r.kv_transfer_written or r.kv_transfer).get("kv_connector")
        release = fmt(version) if version else "this release"
        out.append((
            f"{r.role}: --enable-sleep-mode with {top}: {why}; vLLM {release} refuses it while building the engine's "
            f"config (vllm/config/vllm.py: \"{top} does not support sleep mode.\"), so this engine never starts.",
            f"Remove --enable-sleep-mode from the {r.role} engine, or {fix}.",
            severity,
        ))
    return out
