"""A work queue of object keys with a pool of worker threads: bursts coalesce, no key runs twice at once.

The semantics are client-go's ``workqueue`` (what controller-runtime's reconcilers run on):

- a key added while it waits is not added again (a dirty set): N events of one object in a burst
  become one reconcile;
- a key added while a worker processes it is marked dirty and queued again once that worker is
  done: the object is reconciled once more, after, never concurrently;
- keys are served in the order they were first added, so one busy object never holds up the others:
  a worker that finished a key takes the next waiting one, whatever it is.

A key whose ``process`` returns True (a transient failure) is queued again after a per-key
exponential backoff (client-go's ``ItemExponentialFailureRateLimiter``, :func:`retry_delay`): the
n-th failure in a row waits ``base x 2**(n-1)`` seconds, at most ``cap``; a run that returns anything
else resets the key's count (client-go's ``Forget``). An :meth:`WorkQueue.add` of a key that waits
out its backoff queues it at once and cancels the timer (the event may be the fix, or the apiserver
back), keeping its failure count, so a key that fails again waits longer. Retries are counted in
``pdd_workqueue_retries_total``. Retried keys keep the rules above: coalesced, never twice at once.

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

from pdd_operator.controller.metrics import QUEUE_ADDS, QUEUE_DEPTH, QUEUE_RETRIES, QUEUE_WAIT

log = logging.getLogger(__name__)

#: client-go's DefaultItemBasedRateLimiter base: the first retry of a failed key waits 5 ms.
RETRY_BASE_SECONDS = 0.005
#: Longest wait of a failing key (client-go's default is 1000 s); the operator passes its kopf API
#: backoff cap (``PDD_BACKOFF_CAP_SECONDS``, 30 s), so a reconcile is retried as often as kopf's watches.
RETRY_CAP_SECONDS = 30.0


def retry_delay(failures: int, base: float = RETRY_BASE_SECONDS, cap: float = RETRY_CAP_SECONDS) -> float:
    """Seconds a key waits before its retry after ``failures`` failures in a row (>= 1):
    ``base x 2**(failures-1)``, at most ``cap`` (client-go ``ItemExponentialFailureRateLimiter.When``).

    Raises ``ValueError`` for ``failures < 1`` or unless ``0 < base <= cap``.
    """
    if failures < 1:
        raise ValueError(f"a retry delay needs at least one failure, got {failures}")
    if not 0 < base <= cap:
        raise ValueError(f"retry backoff needs 0 < base <= cap, got base={base}, cap={cap}")
    if failures > 64:  # 2**64 x any positive base is past every sensible cap; avoids float overflow
        return cap
    return min(cap, base * 2 ** (failures - 1))


class WorkQueue:
    """Keys waiting to be processed by ``workers`` threads calling ``process(key, queued_at)``
    (``queued_at``: ``clock()`` of the add that queued the key, or of the end of its backoff).

    ``process`` returns True to have the key retried after its backoff (``retry_base``, ``retry_cap``
    seconds, :func:`retry_delay`), anything else when done. It should not raise; an exception is
    logged and the key is dropped, not retried, until it is added again (the next event or the
    periodic resync). ``clock`` is monotonic seconds (tests pass a fake one). Raises ``ValueError``
    for ``workers < 1`` or a backoff :func:`retry_delay` refuses.
    """

    def __init__(self, process: Callable[[Hashable, float], bool | None], workers: int = 8,
                 name: str = "reconcile", retry_base: float = RETRY_BASE_SECONDS,
                 retry_cap: float = RETRY_CAP_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        if workers < 1:
            raise ValueError(f"a work queue needs at least one worker, got {workers}")
        retry_delay(1, retry_base, retry_cap)  # refuses a bad backoff now, not at the first failure
        self._retry_base, self._retry_cap, self._clock = retry_base, retry_cap, clock
        self._failures: dict[Hashable, int] = {}
        self._retry_at: dict[Hashable, float] = {}
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
        """Queue ``key`` unless it already waits; a key being processed runs once more afterwards; a key
        waiting out a retry backoff is queued now (its failure count is kept)."""
        with self._cond:
            QUEUE_ADDS.inc()
            self._retry_at.pop(key, None)
            self._enqueue(key, self._clock())

    def add_after(self, key: Hashable, delay: float) -> None:
        """Queue ``key`` once ``delay`` seconds have passed (client-go's ``AddAfter``), unless it waits
        already (then nothing changes) or an earlier timer is set for it; an :meth:`add` meanwhile queues
        it at once and cancels the timer. Its failure count is left as it is. Timers share the retry
        backoff's (:meth:`retry_due`)."""
        with self._cond:
            if self._stopping or (key in self._dirty and key not in self._processing):
                return
            at = self._clock() + max(0.0, delay)
            if key not in self._retry_at or at < self._retry_at[key]:
                self._retry_at[key] = at
            self._cond.notify()

    def _enqueue(self, key: Hashable, now: float) -> None:
        # Under self._cond.
        if key in self._dirty:
            return
        self._dirty.add(key)
        self._queued_at[key] = now
        if key in self._processing:
            return
        self._queue.append(key)
        QUEUE_DEPTH.set(len(self._queue))
        self._cond.notify()

    def retry_due(self, key: Hashable) -> float | None:
        """The ``clock()`` time at which ``key`` is queued again after a failure, ``None`` unless it
        waits out a backoff."""
        with self._cond:
            return self._retry_at.get(key)

    def failures(self, key: Hashable) -> int:
        """Failures of ``key`` in a row (0 after a run that did not ask for a retry)."""
        with self._cond:
            return self._failures.get(key, 0)

    def __len__(self) -> int:
        """Keys waiting (not counting those being processed)."""
        with self._cond:
            return len(self._queue)

    def idle(self) -> bool:
        """True when no key waits, none is being processed and none waits out a retry backoff."""
        with self._cond:
            return not self._queue and not self._processing and not self._retry_at

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
            self._retry_at.clear()
            self._failures.clear()
            self._cond.notify_all()
            threads, self._threads = self._threads, []
        self._gate.set()
        for thread in threads:
            thread.join(timeout)

    def _get(self) -> tuple[Hashable, float] | None:
        with self._cond:
            while True:
                if self._stopping:
                    return None
                now = self._clock()
                self._requeue_due(now)
                if self._queue:
                    break
                # Sleep until the next backoff ends (an add or a new backoff wakes us sooner).
                self._cond.wait(min(self._retry_at.values()) - now if self._retry_at else None)
            key = self._queue.popleft()
            QUEUE_DEPTH.set(len(self._queue))
            self._processing.add(key)
            self._dirty.discard(key)
            queued_at = self._queued_at.pop(key, now)
        QUEUE_WAIT.observe(max(0.0, self._clock() - queued_at))
        return key, queued_at

    def _requeue_due(self, now: float) -> None:
        # Under self._cond: queue the keys whose backoff ended, earliest first. A scan of the waiting
        # keys: they are few but in an outage, and then every key is one per PDDeployment.
        due = sorted((at, i, key) for i, (key, at) in enumerate(self._retry_at.items()) if at <= now)
        for at, _, key in due:
            del self._retry_at[key]
            self._enqueue(key, at)

    def _done(self, key: Hashable, retry: bool) -> None:
        with self._cond:
            self._processing.discard(key)
            if self._stopping:
                return
            if retry:
                failures = self._failures[key] = self._failures.get(key, 0) + 1
                QUEUE_RETRIES.inc()
            else:
                self._failures.pop(key, None)
            if key in self._dirty:  # added during the run: runs again now, whatever the outcome
                self._queue.append(key)
                QUEUE_DEPTH.set(len(self._queue))
                self._cond.notify()
            elif retry:
                self._retry_at[key] = self._clock() + retry_delay(failures, self._retry_base, self._retry_cap)
                self._cond.notify()  # a waiting worker sleeps until the earliest backoff ends

    def _run(self) -> None:
        while True:
            self._gate.wait()
            taken = self._get()
            if taken is None:
                return
            key, queued_at = taken
            retry = False
            try:
                retry = self._process(key, queued_at) is True
            except Exception:  # noqa: BLE001  (a worker must survive whatever one key does)
                log.exception("%s of %s failed", self._name, key)
            finally:
                self._done(key, retry)
