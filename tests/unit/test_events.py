"""Events on transitions only (controller/events.py): the statuses are real ones, folded by
controller/status.py the way reconcile folds them, one step of a deployment's life after another."""

from __future__ import annotations

import pytest

from pdd_operator.controller import reconcile
from pdd_operator.controller.events import BURST, DEDUPE_SECONDS, REFILL_SECONDS, Event, EventFilter, transitions
from pdd_operator.controller.recorder import EventRecorder
from pdd_operator.controller.status import RoleObservation, fold_status
from tests.unit.test_status import BAD, GOOD, INVALID, T0, T1, dep, fold, obs

MISSING = RoleObservation(replicas=1)
PENDING = RoleObservation.from_deployment(dep(replicas=1, ready=0, updated=1),
                                          [{"status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                                                       "reason": "Unschedulable",
                                                                       "message": "0/5 nodes are available"}]}}])


def fold_with(previous: dict, **kw) -> dict:
    """A ready deployment's status with ``apply_errors`` or ``preflight`` (at time T1)."""
    return fold_status(generation=1, previous=previous, report=GOOD, applied_generation=1,
                       observations={"prefill": obs(), "decode": obs()}, now=T1, **kw)


def step(previous: dict, **kw) -> dict:
    """The status reconcile would write next, given the stored one (transition times carried over)."""
    return fold(previous=previous, now=T1, **kw)


def rolling(replicas=2):
    return obs(replicas=replicas, ready=1, updated=replicas)


READY = fold()
NEW = fold(prefill=obs(ready=0), decode=obs(ready=0))   # children just created, pods starting
REFUSED = fold(report=BAD, generation=2, applied=1, previous=READY)
NEVER_APPLIED_REFUSED = fold(report=BAD, applied=None, prefill=MISSING, decode=MISSING)


def kinds(events: list[Event]) -> list[tuple[str, str]]:
    return [(e.type_, e.reason) for e in events]


@pytest.mark.parametrize("previous, new, expected", [
    # creation: the first status names the children and no Event repeats it; RolledOut when the pods are Ready
    ({}, NEW, []),
    ({}, READY, [("Normal", "RolledOut")]),
    (NEW, step(NEW), [("Normal", "RolledOut")]),
    # a resync or a no-op reconcile: nothing transitions
    (READY, step(READY), []),
    (NEW, step(NEW, prefill=obs(ready=0), decode=obs(ready=0)), []),
    # a new pod count while rolling out is no transition
    (step(READY, generation=2, applied=2, prefill=rolling(3)),
     step(step(READY, generation=2, applied=2, prefill=rolling(3)), generation=2, applied=2,
          prefill=obs(replicas=3, ready=2, updated=3)), []),
    # scaled: the replicas of a role change; rolled out again once ready
    (READY, step(READY, generation=2, applied=2, prefill=rolling(2)), [("Normal", "Scaled")]),
    (step(READY, generation=2, applied=2, prefill=rolling(2)),
     step(READY, generation=2, applied=2, prefill=obs(replicas=2, ready=2, updated=2)), [("Normal", "RolledOut")]),
    # a new generation rolled out while Ready stays True (nothing the pods had to change)
    (READY, step(READY, generation=2, applied=2), [("Normal", "RolledOut")]),
    # refused: once per refused generation
    (READY, REFUSED, [("Warning", "Incompatible")]),
    (REFUSED, step(REFUSED, report=BAD, generation=2, applied=1), []),
    (REFUSED, step(REFUSED, report=BAD, generation=3, applied=1), [("Warning", "Incompatible")]),
    (REFUSED, step(REFUSED, report=INVALID, generation=3, applied=1), [("Warning", "InvalidSpec")]),
    ({}, NEVER_APPLIED_REFUSED, [("Warning", "Incompatible")]),
    # the refusal fixed: recovered, and the fixed generation rolled out
    (REFUSED, step(REFUSED, generation=3, applied=3), [("Normal", "Recovered"), ("Normal", "RolledOut")]),
    # degraded and recovered
    (READY, step(READY, decode=MISSING), [("Warning", "ChildMissing")]),
    (step(READY, decode=MISSING), step(step(READY, decode=MISSING)), [("Normal", "Recovered"), ("Normal", "RolledOut")]),
    (READY, step(READY, decode=PENDING), [("Warning", "Unschedulable")]),
    (step(READY, decode=PENDING), step(step(READY, decode=PENDING), decode=MISSING), [("Warning", "ChildMissing")]),
    (step(READY, decode=PENDING), step(step(READY, decode=PENDING), decode=PENDING), []),
    (READY, step(READY, prefill=obs(conditions=[{"type": "Progressing", "reason": "ProgressDeadlineExceeded"}])),
     [("Warning", "ProgressDeadlineExceeded")]),
])
def test_transitions(previous, new, expected):
    assert kinds(transitions(previous, new)) == expected


