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
3. only then is it scaled to 0 (:func:`scaled_to_zero`). It is never deleted: the operator's RBAC
   grants no ``delete`` and the next hash change reuses it.

The serving slot is never touched before the new pair can serve, so a spec whose pods never become
Ready (an image that does not pull, a quota) leaves the old revision serving; the PDDeployment then
reads ``Progressing``/``Reconciling`` until it is fixed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pdd_operator.api.constants import ANNOTATION_GENERATION, LABEL_COMPAT_HASH, ROLES, SLOTS


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
    """

    exists: bool = False
    compat_hash: str | None = None
    replicas: int = 0
    ready: int = 0
    rolled_out: bool = False


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


def observe(dep: dict | None) -> SlotRole:
    """A :class:`SlotRole` from a live Deployment (API JSON, camelCase) or ``None``."""
    if not dep:
        return SlotRole()
    spec, status = dep.get("spec") or {}, deployment_status_view(dep)
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    replicas = int(spec.get("replicas", 1))
    ready = status["readyReplicas"]
    observed = status["observedGeneration"] >= int((dep.get("metadata") or {}).get("generation") or 0)
    rolled_out = (observed and status["updatedReplicas"] == replicas and ready == replicas
                  and status["replicas"] == replicas)
    return SlotRole(exists=True, compat_hash=labels.get(LABEL_COMPAT_HASH), replicas=replicas, ready=ready,
                    rolled_out=rolled_out)


@dataclass(frozen=True)
class RolloutStep:
    """The decision of :func:`plan_rollout`.

    Attributes:
        active: the slot the target spec is rendered into.
        previous: the other slot when it still has pods wanted (``replicas`` > 0 in some role), else ``None``.
        retire: whether ``previous`` is scaled to 0 now (the active slot is rolled out in every role).
    """

    active: str
    previous: str | None = None
    retire: bool = False

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
    ``slots[slot][role]`` what each slot's Deployment says (:func:`observe`; every slot and role of
    :data:`~pdd_operator.api.constants.SLOTS` and ``ROLES`` present). Never raises for any observation.
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
    return RolloutStep(active, other, retire=done)


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
