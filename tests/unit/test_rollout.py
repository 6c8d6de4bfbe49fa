"""The rollout planner: which revision slot runs the target spec and when the previous one is scaled
down, table-driven as LWS's DisaggregatedSet planner_test.go (no cluster)."""

from __future__ import annotations

import pytest

from pdd_operator.api.names import deployment_name
from pdd_operator.compat import evaluate
from pdd_operator.controller.plan import plan_children
from pdd_operator.controller.rollout import RolloutStep, SlotRole, observe, plan_rollout, scaled_to_zero
from pdd_operator.controller.status import RoleObservation
from pdd_operator.render.engine import compat_hash
from tests.helpers import make_spec

NONE = SlotRole()


def up(h: str, replicas: int = 1, ready: int | None = None, rolled_out: bool | None = None) -> SlotRole:
    """A Deployment with template hash ``h``; by default all ``replicas`` ready and rolled out."""
    ready = replicas if ready is None else ready
    return SlotRole(True, h, replicas, ready, ready == replicas if rolled_out is None else rolled_out)


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
     RolloutStep("b", "a", retire=False)),
    ("new slot has ready prefill only: a keeps serving", "H2", ONE,
     slots(a=(up("H1"), up("H1")), b=(up("H2"), up("H2", ready=0))), RolloutStep("b", "a", retire=False)),
    ("new slot short of the target replicas: a keeps serving", "H2", {"prefill": 2, "decode": 1},
     slots(a=(up("H1"), up("H1")), b=(up("H2", 2, ready=1), up("H2"))), RolloutStep("b", "a", retire=False)),
    ("new slot rolled out but with other replicas than the target (scaled meanwhile)", "H2",
     {"prefill": 2, "decode": 1}, slots(a=(up("H1"), up("H1")), b=(up("H2", 1), up("H2"))),
     RolloutStep("b", "a", retire=False)),
    ("new slot rolled out in both roles: retire a", "H2", ONE,
     slots(a=(up("H1"), up("H1")), b=(up("H2"), up("H2"))), RolloutStep("b", "a", retire=True)),
    ("a already retired: steady on b", "H2", ONE,
     slots(a=(up("H1", 0), up("H1", 0)), b=(up("H2"), up("H2"))), RolloutStep("b")),
    ("next hash change from b goes back to slot a", "H3", ONE,
     slots(a=(up("H1", 0), up("H1", 0)), b=(up("H2"), up("H2"))), RolloutStep("a", "b", retire=False)),
    ("changed again mid-rollout: the serving slot a stays, b is overwritten", "H3", ONE,
     slots(a=(up("H1"), up("H1")), b=(up("H2", ready=0), up("H2", ready=0))), RolloutStep("b", "a", retire=False)),
    ("reverted mid-rollout: a runs the hash again, b is retired", "H1", ONE,
     slots(a=(up("H1"), up("H1")), b=(up("H2", ready=0), up("H2", ready=0))), RolloutStep("a", "b", retire=True)),
    ("back to a retired slot's hash: scale it up, the other serves meanwhile", "H1", ONE,
     slots(a=(up("H1", 0), up("H1", 0)), b=(up("H2"), up("H2"))), RolloutStep("a", "b", retire=False)),
    ("old slot lost a role by hand: it cannot serve, the new slot is the other", "H2", ONE,
     slots(a=(up("H1"), NONE)), RolloutStep("b", "a", retire=False)),
    ("active slot lost a role by hand: restored, old slot not retired meanwhile", "H2", ONE,
     slots(a=(up("H1"), up("H1")), b=(up("H2"), NONE)), RolloutStep("b", "a", retire=False)),
    ("active slot not rolled out (a template rolling in place): previous kept", "H2", ONE,
     slots(a=(up("H1"), up("H1")), b=(up("H2"), up("H2", rolled_out=False))), RolloutStep("b", "a", retire=False)),
    ("only slot b exists (a deleted by hand), same hash: in place in b", "H2", ONE,
     slots(b=(up("H2"), up("H2"))), RolloutStep("b")),
    ("target scales a role to 0: rolled out at 0, previous retired", "H2", {"prefill": 1, "decode": 0},
     slots(a=(up("H1"), up("H1")), b=(up("H2"), up("H2", 0))), RolloutStep("b", "a", retire=True)),
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


def test_observe_reads_the_template_hash_and_rollout():
    assert observe(None) == SlotRole()
    assert observe(_live("d", "H", 2, 2)) == SlotRole(True, "H", 2, 2, True)
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
    assert plan.step == RolloutStep("b", "a", retire=False)
    pods = [c["spec"]["template"]["metadata"]["labels"] for c in plan.children if c["metadata"]["name"].endswith("-b")]
    assert {p["pdd-operator.dev/slot"] for p in pods} == {"b"}
    assert {p["pdd-operator.dev/compat-hash"] for p in pods} == {compat_hash(NEW)}
    selectors = [c["spec"]["selector"]["matchLabels"] for c in plan.children if c["metadata"]["name"].endswith("-b")]
    assert all(s["pdd-operator.dev/slot"] == "b" for s in selectors)


def test_slot_a_is_scaled_to_zero_once_slot_b_is_rolled_out():
    plan = plan_children(name="demo", namespace="ns", uid="u", generation=5, spec=NEW, report=evaluate(NEW),
                         previous_status={}, last_good=None, deployments=_deployments(compat_hash(OLD), 1))
    assert _engine_deployments(plan) == {"demo-prefill-b": 1, "demo-decode-b": 1, "demo-prefill": 0,
                                         "demo-decode": 0}
    scaled = [c for c in plan.children if c["kind"] == "Deployment" and c["metadata"]["name"] in ("demo-prefill", "demo-decode")]
    assert all(c["spec"]["template"]["metadata"]["labels"]["pdd-operator.dev/compat-hash"] == compat_hash(OLD)
               for c in scaled)


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
