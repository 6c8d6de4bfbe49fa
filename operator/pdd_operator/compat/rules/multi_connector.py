"""Connectors wrapped next to NIXL in a ``MultiConnector``: one request's ``kv_transfer_params`` from two children."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule

#: Connectors that may return ``kv_transfer_params`` from ``request_finished`` next to NIXL's. vLLM's
#: ``MultiConnector.request_finished`` (kv_connector/v1/multi_connector.py, 0.9.0-0.33.0) raises
#: ``RuntimeError("Only one connector can produce KV transfer params")`` when a second child returns params that
#: are not ``None``, and NixlConnector returns them for every request P finishes. LMCacheMPConnector returned an
#: empty dict (not ``None``) until LMCache/LMCache#3866 and returns per-request cache statistics where LMCache
#: reports them after it (the maintainers want them in ``kv_transfer_params``), so whether a pair fails depends on
#: the LMCache build inside the image, which a manifest does not show.
PARAMS_PRODUCERS: tuple[str, ...] = ("LMCacheMPConnector",)


def wrapped_children(wrapper: str | None) -> list[str]:
    """The child connector names of a wrapper description (``MultiConnector[NixlConnector, LMCacheMPConnector]``
    -> ``["NixlConnector", "LMCacheMPConnector"]``, as :func:`pdd_operator.compat.pair.unwrap_connector` writes it);
    ``[]`` for ``None`` or a description without brackets."""
    if not wrapper or "[" not in wrapper or not wrapper.endswith("]"):
        return []
    return [c.strip() for c in wrapper[wrapper.index("[") + 1:-1].split(",") if c.strip()]


@rule(
    id="multi-connector-params-producers", family="multi-connector", severity="warning",
    fields=("spec.prefill.kvTransfer", "spec.decode.kvTransfer"),
    source=("vllm kv_connector/v1/multi_connector.py MultiConnector.request_finished (0.9.0-0.33.0): RuntimeError "
            "'Only one connector can produce KV transfer params'; LMCache/LMCache#3866 (LMCacheMPConnector returned "
            "{} next to NixlConnector, every P/D request failed; after the fix it still returns cache statistics)"),
    example="MultiConnector[NixlConnector, LMCacheMPConnector] on the prefill (vLLM 0.33.0)",
)
def check_multi_connector_params(pair: PDPair) -> list[Violation]:
    """No second connector that may produce kv_transfer_params next to NIXL inside a MultiConnector.

    Each role on its own (a warning: whether the child returns params depends on its own release).
    """
    out: list[Violation] = []
    for r in pair.roles:
        others = [c for c in wrapped_children(r.wrapper) if c in PARAMS_PRODUCERS]
        if not r.nixl or not others:
            continue
        out.append((
            f"{r.role}: {r.wrapper} wraps {others[0]} next to the NIXL connector; when it also returns "
            "kv_transfer_params for a finished request (LMCacheMPConnector returned an empty dict before "
            "LMCache#3866 and returns cache statistics after it), vLLM's MultiConnector raises \"Only one connector "
            "can produce KV transfer params\" and the request fails.",
            f"Use an LMCache release whose {others[0]} returns None for kv_transfer_params in P/D setups, or move "
            f"the KV offload out of the {r.role}'s MultiConnector.",
        ))
    return out
