"""Coordinated P/D rollouts: which revision slot runs the target spec and when the other one stops (pure).

The router pairs a prefill and a decode pod only when their ``pdd-operator.dev/compat-hash`` labels
are equal (:mod:`pdd_operator.vllm.must_match` defines what the hash covers). A change that keeps the
hash rolls each role's Deployment in place: old and new pods pair with each other. A change of the hash
cannot roll in place without an outage: each role's Deployment would roll on its own, and while one
role has only new pods and the other only old ones no pair exists (measured: 50 of 366 requests failed
with one pod per role). So each role has two revision slots (``a`` and ``b``, one Deployment each,
:func:`~pdd_operator.api.names.deployment_name`), and as LWS's DisaggregatedSet does:

1. the target spec is rendered into the slot that already runs its compat hash (in place), else into
   the slot that serves less (the *new* slot: it starts with the target's replicas at once);
2. the other slot keeps serving, untouched, until the active slot of *every* role is rolled out with
   the target's replicas (all pods updated and Ready, no old ones);
3. only then is it retired, one role after the other (:data:`RETIRE_ORDER`): its prefill is scaled to 0
   (:func:`scaled_to_zero`) at once, its decode only once the slot's prefill has no pods left, Terminating
   ones included (:attr:`SlotRole.gone`). The router sends a request's decode leg to a decode of its
   prefill's compat hash after the prefill leg ran, and a prefill pod keeps running the legs it has
   (its preStop drain) while it is Terminating, no longer offered to new requests; so every prefill leg
   run on the old revision still finds a Ready decode of that revision, whose own drain then covers
   the streams it serves. Scaled to 0 together, the old decode would be Terminating (not Ready, out of
   the router's choice) while legs still ran on the old prefill, and those requests would have no
   decode left (measured: issue 13, "no usable decode endpoint (no_ready)" and the prefill serving
   alone). A slot is never deleted: the operator's RBAC grants no ``delete`` and the next hash change
   reuses it.

The serving slot is never touched before the new pair can serve, so a spec whose pods never become
Ready (an image that does not pull, a quota) leaves the old revision serving; the PDDeployment then
reads ``Progressing``/``Reconciling`` until it is fixed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pdd_operator.api.constants import ANNOTATION_GENERATION, LABEL_COMPAT_HASH, LABEL_SLOT, ROLES, SLOTS

#: The order in which the roles of a retired slot are scaled to 0: a role only once every role before it
#: has no pods left in that slot (module docstring, step 3).
RETIRE_ORDER = ("prefill", "decode")


def pod_slot(pod: Mapping) -> str:
    """The revision slot a pod (API JSON, or its cache view) belongs to: its
    :data:`~pdd_operator.api.constants.LABEL_SLOT` label; slot ``a`` for a pod without one (created by a
    release before the slots, whose Deployment became slot ``a``)."""
    return ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_SLOT) or SLOTS[0]


def terminating(pod: Mapping) -> bool:
    """Whether a pod is Terminating: its ``metadata.deletionTimestamp`` is set. A Deployment's
    ``status.replicas`` no longer counts it (the ReplicaSet controller counts only active pods:
    ``FilterActivePods``, kubernetes ``pkg/controller/controller_utils.go``), though its containers may
    still run for the whole grace period (the preStop drain)."""
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def slot_pods(pods: list[dict], slot: str) -> list[dict]:
    """The pods of ``pods`` (one role's, both slots) that belong to ``slot`` (:func:`pod_slot`)."""
    return [p for p in pods if pod_slot(p) == slot]


@dataclass(frozen=True)
class SlotRole:
    """What one role's Deployment in one slot says (:func:`observe`).

    Attributes:
        exists: the Deployment exists.
        compat_hash: its pod template's ``pdd-operator.dev/compat-hash`` label (``None``: none).
        replicas: ``spec.replicas``.
        ready: ``status.readyReplicas``.
        rolled_out: every pod is on the current template and Ready, no old pod remains, and the
            Deployment controller has seen the latest spec.
        current: ``status.replicas`` (its pods that are not Terminating).
        pods: its pods as the pod list shows them, Terminating ones included.
    """

    exists: bool = False
    compat_hash: str | None = None
    replicas: int = 0
    ready: int = 0
    rolled_out: bool = False
    current: int = 0
    pods: int = 0

    @property
    def gone(self) -> bool:
        """No pod of this slot and role runs or may run: the Deployment does not exist, or it wants 0
        replicas, its status counts none, and the pod list shows none, not even a Terminating one."""
        return not self.exists or (self.replicas == 0 and self.current == 0 and self.pods == 0)


def deployment_status_view(dep: Mapping | None) -> dict:
    """Everything the operator reads of a Deployment's ``status`` (API JSON, camelCase; ``None``: none):
    ``replicas``, ``readyReplicas``, ``updatedReplicas``, ``observedGeneration`` (as integers, 0 when
    absent), ``deadlineExceeded`` (the ``Progressing`` condition's reason is ``ProgressDeadlineExceeded``)
    and ``replicaFailure`` (the ``ReplicaFailure`` condition's message while it is True, else ``""``).

    :func:`observe` and :meth:`~pdd_operator.controller.status.RoleObservation.from_deployment` read a
    Deployment's status only through this view, so two statuses with equal views give a reconcile the
    same result: a Deployment status update that changes nothing here (``availableReplicas``, a
    condition's times or other reasons) queues no reconcile (:mod:`pdd_operator.controller.triage`).
    """
    status = (dep or {}).get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    progressing, failure = conditions.get("Progressing") or {}, conditions.get("ReplicaFailure") or {}
    return {
        "replicas": int(status.get("replicas") or 0),
        "readyReplicas": int(status.get("readyReplicas") or 0),
        "updatedReplicas": int(status.get("updatedReplicas") or 0),
        "observedGeneration": int(status.get("observedGeneration") or 0),
        "deadlineExceeded": progressing.get("reason") == "ProgressDeadlineExceeded",
        "replicaFailure": str(failure.get("message", "")) if failure.get("status") == "True" else "",
    }


def observe(dep: dict | None, pods: list[dict] | None = None) -> SlotRole:
    """A :class:`SlotRole` from a live Deployment (API JSON, camelCase) or ``None``, and the pods of its
    slot and role (:func:`slot_pods`; ``None``: none)."""
    if not dep:
        return SlotRole(pods=len(pods or []))
    spec, status = dep.get("spec") or {}, deployment_status_view(dep)
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    replicas = int(spec.get("replicas", 1))
    ready = status["readyReplicas"]
    observed = status["observedGeneration"] >= int((dep.get("metadata") or {}).get("generation") or 0)
    rolled_out = (observed and status["updatedReplicas"] == replicas and ready == replicas
                  and status["replicas"] == replicas)
    return SlotRole(exists=True, compat_hash=labels.get(LABEL_COMPAT_HASH), replicas=replicas, ready=ready,
                    rolled_out=rolled_out, current=status["replicas"], pods=len(pods or []))


@dataclass(frozen=True)
class RolloutStep:
    """The decision of :func:`plan_rollout`.

    Attributes:
        active: the slot the target spec is rendered into.
        previous: the other slot while it still has pods wanted (``replicas`` > 0 in some role), else ``None``.
        retire: the roles of ``previous`` that are (scaled to, or kept at) 0 now, in :data:`RETIRE_ORDER`:
            none until the active slot is rolled out in every role, then prefill, and decode too once
            the previous slot's prefill has no pods left (:attr:`SlotRole.gone`).
    """

    active: str
    previous: str | None = None
    retire: tuple[str, ...] = ()

    @property
    def coordinated(self) -> bool:
        """A previous revision still serves while the active one rolls out (a compat hash change)."""
        return self.previous is not None and not self.retire


def _serving(roles: Mapping[str, SlotRole]) -> tuple[int, int]:
    """How much a slot serves: (ready pairs it can form, pods it wants); a slot serves only with both roles."""
    return (min(roles[r].ready for r in ROLES), sum(roles[r].replicas for r in ROLES))


def plan_rollout(target_hash: str, target_replicas: Mapping[str, int],
                 slots: Mapping[str, Mapping[str, SlotRole]]) -> RolloutStep:
    """Choose the active slot and what happens to the other (see the module docstring).

    ``target_hash`` is the compat hash of the spec to run, ``target_replicas`` its replicas per role,
    ``slots[slot][role]`` what each slot's Deployment and pods say (:func:`observe`; every slot and role
    of :data:`~pdd_operator.api.constants.SLOTS` and ``ROLES`` present). Never raises for any observation.
    """
    def has_target(slot: str) -> bool:
        return any(slots[slot][r].exists and slots[slot][r].compat_hash == target_hash for r in ROLES)

    def rank(slot: str) -> tuple:
        return (*_serving(slots[slot]), slot == SLOTS[0])

    matching = [s for s in SLOTS if has_target(s)]
    if matching:
        active = max(matching, key=rank)
    elif not any(slots[s][r].exists for s in SLOTS for r in ROLES):
        active = SLOTS[0]
    else:
        serving = max(SLOTS, key=rank)
        active = next(s for s in SLOTS if s != serving)
    other = next(s for s in SLOTS if s != active)
    if not any(slots[other][r].exists and slots[other][r].replicas > 0 for r in ROLES):
        return RolloutStep(active)
    done = all(slots[active][r].exists and slots[active][r].compat_hash == target_hash
               and slots[active][r].replicas == target_replicas[r] and slots[active][r].rolled_out for r in ROLES)
    if not done:
        return RolloutStep(active, other)
    retire: list[str] = []
    for role in RETIRE_ORDER:
        retire.append(role)
        if not slots[other][role].gone:
            break
    return RolloutStep(active, other, retire=tuple(retire))


#: Fields of a live Deployment's ``spec`` that :func:`scaled_to_zero` applies again as they are.
_KEPT_SPEC = ("selector", "strategy", "template")


def scaled_to_zero(dep: dict) -> dict:
    """The apply body that scales the live Deployment ``dep`` (API JSON) to 0 and changes nothing else.

    Its pod template, selector, strategy, labels, generation annotation and ownerReferences are
    applied as they are (a server-side apply must name every field the operator keeps owning, or it
    would remove them), so only ``spec.replicas`` changes and the slot can be scaled up again later.
    """
    meta = dep.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k == ANNOTATION_GENERATION}
    out_meta: dict = {"name": meta["name"], "namespace": meta["namespace"], "labels": dict(meta.get("labels") or {})}
    if annotations:
        out_meta["annotations"] = annotations
    if meta.get("ownerReferences"):
        out_meta["ownerReferences"] = [dict(r) for r in meta["ownerReferences"] if r.get("controller")]
    spec = dep.get("spec") or {}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": out_meta,
            "spec": {"replicas": 0, **{k: spec[k] for k in _KEPT_SPEC if k in spec}}}
