"""Fold what the operator observed into a PDDeployment status (pure functions, no cluster access).

Conditions follow the Kubernetes API conventions: ``lastTransitionTime`` changes only when a
condition's status changes, ``reason`` is CamelCase, ``observedGeneration`` names the spec generation
the condition was computed for. Each condition is one small function of :class:`Observed` returning
the :class:`~pdd_operator.api.status.Condition` model; :func:`fold_status` assembles the
:class:`~pdd_operator.api.status.PDDeploymentStatus` model and returns its wire form.

``Reconciling`` and ``Stalled`` are kstatus's abnormal-true conditions (sigs.k8s.io/cli-utils
``pkg/kstatus``), so Flux, kpt and ``kstatus``-based tools read a rolling-out PDDeployment as
InProgress and a refused one as Failed instead of waiting for a timeout.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from pdd_operator.api.constants import ROLES, other_role
from pdd_operator.api.messages import SPEC_INVALID_RULE, finding_text
from pdd_operator.api.status import Condition, Finding, PDDeploymentStatus, RoleStatus
from pdd_operator.compat.engine import CompatReport
from pdd_operator.controller.pod_failures import ROUTER, pod_problems, unschedulable, with_fix
from pdd_operator.controller.rollout import deployment_status_view, terminating


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
        unschedulable: ``pod P: <scheduler message>`` for a pod of the role the scheduler cannot place
            (:func:`~pdd_operator.controller.pod_failures.unschedulable`), or ``""``.
        failing: why a container of a pod of the role cannot run
            (:func:`~pdd_operator.controller.pod_failures.pod_problems`), or ``""``.
        previous: pods of the previous revision slot that still run while the active one rolls out
            or after it was scaled to 0 (a coordinated rollout, :mod:`pdd_operator.controller.rollout`),
            Terminating ones included; counted in ``current``.
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
    previous: int = 0
    failing: str = ""

    @classmethod
    def from_deployment(cls, dep: dict | None, pods: list[dict] | None = None, desired: int = 0) -> RoleObservation:
        """Build from a Deployment object (as returned by the API, camelCase) or ``None``.

        ``pods`` are the pods of the role, or of the router (their cache views: the scheduler's verdict,
        containers that cannot run); ``desired`` is the replica count the spec asks for, reported when
        the Deployment does not exist.
        """
        pending = unschedulable(pods or [])
        problems = pod_problems(pods or [])
        failing = problems[0] if problems else ""
        if not dep:
            return cls(replicas=desired)
        spec, status = dep.get("spec") or {}, deployment_status_view(dep)  # the only read of its status
        return cls(
            exists=True,
            replicas=int(spec.get("replicas", 1)),
            ready=status["readyReplicas"],
            updated=status["updatedReplicas"],
            current=status["replicas"],
            observed=status["observedGeneration"] >= int(dep["metadata"].get("generation") or 0),
            deadline_exceeded=status["deadlineExceeded"],
            replica_failure=status["replicaFailure"],
            unschedulable=pending, failing=failing,
        )

    def with_previous(self, dep: dict | None, pods: list[dict] | None = None) -> RoleObservation:
        """This observation of the active slot's Deployment plus the previous slot's Deployment ``dep``
        (or ``None``) and that slot's pods ``pods`` (:func:`~pdd_operator.controller.rollout.slot_pods`):
        its ready pods count as ready, its pods as current (so the role is not rolled out while they
        run) and as ``previous``; its ReplicaFailure is reported too.

        Its pods are those its Deployment's ``status.replicas`` counts, or the pod list's pods that are
        not Terminating where the list shows more (the status lags behind), plus the Terminating ones,
        which ``status.replicas`` never counts (:func:`~pdd_operator.controller.rollout.terminating`): a
        slot scaled to 0 whose pods are still draining is not gone yet."""
        pods = pods or []
        stopping = sum(1 for p in pods if terminating(p))
        if not dep and not stopping:
            return self
        other = RoleObservation.from_deployment(dep)
        count = max(other.current, len(pods) - stopping) + stopping
        return RoleObservation(
            exists=self.exists, replicas=self.replicas, ready=self.ready + other.ready, updated=self.updated,
            current=self.current + count, observed=self.observed and (other.observed or not dep),
            deadline_exceeded=self.deadline_exceeded, replica_failure=self.replica_failure or other.replica_failure,
            unschedulable=self.unschedulable, previous=self.previous + count, failing=self.failing,
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


@dataclass(frozen=True)
class Observed:
    """Everything one status is folded from, and the facts the conditions share (defined once here).

    Attributes:
        generation: ``metadata.generation`` of the PDDeployment.
        report: compatibility report of the current spec (for a spec the API models refuse, the
            :data:`~pdd_operator.api.messages.SPEC_INVALID_RULE` findings of
            :func:`pdd_operator.controller.reconcile.invalid_spec_report`).
        applied_generation: generation the children were last rendered from (``None``: never).
        observations: per role (``prefill``, ``decode``) what its Deployment says.
        now: current time, RFC 3339; the ``lastTransitionTime`` of a condition that transitions.
        apply_errors: what the apiserver refused this time (children or inputs), one line each.
        fallback: ``spec.router.fallback`` of the router the children run (``None``: no router).
        served_before: the stored status already says the pair served (``Ready=True``) or that it lost a
            role (``Degraded`` ``PrefillUnavailable``/``DecodeUnavailable``): a role that has no Ready pod
            then is lost, not still starting (:func:`served_before`).
        router: what the router's Deployment says (``None``: the children run no router). The router is
            the deployment's one endpoint (``status.endpoint``), so the deployment is rolled out, and
            Ready, only once it is too.
    """

    generation: int
    report: CompatReport
    applied_generation: int | None
    observations: Mapping[str, RoleObservation]
    now: str
    apply_errors: tuple[str, ...] = ()
    fallback: bool | None = None
    served_before: bool = False
    router: RoleObservation | None = None

    @property
    def compatible(self) -> bool:
        """No error finding: the current spec may be applied."""
        return self.report.compatible

    @property
    def spec_invalid(self) -> bool:
        """The API models refuse the current spec (its findings are ``spec-invalid`` errors)."""
        return any(f.rule == SPEC_INVALID_RULE for f in self.report.errors)

    @property
    def applied_current(self) -> bool:
        """The children are rendered from the current generation."""
        return self.compatible and self.applied_generation == self.generation

    @property
    def missing(self) -> list[str]:
        """Roles whose Deployment does not exist."""
        return [r for r in ROLES if not self.observations[r].exists]

    @property
    def rolled_out(self) -> bool:
        """Every role's Deployment, and the router's where there is one, is rolled out
        (:attr:`RoleObservation.rolled_out`)."""
        return not self.not_rolled_out

    @property
    def scaled_to_zero(self) -> bool:
        """A role's Deployment exists with 0 replicas."""
        return any(self.observations[r].exists and self.observations[r].replicas == 0 for r in ROLES)

    @property
    def unavailable(self) -> list[str]:
        """Roles that should run pods but have none Ready (either slot) while the other role has one,
        once the pair has served (:attr:`served_before`): the router serves the other role alone
        (fallback) or fails requests. A role still starting for the first time is progress, not a loss."""
        if not self.served_before:
            return []
        obs = self.observations
        return [r for r in ROLES if obs[r].exists and obs[r].replicas > 0 and obs[r].ready == 0
                and obs[other_role(r)].ready > 0]

    @property
    def parts(self) -> dict[str, RoleObservation]:
        """What runs pods, by name: ``prefill``, ``decode`` and, where the children run one, ``router``.
        Each pod failure is told the same way for each of them (:func:`~pdd_operator.controller.pod_failures.with_fix`)."""
        seen = {r: self.observations[r] for r in ROLES}
        if self.router is not None:
            seen[ROUTER] = self.router
        return seen

    @property
    def failing(self) -> list[str]:
        """``part: pod P container C: Reason: message (fix: spec...)`` for each part (:attr:`parts`) with a
        container that cannot run."""
        return [with_fix(p, o.failing) for p, o in self.parts.items() if o.failing]

    @property
    def stuck(self) -> list[str]:
        """Parts (:attr:`parts`) whose Deployment reports ProgressDeadlineExceeded."""
        return [p for p, o in self.parts.items() if o.deadline_exceeded]

    @property
    def failures(self) -> list[str]:
        """``part: message (fix: spec...)`` of each ReplicaFailure (quota, admission: a missing
        ServiceAccount) of a part (:attr:`parts`)."""
        return [with_fix(p, o.replica_failure) for p, o in self.parts.items() if o.replica_failure]

    @property
    def unschedulable(self) -> list[str]:
        """``part: pod P: scheduler message (fix: spec...)`` for each part (:attr:`parts`) with a pod the
        scheduler cannot place."""
        return [with_fix(p, o.unschedulable) for p, o in self.parts.items() if o.unschedulable]

    @property
    def not_rolled_out(self) -> list[str]:
        """Parts (:attr:`parts`) not rolled out yet (:attr:`RoleObservation.rolled_out`): what ``Ready`` waits for."""
        return [p for p, o in self.parts.items() if not o.rolled_out]

    @property
    def stalled_reason(self) -> str | None:
        """Why the operator cannot make progress without a spec change, or ``None``.

        ``InvalidSpec`` (the API models refuse the spec), ``Incompatible`` (compatibility errors), or
        ``ApplyFailed`` (the apiserver refused a child or an input: a retry alone does not help), or
        ``ProgressDeadlineExceeded`` (a role's Deployment says so).
        """
        if self.spec_invalid:
            return "InvalidSpec"
        if not self.compatible:
            return "Incompatible"
        if self.apply_errors:
            return "ApplyFailed"
        if self.stuck:
            return "ProgressDeadlineExceeded"
        return None

    def waiting(self) -> str:
        """``prefill: 1/2 ready, 2 updated; decode: ...; router: 1/1 ready, 1 updated`` for the conditions'
        messages (the router only where there is one)."""
        return "; ".join(
            f"{r}: {o.ready}/{o.replicas} ready, {o.updated} updated"
            + (f", {o.previous} of the previous revision" if o.previous else "")
            for r, o in self.parts.items()
        )


