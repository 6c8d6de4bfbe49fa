"""Wrapper connectors that turn vLLM's hybrid KV cache manager (HMA) off by themselves.

From vLLM 0.22.0 a ``--kv-transfer-config`` no longer turns HMA off when its connector supports HMA
(vllm/config/vllm.py ``__post_init__``, read in the 0.32.0 wheel: with no explicit flag, HMA is disabled only when
``KVConnectorFactory.supports_hma_config`` is false), so a plain NixlConnector role keeps HMA on. Dynamo KVBM's
``PdConnector`` (``kvbm.vllm_integration.connector``: a cache connector plus NixlConnector) disables HMA when one of
its children does not support it, and its cache children (KVBM's DynamoConnector, LMCache, FlexKV) do not:
ai-dynamo/dynamo#12821 reproduced "a NIXL compatibility-hash mismatch followed by handshake and KV-load failures"
between a PdConnector prefill and a plain NixlConnector decode on vllm-runtime 1.3.0-rc.9 (vLLM 0.23.0) and fixed
its examples with ``--disable-hybrid-kv-cache-manager`` on the decode (#12940). ``is_hma_enabled`` is a factor of
the NIXL compatibility hash (nixl/metadata.py, 0.18.0+).

vLLM's own ``MultiConnector`` does the same from 0.22.0: ``VllmConfig.__post_init__`` keeps HMA on for it only when
every child connector subclasses ``SupportsHMA`` (0.22.0 config/vllm.py: ``all(supports_hma(...) for sub in
connectors)``; 0.23.0, 0.24.0 and the 0.32.0 wheel: ``KVConnectorFactory.supports_hma_config`` ->
``MultiConnector.all_children_support_hma``). In those releases the in-tree LMCacheConnectorV1, ExampleConnector and
FlexKVConnectorV1 classes do not subclass it (kv_connector/v1/*.py of the 0.22.0, 0.23.0, 0.24.0, 0.33.0 and 0.34.0
sdists and the 0.32.0 wheel; 0.33.0 and 0.34.0 config/vllm.py and multi_connector.py decide as 0.32.0), so
``MultiConnector[NixlConnector, LMCacheConnectorV1]`` runs with HMA off while a plain NixlConnector peer keeps it on.
Children not listed are not claimed: out-of-tree connectors, newer releases, and
``LMCacheMPConnector``, which vLLM resolves to LMCache's own class when the lmcache package is installed
(lmcache_mp_connector.py ``_resolve_lmcache_mp_connector``, 0.24.0 and 0.32.0), so its HMA support is LMCache's.
"""

from __future__ import annotations

from pdd_operator.compat.pair import NIXL_CONNECTORS, RoleConfig
from pdd_operator.vllm.versions import Version

#: vLLM's in-tree connectors without ``SupportsHMA`` in every release read from 0.22.0 to 0.34.0 (see above).
MULTI_CHILDREN_WITHOUT_HMA = ("LMCacheConnectorV1", "ExampleConnector", "FlexKVConnectorV1")
#: The releases whose MultiConnector HMA decision was read: 0.22.0 (first with HMA kept on under a connector) to
#: the 0.34 line (the newest read: the 0.33.0 and 0.34.0 sdists).
MULTI_READ: tuple[Version, Version] = ((0, 22, 0), (0, 35, 0))


#: vLLM's own top-level KV connectors (not NIXL, not a wrapper) by the releases read without ``SupportsHMA`` on the
#: class: ``(first release read, last release line without it)``, and the first release whose class subclasses it
#: (``None``: none read up to 0.34.0). Read as ``class <Name>(KVConnectorBase_V1[, SupportsHMA])`` in the
#: kv_connector/v1 sources of the 0.17.1, 0.18.0, 0.19.1, 0.20.0, 0.21.0-0.24.0, 0.26.0, 0.28.0, 0.29.0, 0.30.0,
#: 0.32.0 and 0.34.0 sdists. P2pNcclConnector ships 0.9.2-0.23.x (its v1/p2p package and factory registration are gone
#: from 0.24.0) and never subclasses it; MooncakeConnector does from 0.20.0, MoRIIOConnector from 0.30.0 (not in the
#: 0.29.0 sdist); LMCacheConnectorV1 and ExampleConnector are not SupportsHMA in any release read.
CONNECTOR_HMA: dict[str, tuple[Version, Version, Version | None]] = {
    "P2pNcclConnector": ((0, 9, 2), (0, 23, 99), None),
    "MooncakeConnector": ((0, 13, 0), (0, 19, 99), (0, 20, 0)),
    "MoRIIOConnector": ((0, 14, 0), (0, 29, 99), (0, 30, 0)),
    "LMCacheConnectorV1": ((0, 9, 0), (0, 34, 99), None),
    "ExampleConnector": ((0, 13, 0), (0, 34, 99), None),
}


def connector_without_hma(r: RoleConfig) -> str | None:
    """The role's own vLLM connector (top level, not NIXL, not inside a wrapper, not loaded from outside vLLM) where
    its release is one read without ``SupportsHMA`` on that class (:data:`CONNECTOR_HMA`), else ``None``: another
    connector, a release outside the ones read, or an unknown release. Pure."""
    name = r.connector or ""
    if r.wrapper or r.third_party_connector or name not in CONNECTOR_HMA or r.version is None:
        return None
    first, last, _ = CONNECTOR_HMA[name]
    return name if first <= r.version <= last else None


def multi_children_without_hma(r: RoleConfig) -> list[str]:
    """The children of the role's vLLM ``MultiConnector`` that are not ``SupportsHMA`` in its release (names from
    :data:`MULTI_CHILDREN_WITHOUT_HMA`, in the wrapper's order); empty for another connector, a release outside
    :data:`MULTI_READ` or an unknown one. Pure."""
    wrapper = r.wrapper or ""
    if not wrapper.startswith("MultiConnector[") or r.version is None or not MULTI_READ[0] <= r.version < MULTI_READ[1]:
        return []
    children = [c.strip() for c in wrapper[len("MultiConnector["):-1].split(",")]
    return [c for c in children if c in MULTI_CHILDREN_WITHOUT_HMA]


def wrapper_hma_off(r: RoleConfig) -> str | None:
    """Why the role's connector turns HMA off by itself, or ``None``: a ``PdConnector`` with a child that is not a
    NIXL connector (``r.wrapper`` is the wrapper's description, ``PdConnector[DynamoConnector, NixlConnector]``), or
    on 0.22.0-0.34.x a ``MultiConnector`` with a child of :data:`MULTI_CHILDREN_WITHOUT_HMA`."""
    wrapper = r.wrapper or ""
    if wrapper.startswith("MultiConnector[") and r.version is not None and MULTI_READ[0] <= r.version < MULTI_READ[1]:
        children = [c.strip() for c in wrapper[len("MultiConnector["):-1].split(",")]
        without = [c for c in children if c in MULTI_CHILDREN_WITHOUT_HMA]
        if without:
            return (f"its {wrapper} turns HMA off because {', '.join(without)} does not subclass SupportsHMA "
                    "(vLLM's MultiConnector keeps HMA only when every child does)")
        return None
    if not wrapper.startswith("PdConnector["):
        return None
    children = [c.strip() for c in wrapper[len("PdConnector["):-1].split(",")]
    others = [c for c in children if c not in NIXL_CONNECTORS]
    if not others:
        return None
    return f"its {wrapper} turns HMA off because {', '.join(others)} does not support it"
