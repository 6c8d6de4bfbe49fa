"""The KV connector: both roles run a NIXL connector that their vLLM version ships."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.versions import fmt


@rule(
    id="kv-connector-missing", family="connector", severity="error",
    fields=("spec.kvTransfer.connector",),
    source=("vllm v1 core: without --kv-transfer-config no KV connector is created, and kv_transfer_params in a "
            "request are ignored ('Got kv_transfer_params, but no KVConnector found'), so decode recomputes every "
            "prompt (kserve#5987, dynamo#11467)"),
    without_connector=True,
)
def check_connector_present(pair: PDPair) -> list[Violation]:
    """Every engine of a prefill/decode topology has a KV connector."""
    out = []
    for r in pair.roles:
        if r.connector is None:
            kv_role = "kv_producer" if r.role == "prefill" else "kv_consumer"
            out.append((
                f"{r.role}: the engine runs in a prefill/decode topology but has no KV connector (no "
                "--kv-transfer-config): it never receives KV from the other role, so decode recomputes every "
                "prompt (or prefill never hands KV over) while every request still succeeds. The NIXL rules "
                "(handshake, block sizes, side channel, parallelism across roles) are checked once both roles "
                "have a connector.",
                fix_for(pair, "Set spec.kvTransfer.connector (the operator renders it on both roles).",
                        f"Add --kv-transfer-config '{{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"{kv_role}\"}}' "
                        f"to the {r.role} container{_named(r)}."),
            ))
    return out


def _named(r) -> str:
    return f" ({r.container})" if r.container else ""


@rule(
    id="nixl-connector-unavailable", family="connector", severity="error",
    fields=("spec.engine",),
    source="vllm-nixl-facts.md section 7: NixlConnector first in 0.9.0",
    until=(0, 9, 0),
)
def check_nixl_available(pair: PDPair) -> list[Violation]:
    """The vLLM version ships a NixlConnector."""
    return [(f"vLLM {fmt(pair.version)} has no NixlConnector (first in 0.9.0).", "Use a vLLM >= 0.20 engine image.")]


@rule(
    id="push-connector-unavailable", family="connector", severity="error",
    fields=("spec.kvTransfer.connector", "spec.engine"),
    source="vllm kv_connector/factory.py (NixlPushConnector from 0.24.0)",
    until=(0, 24, 0), example="kvTransfer: {connector: NixlPushConnector} on v0.20.2",
)
def check_push_available(pair: PDPair) -> list[Violation]:
    """NixlPushConnector exists in the vLLM version."""
    if not any(r.push for r in pair.roles):
        return []
    return [(f"NixlPushConnector does not exist in vLLM {fmt(pair.version)} (first in 0.24.0).",
             "Use NixlConnector (pull), or a vLLM >= 0.24 engine image.")]


@rule(
    id="handshake-compat-disabled", family="handshake", severity="warning",
    fields=("spec.kvTransfer.extraConfig",),
    source="seed 000 section 2; vllm nixl _nixl_handshake (0.13+)",
)
def check_handshake_compat(pair: PDPair) -> list[Violation]:
    """The handshake compatibility check stays on."""
    for r in pair.roles:
        value = r.extra.get("enforce_handshake_compat", True)
        if value is False or str(value).lower() == "false":
            return [(
                "enforce_handshake_compat is false: prefill and decode pair even when their compatibility hashes "
                "differ, and mismatches show up as wrong output or crashes instead of a handshake error.",
                "Remove enforce_handshake_compat from the kv_connector_extra_config.",
            )]
    return []