def _condition(type_: str, status: bool | None, reason: str, message: str, generation: int | None,
               now: str) -> Condition:
    """A :class:`Condition` with ``lastTransitionTime`` ``now`` (:func:`merge_conditions` keeps the old one)."""
    value = "Unknown" if status is None else ("True" if status else "False")
    return Condition(type=type_, status=value, reason=reason, message=message, observed_generation=generation,
                     last_transition_time=now)


def findings_text(findings: list[Finding]) -> str:
    """Findings in a condition message: each :func:`~pdd_operator.api.messages.finding_text`, space-separated."""
    return " ".join(finding_text(f) for f in findings)


def kv_transport_condition(results: list[tuple[str, dict]], generation: int, now: str) -> Condition:
    """The ``KVTransportReady`` condition from the preflight verdicts of all engine pods.

    ``results`` as :func:`preflight_results` returns them. Unknown (``NoPreflightResult``) until a pod
    reported; True when every pod is ready; else False with the worst reason of
    :data:`_PREFLIGHT_ORDER` and the pod that reported it.
    """
    if not results:
        return _condition("KVTransportReady", None, "NoPreflightResult",
                          "No engine pod has reported a preflight result yet.", generation, now)
    bad = [(pod, v) for pod, v in results if not v.get("ready")]
    if not bad:
        transports = sorted({str(v.get("transport", "?")) for _, v in results})
        return _condition("KVTransportReady", True, "RDMAReady",
                          f"{len(results)} pod(s) verified KV transport over {', '.join(transports)}.", generation, now)
    rank = {r: i for i, r in enumerate(_PREFLIGHT_ORDER)}
    pod, worst = min(bad, key=lambda pv: rank.get(pv[1]["reason"], 0))
    return _condition("KVTransportReady", False, str(worst["reason"]),
                      f"{pod}: {worst.get('message', '')} ({len(bad)} of {len(results)} pod(s) not ready)",
                      generation, now)


