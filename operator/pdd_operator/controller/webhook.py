"""Validating admission webhook for PDDeployments: refuse at ``kubectl apply`` what the operator would
refuse later, and print its warnings there too.

:func:`review` is the whole decision, a pure function of the admission request's operation and the
old and new objects; :func:`enable` registers it with kopf (``@kopf.on.validate``) and
:func:`configure_admission` points kopf's admission settings at the webhook server made by
:func:`build_server` (real TLS, certificates from :mod:`pdd_operator.controller.tls`).

What the webhook configuration (kopf manages it, named ``pdd-operator.dev``) covers:

- CREATE and UPDATE of ``pddeployments`` only: DELETE never reaches the webhook, and neither do
  writes to the ``status`` subresource (a separate resource, ``pddeployments/status``), so the
  operator's status patches never depend on the webhook;
- ``failurePolicy: Fail``: while the webhook is unreachable (operator restarting), creates and updates
  are refused rather than let through unchecked. The webhook is registered as *persistent*, so kopf
  leaves it in place when the operator stops.

An UPDATE that leaves the spec as it is (labels, annotations, finalizers, an object being deleted)
is always allowed, even when the stored spec breaks a rule (it may predate the webhook): removing a
finalizer must never be blocked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kopf
from pydantic import ValidationError

from pdd_operator.api.constants import GROUP, KIND, PLURAL, VERSION
from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.api.status import Finding
from pdd_operator.compat import evaluate

log = logging.getLogger(__name__)

#: Name of the ValidatingWebhookConfiguration kopf creates and keeps up to date.
CONFIGURATION_NAME = GROUP
#: kopf handler id: the webhook is ``validate-pddeployment.pdd-operator.dev``, its URL path ``/validate-pddeployment``.
HANDLER_ID = "validate-pddeployment"
WEBHOOK_NAME = f"{HANDLER_ID}.{CONFIGURATION_NAME}"
OPERATIONS = ("CREATE", "UPDATE")

#: Rule id of the warning for an in-place change of a setting that must match between P and D.
ROLLOUT_RULE = "rollout-incompatible-change"
#: Rule id used for fields the API models refuse (the same one the operator puts in status).
INVALID_RULE = "spec-invalid"

#: Settings that must match between prefill and decode, as (path in the spec, getter).
MUST_MATCH: tuple[tuple[str, Callable[[PDDeploymentSpec], Any]], ...] = (
    ("spec.model.name", lambda s: s.model.name),
    ("spec.model.revision", lambda s: s.model.revision),
    ("spec.engine.image", lambda s: s.engine.image),
    ("spec.engine.vllmVersion", lambda s: s.engine.vllm_version),
    ("spec.kvCache", lambda s: s.kv_cache.wire()),
    ("spec.kvTransfer.connector", lambda s: s.kv_transfer.connector),
    ("spec.kvTransfer.backends", lambda s: list(s.kv_transfer.backends)),
    ("spec.kvTransfer.bufferDevice", lambda s: s.kv_transfer.buffer_device),
    ("spec.speculative", lambda s: s.speculative.wire() if s.speculative else None),
)


@dataclass(frozen=True)
class Verdict:
    """The outcome of :func:`review`: allowed or not, the refusal message, and warnings for kubectl."""

    allowed: bool
    message: str = ""
    warnings: list[str] = field(default_factory=list)


def finding_text(f: Finding) -> str:
    """One finding as one line: ``[rule-id] message Fix: fix``."""
    text = f"[{f.rule}] {f.message}"
    return f"{text} Fix: {f.fix}" if f.fix else text


def invalid_fields(exc: ValidationError) -> list[str]:
    """One ``[spec-invalid] spec.<field>: <reason>`` line per field the API models refuse."""
    lines = []
    for err in exc.errors():
        path = "spec" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        lines.append(f"[{INVALID_RULE}] {path}: {err['msg']}")
    return lines


def parse_spec(obj: Mapping | None) -> PDDeploymentSpec:
    """The spec of a PDDeployment object (a dict as the apiserver sends it). Raises ValidationError."""
    return PDDeploymentSpec.model_validate((obj or {}).get("spec") or {})


def changed_must_match(old: PDDeploymentSpec, new: PDDeploymentSpec) -> list[str]:
    """Paths of the :data:`MUST_MATCH` settings whose value differs between ``old`` and ``new``."""
    return [path for path, get in MUST_MATCH if get(old) != get(new)]


def rollout_warning(paths: list[str]) -> str:
    """The warning for an in-place change of settings that must match between prefill and decode."""
    return (
        f"[{ROLLOUT_RULE}] {', '.join(paths)} changed in place: prefill and decode roll out "
        "independently, so during the rollout old and new pods are incompatible and KV transfers "
        "between them fail. Fix: create a new PDDeployment with the new settings, switch traffic to "
        "it, then delete this one."
    )


def _describe(obj: Mapping | None) -> str:
    meta = (obj or {}).get("metadata") or {}
    name = meta.get("name") or (f"{meta['generateName']}*" if meta.get("generateName") else "?")
    return f"{KIND} {name}"


def review(operation: str | None, new: Mapping | None, old: Mapping | None = None) -> Verdict:
    """Decide an admission request for a PDDeployment (``new``/``old``: the objects as dicts).

    - not a CREATE or UPDATE: allowed (the webhook is not registered for others);
    - UPDATE that does not change the spec, or of an object being deleted: allowed; findings of the
      stored spec are passed on as warnings only;
    - a spec the API models refuse: refused, naming every bad field (``[spec-invalid] spec.x: ...``);
    - compatibility errors: refused with all of them, one ``[rule-id] message Fix: fix`` per line;
    - compatibility warnings: allowed, each as an admission warning (``kubectl`` prints ``Warning:``);
    - UPDATE changing a setting that must match between prefill and decode: an extra warning.
    """
    if operation not in OPERATIONS or new is None:
        return Verdict(True)
    what = _describe(new)
    if operation == "UPDATE" and old is not None:
        deleting = bool(((new.get("metadata") or {}).get("deletionTimestamp")))
        if deleting or old.get("spec") == new.get("spec"):
            return Verdict(True, warnings=_unchanged_warnings(new))

    try:
        spec = parse_spec(new)
    except ValidationError as exc:
        lines = invalid_fields(exc)
        return Verdict(False, f"{what}: invalid spec ({len(lines)} field(s)):\n" + "\n".join(lines))

    report = evaluate(spec)
    if report.errors:
        lines = [finding_text(f) for f in report.errors]
        return Verdict(
            False,
            f"{what} cannot work with vLLM {report.version}: {len(lines)} compatibility error(s):\n"
            + "\n".join(lines),
            warnings=[finding_text(f) for f in report.warnings],
        )
    warnings = [finding_text(f) for f in report.warnings]
    if operation == "UPDATE" and old is not None:
        try:
            old_spec = parse_spec(old)
        except ValidationError:
            old_spec = None  # nothing sensible to compare with
        if old_spec is not None and (paths := changed_must_match(old_spec, spec)):
            warnings.append(rollout_warning(paths))
    return Verdict(True, warnings=warnings)


def _unchanged_warnings(obj: Mapping) -> list[str]:
    """Warnings for an update that leaves a spec as it is: only when that spec is refused today."""
    try:
        report = evaluate(parse_spec(obj))
    except ValidationError as exc:
        rules = [INVALID_RULE]
        detail = "; ".join(invalid_fields(exc))
    else:
        if report.compatible:
            return []
        rules = [f.rule for f in report.errors]
        detail = "; ".join(finding_text(f) for f in report.errors)
    return [
        f"{_describe(obj)}: this update leaves the spec unchanged and is allowed, but the spec is "
        f"refused by {', '.join(f'[{r}]' for r in rules)}; the operator keeps it on its last good spec. {detail}"
    ]


# --- kopf wiring ------------------------------------------------------------------------------------

_state: dict[str, Any] = {}


def validate_pddeployment(operation: str | None, body: Mapping, old: Mapping | None, warnings: list[str],
                          **_: Any) -> None:
    """kopf validating handler: apply :func:`review`; raise ``kopf.AdmissionError`` to refuse.

    ``warnings`` is kopf's list for admission warnings (``response.warnings``); ``body`` is the new
    object (the old one for a DELETE, which is not registered), ``old`` the stored one on UPDATE.
    """
    new = body if operation != "DELETE" else None
    verdict = review(operation, dict(new) if new is not None else None, dict(old) if old is not None else None)
    warnings.extend(verdict.warnings)
    if not verdict.allowed:
        raise kopf.AdmissionError(verdict.message, code=422)


def enable(server: kopf.WebhookServer, *, registry: kopf.OperatorRegistry | None = None) -> None:
    """Register the validating handler and remember ``server`` for :func:`configure_admission`.

    Call before ``kopf.run``. Only when a server is configured: kopf refuses to start with admission
    handlers but no server. Idempotent per registry.
    """
    _state["server"] = server
    key = id(registry) if registry is not None else "default"
    if key in _state.setdefault("registered", set()):
        return
    kopf.on.validate(
        GROUP, VERSION, PLURAL, id=HANDLER_ID, operations=list(OPERATIONS),
        persistent=True,        # kopf keeps it in the configuration on exit -> Fail while we are down
        side_effects=False,     # sideEffects: None -> dry-run requests are validated too
        ignore_failures=False,  # failurePolicy: Fail
        registry=registry,
    )(validate_pddeployment)
    _state["registered"].add(key)


def configure_admission(settings: kopf.OperatorSettings) -> None:
    """Point kopf at the webhook server given to :func:`enable` and let it manage the configuration.

    Called from the operator's startup handler; does nothing when the webhook is not enabled.
    """
    server = _state.get("server")
    if server is None:
        return
    settings.admission.server = server
    settings.admission.managed = CONFIGURATION_NAME


def build_server(*, port: int, host: str, listen: str, cert_dir: Path) -> kopf.WebhookServer:
    """A kopf HTTPS webhook server on ``listen:port`` that the apiserver reaches at ``host:port``.

    Certificates come from ``cert_dir`` (``tls.crt``/``tls.key``/``ca.crt``, used when present) or
    are generated there for ``host``. ``ca.crt`` goes to kopf as ``cafile`` and so into the
    configuration's ``caBundle``; without one, kopf uses the serving certificate itself. kopf re-reads
    the three files every 60 s and, when they changed (a renewed Secret), restarts its listener and
    patches the new ``caBundle`` in.
    """
    from pdd_operator.controller.tls import covers, ensure_serving_files, load_cert

    files = ensure_serving_files(cert_dir, [host])
    cert = load_cert(files.certfile)
    if files.generated:
        log.info("webhook: generated a CA and a serving certificate for %s in %s", host, cert_dir)
    elif not covers(cert, host):
        log.warning("webhook: %s does not name %s among its SANs; the apiserver will refuse the TLS "
                    "handshake", files.certfile, host)
    return kopf.WebhookServer(
        addr=listen, port=port, host=host,
        certfile=str(files.certfile), pkeyfile=str(files.keyfile),
        cafile=str(files.cafile) if files.cafile is not None else None,
    )
