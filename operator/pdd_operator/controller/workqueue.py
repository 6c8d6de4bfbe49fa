"""A work queue of object keys with a pool of worker threads: bursts coalesce, no key runs twice at once.

The semantics are client-go's ``workqueue`` (what controller-runtime's reconcilers run on):

- a key added while it waits is not added again (a dirty set): N events of one object in a burst
  become one reconcile;
- a key added while a worker processes it is marked dirty and queued again once that worker is
  done: the object is reconciled once more, after, never concurrently;
- keys are served in the order they were first added, so one busy object never holds up the others:
  a worker that finished a key takes the next waiting one, whatever it is.

Each key is handed to the worker with the time it was queued (its first add since a worker last took
it), so the caller can measure from the event to what the work did; the wait itself is observed in
``pdd_workqueue_wait_seconds``.

:meth:`WorkQueue.add` never blocks for long (a lock held only for set operations), so kopf's event
handlers can call it from the event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable

from pdd_operator.controller.metrics import QUEUE_ADDS, QUEUE_DEPTH, QUEUE_WAIT

log = logging.getLogger(__name__)


class WorkQueue:
    """Keys waiting to be processed by ``workers`` threads calling ``process(key, queued_at)``
    (``queued_at``: ``time.monotonic()`` of the add that queued the key).

    ``process`` should not raise; an exception is logged and the key is dropped until it is added
    again (the next event or the periodic resync). Raises ``ValueError`` for ``workers < 1``.
    """

    def __init__(self, process: Callable[[Hashable, float], None], workers: int = 8,
                 name: str = "reconcile") -> None:
        if workers < 1:
            raise ValueError(f"a work queue needs at least one worker, got {workers}")
        self._process = process
        self._workers = workers
        self._name = name
        self._cond = threading.Condition()
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._queued_at: dict[Hashable, float] = {}
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self._gate = threading.Event()
        self._gate.set()

    def add(self, key: Hashable) -> None:
        """Queue ``key`` unless it already waits; a key being processed runs once more afterwards."""
        with self._cond:
            QUEUE_ADDS.inc()
            if key in self._dirty:
                return
            self._dirty.add(key)
            self._queued_at[key] = time.monotonic()
            if key in self._processing:
                return
            self._queue.append(key)
            QUEUE_DEPTH.set(len(self._queue))
            self._cond.notify()

    def __len__(self) -> int:
        """Keys waiting (not counting those being processed)."""
        with self._cond:
            return len(self._queue)

    def idle(self) -> bool:
        """True when no key waits and none is being processed."""
        with self._cond:
            return not self._queue and not self._processing

    def hold_until(self, gate: threading.Event) -> None:
        """Workers take no key before ``gate`` is set (e.g. until the caches are filled)."""
        self._gate = gate

    def start(self) -> None:
        """Start the worker threads (daemon threads, named ``<name>-<i>``); idempotent."""
        with self._cond:
            if self._threads:
                return
            self._stopping = False
            self._threads = [threading.Thread(target=self._run, name=f"{self._name}-{i}", daemon=True)
                             for i in range(self._workers)]
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Let the workers finish their current key and end (waiting keys are dropped)."""
        with self._cond:
            self._stopping = True
            self._queue.clear()
            self._dirty.clear()
            self._queued_at.clear()
            self._cond.notify_all()
            threads, self._threads = self._threads, []
        self._gate.set()
        for thread in threads:
            thread.join(timeout)

    def _get(self) -> tuple[Hashable, float] | None:
        with self._cond:
            while not self._queue and not self._stopping:
                self._cond.wait()
            if self._stopping:
                return None
            key = self._queue.popleft()
            QUEUE_DEPTH.set(len(self._queue))
            self._processing.add(key)
            self._dirty.discard(key)
            queued_at = self._queued_at.pop(key, time.monotonic())
        QUEUE_WAIT.observe(time.monotonic() - queued_at)
        return key, queued_at

    def _done(self, key: Hashable) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty and not self._stopping:
                self._queue.append(key)
                QUEUE_DEPTH.set(len(self._queue))
                self._cond.notify()

    def _run(self) -> None:
        while True:
            self._gate.wait()
            taken = self._get()
            if taken is None:
                return
            key, queued_at = taken
            try:
                self._process(key, queued_at)
            except Exception:  # noqa: BLE001  (a worker must survive whatever one key does)
                log.exception("%s of %s failed", self._name, key)
            finally:
                self._done(key)
