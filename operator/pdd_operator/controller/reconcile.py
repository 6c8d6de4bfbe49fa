"""Reconcile one PDDeployment: check, render, apply, observe, report. Idempotent and level-based.

Called for every event of a PDDeployment or of one of its children and by the periodic resync, so it
must be cheap when nothing changed: it then sends no write at all.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import ValidationError

from pdd_operator.api.constants import ANNOTATION_APPLIED_SPEC, ROLES
from pdd_operator.api.messages import invalid_spec_findings
from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.api.status import Finding
from pdd_operator.compat.engine import CompatReport, evaluate, model_config_from_configmap
from pdd_operator.controller.kube import Kube
from pdd_operator.controller.metrics import CHILD_APPLIES, RECONCILES, STATUS_WRITES
from pdd_operator.controller.status import RoleObservation, fold_status, preflight_results
from pdd_operator.render.workloads import Owner, child_name, render_children, router_endpoint, selector_labels

log = logging.getLogger(__name__)

_locks: dict[tuple[str, str], threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock(namespace: str, name: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault((namespace, name), threading.Lock())


def now_rfc3339() -> str:
    """Current UTC time as RFC 3339 with seconds precision (``metav1.Time``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def invalid_spec_report(exc: ValidationError) -> CompatReport:
    """Turn a spec that the models refuse into an error report naming each bad field.

    The CRD schema refuses most of these at admission; this covers objects that predate a schema
    change or got in another way, so the operator reports them instead of crashing. The findings
    are :func:`~pdd_operator.api.messages.invalid_spec_findings`, the ones the webhook and
    ``pdd check`` print.
    """
    return CompatReport(version="unknown", findings=invalid_spec_findings(exc))


def load_model_config(kube: Kube, namespace: str, spec: PDDeploymentSpec) -> tuple[dict | None, Finding | None]:
    """Read the model's config.json from ``spec.model.configMapRef``.

    Returns ``(config, None)``, or ``(None, warning)`` when the ConfigMap or the key is missing or
    its text is not a usable config.json (:func:`~pdd_operator.compat.engine.model_config_from_configmap`):
    rules that need it then fall back to the spec fields and the name tables. Never raises for the
    ConfigMap's content; API errors other than 404 propagate (callers retry).
    """
    ref = spec.model.config_map_ref
    if ref is None:
        return None, None
    return model_config_from_configmap(kube.config_map_value(namespace, ref.name, ref.key), ref.name, ref.key)


def last_applied_spec(kube: Kube, namespace: str, name: str, deployments: dict[str, dict | None]) -> PDDeploymentSpec | None:
    """The spec the children were last rendered from, read from any surviving child's annotation."""
    children = [*deployments.values()] + [kube.get("Service", namespace, child_name(name, r)) for r in ROLES]
    for child in children:
        raw = ((child or {}).get("metadata") or {}).get("annotations", {}).get(ANNOTATION_APPLIED_SPEC)
        if not raw:
            continue
        try:
            return PDDeploymentSpec.model_validate(json.loads(raw))
        except (ValueError, ValidationError):
            continue
    return None


@dataclass(frozen=True)
class Outcome:
    """What one reconcile did: child applies sent, whether status was written, and the verdict."""

    applied: int = 0
    status_written: bool = False
    compatible: bool = True
    found: bool = True


def reconcile(kube: Kube, namespace: str, name: str) -> Outcome:
    """Bring one PDDeployment's children and status in line with its spec.

    Compatible spec: render the children and apply those that differ from the live objects.
    Incompatible spec: touch no child (they keep running the last compatible generation) and report
    why. Either way the status is recomputed and written only when it differs. Raises the client's
    ``ApiException`` on API errors (callers retry); never raises for a bad spec.
    """
    with _lock(namespace, name):
        obj = kube.get_pdd(namespace, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            RECONCILES.labels("gone").inc()
            return Outcome(found=False)
        meta = obj["metadata"]
        generation = int(meta.get("generation") or 1)
        previous = obj.get("status") or {}
        applied_generation = previous.get("appliedGeneration")
        model_config = None
        try:
            spec = PDDeploymentSpec.model_validate(obj.get("spec") or {})
        except ValidationError as exc:
            spec, report = None, invalid_spec_report(exc)
        else:
            model_config, problem = load_model_config(kube, namespace, spec)
            report = evaluate(spec, model_config=model_config)
            if problem is not None:
                report = CompatReport(report.version, [*report.findings, problem], report.not_evaluated)

        applied = 0
        deployments = {role: kube.get("Deployment", namespace, child_name(name, role)) for role in ROLES}
        if spec is not None and report.compatible:
            owner = Owner(name=name, namespace=namespace, uid=meta["uid"], generation=generation)
            for child in render_children(owner, spec, model_config):
                applied += kube.apply(child)
            applied_generation = generation
            target = spec
        else:
            # Keep the children on the last compatible spec: restore deleted ones, revert drift.
            target = last_applied_spec(kube, namespace, name, deployments)
            if target is not None and applied_generation is not None:
                owner = Owner(name=name, namespace=namespace, uid=meta["uid"], generation=applied_generation)
                for child in render_children(owner, target, model_config):
                    applied += kube.apply(child)
        if applied:
            deployments = {role: kube.get("Deployment", namespace, child_name(name, role)) for role in ROLES}
        desired = spec or target
        pods = {role: kube.list_pods(namespace, selector_labels(name, role)) for role in ROLES}
        observations = {
            role: RoleObservation.from_deployment(
                deployments[role], pods[role], desired=desired.role(role).replicas if desired is not None else 0,
            )
            for role in ROLES
        }
        preflight = None
        if desired is not None and desired.network.preflight.policy != "Disabled":
            preflight = preflight_results([p for role in ROLES for p in pods[role]])
        status = fold_status(
            generation=generation, previous=previous, report=report,
            applied_generation=applied_generation, observations=observations, now=now_rfc3339(),
            preflight=preflight,
            endpoint=(router_endpoint(Owner(name=name, namespace=namespace), desired)
                      if desired is not None and desired.router.replicas > 0 else None),
        )
        written = False
        if status != previous:
            removed = {k: None for k in previous if k not in status}
            kube.patch_status(namespace, name, {**status, **removed}, meta.get("resourceVersion"))
            written = True
            log.info(
                "status of %s/%s: %s", namespace, name,
                ", ".join(f"{c['type']}={c['status']}" for c in status["conditions"]),
            )
        CHILD_APPLIES.inc(applied)
        STATUS_WRITES.inc(int(written))
        if not report.compatible:
            RECONCILES.labels("incompatible").inc()
        elif applied or written:
            RECONCILES.labels("changed").inc()
        else:
            RECONCILES.labels("unchanged").inc()
        return Outcome(applied=applied, status_written=written, compatible=report.compatible)
