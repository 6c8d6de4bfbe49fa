"""The rollout planner: which revision slot runs the target spec and when the previous one is scaled
down, table-driven as LWS's DisaggregatedSet planner_test.go (no cluster)."""

from __future__ import annotations

import pytest

from pdd_operator.api.names import deployment_name
from pdd_operator.compat import evaluate
from pdd_operator.controller.plan import plan_children
from pdd_operator.controller.rollout import (
    RolloutStep,
    SlotRole,
    observe,
    plan_rollout,
    pod_slot,
    scaled_to_zero,
    slot_pods,
    terminating,
)
from pdd_operator.controller.status import RoleObservation
from pdd_operator.render.engine import compat_hash
from tests.helpers import make_spec

NONE = SlotRole()


def up(h: str, replicas: int = 1, ready: int | None = None, rolled_out: bool | None = None,
       current: int | None = None, pods: int | None = None) -> SlotRole:
    """A Deployment with template hash ``h``; by default all ``replicas`` ready and rolled out, its status
    counting ``replicas`` pods (``current``) and the pod list showing as many (``pods``, Terminating ones
    included)."""
    ready = replicas if ready is None else ready
    current = replicas if current is None else current
    return SlotRole(True, h, replicas, ready, ready == replicas if rolled_out is None else rolled_out,
                    current, current if pods is None else pods)


def gone(h: str) -> SlotRole:
    """A Deployment scaled to 0 whose pods are all gone."""
    return up(h, 0)


def draining(h: str, terminating: int = 1) -> SlotRole:
    """A Deployment scaled to 0 (its status counts no pod) with ``terminating`` pods still Terminating."""
    return up(h, 0, pods=terminating)


PREFILL = ("prefill",)
BOTH = ("prefill", "decode")


def slots(a: tuple[SlotRole, SlotRole] = (NONE, NONE), b: tuple[SlotRole, SlotRole] = (NONE, NONE)) -> dict:
    return {"a": {"prefill": a[0], "decode": a[1]}, "b": {"prefill": b[0], "decode": b[1]}}


ONE = {"prefill": 1, "decode": 1}

