"""Status writes that are only a rollout's progress wait for a short window (StatusPacer); transitions,
a new generation and errors are written at once; the work queue's timer brings the object back."""

from __future__ import annotations

import threading

import pytest

from pdd_operator.controller.reconcile import StatusPacer
from pdd_operator.controller.status import progress_only
from pdd_operator.controller.workqueue import Priority, WorkQueue


def cond(type_, status, reason, message="", generation=2):
    return {"type": type_, "status": status, "reason": reason, "message": message, "observedGeneration": generation,
            "lastTransitionTime": "2026-12-02T00:00:00Z"}


def status(ready=1, updated=1, replicas=2, generation=2, ready_cond="False", reason="ReplicasNotReady", **extra):
    message = f"prefill: 1/1 ready, 1 updated; decode: {ready}/{replicas} ready, {updated} updated"
    return {"observedGeneration": generation, "appliedGeneration": generation, "vllmVersion": "0.32.0",
            "prefill": {"replicas": 1, "readyReplicas": 1, "updatedReplicas": 1, "ready": "1/1"},
            "decode": {"replicas": replicas, "readyReplicas": ready, "updatedReplicas": updated,
                       "ready": f"{ready}/{replicas}"},
            "conditions": [cond("Ready", ready_cond, reason, message, generation),
                           cond("Progressing", "True", "RollingOut", message, generation)], **extra}


@pytest.mark.parametrize("previous, new, expected", [
    (status(updated=1), status(updated=2), True),  # a count and the messages that quote it
    (status(ready=1, updated=2), status(ready=1, updated=2), False),  # equal: nothing to write
    ({}, status(), False),  # the first status
    (status(ready=1, updated=2), status(ready=2, updated=2, ready_cond="True", reason="AllReplicasReady"), False),
    (status(replicas=2), status(replicas=3), False),  # the desired count: a Scaled transition
    (status(generation=2), status(generation=3), False),  # a new generation
    (status(), status(endpoint="http://a-router.ns.svc:8000"), False),  # a field added
    (status(), {**status(), "appliedGeneration": 1}, False),
    (status(), {**status(), "conditions": status()["conditions"][:1]}, False),  # a condition gone
])
def test_progress_only_is_a_change_of_counts_and_messages_alone(previous, new, expected):
    assert progress_only(previous, new) is expected


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_progress_update_waits_for_the_rest_of_the_window_after_the_last_write():
    clock = Clock()
    pacer = StatusPacer(window=1.0, clock=clock)
    key, before, after = ("ns", "a"), status(updated=1), status(updated=2)
    assert pacer.hold(key, before, after) == pytest.approx(1.0)  # never written by this process: the window
    clock.now += 1.0
    assert pacer.hold(key, before, after) is None  # its window is over
    pacer.written(key)
    clock.now += 0.25
    assert pacer.hold(key, before, after) == pytest.approx(1.0)  # a window from now (later than the write's)
    clock.now += 0.25
    assert pacer.hold(key, before, after) == pytest.approx(0.75)  # the rest of it
    ready = status(ready=2, updated=2, ready_cond="True", reason="AllReplicasReady")
    assert pacer.hold(key, before, ready) is None  # a transition: at once
    assert pacer.hold(("ns", "b"), before, after) == pytest.approx(1.0)  # another object: its own window
    clock.now += 0.75
    assert pacer.hold(key, before, after) is None  # the window is over
    assert StatusPacer(window=0.0, clock=clock).hold(key, before, after) is None
    with pytest.raises(ValueError):
        StatusPacer(window=-1)


def test_a_progress_update_long_after_the_last_write_waits_a_window_for_what_follows_it():
    """A new object in a burst: its first status write, its pods created a minute later (the updated
    count, a progress update) and Ready 0.1 s after that: one patch for both, not two."""
    clock = Clock()
    pacer = StatusPacer(window=1.0, clock=clock)
    key = ("ns", "a")
    created, ready = status(ready=0, updated=0), status(ready=0, updated=2)
    pacer.written(key)  # the children applied
    clock.now += 60.0
    assert pacer.hold(key, created, ready) == pytest.approx(1.0)  # held from now, not from the write
    clock.now += 0.6
    assert pacer.hold(key, created, status(ready=1, updated=2)) == pytest.approx(0.4)  # the same window
    clock.now += 0.4
    assert pacer.hold(key, created, status(ready=1, updated=2)) is None  # never more than a window late
    pacer.written(key)
    clock.now += 5.0
    assert pacer.hold(key, status(ready=1, updated=2), status(ready=2, updated=2)) == pytest.approx(1.0)  # anew
    done = status(ready=2, updated=2, ready_cond="True", reason="AllReplicasReady")
    assert pacer.hold(key, created, done) is None  # Ready: at once


def test_add_after_queues_a_key_when_its_time_comes_and_an_add_queues_it_at_once():
    clock = Clock()
    queue = WorkQueue(lambda key, queued_at: None, clock=clock)
    queue.add_after("a", 0.5)
    queue.add_after("a", 2.0)  # a later timer does not postpone the earlier one
    assert queue.retry_due("a") == pytest.approx(100.5) and len(queue) == 0 and not queue.idle()
    queue.add_after("b", 1.0)
    queue.add("b")  # an event meanwhile: at once, the timer cancelled
    assert queue.retry_due("b") is None and len(queue) == 1
    queue.add_after("b", 1.0)  # waits already: nothing changes
    assert queue.retry_due("b") is None
    clock.now += 0.5
    with queue._cond:
        queue._requeue_due(clock())
    # the held-back progress update is status work, behind the event's
    assert queue.waiting() == [("b", Priority.WRITE), ("a", Priority.STATUS)] and queue.failures("a") == 0


def test_a_worker_runs_a_key_again_after_its_add_after():
    seen, done = [], threading.Event()

    def process(key, queued_at):
        seen.append(key)
        if len(seen) == 1:
            queue.add_after(key, 0.01)  # as a reconcile whose progress write waits
        else:
            done.set()

    queue = WorkQueue(process, workers=2)
    queue.start()
    try:
        queue.add("a")
        assert done.wait(10), seen
    finally:
        queue.stop()
    assert seen == ["a", "a"]
