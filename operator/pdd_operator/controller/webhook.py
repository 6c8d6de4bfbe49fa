"""Validating admission webhook for PDDeployments: refuse at ``kubectl apply`` what the operator would
refuse later, and print its warnings there too.

- :func:`review` is the whole decision, a pure function of the admission request's operation and
  the new and old objects (unit-tested without a cluster).
- :func:`prepare` makes the HTTPS endpoint: certificates from :mod:`pdd_operator.controller.tls`
  (a directory with ``tls.crt``/``tls.key``/``ca.crt``, generated when absent) and a
  ``kopf.WebhookServer`` that serves them.
- :func:`enable` registers everything with kopf: the ``@kopf.on.validate`` handler, and startup and
  cleanup handlers that point ``settings.admission.server`` at the endpoint and keep the
  ValidatingWebhookConfiguration :data:`CONFIGURATION_NAME` in place (:func:`webhook_configuration`).

The operator writes the ValidatingWebhookConfiguration itself (server-side apply) instead of using
kopf's ``settings.admission.managed``, for three reasons:

- kopf cannot express ``matchConditions``. Ours send only CREATEs and spec-changing UPDATEs of
  objects not being deleted. With ``failurePolicy: Fail`` every request that reaches the webhook is
  refused while the operator is down, and that must not include the garbage collector's removal of
  the ``foregroundDeletion`` finalizer (``kubectl delete --cascade=foreground`` would hang until the
  operator is back: measured with kopf's configuration) nor label, annotation or finalizer edits;
- kopf removes non-persistent webhooks on exit, so bad objects slip in while the operator restarts,
  and it creates an empty MutatingWebhookConfiguration of the same name as well;
- kopf re-patches the whole ``webhooks`` list on every start.

What the configuration covers: CREATE and UPDATE of ``pddeployments`` only. DELETE never reaches the
webhook, and neither do writes to the status subresource (``pddeployments/status`` is a separate
resource in the rules), so the operator's status patches never depend on it. The configuration is
left in place when the operator stops (creates and updates are then refused: fail closed); delete it
by hand (``kubectl delete validatingwebhookconfiguration pdd-operator.dev``) when uninstalling.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import ipaddress
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import kopf
from pydantic import ValidationError

from pdd_operator.api.constants import FIELD_MANAGER, GROUP, KIND, LABEL_MANAGED_BY, PLURAL, VERSION
from pdd_operator.api.messages import finding_text, invalid_spec_findings
from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.compat import evaluate

# Rule ids of the warning for a change of a must-match setting, and of fields the API models
# refuse; registered (and listed by `pdd rules`) in compat/rules/records.py.
from pdd_operator.compat.rules.records import INVALID_RULE, ROLLOUT_RULE
from pdd_operator.render.admission import ADMISSION_RULES, admission_findings_of
from pdd_operator.vllm import must_match

log = logging.getLogger(__name__)

#: Name of the ValidatingWebhookConfiguration the operator keeps in place.
CONFIGURATION_NAME = GROUP
#: kopf handler id, and the URL path of the webhook (kopf routes ``/<id>`` to that handler).
HANDLER_ID = "validate-pddeployment"
WEBHOOK_NAME = f"{HANDLER_ID}.{CONFIGURATION_NAME}"
OPERATIONS = ("CREATE", "UPDATE")
#: The apiserver waits this long for an answer before applying the failure policy (max 30).
TIMEOUT_SECONDS = 10
#: How often the operator checks that the configuration (and its caBundle) is still in place.
KEEP_INTERVAL = 60.0


#: CEL conditions, all of which must hold for the apiserver to call the webhook: not for objects
#: being deleted, and UPDATEs only when the spec changes (status is a separate resource anyway).
MATCH_CONDITIONS = (
    {"name": "not-being-deleted", "expression": "!has(object.metadata.deletionTimestamp)"},
    {"name": "spec-changed",
     "expression": "request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) "
                   "|| object.spec != oldObject.spec"},
)

# --- the decision -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """The outcome of :func:`review`: allowed or not, the refusal message, and warnings for kubectl."""

    allowed: bool
    message: str = ""
    warnings: list[str] = field(default_factory=list)


def invalid_fields(exc: ValidationError) -> list[str]:
    """One ``[spec-invalid] spec.<field>: <reason>. Fix: ...`` line per field the API models refuse
    (:func:`~pdd_operator.api.messages.invalid_spec_findings`, printed as ``pdd check`` and status do)."""
    return [finding_text(f) for f in invalid_spec_findings(exc)]


def parse_spec(obj: Mapping | None) -> PDDeploymentSpec:
    """The spec of a PDDeployment object (a dict as the apiserver sends it). Raises ValidationError."""
    return PDDeploymentSpec.model_validate((obj or {}).get("spec") or {})


def changed_must_match(old: PDDeploymentSpec, new: PDDeploymentSpec) -> list[str]:
    """Fields of the settings prefill and decode must share (:data:`~pdd_operator.vllm.must_match.MUST_MATCH`)
    that differ between ``old`` and ``new``."""
    return must_match.changed_fields(old, new)


def rollout_warning(paths: list[str]) -> str:
    """The warning for a change of settings that must match between prefill and decode: a coordinated
    rollout (:mod:`pdd_operator.controller.rollout`) that runs both revisions side by side for a while."""
    return (
        f"[{ROLLOUT_RULE}] {', '.join(paths)} changed: this changes the compat hash, so every pod of "
        "both roles is replaced by a coordinated rollout: a new revision of prefill and decode starts "
        "beside the running one, which keeps serving until the new one is Ready in both roles "
        "(docs/rollouts.md). Fix: make sure the cluster has room (GPUs) for the new revision's "
        "prefill and decode pods next to the running ones, or scale the roles down first."
    )


def _describe(obj: Mapping | None) -> str:
    meta = (obj or {}).get("metadata") or {}
    name = meta.get("name") or (f"{meta['generateName']}*" if meta.get("generateName") else "?")
    return f"{KIND} {name}"


def review(operation: str | None, new: Mapping | None, old: Mapping | None = None) -> Verdict:
    """Decide an admission request for a PDDeployment (``new``/``old``: the objects as dicts).

    - not a CREATE or UPDATE: allowed (the webhook is not registered for others);
    - UPDATE of an object being deleted, or that leaves the spec as it is: allowed, whatever the
      stored spec (it may predate the webhook); its errors come back as one warning. The
      configuration's ``matchConditions`` already keep these away from the webhook; this is the
      same rule for an apiserver without them;
    - a spec the API models refuse: refused, naming every bad field (``[spec-invalid] spec.x: ...``);
    - compatibility errors, and what the apiserver would refuse in the rendered children
      (:func:`~pdd_operator.render.admission.admission_findings`): refused with all of them, one
      ``[rule-id] message Fix: fix`` per line;
    - compatibility warnings: allowed, each as an admission warning (``kubectl`` prints ``Warning:``);
    - UPDATE changing a setting that must match between prefill and decode: one more warning
      (:data:`ROLLOUT_RULE`).
    """
    if operation not in OPERATIONS or new is None:
        return Verdict(True)
    what = _describe(new)
    if operation == "UPDATE" and old is not None:
        deleting = bool((new.get("metadata") or {}).get("deletionTimestamp"))
        if deleting or old.get("spec") == new.get("spec"):
            return Verdict(True, warnings=_unchanged_warnings(new))

    try:
        spec = parse_spec(new)
    except ValidationError as exc:
        lines = invalid_fields(exc)
        return Verdict(False, f"{what}: invalid spec ({len(lines)} field(s)):\n" + "\n".join(lines))

    report = evaluate(spec)
    report = replace(report, findings=[*admission_findings_of(new, spec), *report.findings])
    warnings = list(dict.fromkeys(finding_text(f) for f in report.warnings))
    if report.errors:
        lines = list(dict.fromkeys(finding_text(f) for f in report.errors))
        return Verdict(False, f"{what} {refusal_summary(report.errors, report.version)}:\n" + "\n".join(lines),
                       warnings=warnings)
    if operation == "UPDATE" and old is not None:
        try:
            old_spec = parse_spec(old)
        except ValidationError:
            old_spec = None  # nothing sensible to compare with
        if old_spec is not None and (paths := changed_must_match(old_spec, spec)):
            warnings.append(rollout_warning(paths))
    return Verdict(True, warnings=warnings)


def refusal_summary(errors: list, version: str) -> str:
    """The head of a refusal: what kind of errors follow, counted (``errors``: error findings, ``version``:
    the vLLM version judged).

    Compatibility errors (vLLM's code fails) and rendered-object errors (``ADMISSION_RULES``: the apiserver
    would refuse a child) are named apart, so a bad resource quantity is not called a vLLM incompatibility.
    """
    rendered = len({finding_text(f) for f in errors if f.rule in ADMISSION_RULES})
    compat = len({finding_text(f) for f in errors if f.rule not in ADMISSION_RULES})
    parts = []
    if compat:
        parts.append(f"cannot work with vLLM {version}: {compat} compatibility error(s)")
    if rendered:
        parts.append(f"cannot be rendered into objects the apiserver accepts: {rendered} error(s)")
    return "; ".join(parts)


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
        rules = list(dict.fromkeys(f.rule for f in report.errors))
        detail = "; ".join(dict.fromkeys(finding_text(f) for f in report.errors))
    return [
        f"{_describe(obj)}: allowed because this update leaves the spec unchanged, but the spec is "
        f"refused by {', '.join(f'[{r}]' for r in rules)}; the operator keeps it on its last good spec. {detail}"
    ]


# --- the webhook configuration ----------------------------------------------------------------------


def webhook_url(host: str, port: int) -> str:
    """``https://host:port/<handler id>``, with brackets around an IPv6 literal."""
    try:
        if isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address):
            host = f"[{host}]"
    except ValueError:
        pass  # a DNS name
    return f"https://{host}:{port}/{HANDLER_ID}"