# (case, target hash, target replicas, observed slots) -> expected step
CASES = [
    ("nothing yet: create slot a", "H1", ONE, slots(), RolloutStep("a")),
    ("in place: slot a runs the hash", "H1", ONE, slots(a=(up("H1"), up("H1"))), RolloutStep("a")),
    ("in place scale-up, nothing in b", "H1", {"prefill": 1, "decode": 3},
     slots(a=(up("H1"), up("H1", 1))), RolloutStep("a")),
    ("hash change: new slot b, a keeps serving", "H2", ONE, slots(a=(up("H1"), up("H1"))),
     RolloutStep("b", "a")),
    ("new slot has ready prefill only: a keeps serving", "H2", ONE,
     slots(a=(up("H1"), up("H1")), b=(up("H2"), up("H2", ready=0))), RolloutStep("b", "a")),
    ("new slot short of the target replicas: a keeps serving", "H2", {"prefill": 2, "decode": 1},
     slots(a=(up("H1"), up("H1")), b=(up("H2", 2, ready=1), up("H2"))), RolloutStep("b", "a")),
    ("new slot rolled out but with other replicas than the target (scaled meanwhile)", "H2",
     {"prefill": 2, "decode": 1}, slots(a=(up("H1"), up("H1")), b=(up("H2", 1), up("H2"))),
     RolloutStep("b", "a")),
    ("new slot rolled out in both roles: retire a's prefill, its decode still serves", "H2", ONE,
     slots(a=(up("H1"), up("H1")), b=(up("H2"), up("H2"))), RolloutStep("b", "a", retire=PREFILL)),
    ("a's prefill scaled to 0, its status still counts the pod: decode kept", "H2", ONE,
     slots(a=(up("H1", 0, ready=1, current=1), up("H1")), b=(up("H2"), up("H2"))),
     RolloutStep("b", "a", retire=PREFILL)),
    ("a's prefill pod Terminating (draining its legs): decode kept", "H2", ONE,
     slots(a=(draining("H1"), up("H1")), b=(up("H2"), up("H2"))), RolloutStep("b", "a", retire=PREFILL)),
    ("a's prefill has no pods left: retire a's decode", "H2", ONE,
     slots(a=(gone("H1"), up("H1")), b=(up("H2"), up("H2"))), RolloutStep("b", "a", retire=BOTH)),
    ("a's prefill Deployment deleted by hand, no pods: retire a's decode", "H2", ONE,
     slots(a=(NONE, up("H1")), b=(up("H2"), up("H2"))), RolloutStep("b", "a", retire=BOTH)),
    ("a's prefill gone but b no longer rolled out: a's decode kept", "H2", ONE,
     slots(a=(gone("H1"), up("H1")), b=(up("H2"), up("H2", ready=0))), RolloutStep("b", "a")),
    ("a's decode scaled to 0, its pod still Terminating: nothing left to scale", "H2", ONE,
     slots(a=(gone("H1"), draining("H1")), b=(up("H2"), up("H2"))), RolloutStep("b")),
    ("a already retired: steady on b", "H2", ONE,
     slots(a=(up("H1", 0), up("H1", 0)), b=(up("H2"), up("H2"))), RolloutStep("b")),
    ("next hash change from b goes back to slot a", "H3", ONE,
     slots(a=(up("H1", 0), up("H1", 0)), b=(up("H2"), up("H2"))), RolloutStep("a", "b")),
    ("changed again mid-rollout: the serving slot a stays, b is overwritten", "H3", ONE,
     slots(a=(up("H1"), up("H1")), b=(up("H2", ready=0), up("H2", ready=0))), RolloutStep("b", "a")),
    ("reverted mid-rollout: a runs the hash again, b is retired, prefill first", "H1", ONE,
     slots(a=(up("H1"), up("H1")), b=(up("H2", ready=0), up("H2", ready=0))), RolloutStep("a", "b", retire=PREFILL)),
    ("back to a retired slot's hash: scale it up, the other serves meanwhile", "H1", ONE,
     slots(a=(up("H1", 0), up("H1", 0)), b=(up("H2"), up("H2"))), RolloutStep("a", "b")),
    ("old slot lost a role by hand: it cannot serve, the new slot is the other", "H2", ONE,
     slots(a=(up("H1"), NONE)), RolloutStep("b", "a")),
    ("active slot lost a role by hand: restored, old slot not retired meanwhile", "H2", ONE,
     slots(a=(up("H1"), up("H1")), b=(up("H2"), NONE)), RolloutStep("b", "a")),
    ("active slot not rolled out (a template rolling in place): previous kept", "H2", ONE,
     slots(a=(up("H1"), up("H1")), b=(up("H2"), up("H2", rolled_out=False))), RolloutStep("b", "a")),
    ("only slot b exists (a deleted by hand), same hash: in place in b", "H2", ONE,
     slots(b=(up("H2"), up("H2"))), RolloutStep("b")),
    ("target scales a role to 0: rolled out at 0, previous retired", "H2", {"prefill": 1, "decode": 0},
     slots(a=(up("H1"), up("H1")), b=(up("H2"), up("H2", 0))), RolloutStep("b", "a", retire=PREFILL)),
]


@pytest.mark.parametrize("case, target, replicas, observed, want", CASES, ids=[c[0] for c in CASES])
def test_plan_rollout(case, target, replicas, observed, want):
    assert plan_rollout(target, replicas, observed) == want


def _live(name: str, h: str, replicas: int, ready: int, updated: int | None = None, generation: int = 2) -> dict:
    updated = ready if updated is None else updated
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ns", "generation": generation,
                     "labels": {"pdd-operator.dev/compat-hash": h},
                     "annotations": {"pdd-operator.dev/generation": "4", "pdd-operator.dev/applied-hash": "x",
                                     "deployment.kubernetes.io/revision": "3"},
                     "ownerReferences": [{"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment",
                                          "name": "demo", "uid": "u", "controller": True}]},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"k": "v"}}, "progressDeadlineSeconds": 600,
                 "strategy": {"type": "RollingUpdate"},
                 "template": {"metadata": {"labels": {"k": "v", "pdd-operator.dev/compat-hash": h}},
                              "spec": {"containers": [{"name": "vllm", "image": "i",
                                                       "terminationMessagePath": "/dev/termination-log"}]}}},
        "status": {"observedGeneration": generation, "replicas": replicas, "readyReplicas": ready,
                   "updatedReplicas": updated},
    }


