"""Posting Events off the reconcile workers: a bounded queue and one thread that sends them.

An Event is a report, not part of the reconcile's result (the status condition says the same), so a
reconcile worker should not wait for the apiserver to store it: a new PDDeployment's reconcile posts
about two (children applied, then Ready), and each POST held its worker for one more round trip while
other objects waited in the queue (bench/README.md, bench_scale's burst). client-go records Events
the same way: ``tools/record/event.go`` hands them to a broadcaster with a queue of
``maxQueuedEvents`` (1000) that drops when full (``watch.DropIfChannelFull``), and a goroutine writes
them to the sink.

:class:`EventRecorder` keeps at most ``capacity`` Events; when full, a new one is dropped and
counted in ``pdd_events_dropped_total``: losing a report beats blocking a reconcile. What an Event
needs of its object (kind, apiVersion and the metadata the Event's ``involvedObject`` names) is copied
when it is queued, so a queued Event keeps no object body alive.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from pdd_operator.controller.metrics import EVENTS_DROPPED

log = logging.getLogger(__name__)

#: Events waiting to be posted at most (client-go's ``maxQueuedEvents``).
CAPACITY = 1000

#: ``post(obj, type_, reason, message) -> bool``: :meth:`~pdd_operator.controller.kube.Kube.event`.
Post = Callable[[dict, str, str, str], bool]

_STOP = object()


def involved(obj: dict) -> dict:
    """The part of ``obj`` (an object as a dict) that an Event about it needs: ``apiVersion``, ``kind``
    and ``metadata``'s ``name``, ``namespace``, ``uid`` and ``resourceVersion``."""
    meta = obj.get("metadata") or {}
    slim = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta}
    return {**{k: obj[k] for k in ("apiVersion", "kind") if k in obj}, "metadata": slim}


class EventRecorder:
    """Posts Events in the background, in the order they were recorded; thread-safe.

    ``capacity``: Events queued at most (``ValueError`` below 1). The sending thread starts at the
    first :meth:`record` and is a daemon; :meth:`stop` ends it after what is queued was sent.
    """

    def __init__(self, capacity: int = CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"an event queue needs room for at least one Event, got {capacity}")
        self._queue: queue.Queue = queue.Queue(maxsize=capacity)
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._lock = threading.Lock()

    def record(self, post: Post, obj: dict, type_: str, reason: str, message: str) -> bool:
        """Queue one Event about ``obj`` for ``post``; returns False when the queue is full (the Event is
        dropped and counted) or the recorder was stopped."""
        with self._lock:
            if self._stopped:
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="event-recorder", daemon=True)
                self._thread.start()
        try:
            self._queue.put_nowait((post, involved(obj), type_, reason, message))
        except queue.Full:
            EVENTS_DROPPED.inc()
            log.warning("event queue full (%d): dropped %s on %s/%s", self._queue.maxsize, reason,
                        obj.get("metadata", {}).get("namespace"), obj.get("metadata", {}).get("name"))
            return False
        return True

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every Event recorded so far was handed to its ``post`` (seconds at most ``timeout``);
        True when the queue emptied in time."""
        done = threading.Event()
        threading.Thread(target=lambda: (self._queue.join(), done.set()), daemon=True).start()
        return done.wait(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """Send what is queued (for ``timeout`` seconds at most) and end the thread; later
        :meth:`record` calls return False."""
        with self._lock:
            self._stopped, thread = True, self._thread
        if thread is None:
            return
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            return
        thread.join(timeout)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                post, obj, type_, reason, message = item
                post(obj, type_, reason, message)
            except Exception:  # noqa: BLE001  (one Event must not end the thread; Kube.event logs its own)
                log.exception("posting an event failed")
            finally:
                self._queue.task_done()