#: ``<service>.<namespace>.svc``: the apiserver reaches such a host through the Service (it may not
#: resolve cluster DNS names itself) and checks the certificate for exactly this name.
SERVICE_HOST = re.compile(r"^(?P<name>[a-z0-9]([-a-z0-9]*[a-z0-9])?)\.(?P<namespace>[a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc$")


def client_config(host: str, port: int) -> dict:
    """The webhook's ``clientConfig`` without ``caBundle``.

    ``<service>.<namespace>.svc`` becomes a Service reference (port ``port``, which the Service must
    expose); anything else (an IP such as 127.0.0.1, an external name) a ``url``.
    """
    if m := SERVICE_HOST.match(host):
        return {"service": {"name": m["name"], "namespace": m["namespace"], "port": port, "path": f"/{HANDLER_ID}"}}
    return {"url": webhook_url(host, port)}


def describe_client_config(config: Mapping) -> str:
    """``https://...`` for a URL, ``service <namespace>/<name>:<port><path>`` for a Service."""
    if "url" in config:
        return str(config["url"])
    svc = config["service"]
    return f"service {svc['namespace']}/{svc['name']}:{svc['port']}{svc['path']}"


def webhook_configuration(target: Mapping, ca_bundle: bytes, name: str = CONFIGURATION_NAME) -> dict:
    """The ValidatingWebhookConfiguration for the webhook at ``target`` (a :func:`client_config`)
    whose serving certificate ``ca_bundle`` (PEM) verifies, named ``name``.

    ``failurePolicy: Fail`` for CREATE/UPDATE of ``pddeployments`` (not ``pddeployments/status``),
    narrowed by :data:`MATCH_CONDITIONS`; ``sideEffects: None`` so dry runs are validated too.
    """
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {LABEL_MANAGED_BY: "pdd-operator"}},
        "webhooks": [{
            "name": WEBHOOK_NAME,
            "clientConfig": {**copy.deepcopy(dict(target)), "caBundle": base64.b64encode(ca_bundle).decode("ascii")},
            "rules": [{
                "apiGroups": [GROUP], "apiVersions": [VERSION], "resources": [PLURAL],
                "operations": list(OPERATIONS), "scope": "Namespaced",
            }],
            "matchPolicy": "Equivalent",
            "matchConditions": [dict(c) for c in MATCH_CONDITIONS],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "timeoutSeconds": TIMEOUT_SECONDS,
            "admissionReviewVersions": ["v1"],
        }],
    }