def _pod(name: str, slot: str | None, deleting: bool = False) -> dict:
    """A pod's cache view: its slot label (``None``: a pod of a release before the slots), Terminating or not."""
    labels = {"pdd-operator.dev/instance": "demo"} | ({"pdd-operator.dev/slot": slot} if slot else {})
    meta = {"name": name, "namespace": "ns", "labels": labels}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-05T20:00:00Z"
    return {"kind": "Pod", "metadata": meta, "status": {}}


def test_pods_belong_to_their_slot_and_unlabelled_ones_to_slot_a():
    pods = [_pod("p1", "a"), _pod("p2", "b", deleting=True), _pod("p3", None)]
    assert [p["metadata"]["name"] for p in slot_pods(pods, "a")] == ["p1", "p3"]
    assert [p["metadata"]["name"] for p in slot_pods(pods, "b")] == ["p2"]
    assert [pod_slot(p) for p in pods] == ["a", "b", "a"]
    assert [terminating(p) for p in pods] == [False, True, False]


def test_observe_reads_the_template_hash_and_rollout():
    assert observe(None) == SlotRole()
    assert observe(_live("d", "H", 2, 2)) == SlotRole(True, "H", 2, 2, True, current=2, pods=0)
    assert observe(_live("d", "H", 2, 2), [_pod("p", "a"), _pod("q", "a")]).pods == 2
    # scaled to 0, the status counts no pod, but one is still Terminating: not gone
    stopping = observe(_live("d", "H", 0, 0), [_pod("p", "a", deleting=True)])
    assert (stopping.current, stopping.pods, stopping.gone) == (0, 1, False)
    assert observe(_live("d", "H", 0, 0), []).gone and observe(None).gone
    assert not observe(_live("d", "H", 0, 0) | {"status": {"replicas": 1}}).gone  # the status lags
    assert observe(_live("d", "H", 2, 1)).rolled_out is False
    stale = _live("d", "H", 2, 2)
    stale["metadata"]["generation"] = 3  # the Deployment controller has not seen the latest spec
    assert observe(stale).rolled_out is False


def test_scaled_to_zero_changes_only_replicas():
    live = _live("demo-decode", "H1", 2, 2)
    body = scaled_to_zero(live)
    assert body["spec"]["replicas"] == 0
    assert body["spec"]["template"] == live["spec"]["template"]
    assert body["spec"]["selector"] == live["spec"]["selector"]
    assert body["metadata"]["annotations"] == {"pdd-operator.dev/generation": "4"}
    assert body["metadata"]["ownerReferences"] == live["metadata"]["ownerReferences"]
    assert "status" not in body and "progressDeadlineSeconds" not in body["spec"]


OLD = make_spec(model={"dtype": "bfloat16"})
NEW = make_spec(model={"dtype": "float16"})


def _deployments(spec_hash_a: str, ready_b: int | None) -> dict:
    dep = {"a": {r: _live(deployment_name("demo", r, "a"), spec_hash_a, 1, 1) for r in ("prefill", "decode")},
           "b": {"prefill": None, "decode": None}}
    if ready_b is not None:
        new = compat_hash(NEW)
        dep["b"] = {r: _live(deployment_name("demo", r, "b"), new, 1, ready_b) for r in ("prefill", "decode")}
    return dep


def _engine_deployments(plan) -> dict[str, int]:
    return {c["metadata"]["name"]: c["spec"]["replicas"] for c in plan.children
            if c["kind"] == "Deployment" and not c["metadata"]["name"].endswith("router")}


def test_a_must_match_change_renders_slot_b_and_leaves_slot_a_serving():
    assert compat_hash(OLD) != compat_hash(NEW)
    plan = plan_children(name="demo", namespace="ns", uid="u", generation=5, spec=NEW, report=evaluate(NEW),
                         previous_status={}, last_good=None, deployments=_deployments(compat_hash(OLD), None))
    assert _engine_deployments(plan) == {"demo-prefill-b": 1, "demo-decode-b": 1}
    assert plan.step == RolloutStep("b", "a")
    pods = [c["spec"]["template"]["metadata"]["labels"] for c in plan.children if c["metadata"]["name"].endswith("-b")]
    assert {p["pdd-operator.dev/slot"] for p in pods} == {"b"}
    assert {p["pdd-operator.dev/compat-hash"] for p in pods} == {compat_hash(NEW)}
    selectors = [c["spec"]["selector"]["matchLabels"] for c in plan.children if c["metadata"]["name"].endswith("-b")]
    assert all(s["pdd-operator.dev/slot"] == "b" for s in selectors)


