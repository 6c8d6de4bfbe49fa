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
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.versions import UPSTREAM_REPOSITORIES, Version, fmt, image_repository

#: The release that renamed SharedStorageConnector to ExampleConnector in the factory's registry.
EXAMPLE_CONNECTOR_SINCE = (0, 13, 0)
#: The releases whose registries were read (sdists); a name is judged only within them.
READ_FROM = (0, 10, 0)
#: name -> (first release that registers it, first release that no longer does), within the releases read.
REGISTERED: dict[str, tuple[Version | None, Version | None]] = {
    "SharedStorageConnector": (None, EXAMPLE_CONNECTOR_SINCE),
    "ExampleConnector": (EXAMPLE_CONNECTOR_SINCE, None),
}
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
    without_connector=True, any_release=True,
)
def check_connector_registered(pair: PDPair) -> list[Violation]:
    """An engine of an upstream vLLM image names a kv_connector its release registers (or a module path)."""
    out: list[Violation] = []
    for r in pair.roles:
        name = r.connector
        right = miscased(name)
        if right and not r.kv_transfer.get("kv_connector_module_path"):
            out.append((
                f"{r.role}: kv_connector {name} is not a name vLLM registers: the connector factory looks names up "
                f"exactly and vLLM's is {right}, so KVConnectorFactory raises 'Unsupported connector type: {name}' "
                "when the engine builds its connector and the engine does not start.",
                fix_for(pair, f"Spell the connector {right}.",
                        f"Write \"kv_connector\":\"{right}\" in the {r.role} container's --kv-transfer-config."),
            ))
            continue
        if (name not in REGISTERED or r.kv_transfer.get("kv_connector_module_path") or r.version is None
                or r.version < READ_FROM or _registered(name, r.version)
                or image_repository(r.image) not in UPSTREAM_REPOSITORIES):
            continue
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
