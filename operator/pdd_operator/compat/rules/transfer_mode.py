"""The NIXL transfer mode an engine is given: the ``transfer_mode`` option of ``NixlConnector`` (0.34.0) and what
the push connector refuses (bidirectional KV transfer). Whether the two roles' modes match is
``transfer-mode-mismatch`` (:mod:`pdd_operator.compat.rules.must_match`)."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.transfer_mode import TRANSFER_MODE_OPTION_SINCE, ignored_option, invalid_option
from pdd_operator.vllm.versions import fmt

#: The releases read whose ``NixlPushConnectorScheduler.__init__`` refuses ``bidirectional_kv_xfer``
#: (vllm#46473; nixl/push_scheduler.py in the 0.25.0-0.34.0 sdists). Push is older (vllm#35264), so before the
#: first of them the refusal is not established.
PUSH_BIDIRECTIONAL_REFUSED_SINCE = (0, 25, 0)

_EXTRA = ("spec.kvTransfer.connector", "spec.kvTransfer.extraConfig")


def _where(pair: PDPair, r: RoleConfig, what: str) -> str:
    return fix_for(pair, f"{what} in spec.kvTransfer.extraConfig.", f"{what} in the {r.role}'s --kv-transfer-config.")


@rule(
    id="nixl-transfer-mode-invalid", family="transfer-mode-mismatch", severity="error",
    fields=_EXTRA,
    source=("vllm kv_connector/factory.py KVConnectorFactory.get_connector_class: NixlConnector with "
            "kv_connector_extra_config transfer_mode other than 'pull'/'push' raises ValueError 'Invalid NixlConnector "
            "transfer_mode' (0.34.0 sdist lines 126-130; docs/design/nixl_kv_push_connector.md); releases before 0.34.0 "
            "do not read the key"),
    example='kvTransfer: {connector: NixlConnector, extraConfig: {transfer_mode: write}}',
)
def check_transfer_mode_value(pair: PDPair) -> list[Violation]:
    """A NixlConnector's transfer_mode is pull or push.

    Per role: the raw ``transfer_mode`` of a ``NixlConnector``'s extra config. From 0.34.0 any other value (case
    counts: ``Push`` too) stops the engine while it builds its config; on an unknown release it is a warning, and
    before 0.34.0 the key is ignored (``nixl-transfer-mode-ignored`` speaks of ``push`` there).
    """
    out: list[Violation] = []
    for r in pair.roles:
        value = invalid_option(r.connector, r.extra)
        if value is None or (r.version is not None and r.version < TRANSFER_MODE_OPTION_SINCE):
            continue
        fix = _where(pair, r, 'Give transfer_mode "pull" or "push" (or leave it out for pull)')
        if r.version is None:
            out.append((f"{r.role}: NixlConnector with transfer_mode {value!r}: vLLM "
                        f"{fmt(TRANSFER_MODE_OPTION_SINCE)} and later refuse any value but 'pull' or 'push' at startup "
                        "(ValueError 'Invalid NixlConnector transfer_mode'); the release is not known.", fix, "warning"))
            continue
        out.append((f"{r.role}: NixlConnector with transfer_mode {value!r}: vLLM {fmt(r.version)} accepts only 'pull' "
                    "or 'push' and raises ValueError 'Invalid NixlConnector transfer_mode' while the engine builds its "
                    "config, so it never starts.", fix))
    return out


@rule(
    id="nixl-transfer-mode-ignored", family="transfer-mode-mismatch", severity="warning",
    fields=_EXTRA,
    source=("vllm kv_connector/factory.py: the transfer_mode option of NixlConnector is read from 0.34.0 (0.34.0 sdist "
            "lines 126-130); the 0.33.0 sdist's get_connector_class has no such branch, so NixlConnector pulls"),
    example='image v0.33.0, kvTransfer: {connector: NixlConnector, extraConfig: {transfer_mode: push}}',
)
def check_transfer_mode_ignored(pair: PDPair) -> list[Violation]:
    """transfer_mode push is given to a NixlConnector whose release does not read it (it pulls)."""
    return [(
        f"{r.role}: NixlConnector with transfer_mode 'push' on vLLM {fmt(r.version)}: releases before "
        f"{fmt(TRANSFER_MODE_OPTION_SINCE)} do not read the option, so this engine pulls.",
        _where(pair, r, "Name NixlPushConnector instead of NixlConnector + transfer_mode push"),
    ) for r in pair.roles if ignored_option(r.connector, r.extra, r.version)]


@rule(
    id="push-bidirectional-unsupported", family="transfer-mode-mismatch", severity="error",
    fields=_EXTRA,
    source=("vllm nixl/push_scheduler.py NixlPushConnectorScheduler.__init__: 'Bidirectional KV transfer is not "
            "supported for NIXL push connector.' (NotImplementedError; vllm#46473; read in the 0.25.0-0.34.0 sdists, "
            "0.32.0 lines 71-74)"),
    example='kvTransfer: {connector: NixlPushConnector, extraConfig: {bidirectional_kv_xfer: true}}',
)
def check_push_bidirectional(pair: PDPair) -> list[Violation]:
    """A push NIXL engine does not enable bidirectional_kv_xfer.

    Per role: the engine pushes (``NixlPushConnector``, or ``NixlConnector`` with ``transfer_mode`` push from 0.34.0)
    and ``kv_connector_extra_config.bidirectional_kv_xfer`` is truthy (vLLM tests the raw value). From 0.25.0 the
    push scheduler raises NotImplementedError when the engine starts; before it, or on an unknown release, a warning.
    """
    out: list[Violation] = []
    for r in pair.roles:
        if not r.push or not r.extra.get("bidirectional_kv_xfer"):
            continue
        fix = _where(pair, r, "Remove bidirectional_kv_xfer, or use the pull NixlConnector,")
        if r.version is None or r.version < PUSH_BIDIRECTIONAL_REFUSED_SINCE:
            out.append((f"{r.role}: {r.connector} (push) with bidirectional_kv_xfer "
                        f"{r.extra.get('bidirectional_kv_xfer')!r}: vLLM {fmt(PUSH_BIDIRECTIONAL_REFUSED_SINCE)} and later "
                        "refuse it at startup (NotImplementedError); this release was not read.", fix, "warning"))
            continue
        out.append((f"{r.role}: {r.connector} (push) with bidirectional_kv_xfer {r.extra.get('bidirectional_kv_xfer')!r}: "
                    f"vLLM {fmt(r.version)}'s push scheduler raises NotImplementedError ('Bidirectional KV transfer is "
                    "not supported for NIXL push connector.') when the engine starts.", fix))
    return out


@rule(
    id="transfer-mode-option-managed", family="transfer-mode-mismatch", severity="warning",
    fields=_EXTRA,
    source=("vllm kv_connector/factory.py 0.34.0 lines 126-130 (NixlConnector + transfer_mode push runs "
            "NixlPushConnector); pdd_operator.render.workloads.router_deployment picks the router's --kv-mode from "
            "spec.kvTransfer.connector alone; push engines behind a sequential pull-style handoff still move KV "
            "(ai-dynamo/dynamo#13327: 'working but slower-than-pull')"),
    example='kvTransfer: {connector: NixlConnector, extraConfig: {transfer_mode: push}}, engine v0.34.0',
)
def check_transfer_mode_option_managed(pair: PDPair) -> list[Violation]:
    """A PDDeployment selects push by spec.kvTransfer.connector, not by an extraConfig transfer_mode."""
    if not pair.managed:
        return []
    return [(
        f"{r.role}: spec.kvTransfer.extraConfig transfer_mode 'push' with connector NixlConnector: vLLM "
        f"{fmt(r.version) if r.version else 'from ' + fmt(TRANSFER_MODE_OPTION_SINCE)} runs the push connector, but "
        "the operator renders the router for pull (it reads spec.kvTransfer.connector), so the two legs run one after "
        "the other: KV moves, slower than either mode done right.",
        "Set spec.kvTransfer.connector to NixlPushConnector and drop transfer_mode from spec.kvTransfer.extraConfig.",
    ) for r in pair.roles[:1] if r.connector == "NixlConnector" and r.extra.get("transfer_mode") == "push"
        and (r.version is None or r.version >= TRANSFER_MODE_OPTION_SINCE)]
