"""Leader election on a ``coordination.k8s.io/v1`` Lease (``pdd run --leader-election-lease NAME``).

With more than one replica every replica serves the admission webhook (the Service balances over
ready pods), but only the leader reconciles: the others watch and stay ready to take over. This is
the protocol of client-go's leaderelection package (the Lease's ``holderIdentity``,
``leaseDurationSeconds``, ``renewTime``, ``acquireTime``, ``leaseTransitions``), with optimistic
concurrency on the Lease's ``resourceVersion``:

- a replica takes the Lease when it is free or its holder has not renewed it for
  ``leaseDurationSeconds`` (by this replica's clock);
- the holder renews it every :data:`RETRY_SECONDS`; one that cannot renew for
  :data:`RENEW_DEADLINE_SECONDS` stops reconciling before the Lease can expire for others;
- of two replicas writing at once, the apiserver accepts one update (409 for the other);
- a leader that stops cleanly releases the Lease (client-go's ``ReleaseOnCancel``,
  :func:`release`): it clears ``holderIdentity`` and sets ``leaseDurationSeconds`` to 1, so the next
  replica takes over at its next retry instead of after the lease duration.

kopf's own peering is not leader election: replicas of equal priority all pause.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

log = logging.getLogger(__name__)

LEASE_SECONDS = 15
RENEW_DEADLINE_SECONDS = 10
RETRY_SECONDS = 2.0
#: ``(connect, read)`` seconds of each Lease request: a round's read and write end within the renew
#: deadline, so a dead connection costs leadership no later than the deadline does anyway.
REQUEST_TIMEOUT = (RENEW_DEADLINE_SECONDS / 4, RENEW_DEADLINE_SECONDS / 4)


def _fmt(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


@dataclass(frozen=True)
class Decision:
    """What to do with the Lease: ``spec`` to write (None: nothing), and whether we lead after it."""

    spec: dict | None
    leader: bool


def decide(spec: dict | None, identity: str, now: datetime, lease_seconds: int = LEASE_SECONDS) -> Decision:
    """The pure step of the election, given the Lease's current ``spec`` (None: no Lease).

    - ours: renew (``renewTime`` = now);
    - free (no holder) or expired (``renewTime`` + ``leaseDurationSeconds`` <= now): take it, counting
      a transition when the holder changes;
    - held by another and not expired: follow, write nothing.
    """
    spec = dict(spec or {})
    holder = spec.get("holderIdentity") or ""
    renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
    duration = int(spec.get("leaseDurationSeconds") or lease_seconds)
    if holder == identity:
        return Decision({**spec, "renewTime": _fmt(now), "leaseDurationSeconds": lease_seconds}, True)
    if holder and renewed is not None and renewed + timedelta(seconds=duration) > now:
        return Decision(None, False)
    transitions = int(spec.get("leaseTransitions") or 0) + (1 if holder else 0)
    return Decision({"holderIdentity": identity, "leaseDurationSeconds": lease_seconds, "acquireTime": _fmt(now),
                     "renewTime": _fmt(now), "leaseTransitions": transitions}, True)


def release(spec: dict | None, identity: str, now: datetime) -> dict | None:
    """The pure step of a clean shutdown: the Lease ``spec`` to write so the others may take over at
    once, or ``None`` when ``identity`` does not hold it (nothing to release; never touch another's).

    As client-go's ``LeaderElector.release`` (k8s.io/client-go/tools/leaderelection): no holder,
    ``leaseDurationSeconds`` 1, ``renewTime`` and ``acquireTime`` now, ``leaseTransitions`` kept (the
    next holder counts no transition from an empty holder, as :func:`decide` does).
    """
    spec = dict(spec or {})
    if not identity or spec.get("holderIdentity") != identity:
        return None
    out = {"holderIdentity": "", "leaseDurationSeconds": 1, "acquireTime": _fmt(now), "renewTime": _fmt(now)}
    if spec.get("leaseTransitions") is not None:
        out["leaseTransitions"] = spec["leaseTransitions"]
    return out


class LeaderElector:
    """Runs :func:`decide` against the Lease ``namespace/name`` every :data:`RETRY_SECONDS` (call
    :meth:`run` in a thread); :attr:`leading` says whether this replica leads now.

    ``api``: a ``kubernetes.client.CoordinationV1Api``. ``on_start_leading`` is called (in the
    election thread) each time this replica becomes the leader.
    """

    def __init__(self, api: Any, namespace: str, name: str, identity: str,
                 on_start_leading: Callable[[], None] | None = None, *, lease_seconds: int = LEASE_SECONDS,
                 renew_deadline: float = RENEW_DEADLINE_SECONDS, retry: float = RETRY_SECONDS) -> None:
        self.api, self.namespace, self.name, self.identity = api, namespace, name, identity
        self.on_start_leading = on_start_leading
        self.lease_seconds, self.renew_deadline, self.retry = lease_seconds, renew_deadline, retry
        self.leading = False
        self._last_renew: datetime | None = None
        self._stop = threading.Event()

    def step(self, now: datetime | None = None) -> bool:
        """One round: read, decide, write. Returns :attr:`leading` after it. API errors count as a
        failed renewal (leadership ends once :attr:`renew_deadline` passed without one)."""
        from kubernetes.client.exceptions import ApiException

        now = now or datetime.now(UTC)
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
            current = self.api.api_client.sanitize_for_serialization(lease.spec) if lease.spec else {}
            decision = decide(current, self.identity, now, self.lease_seconds)
            if decision.spec is not None:
                body = {"metadata": {"name": self.name, "namespace": self.namespace,
                                     "resourceVersion": lease.metadata.resource_version},
                        "spec": decision.spec}
                self.api.replace_namespaced_lease(self.name, self.namespace, body)
            won = decision.leader
        except ApiException as exc:
            if exc.status == 404:
                won = self._create(now)
            elif exc.status == 409:
                won = False  # another replica wrote first
            else:
                log.warning("leader election: Lease %s/%s: %s %s", self.namespace, self.name, exc.status, exc.reason)
                won = None
        except Exception as exc:  # noqa: BLE001  (connection errors)
            log.warning("leader election: Lease %s/%s: %s", self.namespace, self.name, exc)
            won = None
        self._settle(won, now)
        return self.leading

    def _create(self, now: datetime) -> bool:
        from kubernetes.client.exceptions import ApiException

        spec = decide(None, self.identity, now, self.lease_seconds).spec
        try:
            self.api.create_namespaced_lease(self.namespace, {"metadata": {"name": self.name}, "spec": spec})
            return True
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise

    def _settle(self, won: bool | None, now: datetime) -> None:
        if won and self._stop.is_set():
            won = False  # stopped while this round was in flight: never lead again
        if won:
            self._last_renew = now
            if not self.leading:
                self.leading = True
                log.info("leader election: %s leads (Lease %s/%s)", self.identity, self.namespace, self.name)
                if self.on_start_leading is not None:
                    self.on_start_leading()
            return
        if won is False or self._last_renew is None or (now - self._last_renew).total_seconds() > self.renew_deadline:
            if self.leading:
                log.warning("leader election: %s stops leading (Lease %s/%s)", self.identity, self.namespace, self.name)
            self.leading = False

    def run(self) -> None:
        """Loop :meth:`step` until :meth:`stop`."""
        while not self._stop.is_set():
            self.step()
            self._stop.wait(self.retry)

    def stop(self) -> None:
        """End :meth:`run` and stop leading at once. The Lease stays ours until it expires for the
        others, unless :meth:`release` is called next."""
        self._stop.set()
        self.leading = False

    def release(self, now: datetime | None = None, attempts: int = 3) -> bool:
        """Give the Lease up (:func:`release`) after :meth:`stop`, once this replica's reconciles have
        ended, so another replica takes over at its next retry. Best effort: returns True when the
        Lease was released or is not ours, False when it could not be written (the others then take
        over when it expires, as after a crash). A 409 (a round of :meth:`run` still in flight wrote
        first) is retried up to ``attempts`` times."""
        from kubernetes.client.exceptions import ApiException

        self._stop.set()
        self.leading = False
        for _ in range(attempts):
            try:
                lease = self.api.read_namespaced_lease(self.name, self.namespace)
                current = self.api.api_client.sanitize_for_serialization(lease.spec) if lease.spec else {}
                spec = release(current, self.identity, now or datetime.now(UTC))
                if spec is None:
                    return True
                self.api.replace_namespaced_lease(self.name, self.namespace, {
                    "metadata": {"name": self.name, "namespace": self.namespace,
                                 "resourceVersion": lease.metadata.resource_version},
                    "spec": spec})
                log.info("leader election: %s released Lease %s/%s", self.identity, self.namespace, self.name)
                return True
            except ApiException as exc:
                if exc.status == 404:
                    return True
                if exc.status != 409:
                    log.warning("leader election: cannot release Lease %s/%s: %s %s", self.namespace, self.name,
                                exc.status, exc.reason)
                    return False
            except Exception as exc:  # noqa: BLE001  (connection errors: the Lease expires instead)
                log.warning("leader election: cannot release Lease %s/%s: %s", self.namespace, self.name, exc)
                return False
        return False