def ensure_configuration(api: Any, desired: dict) -> bool:
    """Server-side apply ``desired`` (a ValidatingWebhookConfiguration) unless it is already in place.

    ``api``: a ``kubernetes.client.AdmissionregistrationV1Api``. Returns True when a write was sent.
    """
    from kubernetes.client.exceptions import ApiException

    from pdd_operator.controller.kube import contains

    name = desired["metadata"]["name"]
    try:
        resp = api.read_validating_webhook_configuration(name, _preload_content=False)
        live = json.loads(resp.data)
    except ApiException as exc:
        if exc.status != 404:
            raise
        live = None
    if live is not None and contains(live, desired):
        return False
    api.patch_validating_webhook_configuration(
        name, desired, field_manager=FIELD_MANAGER, force=True, _content_type="application/apply-patch+yaml",
    )
    log.info("webhook: applied ValidatingWebhookConfiguration %s (%s)", name,
             describe_client_config(desired["webhooks"][0]["clientConfig"]))
    return True


class ConfigurationMissing(Exception):
    """The ValidatingWebhookConfiguration the operator must only patch (``ca-bundle`` mode) is absent,
    or has no webhook named :data:`WEBHOOK_NAME`."""


def ca_bundle_patch(name: str, ca_bundle: bytes) -> dict:
    """The server-side apply body that sets only ``caBundle`` of webhook :data:`WEBHOOK_NAME` in the
    ValidatingWebhookConfiguration ``name`` (``webhooks`` is a list map keyed by ``name``, so the
    apiserver merges this into the object's other fields, which stay with their owner: the chart)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{"name": WEBHOOK_NAME,
                      "clientConfig": {"caBundle": base64.b64encode(ca_bundle).decode("ascii")}}],
    }


def ensure_ca_bundle(api: Any, name: str, ca_bundle: bytes) -> bool:
    """Make ``caBundle`` of webhook :data:`WEBHOOK_NAME` in the existing configuration ``name`` equal
    ``ca_bundle`` (PEM), with a server-side apply of that one field under the operator's field manager.

    ``api``: a ``kubernetes.client.AdmissionregistrationV1Api``. Returns True when a write was sent.
    Raises :class:`ConfigurationMissing` when the configuration or its webhook is absent (the Helm
    chart creates it; the operator never creates it in this mode), ``ApiException`` for API errors.
    """
    from kubernetes.client.exceptions import ApiException

    try:
        live = json.loads(api.read_validating_webhook_configuration(name, _preload_content=False).data)
    except ApiException as exc:
        if exc.status == 404:
            raise ConfigurationMissing(
                f"ValidatingWebhookConfiguration {name} does not exist; it is the Helm chart's (templates/"
                f"webhook.yaml). Fix: install or upgrade the chart, or pass --webhook-configuration-mode=apply "
                f"to let the operator write it") from exc
        raise
    hook = next((h for h in live.get("webhooks") or [] if h.get("name") == WEBHOOK_NAME), None)
    if hook is None:
        raise ConfigurationMissing(f"ValidatingWebhookConfiguration {name} has no webhook named {WEBHOOK_NAME}. "
                                   "Fix: reinstall the chart's templates/webhook.yaml")
    want = base64.b64encode(ca_bundle).decode("ascii")
    if (hook.get("clientConfig") or {}).get("caBundle") == want:
        return False
    api.patch_validating_webhook_configuration(
        name, ca_bundle_patch(name, ca_bundle), field_manager=FIELD_MANAGER, force=True,
        _content_type="application/apply-patch+yaml",
    )
    log.info("webhook: set caBundle of ValidatingWebhookConfiguration %s", name)
    return True


# --- kopf wiring ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """The webhook as served (``server``) and as the apiserver reaches it (``target``, ``ca_file``),
    and how the operator keeps the ValidatingWebhookConfiguration ``configuration`` (``mode``: see
    :data:`pdd_operator.controller.rbac.WebhookConfigurationMode`)."""

    server: kopf.WebhookServer
    #: ``clientConfig`` without ``caBundle`` (:func:`client_config`).
    target: dict
    #: PEM bundle the apiserver verifies the serving certificate with (``ca.crt``, else ``tls.crt``).
    ca_file: Path
    configuration: str = CONFIGURATION_NAME
    mode: str = "apply"
    #: Called by the keeper before each check (e.g. renew certificates kept in a Secret: webhook_certs).
    refresh: Callable[[], object] | None = None


def prepare(*, port: int, host: str, listen: str, cert_dir: Path, configuration: str = CONFIGURATION_NAME,
            mode: str = "apply", refresh: Callable[[], object] | None = None) -> Endpoint:
    """The HTTPS webhook endpoint: kopf server on ``listen:port``, which the apiserver reaches at
    ``https://host:port`` (or through the Service, for ``<service>.<namespace>.svc``: :func:`client_config`).

    Certificates come from ``cert_dir`` (``tls.crt``/``tls.key``/``ca.crt``, used when present) or
    are generated there for ``host`` (:func:`pdd_operator.controller.tls.ensure_serving_files`).
    kopf re-reads the files every 60 s and restarts its listener when they changed (a renewed
    Secret); the configuration keeper then applies the new ``caBundle``.
    """
    from pdd_operator.controller.tls import covers, ensure_serving_files, load_cert

    files = ensure_serving_files(cert_dir, [host])
    if files.generated:
        log.info("webhook: generated a CA and a serving certificate for %s in %s", host, cert_dir)
    elif not covers(load_cert(files.certfile), host):
        log.warning("webhook: %s does not name %s among its SANs; the apiserver will refuse the TLS "
                    "handshake", files.certfile, host)
    server = kopf.WebhookServer(
        addr=listen, port=port, host=host,
        certfile=str(files.certfile), pkeyfile=str(files.keyfile),
        cafile=str(files.cafile) if files.cafile is not None else None,
    )
    from pdd_operator.controller.metrics import WEBHOOK_CERT_EXPIRY

    WEBHOOK_CERT_EXPIRY.labels(certificate="serving").set(load_cert(files.certfile).not_valid_after_utc.timestamp())
    if files.cafile is not None:
        WEBHOOK_CERT_EXPIRY.labels(certificate="ca").set(load_cert(files.cafile).not_valid_after_utc.timestamp())
    return Endpoint(server=server, target=client_config(host, port), ca_file=files.cafile or files.certfile,
                    configuration=configuration, mode=mode, refresh=refresh)


async def validate_pddeployment(operation: str | None, body: Mapping, old: Mapping | None, warnings: list[str],
                                **_: Any) -> None:
    """kopf validating handler: apply :func:`review`; raise ``kopf.AdmissionError`` to refuse.

    Async on purpose: :func:`review` is pure CPU work of well under a millisecond, and running it on
    the event loop saves the thread-pool hop kopf makes for synchronous handlers.

    ``warnings`` is kopf's list for the response's admission warnings; ``body`` is the new object
    (the old one on DELETE, which is not registered), ``old`` the stored one on UPDATE.
    """
    new = _plain(body) if operation != "DELETE" else None
    verdict = review(operation, new, _plain(old) if old is not None else None)
    warnings.extend(verdict.warnings)
    if not verdict.allowed:
        raise kopf.AdmissionError(verdict.message, code=422)


def _plain(body: Mapping) -> dict:
    """A kopf body view as a plain JSON dict."""
    return json.loads(json.dumps(dict(body)))


class RefusalLogLevel(logging.Filter):
    """Log kopf's "Webhook 'validate-pddeployment' failed permanently: ..." at INFO, not ERROR.

    kopf logs every refusal (a handler raising ``AdmissionError``) as a handler failure; here a
    refusal is the webhook working, and an ERROR per refused ``kubectl apply`` would trip log alerts.
    """

    PREFIX = f"Webhook {HANDLER_ID!r} failed permanently"

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.ERROR and str(record.msg).startswith(self.PREFIX):
            record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        return True


_state: dict[str, Any] = {}


def enable(endpoint: Endpoint, *, registry: kopf.OperatorRegistry | None = None) -> None:
    """Register the webhook with kopf (before ``kopf.run``): the validating handler, and startup and
    cleanup handlers that configure kopf's admission server and keep the configuration in place.
    """
    _state["endpoint"] = endpoint
    kopf.on.validate(
        GROUP, VERSION, PLURAL, id=HANDLER_ID, operations=list(OPERATIONS),
        side_effects=False, ignore_failures=False, registry=registry,
    )(validate_pddeployment)
    kopf.on.startup(id="webhook-startup", registry=registry)(_startup)
    kopf.on.cleanup(id="webhook-cleanup", registry=registry)(_cleanup)
    objects_log = logging.getLogger("kopf.objects")
    if not any(isinstance(f, RefusalLogLevel) for f in objects_log.filters):
        objects_log.addFilter(RefusalLogLevel())


async def readiness() -> str | None:
    """Readiness check of the webhook (:mod:`pdd_operator.controller.readiness`): ``None`` when the
    configuration was brought in line at least once and the listener completes a verified TLS
    handshake for the host the apiserver dials; else the reason."""
    from pdd_operator.controller.readiness import tls_handshake

    endpoint: Endpoint | None = _state.get("endpoint")
    if endpoint is None:
        return "the webhook is not enabled"
    if not _state.get("configured"):
        return f"ValidatingWebhookConfiguration {endpoint.configuration} not yet in line (see the log)"
    server = endpoint.server
    address = "127.0.0.1" if server.addr in (None, "", "0.0.0.0", "::") else server.addr
    return await tls_handshake(address, int(server.port or 0), server.host or address, str(endpoint.ca_file))


async def _startup(settings: kopf.OperatorSettings, **_: Any) -> None:
    endpoint: Endpoint = _state["endpoint"]
    settings.admission.server = endpoint.server
    settings.admission.managed = None  # the keeper below writes the configuration
    _state["keeper"] = asyncio.get_running_loop().create_task(_keep_configuration(endpoint))


async def _cleanup(**_: Any) -> None:
    task = _state.pop("keeper", None)
    if task is not None:
        task.cancel()  # the configuration stays: fail closed while the operator is away


def keep_once(api: Any, endpoint: Endpoint) -> bool:
    """Bring the configuration in line with ``endpoint`` once, as its mode says (``apply``: the whole
    object; ``ca-bundle``: its ``caBundle`` only; ``none``: nothing). Returns True when a write was sent.
    Raises what :func:`ensure_configuration` and :func:`ensure_ca_bundle` raise."""
    if endpoint.mode == "none":
        return False
    ca_bundle = endpoint.ca_file.read_bytes()
    if endpoint.mode == "ca-bundle":
        return ensure_ca_bundle(api, endpoint.configuration, ca_bundle)
    return ensure_configuration(api, webhook_configuration(endpoint.target, ca_bundle, endpoint.configuration))


async def _keep_configuration(endpoint: Endpoint) -> None:
    """Keep the configuration in line (:func:`keep_once`) now and periodically (the CA bundle may
    change: a renewed or remounted certificate)."""
    from kubernetes import client

    from pdd_operator.kubeclient import load_config

    loop = asyncio.get_running_loop()
    api = client.AdmissionregistrationV1Api(load_config())
    while True:
        delay = KEEP_INTERVAL
        try:
            if endpoint.refresh is not None:
                await loop.run_in_executor(None, endpoint.refresh)
            await loop.run_in_executor(None, keep_once, api, endpoint)
            _state["configured"] = True
        except Exception as exc:  # noqa: BLE001  (API errors, connection errors, an unreadable file)
            log.warning("webhook: cannot keep ValidatingWebhookConfiguration %s: %s", endpoint.configuration, exc)
            delay = 5.0
        await asyncio.sleep(delay)