def compatible_condition(o: Observed) -> Condition:
    """``Compatible``: True (``Compatible``, or ``CompatibleWithWarnings`` naming them) when no rule error
    fired; False with every error (``Incompatible``), or every refused field (``InvalidSpec``); Unknown
    (``NotChecked``, with the warnings) when no error fired but rules could not be decided: rules that refuse the
    spec on some vLLM releases because its version is unknown, or rules that need a flag whose value is not in the
    spec (:attr:`CompatReport.opaque <pdd_operator.compat.engine.CompatReport.opaque>`, said first; both in
    :attr:`CompatReport.unchecked <pdd_operator.compat.engine.CompatReport.unchecked>`). The children are applied
    either way: only an error holds them back."""
    report = o.report
    if o.spec_invalid:
        return _condition("Compatible", False, "InvalidSpec", findings_text(report.errors), o.generation, o.now)
    if not o.compatible:
        return _condition("Compatible", False, "Incompatible", findings_text(report.errors), o.generation, o.now)
    if report.unchecked:
        message = " ".join(x for x in (report.opaque, findings_text(report.warnings)) if x)
        return _condition("Compatible", None, "NotChecked", message, o.generation, o.now)
    if report.warnings:
        return _condition("Compatible", True, "CompatibleWithWarnings", findings_text(report.warnings),
                          o.generation, o.now)
    return _condition("Compatible", True, "Compatible",
                      f"No compatibility rule is violated for vLLM {report.version}.", o.generation, o.now)


