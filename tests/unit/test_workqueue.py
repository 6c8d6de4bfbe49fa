"""The reconcile work queue: bursts coalesce, a key never runs twice at once, one slow key holds no other."""

from __future__ import annotations

import threading
import time

import pytest

from pdd_operator.controller.workqueue import WorkQueue


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


def test_a_key_added_while_processing_runs_once_more_after_never_concurrently():
    started, release = threading.Event(), threading.Event()
    active, most, runs = [0], [0], []
    lock = threading.Lock()

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