def test_apply_failed_is_posted_again_only_when_the_refusal_changes():
    failed = fold_with(READY, apply_errors=["Deployment x-prefill: 422 Unprocessable Entity: a"])
    assert kinds(transitions(READY, failed)) == [("Warning", "ApplyFailed")]
    again = fold_with(failed, apply_errors=["Deployment x-prefill: 422 Unprocessable Entity: a"])
    assert transitions(failed, again) == []
    other = fold_with(failed, apply_errors=["Service x-prefill: 422 Unprocessable Entity: b"])
    (event,) = transitions(failed, other)
    assert (event.reason, event.message) == ("ApplyFailed", "Service x-prefill: 422 Unprocessable Entity: b")


def test_messages_say_what_happened():
    scaled = step(READY, generation=2, applied=2, prefill=rolling(3), decode=obs(replicas=2, ready=2, updated=2))
    (event,) = transitions(READY, scaled)
    assert event.message == "Scaled prefill from 1 to 3; decode from 1 to 2 replicas."
    (refused,) = transitions(READY, REFUSED)
    assert refused.message.startswith("Generation 2 refused: [") and "Fix:" in refused.message
    recovered, rolled = transitions(REFUSED, step(REFUSED, generation=3, applied=3))
    assert recovered.message.startswith("No longer degraded (was IncompatibleSpec: Generation 2 breaks")
    assert rolled.message.startswith("Generation 3 is rolled out: prefill: 1/1 ready")
    assert transitions({}, NEW) == []  # the first apply: the status says it (appliedGeneration, Reconciling)
    assert NEW["appliedGeneration"] == 1 and {c["type"]: c["status"] for c in NEW["conditions"]}["Reconciling"] == "True"


def test_kv_transport_transitions():
    ok = [("p-0", {"ready": True, "reason": "RDMAReady", "transport": "rdma"})]
    tcp = [("p-0", {"ready": False, "reason": "TCPFallback", "message": "UCX chose tcp"})]
    unknown = fold_with({}, preflight=[])
    ready = fold_with(unknown, preflight=ok)
    fallback = fold_with(ready, preflight=tcp)
    assert kinds(transitions(unknown, ready)) == [("Normal", "RDMAReady")]
    assert kinds(transitions(ready, fallback)) == [("Warning", "TCPFallback")]
    assert transitions(fallback, fold_with(fallback, preflight=tcp)) == []


def test_a_status_of_an_older_release_is_no_error():
    assert kinds(transitions({"conditions": [{"type": "Ready"}], "prefill": {}}, READY)) == [("Normal", "RolledOut")]


def test_filter_drops_a_repeat_within_the_window_and_allows_it_after():
    f = EventFilter()
    e = Event("Normal", "RolledOut", "Generation 1 is rolled out.")
    assert f.allow("uid-1", e, 0.0)
    assert not f.allow("uid-1", e, DEDUPE_SECONDS - 1)
    assert f.allow("uid-2", e, 1.0)          # another object
    assert f.allow("uid-1", Event("Warning", "ChildMissing", "x"), 2.0)
    assert f.allow("uid-1", e, DEDUPE_SECONDS + 1)


def test_filter_caps_a_flapping_object_and_refills():
    f = EventFilter()
    posted = sum(f.allow("uid", Event("Normal", "RolledOut", f"m{i}"), float(i) / 1000) for i in range(100))
    assert posted == BURST
    assert not f.allow("uid", Event("Normal", "RolledOut", "later"), 1.0)
    assert f.allow("uid", Event("Normal", "RolledOut", "later"), REFILL_SECONDS + 1)


class _Kube:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str, str]] = []

    def event(self, obj: dict, type_: str, reason: str, message: str) -> bool:
        self.posted.append((type_, reason, message))
        return True


def test_post_events_goes_through_the_filter(monkeypatch):
    monkeypatch.setattr(reconcile, "EVENTS", EventFilter())
    kube, obj = _Kube(), {"metadata": {"uid": "u", "name": "x", "namespace": "ns"}}
    events = transitions(REFUSED, step(REFUSED, generation=3, applied=3))
    monkeypatch.setattr(reconcile, "RECORDER", EventRecorder())
    assert reconcile.post_events(kube, obj, events) == 2
    assert reconcile.post_events(kube, obj, events) == 0   # the same transition again: not re-posted
    assert reconcile.RECORDER.flush(5)
    assert [p[1] for p in kube.posted] == ["Recovered", "RolledOut"]


def test_times_alone_are_no_transition():
    later = fold(previous={}, now=T1)
    assert transitions(READY, later) == [] and READY != later and T0 != T1