def _plan(deployments: dict, pods: dict | None = None):
    return plan_children(name="demo", namespace="ns", uid="u", generation=5, spec=NEW, report=evaluate(NEW),
                         previous_status={}, last_good=None, deployments=deployments, pods=pods)


def test_slot_a_is_retired_prefill_first_once_slot_b_is_rolled_out():
    deployments = _deployments(compat_hash(OLD), 1)
    a_pods = {r: [_pod(f"{r}-a-1", "a")] for r in ("prefill", "decode")}
    b_pods = {r: [_pod(f"{r}-b-1", "b")] for r in ("prefill", "decode")}
    plan = _plan(deployments, {r: a_pods[r] + b_pods[r] for r in a_pods})
    # slot a's decode keeps serving the prefill legs that still run on slot a's prefill
    assert _engine_deployments(plan) == {"demo-prefill-b": 1, "demo-decode-b": 1, "demo-prefill": 0}
    assert plan.step == RolloutStep("b", "a", retire=("prefill",))
    [scaled] = [c for c in plan.children if c["kind"] == "Deployment" and c["metadata"]["name"] == "demo-prefill"]
    assert scaled["spec"]["template"]["metadata"]["labels"]["pdd-operator.dev/compat-hash"] == compat_hash(OLD)

    # the next reconcile: slot a's prefill is at 0, its pod Terminating (its preStop drain runs)
    deployments["a"]["prefill"] = _live("demo-prefill", compat_hash(OLD), 0, 0)
    draining = {"prefill": [_pod("prefill-a-1", "a", deleting=True)] + b_pods["prefill"],
                "decode": a_pods["decode"] + b_pods["decode"]}
    plan = _plan(deployments, draining)
    assert _engine_deployments(plan) == {"demo-prefill-b": 1, "demo-decode-b": 1}
    assert plan.step == RolloutStep("b", "a", retire=("prefill",))

    # its pod is gone: now slot a's decode is scaled to 0
    plan = _plan(deployments, {"prefill": b_pods["prefill"], "decode": a_pods["decode"] + b_pods["decode"]})
    assert _engine_deployments(plan) == {"demo-prefill-b": 1, "demo-decode-b": 1, "demo-decode": 0}
    assert plan.step == RolloutStep("b", "a", retire=("prefill", "decode"))


def test_a_change_that_keeps_the_hash_rolls_in_place_in_slot_a():
    spec = make_spec(model={"dtype": "bfloat16"}, decode={"replicas": 3})
    plan = plan_children(name="demo", namespace="ns", uid="u", generation=5, spec=spec, report=evaluate(spec),
                         previous_status={}, last_good=None, deployments=_deployments(compat_hash(OLD), None))
    assert _engine_deployments(plan) == {"demo-prefill": 1, "demo-decode": 3}
    assert plan.step == RolloutStep("a")


def test_status_counts_both_slots_while_the_previous_one_serves():
    new = RoleObservation.from_deployment(_live("demo-decode-b", "H2", 1, 1))
    merged = new.with_previous(_live("demo-decode", "H1", 1, 1))
    assert (merged.replicas, merged.ready, merged.updated, merged.current, merged.previous) == (1, 2, 1, 2, 1)
    assert merged.rolled_out is False
    done = new.with_previous(_live("demo-decode", "H1", 0, 0))
    assert done.rolled_out is True and done.previous == 0


def test_status_counts_the_previous_slots_terminating_pods_until_they_are_gone():
    """A Deployment's status.replicas does not count Terminating pods: the pod list does."""
    new = RoleObservation.from_deployment(_live("demo-prefill-b", "H2", 1, 1))
    scaled = _live("demo-prefill", "H1", 0, 0)
    stopping = new.with_previous(scaled, [_pod("demo-prefill-1", "a", deleting=True)])
    assert (stopping.current, stopping.previous, stopping.rolled_out) == (2, 1, False)
    assert new.with_previous(scaled, []).rolled_out is True
    # the Deployment deleted by hand while its pod still stops
    assert new.with_previous(None, [_pod("demo-prefill-1", "a", deleting=True)]).previous == 1
    # the pod list is ahead of the Deployment's status: a pod it does not count yet
    lagging = new.with_previous(_live("demo-prefill", "H1", 1, 1) | {"status": {"replicas": 0}},
                                [_pod("x", "a"), _pod("y", "a", deleting=True)])
    assert lagging.previous == 2
