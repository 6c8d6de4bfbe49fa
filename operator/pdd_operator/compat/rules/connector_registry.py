"""A ``kv_connector`` name that the engine's vLLM release does not register: the connector factory refuses it when
the engine builds its connector (an engine-alone rule, so it holds for any connector pair, not only NIXL's).

``KVConnectorFactory._get_connector_class_with_compat`` (distributed/kv_transfer/kv_connector/factory.py) looks
the name up in its registry and, when it is absent and ``kv_connector_module_path`` is unset, raises
``ValueError("Unsupported connector type: <name>")`` (0.12.0 lines 104-116; the same lookup in the other releases
read). The registry renames vLLM's example storage connector in 0.13.0: the 0.10.0 wheel and the 0.10.1.1, 0.11.0,
0.11.1 and 0.12.0 sdists register ``SharedStorageConnector`` and no ``ExampleConnector``; the 0.13.0, 0.14.0, 0.21.0,
0.24.0, 0.27.0 and 0.32.0 sdists register ``ExampleConnector`` and no ``SharedStorageConnector``.
``P2pNcclConnector``, which 0.24.0 dropped, has its own rule (``p2p-nccl-connector-unavailable``).

The lookup is an exact dict key (``connector_name in cls._registry``; 0.20.0 factory.py lines 103-134), so a
connector name spelled in another case than vLLM's (``NIXLConnector``, the NIXL library's own capitalisation, for
``NixlConnector``) is refused the same way on every release and every image built on vLLM's factory: the rule is
judged on any release (``Rule.any_release``; the V0 factory of 0.8.x and the early V1 registry compare names with
``==``/``in`` too), the renamed storage connector only within the releases read.

From 0.10.1 (the V1-only factory) the registries of the 0.10.1.1, 0.11.0, 0.11.1, 0.12.0-0.14.0, 0.16.0-0.34.0 sdists
were read: a name none of them registers (the V0 connectors ``LMCacheConnector``, ``PyNcclConnector``,
``TorchDistributedConnector`` that old guides still name; a made-up one) is refused on an upstream image of
0.10.1-0.34.0 (:data:`NEWEST_READ`), and a connector added later (:data:`REGISTERED`: ``MooncakeConnector`` from
0.13.0, ``MooncakeStoreConnector`` from 0.21.0, ...) before its first release, but for the names 0.9.0-0.10.0 register
for V0 classes (``MooncakeConnector``, ``MooncakeStoreConnector``: the 0.10.0 wheel's factory.py lines 91-108, the V0
``SimpleConnector`` and ``mooncake_store_connector``), which are registered up to 0.10.0 (``kv-connector-v0-only``
judges them on the V1 engine there). On an unknown release a name no release read registers (0.10.1-0.34.0, nor
0.9.0-0.10.0's V0 names: ``DynamoNixlConnector``, which only Dynamo's patched 0.7/0.8 fork registered, vllm#16677) is
a warning naming it: the factory raises for it on every release read, and a patched build may register it. Not judged
past :data:`NEWEST_READ`
(a later release may register the name) nor where the engine loads it from ``kv_connector_module_path``.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.kv_transfer_config import multi_connector_children
from pdd_operator.vllm.shipped_modules import import_fails, releases_shipping
from pdd_operator.vllm.versions import UPSTREAM_REPOSITORIES, Version, fmt, image_repository

#: The release that renamed SharedStorageConnector to ExampleConnector in the factory's registry.
EXAMPLE_CONNECTOR_SINCE = (0, 13, 0)
#: The releases whose registries were read (sdists); a name is judged only within them.
READ_FROM = (0, 10, 0)
#: name -> (first release that registers it, first release that no longer does), within the releases read.
REGISTERED: dict[str, tuple[Version | None, Version | None]] = {
    "SharedStorageConnector": (None, EXAMPLE_CONNECTOR_SINCE),
    "ExampleConnector": (EXAMPLE_CONNECTOR_SINCE, None),
    # first registered in (absent from the sdist before it): 0.11.0 (0.10.1.1), 0.11.1 (0.11.0), 0.13.0 (0.12.0),
    # 0.14.0 (0.13.0), 0.17.0 (0.16.0), 0.18.0 (0.17.1), 0.20.0 (0.19.1), 0.21.0 (0.20.0), 0.30.0 (0.29.0), 0.34.0 (0.33.0)
    "OffloadingConnector": ((0, 11, 0), None),
    "LMCacheMPConnector": ((0, 11, 1), None),
    "DecodeBenchConnector": ((0, 11, 1), None),
    "MooncakeConnector": ((0, 13, 0), None),
    "MoRIIOConnector": ((0, 14, 0), None),
    "ExampleHiddenStatesConnector": ((0, 17, 0), None),
    "FlexKVConnectorV1": ((0, 18, 0), None),
    "HF3FSKVConnector": ((0, 20, 0), None),
    "MooncakeStoreConnector": ((0, 21, 0), None),
    "HiSparseConnector": ((0, 30, 0), None),
    "UMBPStoreConnector": ((0, 34, 0), None),
}
#: The V1-only factory (no V0 connector names registered: 0.10.1.1 sdist) and the newest release whose registry was read.
V1_REGISTRY_SINCE = (0, 10, 1)
NEWEST_READ = (0, 34, 0)
#: The other name of each renamed connector (the fix).
RENAMED = {"SharedStorageConnector": "ExampleConnector", "ExampleConnector": "SharedStorageConnector"}
#: The names the factory registers in the releases read (0.11.0, 0.19.1, 0.20.0, 0.25.0, 0.34.0 sdists' factory.py
#: ``register_connector`` calls), no two the same but for case.
UPSTREAM_NAMES = frozenset({
    "DecodeBenchConnector", "ExampleConnector", "ExampleHiddenStatesConnector", "FlexKVConnectorV1", "HF3FSKVConnector",
    "HiSparseConnector", "LMCacheConnectorV1", "LMCacheMPConnector", "MoRIIOConnector", "MooncakeConnector",
    "MooncakeStoreConnector", "MultiConnector", "NixlConnector", "NixlPullConnector", "NixlPushConnector",
    "OffloadingConnector", "P2pNcclConnector", "SharedStorageConnector", "SimpleCPUOffloadConnector",
    "UMBPStoreConnector"})
_BY_LOWER = {n.lower(): n for n in UPSTREAM_NAMES}


def miscased(name: str | None) -> str | None:
    """vLLM's spelling of ``name`` when ``name`` is one of :data:`UPSTREAM_NAMES` in another case
    (``NIXLConnector`` -> ``NixlConnector``), else ``None`` (vLLM's own spelling, or no vLLM name)."""
    if not isinstance(name, str) or name in UPSTREAM_NAMES:
        return None
    return _BY_LOWER.get(name.lower())


def _registered(name: str, version: Version) -> bool:
    since, until = REGISTERED[name]
    return (since is None or version >= since) and (until is None or version < until)


@rule(
    id="kv-connector-unregistered", family="connector", severity="error",
    fields=("spec.kvTransfer.connector", "spec.engine"),
    source=("vllm distributed/kv_transfer/kv_connector/factory.py KVConnectorFactory._get_connector_class_with_compat: "
            "ValueError('Unsupported connector type: ...') for a name not in the registry without "
            "kv_connector_module_path; SharedStorageConnector registered in the 0.10.0 wheel and the 0.10.1.1-0.12.0 "
            "sdists, ExampleConnector (its new name) in the 0.13.0, 0.14.0, 0.21.0, 0.24.0, 0.27.0 and 0.32.0 sdists, "
            "each without the other: judged on upstream vLLM images from 0.10.0 only. A vLLM name in another case "
            "(NIXLConnector) is refused on every release (the lookup is exact in each)"),
    example='--kv-transfer-config {"kv_connector":"ExampleConnector","kv_role":"kv_producer"} on '
    "vllm/vllm-openai:v0.12.0",
    without_connector=True, one_engine=True, any_release=True,
)
def check_connector_registered(pair: PDPair) -> list[Violation]:
    """An engine of an upstream vLLM image names a kv_connector its release registers (or a module path), in each
    child of a MultiConnector too (each child's class is looked up in the same registry as the engine starts:
    :func:`~pdd_operator.vllm.kv_transfer_config.multi_connector_children`). On an unknown release a name that no
    release read registers (``DynamoNixlConnector``) is a warning naming it: the factory of every release read raises
    for it, and a patched build may register it."""
    out: list[Violation] = []
    for r in pair.roles:
        written = r.kv_transfer_written
        children = multi_connector_children(written) if isinstance(written, dict) else []
        for name, kv in [(r.connector, r.kv_transfer),
                         *((c.get("kv_connector"), c) for c in children if c.get("kv_connector") != r.connector)]:
            out += _unregistered(pair, r, name, kv)
    return out


def _unregistered(pair: PDPair, r: RoleConfig, name: object, kv_transfer: dict) -> list[Violation]:
    """The finding of :func:`check_connector_registered` for one connector name of role ``r`` (its own, or a
    MultiConnector child's, with that config's ``kv_connector_module_path``)."""
    out: list[Violation] = []
    right = miscased(name)
    if right and not kv_transfer.get("kv_connector_module_path"):
        out.append((
            f"{r.role}: kv_connector {name} is not a name vLLM registers: the connector factory looks names up "
            f"exactly and vLLM's is {right}, so KVConnectorFactory raises 'Unsupported connector type: {name}' "
            "when the engine builds its connector and the engine does not start.",
            fix_for(pair, f"Spell the connector {right}.",
                    f"Write \"kv_connector\":\"{right}\" in the {r.role} container's --kv-transfer-config."),
        ))
        return out
    # imported here as connector_mix does: the rules' registration order
    from pdd_operator.compat.rules.v0_connector import V0_ONLY

    if (isinstance(name, str) and not kv_transfer.get("kv_connector_module_path") and r.version is None
            and name not in UPSTREAM_NAMES and name not in V0_ONLY):
        out.append((
            f"{r.role}: kv_connector {name} is registered by no vLLM release read (0.10.1-{fmt(NEWEST_READ)}, and no "
            "V0 connector of 0.9.0-0.10.0): on those KVConnectorFactory raises 'Unsupported connector type: "
            f"{name}' when the engine builds its connector and the engine does not start. This engine's vLLM "
            "version is unknown: a patched build may register it (Dynamo's 0.7/0.8 fork had DynamoNixlConnector).",
            fix_for(pair, "Name a connector vLLM registers (NixlConnector), or give the engine's vLLM release.",
                    f"Write a connector vLLM registers (NixlConnector for NIXL) in the {r.role} container's "
                    "--kv-transfer-config, set kv_connector_module_path to the module that defines "
                    f"{name}, or give pdd check the image's vLLM release (--vllm-version) to have it judged."),
            "warning"))
        return out
    if (not isinstance(name, str) or kv_transfer.get("kv_connector_module_path") or r.version is None
            or r.version < READ_FROM or image_repository(r.image) not in UPSTREAM_REPOSITORIES):
        return out

    if name in V0_ONLY and r.version < V1_REGISTRY_SINCE:
        return out  # 0.9.0-0.10.0 register it for a V0 class (factory.py 0.10.0 lines 91-108): kv-connector-v0-only's
    if name not in RENAMED:
        if (r.version > NEWEST_READ or (name in UPSTREAM_NAMES and name not in REGISTERED)
                or (name in REGISTERED and _registered(name, r.version))
                or (name not in UPSTREAM_NAMES and r.version < V1_REGISTRY_SINCE)):
            return out
        since = REGISTERED.get(name, (None, None))[0]
        out.append((
            f"{r.role}: vLLM {fmt(r.version)} ({r.image}) registers no connector named {name} ("
            + (f"it arrived in {fmt(since)}" if since else "no release from 0.10.1 to 0.34.0 registers it; "
               "LMCacheConnector, PyNcclConnector and TorchDistributedConnector were V0 connectors")
            + f"): KVConnectorFactory raises 'Unsupported connector type: {name}' when the engine builds its "
            "connector, so the engine does not start.",
            fix_for(pair, f"Name a connector vLLM {fmt(r.version)} registers.",
                    (f"Use an image of vLLM {fmt(since)} or later for {name}, or " if since else "Write ")
                    + f"a connector vLLM {fmt(r.version)} registers (LMCacheConnectorV1 for LMCache) in the "
                    f"{r.role} container's --kv-transfer-config, or set kv_connector_module_path to the "
                    "module that defines it."),
        ))
        return out
    if _registered(name, r.version):
        return out
    other = RENAMED[name]
    out.append((
        f"{r.role}: vLLM {fmt(r.version)} ({r.image}) registers no connector named {name} (it is {other} in this "
        f"release; the name changed in 0.13.0): KVConnectorFactory raises 'Unsupported connector type: {name}' "
        "when the engine builds its connector, so the engine does not start.",
        fix_for(pair, f"Use the connector name {other} for this vLLM release.",
                f"Write \"kv_connector\":\"{other}\" in the {r.role} container's --kv-transfer-config for vLLM "
                f"{fmt(r.version)}, or use an image of a release that registers {name}."),
    ))
    return out


@rule(
    id="kv-connector-module-missing", family="connector", severity="error",
    fields=("spec.kvTransfer.connector", "spec.engine"),
    source=("vllm distributed/kv_transfer/kv_connector/factory.py KVConnectorFactory._get_connector_class_with_compat: "
            "importlib.import_module(kv_connector_module_path) before the registry (0.26.0, 0.31.0 and 0.34.0 lines "
            "106-108), when each engine builds its connector; the modules under vllm/distributed/kv_transfer of the "
            "0.9.0-0.34.0 sdists (kv_transfer_modules.json: v1/mooncake_connector.py in 0.13.0-0.14.1 only, "
            "v1/mooncake/mooncake_connector.py from 0.16.0)"),
    example='{"kv_connector":"MooncakeConnector","kv_connector_module_path":'
    '"vllm.distributed.kv_transfer.kv_connector.v1.mooncake_connector"} on vllm/vllm-openai:v0.31.0',
    without_connector=True, one_engine=True,
)
def check_connector_module_shipped(pair: PDPair) -> list[Violation]:
    """An engine's ``kv_connector_module_path`` under ``vllm.distributed.kv_transfer`` (its own or a MultiConnector
    child's) names a module its vLLM release ships.

    The factory imports that module before it looks at its registry, so a path the release lacks (a connector's module
    copied from an older guide: vLLM 0.13.0-0.14.1 kept MooncakeConnector in ``v1/mooncake_connector.py``, 0.16.0 on in
    ``v1/mooncake/mooncake_connector.py``) raises ``ModuleNotFoundError`` and the engine does not start. Judged where
    :func:`~pdd_operator.vllm.shipped_modules.import_fails` decides it (the releases read, or two around the version
    that agree; an unknown version only where no release read ships the module); a path elsewhere is another
    package's code (:func:`~pdd_operator.vllm.kv_transfer_config.third_party_module`), not judged here."""
    out: list[Violation] = []
    for r in pair.roles:
        written = r.kv_transfer_written if isinstance(r.kv_transfer_written, dict) else {}
        configs = [written or r.kv_transfer, *multi_connector_children(written)]
        seen: set[str] = set()
        for kv in configs:
            path = kv.get("kv_connector_module_path")
            if not isinstance(path, str) or path in seen or import_fails(path, r.version) is not True:
                continue
            seen.add(path)
            shipped = releases_shipping(path) or ()
            where = (f"vLLM ships it in {fmt(shipped[0])}-{fmt(shipped[-1])} of the releases read" if shipped
                     else "no vLLM release from 0.9.0 to 0.34.0 ships it")
            out.append((
                f"{r.role}: kv_connector_module_path {path} is not a module of vLLM {fmt(r.version)} ({where}): the "
                "connector factory imports it before looking in its registry and raises ModuleNotFoundError when the "
                "engine builds its connector, so the engine does not start.",
                fix_for(pair, "Drop kv_connector_module_path for a connector vLLM registers, or name the module the "
                        "release ships.",
                        f"Remove kv_connector_module_path from the {r.role} container's --kv-transfer-config (vLLM "
                        f"registers {kv.get('kv_connector')} itself where it ships it), or write the module path of "
                        f"vLLM {fmt(r.version)}."),
            ))
    return out
