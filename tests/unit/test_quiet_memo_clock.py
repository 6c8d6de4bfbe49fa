"""QuietMemo is sound only because no status field depends on the clock (reconcile.QuietMemo's docstring): a
reconcile whose inputs did not change is skipped, so a status that would change with time alone (an age, a
deadline the operator counted itself, a "since" in a message) would never be written.

Each case puts the fake apiserver's objects (the children, their Deployments' status, the pods) into one state of
the e2e and unit fixtures (Ready, rolling out, past the Deployment's progress deadline, ReplicaFailure, pods the
scheduler cannot place or whose containers cannot run, a role lost after serving, an incompatible or invalid spec),
reconciles until quiet with every clock the operator could read frozen at one time, then moves those clocks on by a
day and reconciles again without the memo: nothing may be written. And the status computed from the same inputs
with no stored status is the same at both times but for ``lastTransitionTime``, which is the clock's time.

The clocks: ``time.time``/``time_ns``/``monotonic``/``monotonic_ns``/``perf_counter`` and ``datetime.now``/``utcnow``
(also where a module of the operator imported them by name), so a clock read added anywhere in the status
computation moves with them."""

from __future__ import annotations

import copy
import datetime as dt
import sys
import time

import pytest

from pdd_operator.api.constants import KIND
from pdd_operator.controller import reconcile as reconciling
from pdd_operator.controller.cache import ClusterCache
from pdd_operator.controller.reconcile import QuietMemo, reconcile
from tests.unit.test_quiet_reconciles import NS, SPEC, FakeApiserver, pdd

T1 = dt.datetime(2026, 12, 7, 12, 0, 0, tzinfo=dt.UTC)
DAY = 86_400.0 + 3_600.0