def degraded_condition(o: Observed) -> Condition:
    """``Degraded``: True when the spec is refused (the children keep the last compatible generation,
    which the message names), a child is missing, a ReplicaFailure, unschedulable pods, a container that
    cannot run (``ContainersFailing``: a missing Secret, an image that cannot be pulled, a crash loop), a rollout
    past its deadline (the last four for the engines' pods and the router's alike, each entry
    :func:`~pdd_operator.controller.pod_failures.with_fix`: the part, the pod, why, the spec fields to fix),
    or, once the pair has served, a role has no Ready pod while the other has (``PrefillUnavailable``,
    ``DecodeUnavailable``: the message says whether the router serves the other role alone); else False
    (``AsExpected``)."""
    if not o.compatible:
        if o.applied_generation is None:
            keeping = "No child objects were created."
        elif o.missing:
            keeping = (f"Generation {o.applied_generation}, the last compatible spec, cannot be restored: "
                       f"Deployment of {', '.join(o.missing)} is missing.")
        else:
            keeping = f"Children keep running generation {o.applied_generation}, the last compatible spec."
        if o.spec_invalid:
            return _condition(
                "Degraded", True, "InvalidSpec",
                f"Generation {o.generation} has {len(o.report.errors)} invalid field(s) and was not applied. {keeping}",
                o.generation, o.now,
            )
        return _condition(
            "Degraded", True, "IncompatibleSpec",
            f"Generation {o.generation} breaks {len(o.report.errors)} compatibility rule(s) and was not applied. "
            f"{keeping}",
            o.generation, o.now,
        )
    if o.apply_errors:
        return _condition("Degraded", True, "ApplyFailed", "; ".join(o.apply_errors), o.generation, o.now)
    if o.missing:
        return _condition("Degraded", True, "ChildMissing", f"Deployment of {', '.join(o.missing)} is missing.",
                          o.generation, o.now)
    if o.failures:
        return _condition("Degraded", True, "ReplicaFailure", "; ".join(o.failures), o.generation, o.now)
    if o.unschedulable:
        return _condition("Degraded", True, "Unschedulable", "Pods cannot be scheduled: " + "; ".join(o.unschedulable),
                          o.generation, o.now)
    if o.unavailable:
        role = o.unavailable[0]
        other = other_role(role)
        if o.fallback:
            serving = (f"the router serves each request with a {other} engine alone (no KV transfer; "
                       "spec.router.fallback) until one is Ready.")
        elif o.fallback is None:
            serving = "there is no router."
        else:
            serving = "spec.router.fallback is off: the router answers 503 until one is Ready."
        why = f" {o.observations[role].failing}." if o.observations[role].failing else ""
        return _condition("Degraded", True, f"{role.capitalize()}Unavailable",
                          f"No {role} pod is Ready; {serving}{why}", o.generation, o.now)
    if o.failing:
        return _condition("Degraded", True, "ContainersFailing",
                          "Containers cannot run: " + "; ".join(o.failing), o.generation, o.now)
    if o.stuck:
        return _condition("Degraded", True, "ProgressDeadlineExceeded",
                          f"Rollout of {', '.join(o.stuck)} made no progress within its deadline.", o.generation, o.now)
    return _condition("Degraded", False, "AsExpected", "", o.generation, o.now)


