"""Liveness of the operator and kopf's retry policy (pure: no kopf, no cluster access).

- :class:`CappedBackoff`: kopf's ``settings.networking.error_backoffs`` as an unbounded sequence, so
  no API outage makes kopf give up (and the operator exit); kopf iterates it afresh for every request.
- :class:`WatchHealth`: whether the PDDeployment watch still delivers. The periodic resync lists
  every PDDeployment straight from the apiserver; an object whose listed ``resourceVersion`` the
  watch has not delivered for longer than ``stuck_after`` means the watch is stuck (connected but
  silent, or dead without kopf noticing). The resync loop not running for that long is reported too.
- :func:`informer_problem`: whether one of the operator's own informers
  (:mod:`~pdd_operator.controller.informer`) is stuck: every attempt failing for longer than
  ``stuck_after``, or nothing read (no event, bookmark, list page or watch end) for longer than
  ``silent_after``, which must exceed a watch's whole life (the apiserver ends each after
  ``timeoutSeconds``, and a silent connection is dropped by the client's read timeout), so that a
  healthy informer always makes progress within it.
- :func:`liveness_failure`: whether such a problem should fail liveness: only while the apiserver
  answers a fresh request as ready. With the apiserver hung or away (stopped, SIGSTOPped, its etcd away) a
  restart cures nothing, and each restart the kubelet makes lengthens its CrashLoopBackOff (up to 5
  minutes), which would delay the recovery once the apiserver is back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator


class CappedBackoff:
    """Delays in seconds: ``first``, doubling, up to ``cap``, then ``cap`` forever.

    Re-iterable and not sized: kopf (``kopf/_cogs/clients/api.py``) takes a sized sequence as a retry
    limit and re-raises after its last element; an unsized iterable is retried for as long as it
    yields. Raises ``ValueError`` unless ``0 < first <= cap``.
    """

    def __init__(self, first: float = 1.0, cap: float = 30.0) -> None:
        if not 0 < first <= cap:
            raise ValueError(f"backoff needs 0 < first <= cap, got first={first}, cap={cap}")
        self.first, self.cap = first, cap

    def __iter__(self) -> Iterator[float]:
        delay = self.first
        while True:
            yield delay
            delay = min(self.cap, delay * 2)


class WatchHealth:
    """Compares what the watch delivered with what the resync listed. Times are monotonic seconds."""

    def __init__(self, stuck_after: float) -> None:
        self.stuck_after = stuck_after
        self._delivered: dict[tuple[str, str], str | None] = {}
        self._behind_since: dict[tuple[str, str], float] = {}
        self._resync_at: float | None = None
        self._started: float | None = None

    def watched(self, key: tuple[str, str], resource_version: str | None, now: float) -> None:
        """The watch delivered ``key`` at ``resource_version`` (``None``: deleted)."""
        self._started = self._started if self._started is not None else now
        if resource_version is None:
            self._delivered.pop(key, None)
            self._behind_since.pop(key, None)
        else:
            self._delivered[key] = resource_version
            self._behind_since.pop(key, None)

    def resync_ran(self, now: float) -> None:
        """A resync round started (whether or not the apiserver answered)."""
        self._resync_at = now
        self._started = self._started if self._started is not None else now

    def listed(self, items: Iterable[tuple[tuple[str, str], str | None]], now: float) -> None:
        """The resync listed these ``(key, resourceVersion)`` pairs from the apiserver at ``now``."""
        seen = set()
        for key, version in items:
            seen.add(key)
            if self._delivered.get(key) == version:
                self._behind_since.pop(key, None)
            else:
                self._behind_since.setdefault(key, now)
        for key in list(self._behind_since):
            if key not in seen:
                del self._behind_since[key]

    def problem(self, now: float) -> str | None:
        """Why the operator is not live (a message), or ``None``."""
        if self._resync_at is not None and now - self._resync_at > self.stuck_after:
            return f"the periodic resync has not run for {now - self._resync_at:.0f}s"
        if self._behind_since:
            key, since = min(self._behind_since.items(), key=lambda kv: kv[1])
            if now - since > self.stuck_after:
                return (f"the PDDeployment watch has not delivered {key[0]}/{key[1]} as listed {now - since:.0f}s "
                        f"ago ({len(self._behind_since)} object(s) behind)")
        return None


def informer_problem(name: str, progress_at: float | None, failing_since: float | None, last_error: str | None,
                     started_at: float, now: float, stuck_after: float, silent_after: float) -> str | None:
    """Why the informer ``name`` is stuck (a message), or ``None``. Times are monotonic seconds:
    ``progress_at`` its last progress (None: none yet), ``failing_since`` the first of the failures in
    a row that continue now (None: not failing), ``started_at`` when it started. Fails after
    ``stuck_after`` seconds of failures, or ``silent_after`` seconds without progress (since the start
    when there was none)."""
    if failing_since is not None and now - failing_since > stuck_after:
        return (f"the {name} informer has failed for {now - failing_since:.0f}s"
                + (f" (last error: {last_error})" if last_error else ""))
    since = progress_at if progress_at is not None else started_at
    if now - since > silent_after:
        return f"the {name} informer has read nothing for {now - since:.0f}s"
    return None


def liveness_failure(problem: str | None, apiserver_answers: Callable[[], bool]) -> str | None:
    """The message to fail liveness with, or ``None`` to stay live: ``problem`` (from
    :meth:`WatchHealth.problem`) when the apiserver answers a fresh request (``apiserver_answers()``,
    called only when there is a problem), else ``None``: the watch is silent because the apiserver is."""
    if problem is None or not apiserver_answers():
        return None
    return f"{problem}, though the apiserver answers"