class Clock:
    """Every clock the operator could read, frozen at ``at`` (seconds since the epoch) until moved."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, at: dt.datetime) -> None:
        self.at = at.timestamp()
        clock = self

        class FrozenDatetime(dt.datetime):
            @classmethod
            def now(cls, tz=None):
                return dt.datetime.fromtimestamp(clock.at, tz)

            @classmethod
            def utcnow(cls):
                return dt.datetime.fromtimestamp(clock.at, dt.UTC).replace(tzinfo=None)

        fakes = {"time": lambda: self.at, "time_ns": lambda: int(self.at * 1e9), "monotonic": lambda: self.at,
                 "monotonic_ns": lambda: int(self.at * 1e9), "perf_counter": lambda: self.at}
        originals = {getattr(time, name): fake for name, fake in fakes.items()}
        for name, fake in fakes.items():
            monkeypatch.setattr(time, name, fake)
        # Modules of the operator that imported a clock by name (``from time import monotonic``,
        # ``from datetime import datetime``) hold their own reference: replace those too.
        for module in [m for n, m in sys.modules.items() if n.startswith("pdd_operator") and m is not None]:
            for attr, value in list(vars(module).items()):
                if value is dt.datetime:
                    monkeypatch.setattr(module, attr, FrozenDatetime)
                elif callable(value) and value in originals:
                    monkeypatch.setattr(module, attr, originals[value])

    def move(self, seconds: float) -> None:
        self.at += seconds

    def stamp(self) -> str:
        """What ``reconcile.now_rfc3339`` returns now."""
        return dt.datetime.fromtimestamp(self.at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _deployments(kube: FakeApiserver) -> dict[str, str]:
    """``{role: Deployment name}`` of the active slot's engine Deployments and the router's the operator applied."""
    names = sorted(n for k, n in kube.objects if k == "Deployment")
    return {role: next(n for n in names if role in n) for role in ("prefill", "decode", "router")}


def _deployment_status(replicas=1, ready=1, updated=1, current=None, conditions=()) -> dict:
    return {"observedGeneration": 1, "replicas": replicas if current is None else current, "readyReplicas": ready,
            "updatedReplicas": updated, "availableReplicas": ready, "conditions": list(conditions)}


def _set_status(kube: FakeApiserver, role: str, **kw) -> None:
    name = _deployments(kube)[role]
    kube.edit("Deployment", name, lambda d: d.update(status=_deployment_status(**kw)))


def _pod(kube: FakeApiserver, role: str, index: int, status: dict) -> None:
    """A pod of ``role``'s Deployment (its template's labels, as the ReplicaSet controller makes them)."""
    deployment = kube.objects[("Deployment", _deployments(kube)[role])]
    labels = copy.deepcopy(deployment["spec"]["template"]["metadata"]["labels"])
    kube.create({"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"{deployment['metadata']['name']}-{index}", "namespace": NS, "labels": labels,
                              "uid": f"pod-{role}-{index}", "creationTimestamp": "2026-12-07T11:59:00Z"},
                 "status": status})


def _ready(kube: FakeApiserver) -> None:
    for role in ("prefill", "decode"):
        _set_status(kube, role)
        _pod(kube, role, 0, {"phase": "Running", "startTime": "2026-12-07T11:59:01Z",
                             "conditions": [{"type": "PodScheduled", "status": "True"},
                                            {"type": "Ready", "status": "True",
                                             "lastTransitionTime": "2026-12-07T11:59:30Z"}]})


def _rolling(kube: FakeApiserver) -> None:
    _set_status(kube, "prefill", ready=0, updated=1,
                conditions=[{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated",
                             "lastUpdateTime": "2026-12-07T11:59:00Z"}])
    _set_status(kube, "decode")


def _past_deadline(kube: FakeApiserver) -> None:
    _set_status(kube, "prefill", ready=0, conditions=[
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
         "message": 'ReplicaSet "x" has timed out progressing.', "lastUpdateTime": "2026-12-07T11:49:00Z",
         "lastTransitionTime": "2026-12-07T11:49:00Z"}])
    _set_status(kube, "decode")


def _replica_failure(kube: FakeApiserver) -> None:
    _set_status(kube, "decode", ready=0, current=0, conditions=[
        {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
         "message": 'pods "x" is forbidden: exceeded quota: compute', "lastTransitionTime": "2026-12-07T11:58:00Z"}])
    _set_status(kube, "prefill")


def _unschedulable(kube: FakeApiserver) -> None:
    _set_status(kube, "decode", ready=0)
    _set_status(kube, "prefill")
    _pod(kube, "decode", 0, {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 3 Insufficient cpu.", "lastTransitionTime": "2026-12-07T11:59:00Z"}]})


def _crash_loop(kube: FakeApiserver) -> None:
    _set_status(kube, "prefill", ready=0)
    _set_status(kube, "decode")
    _pod(kube, "prefill", 0, {"phase": "Running", "startTime": "2026-12-07T11:59:01Z", "containerStatuses": [
        {"name": "vllm", "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff",
                                                                  "message": "back-off 1m20s restarting"}},
         "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                      "finishedAt": "2026-12-07T11:59:40Z"}}}]})


def _role_lost(kube: FakeApiserver) -> None:
    """Ready once (the stored status says so), then prefill has no Ready pod: Degraded PrefillUnavailable."""
    _ready(kube)
    _settle(kube)
    _set_status(kube, "prefill", ready=0)


def _incompatible(kube: FakeApiserver) -> None:
    _ready(kube)
    _settle(kube)
    spec = copy.deepcopy(kube.objects[(KIND, "p")]["spec"])
    spec["prefill"]["tensorParallelSize"], spec["decode"]["tensorParallelSize"] = 2, 3
    kube.edit(KIND, "p", lambda o: (o.update(spec=spec), o["metadata"].update(generation=2)))


def _invalid(kube: FakeApiserver) -> None:
    _ready(kube)
    _settle(kube)
    kube.edit(KIND, "p", lambda o: (o["spec"]["prefill"].update(tensorParallelSize=0),
                                    o["metadata"].update(generation=2)))


def _children_only(kube: FakeApiserver) -> None:
    """The children applied, the controller manager has not answered yet (no Deployment status, no pod)."""


CASES = [
    pytest.param(_children_only, "Ready", "False", id="children-applied-no-status-yet"),
    pytest.param(_ready, "Ready", "True", id="ready"),
    pytest.param(_rolling, "Progressing", "True", id="rolling-out"),
    pytest.param(_past_deadline, "Stalled", "True", id="progress-deadline-exceeded"),
    pytest.param(_replica_failure, "Degraded", "True", id="replica-failure"),
    pytest.param(_unschedulable, "Degraded", "True", id="pod-unschedulable"),
    pytest.param(_crash_loop, "Degraded", "True", id="crash-loop"),
    pytest.param(_role_lost, "Degraded", "True", id="role-lost-after-serving"),
    pytest.param(_incompatible, "Compatible", "False", id="incompatible-spec"),
    pytest.param(_invalid, "Compatible", "False", id="invalid-spec"),
]


def _settle(kube: FakeApiserver) -> list:
    """Reconcile (the watches delivering each write) until a reconcile sends nothing; what the last
    writing one sent."""
    writes: list = []
    for _ in range(6):
        kube.sent = []
        reconcile(kube, NS, "p")
        kube.deliver()
        if not kube.sent:
            return writes
        writes = kube.sent
    raise AssertionError(f"no quiet reconcile after 6: still sending {kube.sent}")


@pytest.fixture
def setup(monkeypatch):
    monkeypatch.setattr(reconciling, "QUIET", QuietMemo())
    monkeypatch.setattr(reconciling, "PACER", reconciling.StatusPacer(window=0))  # nothing held back
    clock = Clock(monkeypatch, T1)
    cache = ClusterCache()
    cache.expect({})
    kube = FakeApiserver(cache)
    kube.create(pdd("p", spec=SPEC))
    reconcile(kube, NS, "p")
    kube.deliver()
    _set_status(kube, "router")  # the router serves in every case (the engines' states are the cases)
    return clock, kube


def _without_times(status: dict) -> dict:
    out = copy.deepcopy(status)
    for cond in out.get("conditions") or []:
        cond.pop("lastTransitionTime", None)
    return out


@pytest.mark.parametrize(("state", "condition", "value"), CASES)
def test_a_quiet_reconcile_stays_quiet_when_only_the_clock_moves(setup, state, condition, value):
    clock, kube = setup
    state(kube)
    _settle(kube)
    stored = kube.objects[(KIND, "p")]["status"]
    conds = {c["type"]: c for c in stored["conditions"]}
    assert conds[condition]["status"] == value, conds[condition]  # the case is the state it names

    clock.move(DAY)
    reconciling.QUIET.forget((NS, "p"))  # really recompute, as a skipped reconcile assumes it would
    kube.sent = []
    outcome = reconcile(kube, NS, "p")
    assert kube.sent == [], f"a day later the same inputs wrote {kube.sent}: the status depends on the clock"
    assert not outcome.status_written and not outcome.applied
    assert kube.objects[(KIND, "p")]["status"] == stored
    assert reconciling.QUIET.quiet((NS, "p"), kube.epoch(NS, "p")) is not None  # recorded quiet again


@pytest.mark.parametrize(("state", "condition", "value"), CASES)
def test_the_status_of_the_same_inputs_differs_only_in_transition_times(setup, state, condition, value):
    clock, kube = setup
    state(kube)
    _settle(kube)

    def fresh() -> dict:
        """The status the same inputs give with the stored one's transition times forgotten: every condition
        stamped now (its status kept: the stored conditions tell whether the pair served, an input)."""
        stored = kube.objects[(KIND, "p")]["status"]
        kept = {**stored, "conditions": [{k: v for k, v in c.items() if k != "lastTransitionTime"}
                                         for c in stored["conditions"]]}
        kube.edit(KIND, "p", lambda o: o.update(status=kept))
        kube.sent = []
        reconcile(kube, NS, "p")
        kube.deliver()
        assert [s[0] for s in kube.sent] == ["status"]
        return kube.objects[(KIND, "p")]["status"]

    first = fresh()
    assert {c["lastTransitionTime"] for c in first["conditions"]} == {clock.stamp()}
    clock.move(DAY)
    reconciling.QUIET.forget((NS, "p"))
    second = fresh()
    assert {c["lastTransitionTime"] for c in second["conditions"]} == {clock.stamp()}
    assert _without_times(second) == _without_times(first)


def test_the_clock_patch_reaches_the_operators_own_clock_reads(setup):
    clock, _ = setup
    before = reconciling.now_rfc3339()
    clock.move(DAY)
    assert reconciling.now_rfc3339() != before == T1.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert time.monotonic() - clock.at == 0