def progressing_condition(o: Observed) -> Condition:
    """``Progressing``: True (``RollingOut``) until the current spec is applied and rolled out; False
    when it is (``RolloutComplete``) or when the spec is refused (``Incompatible``)."""
    if not o.compatible:
        return _condition("Progressing", False, "Incompatible", "The current spec is not applied.", o.generation, o.now)
    if not o.applied_current or not o.rolled_out:
        return _condition("Progressing", True, "RollingOut", o.waiting(), o.generation, o.now)
    return _condition("Progressing", False, "RolloutComplete", "All replicas are updated and ready.", o.generation, o.now)


def ready_condition(o: Observed) -> Condition:
    """``Ready``: True only when the current spec is applied and every role, and the router where there is
    one, is rolled out with at least one pod; else False with why (``Incompatible``/``InvalidSpec``,
    ``ChildMissing``, ``ScaledToZero``, ``ReplicasNotReady``: ``Waiting for router: prefill: 1/1 ready,
    1 updated; decode: ...; router: 0/1 ready, 0 updated``, naming the parts not rolled out)."""
    if o.spec_invalid:
        return _condition("Ready", False, "InvalidSpec", "The current spec has invalid fields.", o.generation, o.now)
    if not o.compatible:
        return _condition("Ready", False, "Incompatible", "The current spec breaks compatibility rules.",
                          o.generation, o.now)
    if o.missing:
        return _condition("Ready", False, "ChildMissing", f"Deployment of {', '.join(o.missing)} is missing.",
                          o.generation, o.now)
    if o.scaled_to_zero:
        return _condition("Ready", False, "ScaledToZero", "A role has 0 replicas.", o.generation, o.now)
    if o.applied_current and o.rolled_out:
        return _condition("Ready", True, "AllReplicasReady", o.waiting(), o.generation, o.now)
    waiting = o.not_rolled_out
    prefix = f"Waiting for {', '.join(waiting)}: " if waiting else ""
    return _condition("Ready", False, "ReplicasNotReady", prefix + o.waiting(), o.generation, o.now)


