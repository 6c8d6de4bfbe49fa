"""Leader election on a Lease (controller/leader.py): the pure decision, and two electors on one Lease
with the apiserver's optimistic concurrency (a stale resourceVersion is 409). Time is passed in, so
expiry is shown without waiting."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from pdd_operator.controller import leader

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_free_lease_is_taken_held_one_is_followed_expired_one_is_taken_over():
    first = leader.decide(None, "a", T0)
    assert first.leader and first.spec["holderIdentity"] == "a" and first.spec["leaseTransitions"] == 0
    follow = leader.decide(first.spec, "b", T0 + timedelta(seconds=14))
    assert not follow.leader and follow.spec is None
    renew = leader.decide(first.spec, "a", T0 + timedelta(seconds=5))
    assert renew.leader and renew.spec["renewTime"] > first.spec["renewTime"]
    assert renew.spec["acquireTime"] == first.spec["acquireTime"]
    takeover = leader.decide(first.spec, "b", T0 + timedelta(seconds=15))
    assert takeover.leader and takeover.spec["holderIdentity"] == "b" and takeover.spec["leaseTransitions"] == 1


class Leases:
    """One Lease with resourceVersion checks, as the apiserver keeps it."""

    def __init__(self) -> None:
        self.obj, self.rv, self.writes = None, 0, 0
        self.api_client = ApiClient()

    def read_namespaced_lease(self, name, namespace):
        if self.obj is None:
            raise ApiException(status=404)
        return SimpleNamespace(spec=copy.deepcopy(self.obj["spec"]), metadata=SimpleNamespace(resource_version=str(self.rv)))

    def create_namespaced_lease(self, namespace, body):
        if self.obj is not None:
            raise ApiException(status=409)
        self.obj, self.rv, self.writes = copy.deepcopy(body), self.rv + 1, self.writes + 1

    def replace_namespaced_lease(self, name, namespace, body):
        if body["metadata"]["resourceVersion"] != str(self.rv):
            raise ApiException(status=409)
        self.obj, self.rv, self.writes = copy.deepcopy(body), self.rv + 1, self.writes + 1


def test_one_leader_and_takeover_within_the_lease_when_it_stops():
    leases = Leases()
    started = []
    a = leader.LeaderElector(leases, "ops", "pdd", "a", on_start_leading=lambda: started.append("a"))
    b = leader.LeaderElector(leases, "ops", "pdd", "b", on_start_leading=lambda: started.append("b"))
    assert a.step(T0) and not b.step(T0 + timedelta(seconds=1))
    for s in range(2, 30, 2):  # a renews every 2 s: b never leads
        assert a.step(T0 + timedelta(seconds=s)) and not b.step(T0 + timedelta(seconds=s + 1))
    assert started == ["a"]
    # a is killed at 28 s (last renewal): b leads once the 15 s lease has run out, not before.
    assert not b.step(T0 + timedelta(seconds=42))
    assert b.step(T0 + timedelta(seconds=43))
    assert started == ["a", "b"] and leases.obj["spec"]["leaseTransitions"] == 1
    # a comes back: it follows, and learns it lost the lease.
    assert not a.step(T0 + timedelta(seconds=44)) and not a.leading


def test_a_leader_that_cannot_renew_stops_before_the_lease_expires():
    leases = Leases()
    a = leader.LeaderElector(leases, "ops", "pdd", "a")
    assert a.step(T0)

    def unreachable(*_args, **_kw):
        raise ApiException(status=503, reason="Service Unavailable")

    leases.read_namespaced_lease = unreachable
    assert a.step(T0 + timedelta(seconds=5))        # within the renew deadline (10 s): still leading
    assert not a.step(T0 + timedelta(seconds=11))   # past it, and before the 15 s lease ends for others


def test_two_replicas_creating_at_once_one_wins():
    leases = Leases()
    a = leader.LeaderElector(leases, "ops", "pdd", "a")
    b = leader.LeaderElector(leases, "ops", "pdd", "b")
    real_read = leases.read_namespaced_lease

    def read_then_b_creates(name, namespace):
        leases.read_namespaced_lease = real_read
        try:
            return real_read(name, namespace)
        finally:
            b.step(T0)  # b creates the Lease between a's read (404) and a's create

    leases.read_namespaced_lease = read_then_b_creates
    assert not a.step(T0) and b.leading and leases.writes == 1


def test_release_clears_only_our_own_lease():
    held = leader.decide(None, "a", T0).spec
    released = leader.release(held, "a", T0 + timedelta(seconds=3))
    assert released["holderIdentity"] == "" and released["leaseDurationSeconds"] == 1
    assert released["leaseTransitions"] == held["leaseTransitions"]
    assert leader.release(held, "b", T0) is None          # another's: never touched
    assert leader.release(None, "a", T0) is None
    assert leader.release({"holderIdentity": ""}, "", T0) is None


def test_a_released_lease_is_taken_at_the_next_retry_not_after_the_lease_duration():
    leases = Leases()
    a = leader.LeaderElector(leases, "ops", "pdd", "a")
    b = leader.LeaderElector(leases, "ops", "pdd", "b")
    assert a.step(T0) and not b.step(T0 + timedelta(seconds=1))
    a.stop()
    assert a.release(T0 + timedelta(seconds=2)) and not a.leading
    assert leases.obj["spec"]["holderIdentity"] == ""
    # b's next round (2 s later), far inside the 15 s the Lease would otherwise still be a's.
    assert b.step(T0 + timedelta(seconds=3)) and leases.obj["spec"]["holderIdentity"] == "b"
    # a released lease counts no transition, as client-go counts none from an empty holder
    assert leases.obj["spec"]["leaseTransitions"] == 0


def test_release_retries_a_conflict_and_leaves_a_lost_lease_alone():
    leases = Leases()
    a = leader.LeaderElector(leases, "ops", "pdd", "a")
    assert a.step(T0)
    replace = leases.replace_namespaced_lease
    calls = []

    def renewed_first(name, namespace, body):
        calls.append(body)
        if len(calls) == 1:  # a round of run() still in flight renews in between: 409 for the release
            leases.rv += 1
        return replace(name, namespace, body)

    leases.replace_namespaced_lease = renewed_first
    assert a.release(T0 + timedelta(seconds=1))
    assert len(calls) == 2 and leases.obj["spec"]["holderIdentity"] == ""
    b = leader.LeaderElector(leases, "ops", "pdd", "b")
    assert b.step(T0 + timedelta(seconds=2))
    writes = leases.writes
    assert a.release(T0 + timedelta(seconds=3)) and leases.writes == writes  # b's now: untouched


def test_a_round_in_flight_when_stopped_does_not_lead_again():
    leases = Leases()
    a = leader.LeaderElector(leases, "ops", "pdd", "a")
    a.stop()
    assert not a.step(T0) and not a.leading
