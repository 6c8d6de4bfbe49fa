"""What one reconcile applies and what it records: a pure planner, separate from the executor
(:func:`pdd_operator.controller.reconcile.reconcile`, which reads, applies and writes status).

Given what was read (the PDDeployment's generation, its parsed spec and report, the last good spec
kept in ``status.appliedSpec``), :func:`plan_children` decides:

- which children to apply: the current spec's when it is compatible; else the last good spec's, so
  deleted children come back and drift is reverted while the current spec is refused; else none;
- which revision slot of each role runs that spec and which roles of the other slot, still serving the
  previous compat hash, are scaled to 0 now (:func:`pdd_operator.controller.rollout.plan_rollout`: prefill
  first, decode once that slot's prefill has no pods left);
- which spec the children run afterwards (status reports its replicas and endpoint);
- what ``status.appliedGeneration`` and ``status.appliedSpec`` become (:meth:`Plan.recorded`): they
  advance to the current generation only when every child of a compatible spec was applied.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pydantic import ValidationError

from pdd_operator.api.constants import ROLES, SLOTS
from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.api.status import decode_spec, encode_spec
from pdd_operator.compat.engine import CompatReport
from pdd_operator.controller.rollout import RolloutStep, observe, plan_rollout, scaled_to_zero, slot_pods
from pdd_operator.render.engine import compat_hash
from pdd_operator.render.workloads import Owner, render_children


@dataclass(frozen=True)
class Plan:
    """The decision of :func:`plan_children`.

    Attributes:
        children: objects to apply, in order (``[]``: touch nothing).
        target: the spec the children run after this reconcile, or ``None`` when there is none.
        target_generation: the generation rendered into the children (``None``: never applied).
        advances: whether a fully successful apply makes the current spec the last good one.
        generation: the PDDeployment's current generation.
        spec: the current spec when it advances (what ``status.appliedSpec`` then keeps).
        previous_applied: ``status.appliedSpec`` as read (kept when the plan does not advance).
        step: the revision slots' step (:class:`~pdd_operator.controller.rollout.RolloutStep`).
    """

    children: list[dict]
    target: PDDeploymentSpec | None
    target_generation: int | None
    advances: bool
    generation: int
    spec: PDDeploymentSpec | None = None
    previous_applied: dict | None = field(default=None, repr=False)
    step: RolloutStep = RolloutStep(SLOTS[0])

    def recorded(self, applied_ok: bool) -> tuple[int | None, dict | None]:
        """``(status.appliedGeneration, status.appliedSpec)`` after the apply (``applied_ok``: every
        child was accepted)."""
        if self.advances and applied_ok and self.spec is not None:
            return self.generation, encode_spec(self.spec.wire(), self.generation)
        return self.target_generation, self.previous_applied


def last_good_spec(previous_status: dict, legacy_annotations: list[str] = ()) -> PDDeploymentSpec | None:
    """The last compatible spec: ``status.appliedSpec``, else the first readable legacy
    ``pdd-operator.dev/applied-spec`` annotation (children written by releases before
    ``status.appliedSpec``). ``None`` when neither is readable (a tampered or truncated copy is not used)."""
    applied = previous_status.get("appliedSpec")
    if applied:
        try:
            return PDDeploymentSpec.model_validate(decode_spec(applied))
        except (ValueError, ValidationError):
            pass
    for raw in legacy_annotations:
        try:
            return PDDeploymentSpec.model_validate(json.loads(raw))
        except (ValueError, ValidationError):
            continue
    return None


def slot_children(owner: Owner, spec: PDDeploymentSpec, model_config: dict | None,
                  deployments: Mapping[str, Mapping[str, dict | None]],
                  pods: Mapping[str, list[dict]] | None = None,
                  render: Callable[..., list[dict]] = render_children) -> tuple[list[dict], RolloutStep]:
    """The children that run ``spec`` and the step that places them: ``render`` (:func:`render_children`,
    or the reconcile's :class:`~pdd_operator.controller.render_memo.RenderMemo` renderer, which gives
    ``[]`` when they are all in place) into the active slot, then the Deployments of the previous
    slot that the step retires (``step.retire``) scaled to 0, where they still want pods.
    ``deployments[slot][role]`` is the live Deployment or ``None``; ``pods[role]`` the role's pods of
    both slots, Terminating ones included (``None``: none)."""
    pods = pods or {}
    slots = {s: {r: observe((deployments.get(s) or {}).get(r), slot_pods(pods.get(r) or [], s)) for r in ROLES}
             for s in SLOTS}
    step = plan_rollout(compat_hash(spec), {r: spec.role(r).replicas for r in ROLES}, slots)
    children = render(owner, spec, model_config, slot=step.active)
    if step.previous is not None:
        children += [scaled_to_zero(live) for r in step.retire
                     if (live := deployments[step.previous].get(r)) and slots[step.previous][r].replicas > 0]
    return children, step


def plan_children(*, name: str, namespace: str, uid: str | None, generation: int, spec: PDDeploymentSpec | None,
                  report: CompatReport, previous_status: dict, last_good: PDDeploymentSpec | None,
                  model_config: dict | None = None,
                  deployments: Mapping[str, Mapping[str, dict | None]] | None = None,
                  pods: Mapping[str, list[dict]] | None = None,
                  render: Callable[..., list[dict]] = render_children) -> Plan:
    """Decide what to apply (see the module docstring). ``last_good`` is :func:`last_good_spec`,
    needed only when the current spec is not applied; ``deployments[slot][role]`` the live engine
    Deployments (``None``: none exist); ``pods[role]`` the engine pods of each role, both slots,
    Terminating ones included (``None``: none); ``render`` renders the children
    (:func:`slot_children`). Never raises for a bad spec."""
    applied_generation = previous_status.get("appliedGeneration")
    previous_applied = previous_status.get("appliedSpec")
    live = deployments or {}
    if spec is not None and report.compatible:
        owner = Owner(name=name, namespace=namespace, uid=uid, generation=generation)
        children, step = slot_children(owner, spec, model_config, live, pods, render)
        return Plan(children, spec, applied_generation, True, generation, spec, previous_applied, step)
    if last_good is not None and applied_generation is not None:
        owner = Owner(name=name, namespace=namespace, uid=uid, generation=applied_generation)
        children, step = slot_children(owner, last_good, model_config, live, pods, render)
        return Plan(children, last_good, applied_generation, False, generation, None, previous_applied, step)
    return Plan([], last_good, applied_generation, False, generation, None, previous_applied)


def _needs(child: dict, other: dict) -> bool:
    """Whether applying ``child`` must wait until ``other`` (in the same plan) was applied:

    - a RoleBinding needs the Role its ``roleRef`` names: without ``bind`` on it (the operator's RBAC
      has none, controller/rbac.py) the apiserver creates a binding only after checking that the
      creator holds every rule of the Role (no escalation), which it cannot do for a Role that does not
      exist yet (kubernetes ``pkg/registry/rbac/rolebinding/policybased/storage.go``,
      ``rbacregistryvalidation.ConfirmNoEscalation``);
    - a Deployment needs the ServiceAccount its pod template runs as (the ServiceAccount admission
      plugin refuses pods of an account that does not exist, and the ReplicaSet controller then backs
      off: ``plugin/pkg/admission/serviceaccount/admission.go``).

    A Deployment does not wait for the RoleBinding that grants its account: the binding is sent in the
    same wave, and the pods' first request comes seconds later (the Deployment and ReplicaSet
    controllers, the scheduler and a container start lie between); a router whose first list is
    refused all the same retries it after 1 s (``router/discovery.py``). So a new PDDeployment's
    children take 2 round trips instead of 3.
    """
    kind, okind = child.get("kind"), other.get("kind")
    meta, ometa = child.get("metadata") or {}, other.get("metadata") or {}
    if meta.get("namespace") != ometa.get("namespace"):
        return False
    if kind == "RoleBinding" and okind == "Role":
        ref = child.get("roleRef") or {}
        return ref.get("kind") == "Role" and ref.get("name") == ometa.get("name")
    if kind != "Deployment":
        return False
    account = (((child.get("spec") or {}).get("template") or {}).get("spec") or {}).get("serviceAccountName")
    if not account:
        return False
    return okind == "ServiceAccount" and ometa.get("name") == account


def apply_dependencies(children: list[dict]) -> list[set[int]]:
    """For each of ``children`` (a :class:`Plan`'s), the indexes of the others it must wait for
    (:func:`_needs`): ``[set(), ...]`` with one set per child; a child never waits for itself."""
    return [{j for j, other in enumerate(children) if j != i and _needs(child, other)}
            for i, child in enumerate(children)]


def apply_waves(children: list[dict]) -> list[list[int]]:
    """The order in which ``children`` (a :class:`Plan`'s) may be applied: waves of indexes into
    ``children``, each wave's applies independent of one another (sent concurrently), every child in
    the wave after the last of those it needs (:func:`_needs`), in plan order within a wave. A
    PDDeployment's children make 2 waves: Services, engine Deployments, the router's ServiceAccount,
    Role and Service; the RoleBinding and the router's Deployment. ``[]`` for no children."""
    needs = apply_dependencies(children)
    level: dict[int, int] = {}

    def depth(i: int, seen: frozenset = frozenset()) -> int:
        if i not in level:
            level[i] = 1 + max((depth(j, seen | {i}) for j in needs[i] if j not in seen), default=-1)
        return level[i]

    waves: list[list[int]] = []
    for i in range(len(children)):
        d = depth(i)
        while len(waves) <= d:
            waves.append([])
        waves[d].append(i)
    return [wave for wave in waves if wave]
