"""Fold what the operator observed into a PDDeployment status (pure functions, no cluster access).

Conditions follow the Kubernetes API conventions: ``lastTransitionTime`` changes only when a
condition's status changes, ``reason`` is CamelCase, ``observedGeneration`` names the spec generation
the condition was computed for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pdd_operator.api.constants import ROLES
from pdd_operator.api.status import Finding
from pdd_operator.compat.engine import CompatReport


@dataclass(frozen=True)
class RoleObservation:
    """What a role's Deployment says, reduced to what status needs.

    Attributes:
        exists: whether the Deployment exists.
        replicas: desired pods (``spec.replicas``).
        ready: ``status.readyReplicas``.
        updated: ``status.updatedReplicas`` (pods on the current template).
        current: ``status.replicas`` (all pods, old and new).
        observed: whether the Deployment controller has seen its latest spec.
        deadline_exceeded: the Deployment's Progressing condition says ProgressDeadlineExceeded.
        replica_failure: message of a ReplicaFailure condition (e.g. quota), or ``""``.
        unschedulable: the scheduler's message for a pod of the role it cannot place, or ``""``.
    """

    exists: bool = False
    replicas: int = 0
    ready: int = 0
    updated: int = 0
    current: int = 0
    observed: bool = False
    deadline_exceeded: bool = False
    replica_failure: str = ""
    unschedulable: str = ""

    @classmethod
    def from_deployment(cls, dep: dict | None, pods: list[dict] | None = None, desired: int = 0) -> RoleObservation:
        """Build from a Deployment object (as returned by the API, camelCase) or ``None``.

        ``pods`` are the role's pods (for the scheduler's verdict); ``desired`` is the replica count
        the spec asks for, reported when the Deployment does not exist.
        """
        unschedulable = ""
        for pod in pods or []:
            for cond in (pod.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
                    unschedulable = unschedulable or cond.get("message", "Unschedulable")
        if not dep:
            return cls(replicas=desired)
        spec, status = dep.get("spec") or {}, dep.get("status") or {}
        conditions = {c.get("type"): c for c in status.get("conditions") or []}
        progressing = conditions.get("Progressing") or {}
        failure = conditions.get("ReplicaFailure") or {}
        return cls(
            exists=True,
            replicas=int(spec.get("replicas", 1)),
            ready=int(status.get("readyReplicas") or 0),
            updated=int(status.get("updatedReplicas") or 0),
            current=int(status.get("replicas") or 0),
            observed=int(status.get("observedGeneration") or 0) >= int(dep["metadata"].get("generation") or 0),
            deadline_exceeded=progressing.get("reason") == "ProgressDeadlineExceeded",
            replica_failure=failure.get("message", "") if failure.get("status") == "True" else "",
            unschedulable=unschedulable,
        )

    @property
    def rolled_out(self) -> bool:
        """All desired pods are on the current template, ready, and no old pods remain."""
        return (
            self.exists and self.observed and self.updated == self.replicas
            and self.ready == self.replicas and self.current == self.replicas
        )


#: Preflight reasons from worst to best (pdd_operator.preflight); the worst one seen is reported.
_PREFLIGHT_ORDER = ["NIXLUnavailable", "GPURegistrationFailed", "NoRDMADevice", "MemlockTooLow", "TCPFallback",
                    "PreflightUnavailable", "RDMAReady"]


def preflight_results(pods: list[dict]) -> list[tuple[str, dict]]:
    """``(pod name, verdict)`` for every pod whose preflight init container has finished with a JSON message."""
    out = []
    for pod in pods:
        for st in (pod.get("status") or {}).get("initContainerStatuses") or []:
            if st.get("name") != "preflight":
                continue
            for key in ("state", "lastState"):
                msg = ((st.get(key) or {}).get("terminated") or {}).get("message")
                if msg:
                    try:
                        verdict = json.loads(msg)
                    except ValueError:
                        continue
                    if isinstance(verdict, dict) and "reason" in verdict:
                        out.append((pod["metadata"]["name"], verdict))
                        break
    return out


def kv_transport_condition(results: list[tuple[str, dict]], generation: int) -> dict:
    """The ``KVTransportReady`` condition from the preflight verdicts of all engine pods."""
    if not results:
        return condition("KVTransportReady", None, "NoPreflightResult",
                         "No engine pod has reported a preflight result yet.", generation)
    bad = [(pod, v) for pod, v in results if not v.get("ready")]
    if not bad:
        transports = sorted({v.get("transport", "?") for _, v in results})
        return condition("KVTransportReady", True, "RDMAReady",
                         f"{len(results)} pod(s) verified KV transport over {', '.join(transports)}.", generation)
    rank = {r: i for i, r in enumerate(_PREFLIGHT_ORDER)}
    pod, worst = min(bad, key=lambda pv: rank.get(pv[1]["reason"], 0))
    return condition("KVTransportReady", False, str(worst["reason"]),
                     f"{pod}: {worst.get('message', '')} ({len(bad)} of {len(results)} pod(s) not ready)", generation)


def role_status(obs: RoleObservation) -> dict:
    """Status of one role (``status.prefill`` / ``status.decode``)."""
    return {
        "replicas": obs.replicas,
        "readyReplicas": obs.ready,
        "updatedReplicas": obs.updated,
        "ready": f"{obs.ready}/{obs.replicas}",
    }


def _findings_text(findings: list[Finding]) -> str:
    return " ".join(f"[{f.rule}] {f.message} Fix: {f.fix}" for f in findings)


def condition(type_: str, status: bool | None, reason: str, message: str, generation: int | None) -> dict:
    """A condition dict without ``lastTransitionTime`` (filled in by :func:`merge_conditions`)."""
    value = "Unknown" if status is None else ("True" if status else "False")
    out = {"type": type_, "status": value, "reason": reason, "message": message}
    if generation is not None:
        out["observedGeneration"] = generation
    return out


def merge_conditions(previous: list[dict], new: list[dict], now: str) -> list[dict]:
    """Give each new condition its ``lastTransitionTime``: the previous one's if the status is unchanged,
    else ``now`` (RFC 3339)."""
    before = {c.get("type"): c for c in previous or []}
    out = []
    for cond in new:
        old = before.get(cond["type"])
        if old is not None and old.get("status") == cond["status"] and old.get("lastTransitionTime"):
            ltt = old["lastTransitionTime"]
        else:
            ltt = now
        out.append({**cond, "lastTransitionTime": ltt})
    return out


def fold_status(
    *,
    generation: int,
    previous: dict,
    report: CompatReport,
    applied_generation: int | None,
    observations: dict[str, RoleObservation],
    now: str,
    preflight: list[tuple[str, dict]] | None = None,
    endpoint: str | None = None,
    apply_errors: list[str] | None = None,
) -> dict:
    """Return the whole new status of a PDDeployment.

    Args:
        generation: ``metadata.generation`` of the PDDeployment.
        previous: its current ``status`` (``{}`` if none), for transition times.
        report: compatibility report of the current spec.
        applied_generation: generation the children were last rendered from (``None``: never).
        observations: per role (``prefill``, ``decode``) what its Deployment says.
        now: current time, RFC 3339, used for conditions that transition.
        preflight: preflight verdicts of the engine pods (``None``: preflight disabled, no condition).
        endpoint: URL of the router's Service (``status.endpoint``); ``None``: no router.
        apply_errors: children (or inputs) the apiserver refused this time, one
            ``<Kind> <name>: <code> <reason>: <message>`` each: Degraded=True, reason ApplyFailed.

    Ready is True only when the current spec was applied and every role is rolled out with at least
    one ready pod. An incompatible spec makes Compatible=False and Degraded=True; the children keep
    running the last compatible generation, which the Degraded message names.
    """
    compatible = report.compatible
    applied_current = compatible and applied_generation == generation
    missing = [r for r in ROLES if not observations[r].exists]
    rolled_out = all(observations[r].rolled_out for r in ROLES)
    scaled_to_zero = any(observations[r].exists and observations[r].replicas == 0 for r in ROLES)
    stuck = [r for r in ROLES if observations[r].deadline_exceeded]
    failures = [f"{r}: {observations[r].replica_failure}" for r in ROLES if observations[r].replica_failure]
    unschedulable = [f"{r}: {observations[r].unschedulable}" for r in ROLES if observations[r].unschedulable]

    if compatible:
        warn = report.warnings
        compat = condition(
            "Compatible", True, "CompatibleWithWarnings" if warn else "Compatible",
            _findings_text(warn) if warn else f"No compatibility rule is violated for vLLM {report.version}.",
            generation,
        )
    else:
        compat = condition("Compatible", False, "Incompatible", _findings_text(report.errors), generation)

    if not compatible:
        if applied_generation is None:
            keeping = "No child objects were created."
        elif missing:
            keeping = (f"Generation {applied_generation}, the last compatible spec, cannot be restored: "
                       f"Deployment of {', '.join(missing)} is missing.")
        else:
            keeping = f"Children keep running generation {applied_generation}, the last compatible spec."
        degraded = condition(
            "Degraded", True, "IncompatibleSpec",
            f"Generation {generation} breaks {len(report.errors)} compatibility rule(s) and was not applied. {keeping}",
            generation,
        )
    elif apply_errors:
        degraded = condition("Degraded", True, "ApplyFailed", "; ".join(apply_errors), generation)
    elif missing:
        degraded = condition("Degraded", True, "ChildMissing", f"Deployment of {', '.join(missing)} is missing.", generation)
    elif failures:
        degraded = condition("Degraded", True, "ReplicaFailure", "; ".join(failures), generation)
    elif unschedulable:
        degraded = condition("Degraded", True, "Unschedulable", "Pods cannot be scheduled: " + "; ".join(unschedulable),
                             generation)
    elif stuck:
        degraded = condition(
            "Degraded", True, "ProgressDeadlineExceeded",
            f"Rollout of {', '.join(stuck)} made no progress within its deadline.", generation,
        )
    else:
        degraded = condition("Degraded", False, "AsExpected", "", generation)

    def _waiting() -> str:
        return "; ".join(
            f"{r}: {observations[r].ready}/{observations[r].replicas} ready, "
            f"{observations[r].updated} updated" for r in ROLES
        )

    if not compatible:
        progressing = condition("Progressing", False, "Incompatible", "The current spec is not applied.", generation)
    elif not applied_current or not rolled_out:
        progressing = condition("Progressing", True, "RollingOut", _waiting(), generation)
    else:
        progressing = condition("Progressing", False, "RolloutComplete", "All replicas are updated and ready.", generation)

    if not compatible:
        ready = condition("Ready", False, "Incompatible", "The current spec breaks compatibility rules.", generation)
    elif missing:
        ready = condition("Ready", False, "ChildMissing", f"Deployment of {', '.join(missing)} is missing.", generation)
    elif scaled_to_zero:
        ready = condition("Ready", False, "ScaledToZero", "A role has 0 replicas.", generation)
    elif applied_current and rolled_out:
        ready = condition("Ready", True, "AllReplicasReady", _waiting(), generation)
    else:
        ready = condition("Ready", False, "ReplicasNotReady", _waiting(), generation)

    new = [ready, progressing, degraded, compat]
    if preflight is not None:
        new.append(kv_transport_condition(preflight, generation))
    conditions = merge_conditions(previous.get("conditions") or [], new, now)
    out = {
        "observedGeneration": generation,
        "appliedGeneration": applied_generation,
        "vllmVersion": report.version,
        "prefill": role_status(observations["prefill"]),
        "decode": role_status(observations["decode"]),
        "compatibility": [f.wire() for f in report.findings],
        "conditions": conditions,
        "endpoint": endpoint,
    }
    return {k: v for k, v in out.items() if v is not None}
