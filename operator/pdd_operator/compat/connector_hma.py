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
"""

from __future__ import annotations

from pdd_operator.compat.pair import NIXL_CONNECTORS, RoleConfig


def wrapper_hma_off(r: RoleConfig) -> str | None:
    """Why the role's connector turns HMA off by itself, or ``None``: a ``PdConnector`` with a child that is not a
    NIXL connector (``r.wrapper`` is the wrapper's description, ``PdConnector[DynamoConnector, NixlConnector]``)."""
    wrapper = r.wrapper or ""
    if not wrapper.startswith("PdConnector["):
        return None
    children = [c.strip() for c in wrapper[len("PdConnector["):-1].split(",")]
    others = [c for c in children if c not in NIXL_CONNECTORS]
    if not others:
        return None
    return f"its {wrapper} turns HMA off because {', '.join(others)} does not support it"
