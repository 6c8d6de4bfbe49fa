"""A work queue of object keys with a pool of worker threads: bursts coalesce, no key runs twice at
once, and work that must write children is served before work that can only update a status.

The semantics are client-go's ``workqueue`` (what controller-runtime's reconcilers run on):

- a key added while it waits is not added again (a dirty set): N events of one object in a burst
  become one reconcile;
- a key added while a worker processes it is marked dirty and queued again once that worker is
  done: the object is reconciled once more, after, never concurrently;
- within one priority, keys are served in the order they were queued, so one busy object never holds
  up the others: a worker that finished a key takes the next waiting one, whatever it is.

**Priorities** (controller-runtime's ``priorityqueue``, v0.20: ``AddWithOpts(Priority)``; the queue
keeps the highest priority a waiting key was added with, and serves higher priorities first): each
add names a :class:`Priority`. ``WRITE`` is an event after which the reconcile may have to write
children (a new object, a spec change, a child deleted or edited); ``STATUS`` one after which it can
only update the status (a child's or pod's status changed); ``RESYNC`` the periodic resync's round, when
nothing is known to have changed. So in a burst of
creates the new objects get their children while the earlier ones' pods are still starting, instead
of waiting behind their status reconciles (bench/README.md, 2026-12-04). A key added with both
while it waits, or while it runs, is queued (again) at the higher.

**Fairness** (what controller-runtime's queue does not give): a ``STATUS`` key that has waited
``promote_after`` seconds is moved behind the ``WRITE`` keys waiting then (counted in
``pdd_workqueue_promotions_total``), so status work waits at most ``promote_after`` plus the time to
serve the write work queued before it, however much write work keeps coming. ``RESYNC`` keys are not
promoted: a round of the safety net that found nothing to do would otherwise, on a saturated
apiserver, queue a whole namespace's no-op reconciles ahead of later creates (measured, bench/README.md
2026-12-05); it runs once nothing else waits, and the next round queues it again.

A key whose ``process`` returns True (a transient failure) is queued again after a per-key
exponential backoff (client-go's ``ItemExponentialFailureRateLimiter``, :func:`retry_delay`): the
n-th failure in a row waits ``base x 2**(n-1)`` seconds, at most ``cap``; a run that returns anything
else resets the key's count (client-go's ``Forget``). The retry keeps the priority of the run that
failed. An :meth:`WorkQueue.add` of a key that waits
out its backoff queues it at once and cancels the timer (the event may be the fix, or the apiserver
back), keeping its failure count, so a key that fails again waits longer. Retries are counted in
``pdd_workqueue_retries_total``. Retried keys keep the rules above: coalesced, never twice at once.

**A reconcile that waits does not hold a worker**: ``process`` may return a
:class:`concurrent.futures.Future` instead of its outcome (a reconcile whose applies and status patch
go on in other threads: :func:`~pdd_operator.controller.reconcile.reconcile`). The worker is then free
for the next key at once, while the key stays in progress until the future is done: it is not run
again meanwhile (an add marks it dirty and it runs once more after, as above), and the future's result
is taken as ``process``'s return value (True: retry), an exception as one ``process`` raised. At most
``max_deferred`` keys wait so; while that many do, workers take no key (the bound on reconciles in
flight, and on what they hold in memory, is ``workers + max_deferred``). The last ``write_reserve`` of those
places are **for write work only** (:func:`lowest_takeable`): a ``STATUS`` or ``RESYNC`` key is taken only while
fewer than ``max_deferred - write_reserve`` keys are deferred, so status patches waiting for a slow apiserver
never hold every place while a new object's children wait in the queue (a status-only reconcile with a patch
to send is deferred too; measured in bench/README.md, 2026-12-07 evening). Worker-seconds spent in
``process`` are counted in ``pdd_workqueue_worker_seconds_total`` (divided by a window's seconds and
the workers: the workers' occupancy), the keys deferred now in ``pdd_workqueue_deferred``.

**Status work is coalesced over a short window** (``status_delay`` seconds, 0: off): a ``STATUS`` add of a
key that does not wait already is queued when the window has passed (as :meth:`WorkQueue.add_after`), so
the status events that one change of the cluster sets off (the Deployment controller's status updates of
the prefill, decode and router Deployments, a child's echo that came before its apply's answer) become
one reconcile instead of one each. A ``WRITE`` or ``RESYNC`` add meanwhile queues the key at once (at the
higher priority); a ``STATUS`` add of a key that waits already raises its priority as before. The cost is
at most ``status_delay`` seconds more before a status update is written; children are never delayed.
client-go's ``AddAfter`` with a fixed delay is the same tool (controller-runtime's ``RequeueAfter``).

Each key is handed to the worker with the time it was queued (its first add since a worker last took
it), so the caller can measure from the event to what the work did; the wait itself is observed in
``pdd_workqueue_wait_seconds`` (all keys) and ``pdd_workqueue_priority_wait_seconds`` (by the
priority it was served at).

:meth:`WorkQueue.add` never blocks for long (a lock held only for set operations), so kopf's event
handlers can call it from the event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from enum import IntEnum

from pdd_operator.controller.metrics import (
    QUEUE_ADDS,
    QUEUE_COALESCED,
    QUEUE_DEFERRED,
    QUEUE_DEPTH,
    QUEUE_PRIORITY_WAIT,
    QUEUE_PROMOTIONS,
    QUEUE_RETRIES,
    QUEUE_WAIT,
    QUEUE_WORKER_SECONDS,
)

log = logging.getLogger(__name__)

#: client-go's DefaultItemBasedRateLimiter base: the first retry of a failed key waits 5 ms.
RETRY_BASE_SECONDS = 0.005
#: Longest wait of a failing key (client-go's default is 1000 s); the operator passes its kopf API
#: backoff cap (``PDD_BACKOFF_CAP_SECONDS``, 30 s), so a reconcile is retried as often as kopf's watches.
RETRY_CAP_SECONDS = 30.0
#: Seconds a ``STATUS`` key waits before it is served with the ``WRITE`` keys (the fairness bound).
PROMOTE_AFTER_SECONDS = 10.0
#: The operator's window over which ``STATUS`` adds of a key are coalesced (``status_delay``; the queue's
#: own default is 0: off).
STATUS_DELAY_SECONDS = 1.0


class Priority(IntEnum):
    """What a queued reconcile may have to do; higher is served first (controller-runtime's
    ``priorityqueue``: higher ``Priority`` first)."""

    #: Nothing known changed: the periodic resync's round, the safety net for a missed event
    #: (controller-runtime queues resyncs at ``handler.LowPriority``). Never promoted: served when no
    #: other work waits; an event of the object meanwhile raises it.
    RESYNC = -1
    #: Only the status can change: a child's or pod's status changed, a held-back progress update.
    STATUS = 0
    #: Children may have to be written: a new object, a spec change, a child deleted or edited by
    #: someone else, a referenced ConfigMap changed.
    WRITE = 1


def lowest_takeable(deferred: int, max_deferred: int, write_reserve: int) -> Priority | None:
    """The lowest :class:`Priority` a worker may take now, with ``deferred`` keys deferred (their runs going on
    off the workers) of at most ``max_deferred`` (0: no bound), the last ``write_reserve`` places kept for
    ``WRITE`` work: ``RESYNC`` (anything) below ``max_deferred - write_reserve``, ``WRITE`` from there up to
    ``max_deferred``, ``None`` (nothing) at ``max_deferred`` or more.

    Raises ``ValueError`` for a negative argument or a ``write_reserve`` above ``max_deferred`` (but with
    ``max_deferred`` 0, where there is nothing to reserve).
    """
    if deferred < 0 or max_deferred < 0 or write_reserve < 0:
        raise ValueError(f"deferred, max_deferred and write_reserve must be >= 0, got {deferred}, {max_deferred}, "
                         f"{write_reserve}")
    if not max_deferred:
        return Priority.RESYNC
    if write_reserve > max_deferred:
        raise ValueError(f"write_reserve {write_reserve} is more than max_deferred {max_deferred}")
    if deferred < max_deferred - write_reserve:
        return Priority.RESYNC
    return Priority.WRITE if deferred < max_deferred else None


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
    seconds, :func:`retry_delay`), anything else when done, or a ``Future`` of one of these: the key
    is then done when the future is, and the worker takes the next key meanwhile (module docstring;
    at most ``max_deferred`` keys at once, 0: process's futures are waited for by the worker). It
    should not raise; an exception is logged and the key is dropped, not retried, until it is added again (the next event or the
    periodic resync). ``promote_after``: seconds a ``STATUS`` key waits before it joins the ``WRITE``
    keys (module docstring). ``clock`` is monotonic seconds (tests pass a fake one). Raises
    ``ValueError`` for ``workers < 1``, a negative ``promote_after`` or a backoff :func:`retry_delay`
    refuses, or a negative ``max_deferred`` or ``status_delay``. ``status_delay``: seconds over which
    ``STATUS`` adds of a key are coalesced (module docstring; 0: queued at once). ``write_reserve``: of the
    ``max_deferred`` places, how many only ``WRITE`` work may take (:func:`lowest_takeable`; ``ValueError`` when
    more than ``max_deferred``, unless that is 0).
    """

    def __init__(self, process: Callable[[Hashable, float], bool | None | Future], workers: int = 8,
                 name: str = "reconcile", retry_base: float = RETRY_BASE_SECONDS,
                 retry_cap: float = RETRY_CAP_SECONDS, clock: Callable[[], float] = time.monotonic,
                 promote_after: float = PROMOTE_AFTER_SECONDS, max_deferred: int = 0,
                 status_delay: float = 0.0, write_reserve: int = 0) -> None:
        if workers < 1:
            raise ValueError(f"a work queue needs at least one worker, got {workers}")
        if max_deferred < 0:
            raise ValueError(f"max_deferred must be >= 0, got {max_deferred}")
        self._max_deferred = max_deferred
        lowest_takeable(0, max_deferred, write_reserve)  # refuses a bad reserve now
        self._write_reserve = write_reserve
        self._deferred: set[Hashable] = set()  # keys whose process returned a future not yet done
        if promote_after < 0:
            raise ValueError(f"promote_after must be >= 0 seconds, got {promote_after}")
        if status_delay < 0:
            raise ValueError(f"status_delay must be >= 0 seconds, got {status_delay}")
        self._status_delay = status_delay
        retry_delay(1, retry_base, retry_cap)  # refuses a bad backoff now, not at the first failure
        self._retry_base, self._retry_cap, self._clock = retry_base, retry_cap, clock
        self._promote_after = promote_after
        self._failures: dict[Hashable, int] = {}
        self._retry_at: dict[Hashable, float] = {}
        self._process = process
        self._workers = workers
        self._name = name
        self._cond = threading.Condition()
        # One FIFO per priority of (key, entry number, when it entered); an entry is live while
        # self._entry[key] holds its number (a key raised to WRITE leaves a dead STATUS entry behind).
        self._levels: dict[Priority, deque[tuple[Hashable, int, float]]] = {p: deque() for p in Priority}
        self._entry: dict[Hashable, int] = {}
        self._seq = 0
        self._priority: dict[Hashable, Priority] = {}  # of every dirty key
        self._timer_priority: dict[Hashable, Priority] = {}  # of every key in self._retry_at
        self._dirty: set[Hashable] = set()
        self._processing: dict[Hashable, Priority] = {}  # key -> the priority it is being served at
        self._queued_at: dict[Hashable, float] = {}
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self._gate = threading.Event()
        self._gate.set()

    def add(self, key: Hashable, priority: Priority = Priority.WRITE) -> None:
        """Queue ``key`` at ``priority`` unless it already waits (then its priority is raised to
        ``priority`` if that is higher); a key being processed runs once more afterwards, at the
        highest priority it was added with meanwhile; a key waiting out a retry backoff is queued now
        (its failure count is kept, its priority is the higher of the failed run's and ``priority``).
        With ``status_delay``, a ``STATUS`` add of a key that does not wait (and is not to run again)
        already is queued once the window has passed instead (:meth:`add_after`; an earlier timer,
        a backoff's included, is kept)."""
        with self._cond:
            QUEUE_ADDS.inc()
            if self._status_delay and priority == Priority.STATUS and key not in self._dirty:
                self._timer(key, self._status_delay, Priority.STATUS)
                QUEUE_COALESCED.inc()
                return
            if self._retry_at.pop(key, None) is not None:
                priority = max(priority, self._timer_priority.pop(key, Priority.RESYNC))
            self._enqueue(key, self._clock(), Priority(priority))

    def add_after(self, key: Hashable, delay: float, priority: Priority = Priority.STATUS) -> None:
        """Queue ``key`` at ``priority`` once ``delay`` seconds have passed (client-go's ``AddAfter``),
        unless it waits already (then nothing changes) or an earlier timer is set for it; an
        :meth:`add` meanwhile queues it at once and cancels the timer. Its failure count is left as
        it is. Timers share the retry backoff's (:meth:`retry_due`)."""
        with self._cond:
            if key in self._dirty and key not in self._processing:
                return
            self._timer(key, delay, priority)

    def _timer(self, key: Hashable, delay: float, priority: Priority) -> None:
        # Under self._cond: queue ``key`` at ``priority`` in ``delay`` seconds unless an earlier timer is set.
        if self._stopping:
            return
        at = self._clock() + max(0.0, delay)
        if key not in self._retry_at or at < self._retry_at[key]:
            self._retry_at[key] = at
        self._timer_priority[key] = max(Priority(priority), self._timer_priority.get(key, Priority.RESYNC))
        self._cond.notify()

    def _enqueue(self, key: Hashable, now: float, priority: Priority) -> None:
        # Under self._cond.
        if key in self._dirty:
            if priority > self._priority[key]:
                self._priority[key] = priority
                if key not in self._processing:
                    self._push(key, priority, now)
            return
        self._dirty.add(key)
        self._priority[key] = priority
        self._queued_at[key] = now
        if key in self._processing:
            return
        self._push(key, priority, now)

    def _push(self, key: Hashable, priority: Priority, now: float) -> None:
        # Under self._cond: a new live entry of ``key`` at the tail of ``priority``'s FIFO.
        self._seq += 1
        self._entry[key] = self._seq
        self._levels[priority].append((key, self._seq, now))
        QUEUE_DEPTH.set(len(self._entry))
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

    def waiting(self) -> list[tuple[Hashable, Priority]]:
        """The keys waiting, with their priority, in the order workers would take them now if no
        ``STATUS`` key were old enough to be promoted (tests, logs)."""
        with self._cond:
            return [(key, priority) for priority in sorted(Priority, reverse=True)
                    for key, seq, _ in self._levels[priority] if self._entry.get(key) == seq]

    def clear(self) -> None:
        """Drop every waiting key (not those being processed or waiting out a backoff)."""
        with self._cond:
            for key in self._entry:
                self._dirty.discard(key)
                self._queued_at.pop(key, None)
                self._priority.pop(key, None)
            self._entry.clear()
            for level in self._levels.values():
                level.clear()
            QUEUE_DEPTH.set(0)

    def __len__(self) -> int:
        """Keys waiting (not counting those being processed)."""
        with self._cond:
            return len(self._entry)

    def deferred(self) -> int:
        """Keys whose run goes on off the workers (``process`` returned a future not yet done)."""
        with self._cond:
            return len(self._deferred)

    def idle(self) -> bool:
        """True when no key waits, none is being processed (deferred ones included) and none waits out
        a retry backoff."""
        with self._cond:
            return not self._entry and not self._processing and not self._retry_at

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
            self._entry.clear()
            for level in self._levels.values():
                level.clear()
            self._priority.clear()
            self._timer_priority.clear()
            self._dirty.clear()
            self._queued_at.clear()
            self._retry_at.clear()
            self._failures.clear()
            self._cond.notify_all()
            threads, self._threads = self._threads, []
        self._gate.set()
        for thread in threads:
            thread.join(timeout)

    def _promote(self, now: float) -> None:
        # Under self._cond: STATUS keys that entered promote_after seconds ago or earlier join the
        # tail of the WRITE keys (the fairness bound); dead entries at the head are dropped.
        status = self._levels[Priority.STATUS]
        while status:
            key, seq, entered = status[0]
            if self._entry.get(key) != seq:
                status.popleft()
                continue
            if now - entered < self._promote_after:
                return
            status.popleft()
            self._priority[key] = Priority.WRITE
            self._push(key, Priority.WRITE, entered)
            QUEUE_PROMOTIONS.inc()

    def _pop(self, lowest: Priority = Priority.RESYNC) -> tuple[Hashable, Priority] | None:
        # Under self._cond: the next live entry of ``lowest`` or above, highest priority first.
        for priority in sorted((p for p in Priority if p >= lowest), reverse=True):
            level = self._levels[priority]
            while level:
                key, seq, _ = level.popleft()
                if self._entry.get(key) == seq:
                    del self._entry[key]
                    return key, priority
        return None

    def _get(self) -> tuple[Hashable, float] | None:
        with self._cond:
            while True:
                if self._stopping:
                    return None
                now = self._clock()
                self._requeue_due(now)
                lowest = lowest_takeable(len(self._deferred), self._max_deferred, self._write_reserve)
                if self._entry and lowest is not None:
                    self._promote(now)
                    taken = self._pop(lowest)
                    if taken is not None:
                        break
                # Sleep until the next backoff ends (an add or a new backoff wakes us sooner).
                self._cond.wait(min(self._retry_at.values()) - now if self._retry_at else None)
            key, priority = taken
            QUEUE_DEPTH.set(len(self._entry))
            self._processing[key] = priority
            self._priority.pop(key, None)
            self._dirty.discard(key)
            queued_at = self._queued_at.pop(key, now)
        wait = max(0.0, self._clock() - queued_at)
        QUEUE_WAIT.observe(wait)
        QUEUE_PRIORITY_WAIT.labels(priority.name.lower()).observe(wait)
        return key, queued_at

    def _requeue_due(self, now: float) -> None:
        # Under self._cond: queue the keys whose backoff ended, earliest first. A scan of the waiting
        # keys: they are few but in an outage, and then every key is one per PDDeployment.
        due = sorted((at, i, key) for i, (key, at) in enumerate(self._retry_at.items()) if at <= now)
        for at, _, key in due:
            del self._retry_at[key]
            self._enqueue(key, at, self._timer_priority.pop(key, Priority.STATUS))

    def _done(self, key: Hashable, retry: bool) -> None:
        with self._cond:
            ran_at = self._processing.pop(key, Priority.STATUS)
            if key in self._deferred:
                self._deferred.discard(key)
                QUEUE_DEFERRED.set(len(self._deferred))
                self._cond.notify()  # a worker held back by max_deferred may go on
            if self._stopping:
                return
            if retry:
                failures = self._failures[key] = self._failures.get(key, 0) + 1
                QUEUE_RETRIES.inc()
            else:
                self._failures.pop(key, None)
            if key in self._dirty:  # added during the run: runs again now, whatever the outcome
                priority = max(self._priority[key], ran_at) if retry else self._priority[key]
                self._priority[key] = priority
                self._push(key, priority, self._queued_at.get(key, self._clock()))
            elif retry:
                self._retry_at[key] = self._clock() + retry_delay(failures, self._retry_base, self._retry_cap)
                self._timer_priority[key] = max(ran_at, self._timer_priority.get(key, Priority.RESYNC))
                self._cond.notify()  # a waiting worker sleeps until the earliest backoff ends

    def _run(self) -> None:
        while True:
            self._gate.wait()
            taken = self._get()
            if taken is None:
                return
            key, queued_at = taken
            retry, deferred, started = False, False, time.monotonic()
            try:
                outcome = self._process(key, queued_at)
                if isinstance(outcome, Future):
                    deferred = self._defer(key, outcome)
                    if not deferred:
                        outcome = outcome.result()
                retry = outcome is True
            except Exception:  # noqa: BLE001  (a worker must survive whatever one key does)
                log.exception("%s of %s failed", self._name, key)
            finally:
                QUEUE_WORKER_SECONDS.inc(time.monotonic() - started)
                if not deferred:
                    self._done(key, retry)

    def _defer(self, key: Hashable, future: Future) -> bool:
        """Let ``future`` finish ``key``'s run (:meth:`_settle`) unless deferring is off; True if so."""
        if not self._max_deferred:
            return False
        with self._cond:
            self._deferred.add(key)
            QUEUE_DEFERRED.set(len(self._deferred))
        future.add_done_callback(lambda done: self._settle(key, done))
        return True

    def _settle(self, key: Hashable, future: Future) -> None:
        # In the thread that completed ``future`` (or the worker, when it was done already).
        retry = False
        try:
            retry = future.result() is True
        except Exception:  # noqa: BLE001  (as a raising process: logged, not retried)
            log.exception("%s of %s failed", self._name, key)
        finally:
            self._done(key, retry)
