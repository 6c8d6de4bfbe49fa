"""The reconcile work queue: bursts coalesce, a key never runs twice at once, one slow key holds no other."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import pytest
from prometheus_client import REGISTRY

from pdd_operator.controller.workqueue import Priority, WorkQueue, lowest_takeable, retry_delay


def wait_until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.005)


def test_a_burst_of_adds_while_waiting_is_one_run():
    runs: list = []
    gate = threading.Event()
    q = WorkQueue(lambda key, _queued_at: runs.append(key), workers=2)
    q.hold_until(gate)
    q.start()
    try:
        for _ in range(100):
            q.add(("ns", "a"))
        q.add(("ns", "b"))
        assert len(q) == 2
        gate.set()
        wait_until(q.idle)
        assert sorted(runs) == [("ns", "a"), ("ns", "b")]
    finally:
        q.stop()


def _first_run_blocks(runs: list, most: list, started: threading.Event, release: threading.Event, result):
    """A queue ``process`` that records each key in ``runs``, the most runs at once in ``most[0]``, blocks
    its first run until ``release`` (setting ``started``) and returns ``result()``."""
    active, lock = [0], threading.Lock()

    def process(key, _queued_at):
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        runs.append(key)
        if len(runs) == 1:
            started.set()
            release.wait(10)
        with lock:
            active[0] -= 1
        return result()
    return process


def test_a_key_added_while_processing_runs_once_more_after_never_concurrently():
    started, release = threading.Event(), threading.Event()
    runs, most = [], [0]
    process = _first_run_blocks(runs, most, started, release, lambda: None)

    q = WorkQueue(process, workers=4)
    q.start()
    try:
        q.add("k")
        assert started.wait(10)
        for _ in range(50):  # a burst while the first run is in progress
            q.add("k")
        time.sleep(0.05)  # give idle workers the chance to (wrongly) take it
        assert runs == ["k"]
        release.set()
        wait_until(q.idle)
        assert runs == ["k", "k"]
        assert most[0] == 1
    finally:
        q.stop()


def test_one_slow_key_does_not_hold_the_others():
    release = threading.Event()
    done: list = []

    def process(key, _queued_at):
        if key == "slow":
            release.wait(10)
        done.append(key)

    q = WorkQueue(process, workers=2)
    q.start()
    try:
        q.add("slow")
        for i in range(20):
            q.add(f"fast-{i}")
        wait_until(lambda: len(done) == 20)
        assert "slow" not in done
        release.set()
        wait_until(q.idle)
        assert done[-1] == "slow"
    finally:
        q.stop()


def test_a_failing_key_does_not_end_the_worker():
    seen: list = []

    def process(key, _queued_at):
        seen.append(key)
        if key == "bad":
            raise RuntimeError("boom")

    q = WorkQueue(process, workers=1)
    q.start()
    try:
        q.add("bad")
        q.add("good")
        wait_until(lambda: seen == ["bad", "good"] and q.idle())
    finally:
        q.stop()


def test_needs_a_worker():
    with pytest.raises(ValueError):
        WorkQueue(lambda k, t: None, workers=0)


def test_each_key_comes_with_the_time_its_first_add_queued_it():
    gate = threading.Event()
    got: dict = {}
    q = WorkQueue(lambda key, queued_at: got.setdefault(key, queued_at), workers=1)
    q.hold_until(gate)
    q.start()
    try:
        before = time.monotonic()
        q.add("k")
        first = time.monotonic()
        wait_until(lambda: time.monotonic() > first)  # a later add of the waiting key keeps the first time
        q.add("k")
        gate.set()
        wait_until(q.idle)
        assert before <= got["k"] <= first
    finally:
        q.stop()


# --- retries with per-key exponential backoff (client-go's ItemExponentialFailureRateLimiter) ----

@pytest.mark.parametrize(("failures", "base", "cap", "delay"), [
    (1, 0.005, 30.0, 0.005),            # the first retry waits the base (client-go: base x 2**0)
    (2, 0.005, 30.0, 0.01),
    (3, 0.005, 30.0, 0.02),
    (13, 0.005, 30.0, 20.48),           # 5 ms x 2**12
    (14, 0.005, 30.0, 30.0),            # 40.96 s capped
    (10_000, 0.005, 30.0, 30.0),        # no float overflow after a long outage
    (11, 0.005, 1000.0, 5.12),          # client-go's defaults
    (1, 1.0, 1.0, 1.0),
])
def test_retry_delay_doubles_from_the_base_up_to_the_cap(failures, base, cap, delay):
    assert retry_delay(failures, base, cap) == pytest.approx(delay)


@pytest.mark.parametrize(("failures", "base", "cap"), [(0, 0.005, 30.0), (1, 0.0, 30.0), (1, 2.0, 1.0)])
def test_retry_delay_refuses_what_is_not_a_backoff(failures, base, cap):
    with pytest.raises(ValueError):
        retry_delay(failures, base, cap)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _failing_queue(outcomes: list, clock: FakeClock, runs: list, **kwargs) -> WorkQueue:
    """A queue whose ``process`` records each run and returns the next of ``outcomes`` (True: retry)."""
    def process(key, _queued_at):
        runs.append(key)
        return outcomes.pop(0) if outcomes else None
    return WorkQueue(process, workers=2, retry_base=1.0, retry_cap=8.0, clock=clock, **kwargs)


def test_a_failed_key_waits_its_backoff_then_runs_and_a_success_forgets_its_failures():
    clock, runs = FakeClock(), []
    retries = REGISTRY.get_sample_value("pdd_workqueue_retries_total") or 0.0
    q = _failing_queue([True, True, None, True], clock, runs)
    q.start()
    try:
        q.add("k")
        wait_until(lambda: q.retry_due("k") is not None)
        assert (runs, q.retry_due("k"), q.failures("k")) == (["k"], 1001.0, 1)
        assert not q.idle()  # a key waiting out its backoff is pending work
        clock.now = 1000.999  # not yet due: the frozen clock never lets a worker take it
        assert len(q) == 0 and runs == ["k"]
        clock.now = 1001.0
        wait_until(lambda: q.retry_due("k") == 1003.0)  # second failure: 2 s
        assert runs == ["k", "k"] and q.failures("k") == 2
        clock.now = 1003.0
        wait_until(lambda: len(runs) == 3 and q.idle())  # succeeds: forgotten
        assert q.failures("k") == 0 and q.retry_due("k") is None
        q.add("k")  # fails again: back to the base delay, not 4 s
        wait_until(lambda: q.retry_due("k") is not None)
        assert q.retry_due("k") == 1004.0 and q.failures("k") == 1
        assert REGISTRY.get_sample_value("pdd_workqueue_retries_total") - retries == 3
    finally:
        q.stop()


def test_an_event_during_the_backoff_runs_the_key_now_and_keeps_its_failure_count():
    clock, runs = FakeClock(), []
    q = _failing_queue([True, True, True], clock, runs)
    q.start()
    try:
        q.add("k")
        wait_until(lambda: q.retry_due("k") is not None)
        q.add("k")  # the event: runs at once, the clock still before the backoff's end
        wait_until(lambda: len(runs) == 2 and q.retry_due("k") is not None)
        assert q.failures("k") == 2 and q.retry_due("k") == 1002.0  # 2 s: the count was kept
        clock.now = 1002.0
        wait_until(lambda: len(runs) == 3 and q.retry_due("k") is not None)
        assert q.retry_due("k") == 1006.0  # the timer the event cancelled did not run it twice
        assert runs == ["k", "k", "k"]
    finally:
        q.stop()


def test_a_key_added_while_its_failing_run_is_in_progress_runs_again_at_once_never_concurrently():
    clock = FakeClock()
    started, release = threading.Event(), threading.Event()
    runs, most = [], [0]
    # the first run fails, the second succeeds
    process = _first_run_blocks(runs, most, started, release, lambda: len(runs) == 1)

    q = WorkQueue(process, workers=4, retry_base=1.0, retry_cap=8.0, clock=clock)
    q.start()
    try:
        q.add("k")
        assert started.wait(10)
        q.add("k")
        release.set()
        wait_until(lambda: len(runs) == 2 and q.idle())  # the frozen clock: not the backoff's timer
        assert most[0] == 1 and q.failures("k") == 0
    finally:
        q.stop()


def test_one_key_in_backoff_does_not_hold_the_others_and_an_exception_is_not_retried():
    clock, runs = FakeClock(), []

    def process(key, _queued_at):
        runs.append(key)
        if key == "bug":
            raise RuntimeError("a bug")
        return key == "failing"

    q = WorkQueue(process, workers=1, retry_base=1.0, retry_cap=8.0, clock=clock)
    q.start()
    try:
        q.add("failing")
        q.add("bug")
        q.add("ok")
        wait_until(lambda: len(runs) == 3)
        wait_until(lambda: q.retry_due("failing") is not None)
        assert q.retry_due("bug") is None and q.failures("bug") == 0
        clock.now = 1001.0
        wait_until(lambda: len(runs) == 4)
        assert runs == ["failing", "bug", "ok", "failing"]
    finally:
        q.stop()


# --- priorities: work that writes children first, status work never starved ----------------------

W, S, R = Priority.WRITE, Priority.STATUS, Priority.RESYNC


def _served_order(adds: list, clock: FakeClock | None = None, promote_after: float = 10.0,
                  advance: float = 0.0) -> list:
    """Keys in the order one worker serves them after ``adds`` (``(key, priority)``, or ``("tick", s)``:
    the fake clock moves ``s`` seconds) were made while it was held."""
    clock = clock or FakeClock()
    order, gate = [], threading.Event()
    q = WorkQueue(lambda key, _queued_at: order.append(key), workers=1, clock=clock, promote_after=promote_after)
    q.hold_until(gate)
    q.start()
    try:
        for key, arg in adds:
            if key == "tick":
                clock.now += arg
            else:
                q.add(key, arg)
        clock.now += advance
        gate.set()
        wait_until(q.idle)
    finally:
        q.stop()
    return order


@pytest.mark.parametrize(("adds", "served"), [
    # write work is served first, each priority in the order it was queued
    ([("a", S), ("b", W), ("c", S), ("d", W)], ["b", "d", "a", "c"]),
    # a waiting status key added again for write work is raised (once, served at the write key's place)
    ([("a", S), ("b", W), ("a", W)], ["b", "a"]),
    # ... and never lowered: a write key added again for status stays write work, at its first place
    ([("a", W), ("b", W), ("a", S)], ["a", "b"]),
    # dedup: many adds of one key are one run
    ([("a", S)] * 5 + [("b", W)] * 5, ["b", "a"]),
    # fairness: a status key that waited promote_after (10 s) joins the tail of the write keys waiting then
    ([("old", S), ("tick", 10.0), ("w1", W), ("w2", W)], ["w1", "w2", "old"]),
    ([("old", S), ("tick", 9.0), ("young", S), ("tick", 1.0), ("w1", W)], ["w1", "old", "young"]),
    # the resync's round comes last and is never promoted; an event raises a resync key
    ([("r1", R), ("r2", R), ("s", S), ("w", W)], ["w", "s", "r1", "r2"]),
    ([("r", R), ("tick", 60.0), ("w", W), ("s", S)], ["w", "s", "r"]),
    ([("r1", R), ("r2", R), ("r2", S)], ["r2", "r1"]),
])
def test_write_work_is_served_before_status_work(adds, served):
    assert _served_order(adds) == served


def test_a_status_key_promoted_after_its_wait_is_served_before_later_write_work():
    clock = FakeClock()
    order, gate = [], threading.Event()
    q = WorkQueue(lambda key, _queued_at: order.append(key), workers=1, clock=clock, promote_after=10.0)
    q.hold_until(gate)
    q.start()
    promotions = REGISTRY.get_sample_value("pdd_workqueue_promotions_total") or 0.0
    try:
        q.add("status", S)
        q.add("w1", W)
        clock.now += 10.0
        q.add("w2", W)  # queued after the status key's wait ended, but the worker promotes it first
        gate.set()
        wait_until(q.idle)
        assert order == ["w1", "w2", "status"] or order == ["w1", "status", "w2"]
        assert REGISTRY.get_sample_value("pdd_workqueue_promotions_total") - promotions == 1
    finally:
        q.stop()


def test_status_work_is_never_starved_by_write_work_that_keeps_coming():
    """Every run of a write key queues another write key: without the promotion the status key would
    wait forever; with it, it runs once its wait passed promote_after."""
    clock = FakeClock()
    order: list = []
    q: WorkQueue

    def process(key, _queued_at):
        order.append(key)
        if key != "status" and len(order) < 100:
            clock.now += 1.0
            q.add(f"w{len(order)}", W)

    q = WorkQueue(process, workers=1, clock=clock, promote_after=10.0)
    gate = threading.Event()
    q.hold_until(gate)
    q.start()
    try:
        q.add("status", S)
        q.add("w0", W)
        gate.set()
        wait_until(lambda: "status" in order)
        assert order.index("status") <= 12  # 10 s of write runs, one second each, then the status key
    finally:
        q.stop()


def test_a_key_added_while_it_runs_runs_again_at_the_highest_priority_added_meanwhile():
    started, release = threading.Event(), threading.Event()
    order = []

    def process(key, _queued_at):
        order.append(key)
        if len(order) == 1:
            started.set()
            release.wait(10)

    q = WorkQueue(process, workers=1)
    q.start()
    try:
        q.add("k", S)
        assert started.wait(10)
        q.add("other", S)
        q.add("k", S)
        q.add("k", W)  # raised while running: runs again before the status key that waited longer
        assert q.waiting() == [("other", S)]
        release.set()
        wait_until(q.idle)
        assert order == ["k", "k", "other"]
    finally:
        q.stop()


def test_a_retry_keeps_the_priority_of_the_run_that_failed():
    clock, order = FakeClock(), []
    started, release = threading.Event(), threading.Event()
    outcomes = {"w": [True, None]}

    def process(key, _queued_at):
        order.append(key)
        if key == "block":
            started.set()
            release.wait(10)
        return (outcomes.get(key) or [None]).pop(0)

    q = WorkQueue(process, workers=1, retry_base=1.0, retry_cap=8.0, clock=clock)
    q.start()
    try:
        q.add("w", W)
        wait_until(lambda: q.retry_due("w") is not None)
        q.add("block", S)
        assert started.wait(10)
        q.add("s", S)  # waits behind the running key
        clock.now += 1.0  # the failed write key's backoff ends while the worker is busy
        release.set()
        wait_until(lambda: len(order) == 4 and q.idle())
        assert order == ["w", "block", "w", "s"]  # the retry is write work again, ahead of the status key
    finally:
        q.stop()


def test_waiting_and_clear():
    q = WorkQueue(lambda key, _queued_at: None)
    q.add("a", S)
    q.add("b", W)
    q.add("a", W)
    assert q.waiting() == [("b", W), ("a", W)] and len(q) == 2
    q.clear()
    assert q.waiting() == [] and len(q) == 0 and q.idle()
    q.add("a", S)
    assert q.waiting() == [("a", S)]


def test_promote_after_must_not_be_negative():
    with pytest.raises(ValueError):
        WorkQueue(lambda k, t: None, promote_after=-1.0)


# --- a run that goes on off the workers (process returns a future) -------------------------------

class _Deferring:
    """A queue ``process`` that records each run and returns a new pending future for every key in
    ``defer`` (the test finishes it), ``None`` for the others."""

    def __init__(self, defer: set) -> None:
        self.defer, self.runs, self.futures = defer, [], {}
        self.lock = threading.Lock()

    def __call__(self, key, _queued_at):
        with self.lock:
            self.runs.append(key)
            if key not in self.defer:
                return None
            future = self.futures[key] = Future()
            return future


def _finish(process: _Deferring, key, outcome) -> None:
    future = process.futures.pop(key)
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


@pytest.mark.parametrize(("max_deferred", "steps", "runs", "deferred", "retry_due"), [
    # the worker is free while "a" waits: "b" runs on the only worker meanwhile
    (4, [("add", "a"), ("add", "b")], ["a", "b"], 1, None),
    # "a" added while its run goes on off the workers: not run again until that run is done, then once
    (4, [("add", "a"), ("add", "a"), ("add", "a"), ("add", "b")], ["a", "b"], 1, None),
    (4, [("add", "a"), ("add", "a"), ("finish", "a", None)], ["a", "a"], 1, None),
    # a deferred run that asks for a retry waits out its backoff (retry_base 1 s on the frozen clock)
    (4, [("add", "a"), ("finish", "a", True)], ["a"], 0, 1001.0),
    # one that raises is logged and not retried, and frees its place
    (4, [("add", "a"), ("finish", "a", RuntimeError("a bug"))], ["a"], 0, None),
    # at most max_deferred keys wait so: "b" waits in the queue until "a" is done
    (1, [("add", "a"), ("add", "b")], ["a"], 1, None),
    (1, [("add", "a"), ("add", "b"), ("finish", "a", None)], ["a", "b"], 0, None),
    # max_deferred 0: the worker itself waits for the future and takes its result (a retry here)
    (0, [("add", "a"), ("finish", "a", True)], ["a"], 0, 1001.0),
])
def test_a_run_that_returns_a_future_frees_its_worker_and_holds_its_key(max_deferred, steps, runs, deferred,
                                                                        retry_due):
    clock, process = FakeClock(), _Deferring({"a"})
    q = WorkQueue(process, workers=1, retry_base=1.0, retry_cap=8.0, clock=clock, max_deferred=max_deferred)
    q.start()
    try:
        for step in steps:
            if step[0] == "add":
                q.add(step[1])
            else:
                wait_until(lambda key=step[1]: key in process.futures)
                _finish(process, step[1], step[2])
            # let the worker act on what this step allows before the next one
            wait_until(lambda: len(q) == 0 or q.deferred() >= max(max_deferred, 1))
        wait_until(lambda: process.runs == runs and q.deferred() == deferred and q.retry_due("a") == retry_due)
        assert process.runs == runs and q.deferred() == deferred and q.retry_due("a") == retry_due
        assert not q.idle() if deferred or retry_due else True
    finally:
        q.stop()


def test_a_key_is_never_run_twice_at_once_across_deferred_runs_and_its_worker_seconds_are_counted():
    before = REGISTRY.get_sample_value("pdd_workqueue_worker_seconds_total") or 0.0
    process = _Deferring({"k"})
    q = WorkQueue(process, workers=4, max_deferred=8)
    q.start()
    try:
        for i in range(5):  # each round: an add while the run is deferred, then the run ends
            q.add("k")
            wait_until(lambda: "k" in process.futures)
            q.add("k")
            assert process.runs.count("k") == 2 * i + 1  # the add waits for the deferred run
            _finish(process, "k", None)
            wait_until(lambda n=i: "k" in process.futures and process.runs.count("k") == 2 * n + 2)
            _finish(process, "k", None)
            wait_until(q.idle)
        assert process.runs == ["k"] * 10
        assert (REGISTRY.get_sample_value("pdd_workqueue_worker_seconds_total") or 0.0) > before
        assert REGISTRY.get_sample_value("pdd_workqueue_deferred") == 0
    finally:
        q.stop()


def test_max_deferred_must_not_be_negative():
    with pytest.raises(ValueError):
        WorkQueue(lambda key, _queued_at: None, max_deferred=-1)


# --- places for write work only (write_reserve) ------------------------------------------------------------

@pytest.mark.parametrize(("deferred", "max_deferred", "write_reserve", "lowest"), [
    (0, 0, 0, Priority.RESYNC),  # no bound on deferred runs: anything, always
    (50, 0, 0, Priority.RESYNC),
    (0, 32, 8, Priority.RESYNC),
    (23, 32, 8, Priority.RESYNC),
    (24, 32, 8, Priority.WRITE),  # the last 8 places: write work only
    (31, 32, 8, Priority.WRITE),
    (32, 32, 8, None),  # full: nothing
    (40, 32, 8, None),
    (31, 32, 0, Priority.RESYNC),  # no reserve: as before
    (32, 32, 0, None),
    (0, 2, 2, Priority.WRITE),  # everything reserved: status work runs only once promoted to write work
])
def test_lowest_takeable(deferred, max_deferred, write_reserve, lowest):
    assert lowest_takeable(deferred, max_deferred, write_reserve) == lowest


@pytest.mark.parametrize(("deferred", "max_deferred", "write_reserve"), [(-1, 4, 1), (0, -1, 0), (0, 4, -1), (0, 4, 5)])
def test_lowest_takeable_refuses_what_is_not_a_bound(deferred, max_deferred, write_reserve):
    with pytest.raises(ValueError):
        lowest_takeable(deferred, max_deferred, write_reserve)
    if deferred == 0 and max_deferred >= 0 and write_reserve >= 0:
        with pytest.raises(ValueError):
            WorkQueue(lambda key, _queued_at: None, max_deferred=max_deferred, write_reserve=write_reserve)


def test_status_work_waiting_for_the_apiserver_leaves_places_for_write_work():
    # 2 places, 1 for write work only: the first status run defers and takes the shared place; a second status key
    # waits, a write key added after it is taken at once into the reserved one; once a run ends the status key runs.
    process = _Deferring({"s1", "s2", "w"})
    q = WorkQueue(process, workers=1, max_deferred=2, write_reserve=1)
    q.start()
    try:
        q.add("s1", Priority.STATUS)
        wait_until(lambda: q.deferred() == 1)
        q.add("s2", Priority.STATUS)
        time.sleep(0.05)
        assert process.runs == ["s1"] and q.waiting() == [("s2", Priority.STATUS)]
        q.add("w", Priority.WRITE)
        wait_until(lambda: q.deferred() == 2)
        assert process.runs == ["s1", "w"] and q.waiting() == [("s2", Priority.STATUS)]
        _finish(process, "w", None)  # the reserved place is free again: still not for status work
        wait_until(lambda: q.deferred() == 1)
        time.sleep(0.05)
        assert process.runs == ["s1", "w"]
        _finish(process, "s1", None)
        wait_until(lambda: process.runs == ["s1", "w", "s2"])
        _finish(process, "s2", None)
        wait_until(q.idle)
    finally:
        q.stop()