def stalled_condition(o: Observed) -> Condition:
    """kstatus ``Stalled`` (abnormal-true; True reads Failed): True when the operator cannot make progress
    without a spec change: ``InvalidSpec``, ``Incompatible`` (the findings follow), ``ApplyFailed`` or
    ``ProgressDeadlineExceeded``; else False (``AsExpected``). Source: sigs.k8s.io/cli-utils
    ``pkg/kstatus/status/generic.go`` (``checkGenericProperties``)."""
    reason = o.stalled_reason
    if reason == "InvalidSpec":
        message = (f"Generation {o.generation} has invalid fields and is not applied until the spec changes: "
                   + findings_text(o.report.errors))
    elif reason == "Incompatible":
        message = (f"Generation {o.generation} cannot work with vLLM {o.report.version} and is not applied until "
                   "the spec changes: " + findings_text(o.report.errors))
    elif reason == "ApplyFailed":
        message = "The apiserver refuses what the spec renders: " + "; ".join(o.apply_errors)
    elif reason == "ProgressDeadlineExceeded":
        message = f"Rollout of {', '.join(o.stuck)} made no progress within its deadline."
    else:
        return _condition("Stalled", False, "AsExpected", "", o.generation, o.now)
    return _condition("Stalled", True, reason, message, o.generation, o.now)


def reconciling_condition(o: Observed) -> Condition:
    """kstatus ``Reconciling`` (abnormal-true; True reads InProgress): True while the current generation
    is not yet applied and rolled out (``Applying``, ``ChildMissing``, ``RollingOut``); False once it is
    (``Reconciled``) and while :func:`stalled_condition` is True (its reason), so the two never
    both hold. Source: sigs.k8s.io/cli-utils ``pkg/kstatus/status/generic.go``."""
    stalled = o.stalled_reason
    if stalled is not None:
        return _condition("Reconciling", False, stalled, "Stalled: no progress without a change; see the Stalled "
                          "condition.", o.generation, o.now)
    if not o.applied_current:
        return _condition("Reconciling", True, "Applying", f"Generation {o.generation} is not applied yet.",
                          o.generation, o.now)
    if o.missing:
        return _condition("Reconciling", True, "ChildMissing", f"Deployment of {', '.join(o.missing)} is missing.",
                          o.generation, o.now)
    if not o.rolled_out:
        return _condition("Reconciling", True, "RollingOut", o.waiting(), o.generation, o.now)
    return _condition("Reconciling", False, "Reconciled", f"Generation {o.generation} is applied and rolled out.",
                      o.generation, o.now)


def role_status(obs: RoleObservation) -> RoleStatus:
    """Status of one role (``status.prefill`` / ``status.decode``)."""
    return RoleStatus(replicas=obs.replicas, ready_replicas=obs.ready, updated_replicas=obs.updated,
                      ready=f"{obs.ready}/{obs.replicas}")


#: ``Degraded`` reasons that say a role was lost after the pair served (:attr:`Observed.unavailable`).
ROLE_LOST_REASONS = frozenset(f"{r.capitalize()}Unavailable" for r in ROLES)


def served_before(previous: dict) -> bool:
    """Whether a stored status (wire form, ``{}`` if none) says the pair has served: ``Ready=True``, or
    ``Degraded=True`` with a :data:`ROLE_LOST_REASONS` reason (a role lost since)."""
    for c in previous.get("conditions") or []:
        if not isinstance(c, dict):
            continue
        if c.get("type") == "Ready" and c.get("status") == "True":
            return True
        if c.get("type") == "Degraded" and c.get("status") == "True" and c.get("reason") in ROLE_LOST_REASONS:
            return True
    return False


def merge_conditions(previous: list[dict], new: list[Condition]) -> list[Condition]:
    """Keep the previous ``lastTransitionTime`` of each new condition whose status is unchanged.

    ``previous``: the conditions of the stored status (wire form); ``new``: conditions stamped with
    the current time. Kubernetes API conventions: the time changes only when the status does.
    """
    before = {c.get("type"): c for c in previous or []}
    out = []
    for cond in new:
        old = before.get(cond.type)
        if old is not None and old.get("status") == cond.status and old.get("lastTransitionTime"):
            cond = cond.model_copy(update={"last_transition_time": old["lastTransitionTime"]})
        out.append(cond)
    return out


