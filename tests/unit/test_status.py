"""Status folding: conditions, transitions, and no change when nothing changed."""

from __future__ import annotations

from pdd_operator.compat import evaluate
from pdd_operator.controller.status import RoleObservation, fold_status
from tests.helpers import make_spec

T0, T1 = "2026-11-29T10:00:00Z", "2026-11-29T10:05:00Z"
GOOD = evaluate(make_spec())
BAD = evaluate(make_spec(prefill={"tensorParallelSize": 2}, decode={"tensorParallelSize": 3}))


def dep(replicas=1, ready=1, updated=1, current=None, generation=1, observed=1, conditions=()):
    return {
        "metadata": {"generation": generation},
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas if current is None else current, "readyReplicas": ready,
                   "updatedReplicas": updated, "observedGeneration": observed, "conditions": list(conditions)},
    }


def obs(**kw):
    return RoleObservation.from_deployment(dep(**kw))


def conds(status):
    return {c["type"]: c for c in status["conditions"]}


def fold(report=GOOD, previous=None, applied=1, generation=1, now=T0, prefill=None, decode=None):
    return fold_status(
        generation=generation, previous=previous or {}, report=report, applied_generation=applied,
        observations={"prefill": prefill or obs(), "decode": decode or obs()}, now=now,
    )


def test_all_ready():
    status = fold()
    c = conds(status)
    assert c["Ready"]["status"] == "True" and c["Ready"]["reason"] == "AllReplicasReady"
    assert c["Progressing"]["status"] == "False" and c["Degraded"]["status"] == "False"
    assert c["Compatible"]["status"] == "True"
    assert status["prefill"] == {"replicas": 1, "readyReplicas": 1, "updatedReplicas": 1, "ready": "1/1"}
    assert status["observedGeneration"] == 1 and status["appliedGeneration"] == 1
    assert all(x["observedGeneration"] == 1 and x["lastTransitionTime"] == T0 for x in status["conditions"])


def test_rolling_out_is_progressing_not_ready():
    status = fold(decode=obs(replicas=2, ready=1, updated=2))
    c = conds(status)
    assert c["Ready"]["status"] == "False" and c["Progressing"]["status"] == "True"
    assert "decode: 1/2 ready" in c["Progressing"]["message"]
    assert status["decode"]["ready"] == "1/2"


def test_old_pods_still_present_is_not_rolled_out():
    c = conds(fold(prefill=obs(replicas=1, ready=1, updated=1, current=2)))
    assert c["Ready"]["status"] == "False"


def test_unchanged_inputs_give_an_identical_status_later():
    first = fold(now=T0)
    assert fold(previous=first, now=T1) == first


def test_transition_times_change_only_on_transition():
    first = fold(now=T0)
    second = fold(previous=first, now=T1, decode=obs(ready=0))
    c = conds(second)
    assert c["Ready"]["lastTransitionTime"] == T1
    assert c["Compatible"]["lastTransitionTime"] == T0 and c["Degraded"]["lastTransitionTime"] == T0


def test_incompatible_spec_keeps_last_good_generation():
    first = fold(generation=1)
    status = fold(report=BAD, previous=first, generation=2, applied=1, now=T1)
    c = conds(status)
    assert c["Compatible"]["status"] == "False" and c["Compatible"]["reason"] == "Incompatible"
    assert "[tp-divisibility]" in c["Compatible"]["message"] and "Fix:" in c["Compatible"]["message"]
    assert c["Degraded"]["status"] == "True" and "keep running generation 1" in c["Degraded"]["message"]
    assert c["Ready"]["status"] == "False"
    assert status["appliedGeneration"] == 1 and status["observedGeneration"] == 2
    assert status["compatibility"][0]["rule"] == "tp-divisibility"


def test_incompatible_from_the_start_creates_nothing():
    status = fold(report=BAD, applied=None, prefill=RoleObservation(), decode=RoleObservation())
    assert "appliedGeneration" not in status
    assert "No child objects were created" in conds(status)["Degraded"]["message"]


def test_missing_child_and_stuck_rollout_are_degraded():
    c = conds(fold(decode=RoleObservation()))
    assert (c["Degraded"]["reason"], c["Ready"]["reason"]) == ("ChildMissing", "ChildMissing")
    stuck = obs(ready=0, updated=1, conditions=[{"type": "Progressing", "status": "False",
                                                  "reason": "ProgressDeadlineExceeded"}])
    assert conds(fold(prefill=stuck))["Degraded"]["reason"] == "ProgressDeadlineExceeded"


def test_warnings_are_reported_on_a_compatible_spec():
    report = evaluate(make_spec(prefill={"blockSize": 16}))
    c = conds(fold(report=report))
    assert c["Compatible"]["status"] == "True" and c["Compatible"]["reason"] == "CompatibleWithWarnings"
    assert "[block-size-partial]" in c["Compatible"]["message"]


def test_unschedulable_pods_make_it_degraded_with_the_schedulers_words():
    pod = {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                      "message": "0/5 nodes are available: 5 Insufficient nvidia.com/gpu."}]}}
    decode = RoleObservation.from_deployment(dep(replicas=1, ready=0, updated=1), pods=[pod])
    c = conds(fold(decode=decode))
    assert c["Degraded"]["reason"] == "Unschedulable" and "Insufficient nvidia.com/gpu" in c["Degraded"]["message"]
    assert c["Progressing"]["status"] == "True"


def test_missing_deployment_reports_the_desired_replicas():
    status = fold(report=BAD, applied=None, prefill=RoleObservation.from_deployment(None, desired=2),
                  decode=RoleObservation.from_deployment(None, desired=1))
    assert (status["prefill"]["ready"], status["decode"]["ready"]) == ("0/2", "0/1")


def test_incompatible_with_a_missing_child_does_not_claim_it_keeps_running():
    status = fold(report=BAD, generation=2, applied=1, decode=RoleObservation())
    assert "cannot be restored" in conds(status)["Degraded"]["message"]
