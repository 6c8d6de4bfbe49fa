"""Which Events a status change is worth: a pure function of the previous and the new status, and a
filter that keeps a flapping object from flooding the namespace.

An Event is posted only when something *transitions* between the stored status and the one the
operator is about to write (:func:`transitions`), and only after that status write succeeded, so a
no-op reconcile or a resync (equal statuses: nothing to write) posts nothing, a write that fails
(a conflict: the next reconcile recomputes from the fresh status) posts nothing, and a second replica
that takes over leadership sees the same stored status and does not post again.

The transitions and their reasons (CamelCase, as the Kubernetes API conventions ask):

=============================  =======  ===================================================================
transition                     type     reason
=============================  =======  ===================================================================
spec refused                   Warning  ``Incompatible`` / ``InvalidSpec`` (the ``Compatible`` reason), once
                                        per refused generation
a role's replicas changed      Normal   ``Scaled``
``Degraded`` became True       Warning  the ``Degraded`` reason (``ChildMissing``, ``Unschedulable``,
(or changed its reason)                 ``ReplicaFailure``, ``ContainersFailing``, ``ProgressDeadlineExceeded``,
                                        ``PrefillUnavailable``, ``DecodeUnavailable``; ``ApplyFailed`` also
                                        when its message changes); not for a refused spec, whose
                                        ``Incompatible``/``InvalidSpec`` Event says it
``Degraded`` became False      Normal   ``Recovered`` (naming what it was)
``KVTransportReady`` False     Warning  its reason (``TCPFallback``, ``NoRDMADevice``, ...)
``KVTransportReady`` True      Normal   ``RDMAReady``
``Ready`` became True, or a    Normal   ``RolledOut``
new generation is rolled out
=============================  =======  ===================================================================

:class:`EventFilter` then drops an Event equal to one posted for the same object within
:data:`DEDUPE_SECONDS` and caps each object at a burst of :data:`BURST` Events refilled one per
:data:`REFILL_SECONDS` (client-go's defaults in ``k8s.io/client-go/tools/record/events_cache.go``:
a 10-minute aggregation window, and ``EventSourceObjectSpamFilter`` with burst 25, qps 1/300), so an
object that flaps between two states gets its first few transitions recorded, not one Event per flap.

**No Event where the status says it all.** Events are best-effort, supplemental history; each is a
request the apiserver must store. A new object's children being applied for the first time is not
posted (until 2026-12-07 it was, as ``Created``): its status says so in the same write
(``appliedGeneration``, ``Reconciling=True`` from that moment: its ``lastTransitionTime``), it happens
once in an object's life, so there is no history to keep, and a burst of 1,000 creates spent one
request in nine on it beside the nine child applies (bench/README.md, 2026-12-07, 06:00). What
``kubectl describe`` shows in Events is what the status alone cannot: each rollout, scaling,
refusal, degradation and recovery, one after another.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Literal

from pdd_operator.api.constants import ROLES

#: ``Degraded`` reasons that a refusal Event (``Incompatible``/``InvalidSpec``) already reports.
_REFUSAL_DEGRADED = frozenset({"IncompatibleSpec", "InvalidSpec"})
#: ``Compatible`` reasons of a refused spec; each is also the Event's reason.
_REFUSALS = frozenset({"Incompatible", "InvalidSpec"})


@dataclass(frozen=True)
class Event:
    """One Event to record on the PDDeployment: ``type_`` ``Normal`` or ``Warning``, a CamelCase
    ``reason``, and a human-readable ``message``."""

    type_: Literal["Normal", "Warning"]
    reason: str
    message: str


def _conditions(status: dict) -> dict[str, dict]:
    return {c.get("type"): c for c in (status or {}).get("conditions") or []}


def _replicas(status: dict, role: str) -> int | None:
    value = ((status or {}).get(role) or {}).get("replicas")
    return None if value is None else int(value)


def transitions(previous: dict, new: dict) -> list[Event]:
    """The Events for going from the stored status ``previous`` to ``new`` (both wire form, as
    :func:`~pdd_operator.controller.status.fold_status` returns them; ``{}`` for none yet).

    Equal statuses give ``[]``; so do changes that are not transitions (a message with new pod
    counts, a ``lastTransitionTime``). The rules are in the module's table. Never raises for a
    status missing fields (an object written by an older release).
    """
    before, after = _conditions(previous), _conditions(new)
    events: list[Event] = []

    compatible, was_compatible = after.get("Compatible") or {}, before.get("Compatible") or {}
    if compatible.get("status") == "False" and compatible.get("reason") in _REFUSALS and (
        was_compatible.get("status") != "False" or was_compatible.get("reason") != compatible.get("reason")
        or was_compatible.get("observedGeneration") != compatible.get("observedGeneration")
    ):
        generation = compatible.get("observedGeneration")
        events.append(Event("Warning", compatible["reason"],
                            f"Generation {generation} refused: {compatible.get('message', '')}"))

    applied, was_applied = new.get("appliedGeneration"), previous.get("appliedGeneration")

    scaled = [f"{role} from {old} to {now}" for role in ROLES
              if (old := _replicas(previous, role)) is not None and (now := _replicas(new, role)) is not None
              and old != now]
    if scaled:
        events.append(Event("Normal", "Scaled", "Scaled " + "; ".join(scaled) + " replicas."))

    degraded, was_degraded = after.get("Degraded") or {}, before.get("Degraded") or {}
    if degraded.get("status") == "True" and degraded.get("reason") not in _REFUSAL_DEGRADED and (
        was_degraded.get("status") != "True" or was_degraded.get("reason") != degraded.get("reason")
        or (degraded.get("reason") == "ApplyFailed" and was_degraded.get("message") != degraded.get("message"))
    ):
        events.append(Event("Warning", str(degraded.get("reason") or "Degraded"), degraded.get("message", "")))
    if was_degraded.get("status") == "True" and degraded.get("status") == "False":
        was = str(was_degraded.get("reason") or "Degraded")
        if was_degraded.get("message"):
            was += f": {was_degraded['message']}"
        events.append(Event("Normal", "Recovered", f"No longer degraded (was {was})."))

    kv, was_kv = after.get("KVTransportReady") or {}, before.get("KVTransportReady") or {}
    if kv.get("status") == "False" and (was_kv.get("status") != "False" or was_kv.get("reason") != kv.get("reason")):
        events.append(Event("Warning", str(kv.get("reason") or "KVTransportNotReady"), kv.get("message", "")))
    if kv.get("status") == "True" and was_kv.get("status") != "True":
        events.append(Event("Normal", "RDMAReady", kv.get("message", "")))

    ready, was_ready = after.get("Ready") or {}, before.get("Ready") or {}
    if ready.get("status") == "True" and (was_ready.get("status") != "True" or was_applied != applied):
        detail = f": {ready['message']}" if ready.get("message") else ""
        events.append(Event("Normal", "RolledOut", f"Generation {applied} is rolled out{detail}."))
    return events


#: An Event equal to one posted for the same object this long ago or less is dropped (seconds).
DEDUPE_SECONDS = 600.0
#: Events one object may get at once, and how often one more is allowed after that (seconds).
BURST = 25
REFILL_SECONDS = 300.0


@dataclass
class _Budget:
    tokens: float
    at: float
    seen: dict[Event, float] = field(default_factory=dict)


class EventFilter:
    """Decides whether an Event is posted (:meth:`allow`); thread-safe. State lives in memory, per
    object UID, and is dropped once an object is idle (its budget full, nothing left to dedupe): a
    restarted operator starts afresh, which :func:`transitions` makes harmless (it posts only on
    transitions of the stored status)."""

    def __init__(self, dedupe_seconds: float = DEDUPE_SECONDS, burst: int = BURST,
                 refill_seconds: float = REFILL_SECONDS) -> None:
        self.dedupe_seconds, self.burst, self.refill_seconds = dedupe_seconds, burst, refill_seconds
        self._objects: dict[str, _Budget] = {}
        self._guard = threading.Lock()

    def allow(self, uid: str, event: Event, now: float) -> bool:
        """True when ``event`` on the object ``uid`` should be posted at ``now`` (monotonic seconds),
        and counts it; False when the same Event was posted within :attr:`dedupe_seconds` or the
        object's budget is spent."""
        with self._guard:
            idle = self.dedupe_seconds + self.burst * self.refill_seconds
            self._objects = {k: b for k, b in self._objects.items() if k == uid or now - b.at < idle}
            budget = self._objects.setdefault(uid, _Budget(tokens=float(self.burst), at=now))
            budget.tokens = min(float(self.burst), budget.tokens + (now - budget.at) / self.refill_seconds)
            budget.at = now
            budget.seen = {e: t for e, t in budget.seen.items() if now - t < self.dedupe_seconds}
            if event in budget.seen or budget.tokens < 1:
                return False
            budget.tokens -= 1
            budget.seen[event] = now
            return True