def with_reconcile_error(previous: list[dict], generation: int, message: str, now: str) -> list[dict]:
    """The stored conditions (wire form) with ``Degraded`` replaced by True, reason ``ReconcileError``,
    ``message``: what the operator records when a reconcile failed unexpectedly. The other conditions
    stay as they are until the next successful reconcile recomputes everything."""
    degraded = merge_conditions(previous, [_condition("Degraded", True, "ReconcileError", message, generation, now)])
    others = [c for c in previous or [] if c.get("type") != "Degraded"]
    return [*others, *(c.wire() for c in degraded)]


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
    fallback: bool | None = None,
    router: RoleObservation | None = None,
) -> dict:
    """Return the whole new status of a PDDeployment, in wire form (:class:`PDDeploymentStatus` ``.wire()``).

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
        fallback: ``spec.router.fallback`` of the router the children run; ``None``: no router.
        router: what the router's Deployment says (``None``: no router): ``Ready`` waits for it.

    The status is built from the same models the CRD's status schema is generated from
    (:mod:`pdd_operator.api.status`), so it never holds a field the apiserver would prune. Equal
    inputs give an equal result (only transitions take ``now``), so the caller can skip the write.
    Conditions: :func:`ready_condition`, :func:`reconciling_condition`, :func:`stalled_condition`,
    :func:`progressing_condition`, :func:`degraded_condition`, :func:`compatible_condition` and, with
    ``preflight``, :func:`kv_transport_condition`.
    """
    o = Observed(generation=generation, report=report, applied_generation=applied_generation,
                 observations=observations, now=now,
                 apply_errors=tuple(apply_errors or ()), fallback=fallback,
                 served_before=served_before(previous), router=router)
    new = [ready_condition(o), reconciling_condition(o), stalled_condition(o), progressing_condition(o),
           degraded_condition(o), compatible_condition(o)]
    if preflight is not None:
        new.append(kv_transport_condition(preflight, generation, now))
    status = PDDeploymentStatus(
        observed_generation=generation,
        applied_generation=applied_generation,
        vllm_version=report.version,
        prefill=role_status(observations["prefill"]),
        decode=role_status(observations["decode"]),
        compatibility=list(report.findings),
        conditions=merge_conditions(previous.get("conditions") or [], new),
        endpoint=endpoint,
    )
    return status.wire()


#: What a role's status may change by in a :func:`progress_only` update (its desired ``replicas`` may not).
_PROGRESS_COUNTS = ("readyReplicas", "updatedReplicas", "ready")


def progress_only(previous: dict, new: dict) -> bool:
    """Whether the status ``new`` differs from the stored ``previous`` (both wire form) only in a rollout's
    progress: the roles' ready and updated counts and the messages of conditions whose type, status,
    reason and ``observedGeneration`` are unchanged (``prefill: 1/2 ready, 2 updated; ...``). Such an
    update is no transition (:func:`~pdd_operator.controller.events.transitions` posts nothing for it) and
    may wait a moment to be written with the next one (:class:`~pdd_operator.controller.reconcile.StatusPacer`).
    False for equal statuses, for a status never written (``{}``) and for any other difference."""
    if not previous or previous == new or set(previous) != set(new):
        return False
    for key, value in new.items():
        old = previous[key]
        if key in ROLES:
            if not isinstance(old, dict) or not isinstance(value, dict) or set(old) != set(value) or any(
                    old[k] != value[k] for k in value if k not in _PROGRESS_COUNTS):
                return False
        elif key == "conditions":
            def shape(conditions: list) -> list:
                return [{k: v for k, v in c.items() if k != "message"} if isinstance(c, dict) else c
                        for c in conditions or []]
            if shape(old) != shape(value):
                return False
        elif old != value:
            return False
    return True
