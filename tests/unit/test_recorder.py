"""controller/recorder.py: Events posted off the reconcile workers, in order, bounded, never blocking."""

from __future__ import annotations

import threading

import pytest

from pdd_operator.controller.metrics import EVENTS_DROPPED
from pdd_operator.controller.recorder import EventRecorder, involved

OBJ = {"apiVersion": "pdd.example/v1", "kind": "PDDeployment", "spec": {"big": "x" * 10_000},
       "status": {"conditions": []},
       "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": "7", "labels": {"l": "v"},
                    "managedFields": [{"manager": "kubectl"}]}}


class Sink:
    """A post function that records what it got, and can be held back until released."""

    def __init__(self, held: bool = False) -> None:
        self.got: list[tuple[dict, str, str, str]] = []
        self.release = threading.Event()
        self.entered = threading.Event()
        if not held:
            self.release.set()

    def __call__(self, obj: dict, type_: str, reason: str, message: str) -> bool:
        self.entered.set()
        assert self.release.wait(10)
        self.got.append((obj, type_, reason, message))
        return True


def test_events_are_posted_in_order_with_only_what_the_event_names():
    sink, rec = Sink(), EventRecorder()
    for i in range(20):
        assert rec.record(sink, OBJ, "Normal", "RolledOut", f"m{i}")
    assert rec.flush(5)
    assert [g[3] for g in sink.got] == [f"m{i}" for i in range(20)]
    obj = sink.got[0][0]
    assert obj == {"apiVersion": "pdd.example/v1", "kind": "PDDeployment",
                   "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": "7"}}
    assert involved({"metadata": {"name": "b"}}) == {"metadata": {"name": "b"}}


def test_record_never_waits_for_the_apiserver():
    sink = Sink(held=True)
    rec = EventRecorder()
    assert rec.record(sink, OBJ, "Normal", "RolledOut", "first")
    assert sink.entered.wait(5)           # the sender is inside post, blocked
    done = threading.Event()
    threading.Thread(target=lambda: (rec.record(sink, OBJ, "Warning", "Degraded", "second"), done.set())).start()
    assert done.wait(5)                   # queued while the first POST still hangs
    assert sink.got == []
    sink.release.set()
    assert rec.flush(5)
    assert [g[2] for g in sink.got] == ["RolledOut", "Degraded"]


def test_a_full_queue_drops_and_counts_instead_of_blocking():
    sink = Sink(held=True)
    rec = EventRecorder(capacity=2)
    assert rec.record(sink, OBJ, "Normal", "R", "taken by the sender")
    assert sink.entered.wait(5)
    before = EVENTS_DROPPED._value.get()
    results = [rec.record(sink, OBJ, "Normal", "R", f"q{i}") for i in range(4)]
    assert results == [True, True, False, False]
    assert EVENTS_DROPPED._value.get() == before + 2
    sink.release.set()
    assert rec.flush(5)
    assert [g[3] for g in sink.got] == ["taken by the sender", "q0", "q1"]


def test_a_failing_post_does_not_end_the_sender():
    got = []

    def post(obj, type_, reason, message):
        if message == "boom":
            raise RuntimeError("connection reset")
        got.append(message)
        return True

    rec = EventRecorder()
    for message in ("a", "boom", "b"):
        rec.record(post, OBJ, "Normal", "R", message)
    assert rec.flush(5)
    assert got == ["a", "b"]


def test_stop_sends_what_is_queued_and_refuses_later_events():
    sink = Sink(held=True)
    rec = EventRecorder()
    rec.record(sink, OBJ, "Normal", "R", "one")
    rec.record(sink, OBJ, "Normal", "R", "two")
    sink.release.set()
    rec.stop(5)
    assert [g[3] for g in sink.got] == ["one", "two"]
    assert not rec.record(sink, OBJ, "Normal", "R", "after stop")
    never = EventRecorder()
    never.stop(1)
    assert not never.record(sink, OBJ, "Normal", "R", "x")


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="at least one Event"):
        EventRecorder(capacity=0)
