"""Status-only work is coalesced over a short window (WorkQueue's ``status_delay``): the status events that
one change sets off become one reconcile, while work that writes children is never delayed."""

from __future__ import annotations

import threading
import time

import pytest
from prometheus_client import REGISTRY

from pdd_operator.controller.workqueue import Priority, WorkQueue

S, W, R = Priority.STATUS, Priority.WRITE, Priority.RESYNC


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _tick(queue: WorkQueue, clock: Clock, seconds: float) -> None:
    clock.now += seconds
    with queue._cond:
        queue._requeue_due(clock())


def _take(queue: WorkQueue):
    """What a worker would take now (the key), without a worker thread."""
    taken = queue._get()
    assert taken is not None
    return taken[0]


# Each step: ("add", key, priority), ("tick", seconds), ("take", key expected), ("done", key).
# ``waiting``: queue.waiting() after the steps; ``timers``: {key: seconds from the last step until it is queued}.
CASES = [
    pytest.param([("add", "a", S)], [], {"a": 1.0}, id="a status add waits for the window"),
    pytest.param([("add", "a", S), ("tick", 0.4), ("add", "a", S), ("tick", 0.3), ("add", "a", S)], [],
                 {"a": 0.3}, id="more status adds in the window: one timer, never postponed"),
    pytest.param([("add", "a", S), ("tick", 0.4), ("add", "a", S), ("tick", 0.6)], [("a", S)], {},
                 id="the window ends: queued once at STATUS"),
    pytest.param([("add", "a", S), ("add", "b", S), ("tick", 1.0)], [("a", S), ("b", S)], {},
                 id="keys are coalesced each on its own"),
    pytest.param([("add", "a", S), ("tick", 0.2), ("add", "a", W)], [("a", W)], {},
                 id="write work in the window: at once, the timer gone"),
    pytest.param([("add", "a", W)], [("a", W)], {}, id="write work is never delayed"),
    pytest.param([("add", "a", R), ("add", "a", S)], [("a", S)], {},
                 id="a status add of a key that waits already raises it at once"),
    pytest.param([("add", "a", W), ("add", "a", S)], [("a", W)], {},
                 id="a status add of a key waiting at WRITE changes nothing"),
    pytest.param([("add", "a", S), ("tick", 0.5), ("add", "a", R)], [("a", S)], {},
                 id="the resync in the window queues it at once, at the timer's priority"),
    pytest.param([("add", "a", W), ("take", "a"), ("add", "a", S)], [], {"a": 1.0},
                 id="a status add while the key runs: a timer, not a rerun at once"),
    pytest.param([("add", "a", W), ("take", "a"), ("add", "a", S), ("done", "a"), ("tick", 1.0)], [("a", S)], {},
                 id="the timer of a key that ran meanwhile queues it once"),
    pytest.param([("add", "a", W), ("take", "a"), ("add", "a", S), ("tick", 1.0)], [], {},
                 id="the timer ends while the key still runs: it runs again after"),
    pytest.param([("add", "a", W), ("take", "a"), ("add", "a", S), ("tick", 1.0), ("done", "a")], [("a", S)], {},
                 id="... once that run is done"),
    pytest.param([("add", "a", W), ("take", "a"), ("add", "a", W), ("add", "a", S), ("done", "a")], [("a", W)], {},
                 id="a status add of a key to run again already: no timer more"),
]


@pytest.mark.parametrize(("steps", "waiting", "timers"), CASES)
def test_status_adds_are_coalesced_over_the_window(steps, waiting, timers):
    clock = Clock()
    queue = WorkQueue(lambda key, queued_at: None, clock=clock, status_delay=1.0)
    for step in steps:
        if step[0] == "add":
            queue.add(step[1], step[2])
        elif step[0] == "tick":
            _tick(queue, clock, step[1])
        elif step[0] == "take":
            assert _take(queue) == step[1]
        else:
            queue._done(step[1], False)
    assert queue.waiting() == waiting
    due = {key: at - clock() for key in ("a", "b") if (at := queue.retry_due(key)) is not None}
    assert due == pytest.approx(timers)


def test_without_a_window_a_status_add_is_queued_at_once():
    queue = WorkQueue(lambda key, queued_at: None, clock=Clock())
    queue.add("a", S)
    assert queue.waiting() == [("a", S)] and queue.retry_due("a") is None


def test_a_status_add_during_a_backoff_keeps_the_earlier_of_the_two():
    clock = Clock()
    queue = WorkQueue(lambda key, queued_at: True, clock=clock, status_delay=1.0, retry_base=4.0, retry_cap=8.0)
    queue.add("a", W)
    assert _take(queue) == "a"
    queue._done("a", True)  # failed: waits 4 s
    queue.add("a", S)
    assert queue.retry_due("a") == pytest.approx(clock() + 1.0) and queue.failures("a") == 1
    _tick(queue, clock, 1.0)
    assert queue.waiting() == [("a", W)]  # the failed run's priority is kept


def test_the_window_must_not_be_negative():
    with pytest.raises(ValueError):
        WorkQueue(lambda key, queued_at: None, status_delay=-0.1)


def test_a_burst_of_status_events_is_one_reconcile_with_real_workers():
    runs, lock = [], threading.Lock()
    before = REGISTRY.get_sample_value("pdd_workqueue_status_coalesced_total") or 0.0

    def process(key, queued_at):
        with lock:
            runs.append(key)

    queue = WorkQueue(process, workers=4, status_delay=0.2)
    queue.start()
    try:
        for _ in range(5):  # as the Deployment controller's status updates of prefill, decode and router
            queue.add("a", S)
            queue.add("b", S)
        deadline = time.monotonic() + 10
        while not queue.idle() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert queue.idle()
    finally:
        queue.stop()
    assert sorted(runs) == ["a", "b"]
    assert (REGISTRY.get_sample_value("pdd_workqueue_status_coalesced_total") or 0.0) - before == 10
