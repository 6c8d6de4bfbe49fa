"""Status folding: conditions, transitions, and no change when nothing changed."""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.api.status import CONDITION_TYPES, PDDeploymentStatus
from pdd_operator.compat import CompatReport, evaluate
from pdd_operator.compat.engine import model_config_from_configmap
from pdd_operator.controller.reconcile import invalid_spec_report
from pdd_operator.controller.status import RoleObservation, fold_status
from tests.helpers import ROOT, make_spec, merge

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


def fold(report=GOOD, previous=None, applied=1, generation=1, now=T0, prefill=None, decode=None, fallback=True):
    return fold_status(
        generation=generation, previous=previous or {}, report=report, applied_generation=applied,
        observations={"prefill": prefill or obs(), "decode": decode or obs()}, now=now, fallback=fallback,
    )


def invalid_report(spec_patch: dict) -> CompatReport:
    base = make_spec().model_dump(mode="json", by_alias=True, exclude_none=True)
    try:
        PDDeploymentSpec.model_validate(merge(base, spec_patch))
    except ValidationError as exc:
        return invalid_spec_report(exc)
    raise AssertionError("the patch should make the spec invalid")


INVALID = invalid_report({"prefill": {"tensorParallelSize": 0}})


def test_all_ready():
    status = fold()
    c = conds(status)
    assert c["Ready"]["status"] == "True" and c["Ready"]["reason"] == "AllReplicasReady"
    assert c["Progressing"]["status"] == "False" and c["Degraded"]["status"] == "False"
    assert c["Compatible"]["status"] == "True"
    assert status["prefill"] == {"replicas": 1, "readyReplicas": 1, "updatedReplicas": 1, "ready": "1/1"}
    assert status["observedGeneration"] == 1 and status["appliedGeneration"] == 1
    assert all(x["observedGeneration"] == 1 and x["lastTransitionTime"] == T0 for x in status["conditions"])


def test_ready_waits_for_the_router_the_endpoint_is():
    # status.endpoint is the router: engines alone that are Ready do not make the deployment Ready.
    def with_router(router):
        return fold_status(generation=1, previous={}, report=GOOD, applied_generation=1,
                           observations={"prefill": obs(), "decode": obs()}, now=T0, fallback=True, router=router)
    c = conds(with_router(obs(ready=0)))
    assert c["Ready"]["status"] == "False" and c["Ready"]["reason"] == "ReplicasNotReady"
    assert "router: 0/1 ready" in c["Ready"]["message"]
    assert c["Reconciling"]["status"] == "True"
    assert conds(with_router(RoleObservation(replicas=1)))["Ready"]["status"] == "False"  # not created yet
    c = conds(with_router(obs()))
    assert c["Ready"]["status"] == "True" and "router: 1/1 ready" in c["Ready"]["message"]
    assert conds(with_router(None))["Ready"]["status"] == "True"  # no router: the engines decide


def test_rolling_out_is_progressing_not_ready():
    status = fold(decode=obs(replicas=2, ready=1, updated=2))
    c = conds(status)
    assert c["Ready"]["status"] == "False" and c["Progressing"]["status"] == "True"
    assert "decode: 1/2 ready" in c["Progressing"]["message"]
    assert status["decode"]["ready"] == "1/2"


def test_old_pods_still_present_is_not_rolled_out():
    c = conds(fold(prefill=obs(replicas=1, ready=1, updated=1, current=2)))
    assert c["Ready"]["status"] == "False"


def test_the_previous_slots_terminating_pod_keeps_it_progressing_and_not_ready():
    """Issue 13: Ready=True was reported while the old revision's prefill pod was still Terminating (its
    Deployment, scaled to 0, no longer counts it). Ready and Progressing wait until it is gone."""
    stopping = {"metadata": {"name": "demo-prefill-x", "labels": {"pdd-operator.dev/slot": "a"},
                             "deletionTimestamp": "2026-11-29T10:00:00Z"}}
    old = dep(replicas=0, ready=0, updated=0)
    c = conds(fold(prefill=obs().with_previous(old, [stopping]), decode=obs().with_previous(old, [])))
    assert c["Ready"]["status"] == "False" and c["Ready"]["reason"] == "ReplicasNotReady"
    assert c["Progressing"]["status"] == "True" and c["Reconciling"]["status"] == "True"
    assert "prefill: 1/1 ready, 1 updated, 1 of the previous revision" in c["Progressing"]["message"]
    c = conds(fold(prefill=obs().with_previous(old, []), decode=obs().with_previous(old, [])))
    assert c["Ready"]["status"] == "True" and c["Progressing"]["status"] == "False"


def test_unchanged_inputs_give_an_identical_status_later():
    first = fold(now=T0)
    assert fold(previous=first, now=T1) == first


def test_transition_times_change_only_on_transition():
    first = fold(now=T0)
    second = fold(previous=first, now=T1, decode=obs(replicas=2, ready=1))
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
    # set 37: TP 3 cannot shard the model's 32 heads either (tp-heads-indivisible)
    assert "tp-divisibility" in [c["rule"] for c in status["compatibility"]]


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


def test_a_role_with_no_ready_pod_is_degraded_and_says_who_serves():
    """The router's fallback is surfaced: once the pair has served, no Ready prefill while decode has
    one reads Degraded PrefillUnavailable, naming decode serving alone (or, fallback off, the 503s);
    both down is only not Ready (no role serves), and one of two ready is not Degraded."""
    served = fold()
    assert conds(served)["Ready"]["status"] == "True"
    c = conds(fold(previous=served, prefill=obs(ready=0)))
    assert (c["Degraded"]["status"], c["Degraded"]["reason"]) == ("True", "PrefillUnavailable")
    assert "decode engine alone" in c["Degraded"]["message"]
    assert c["Ready"]["status"] == "False"
    lost = fold(previous=served, decode=obs(ready=0), fallback=False)
    c = conds(lost)
    assert c["Degraded"]["reason"] == "DecodeUnavailable" and "answers 503" in c["Degraded"]["message"]
    # the next reconcile, with Ready now False, still reads the role as lost
    assert conds(fold(previous=lost, decode=obs(ready=0)))["Degraded"]["reason"] == "DecodeUnavailable"
    assert conds(fold(previous=served, prefill=obs(ready=0), decode=obs(ready=0)))["Degraded"]["reason"] == \
        "AsExpected"
    assert conds(fold(previous=served, prefill=obs(replicas=2, ready=1)))["Degraded"]["reason"] == "AsExpected"


def test_a_role_still_starting_for_the_first_time_is_not_degraded():
    """A new PDDeployment whose prefill pods are Ready before its decode pods is progressing, not
    degraded: no Warning event and no Degraded flap at every create."""
    c = conds(fold(decode=obs(ready=0)))
    assert (c["Degraded"]["status"], c["Degraded"]["reason"]) == ("False", "AsExpected")
    assert c["Ready"]["status"] == "False" and c["Progressing"]["status"] == "True"


def test_warnings_are_reported_on_a_compatible_spec():
    # a fine-tune whose head size is not known, so the decode's default block size on 0.30 is not either
    report = evaluate(make_spec(engine={"image": "vllm/vllm-openai:v0.30.0"}, prefill={"blockSize": 16},
                                model={"name": "NousResearch/Hermes-3-Llama-3.1-8B"}))
    c = conds(fold(report=report))
    assert c["Compatible"]["status"] == "True" and c["Compatible"]["reason"] == "CompatibleWithWarnings"
    assert "[block-size-partial]" in c["Compatible"]["message"]


def test_a_spec_whose_version_is_unknown_is_not_checked_and_still_applied():
    report = evaluate(make_spec(engine={"image": "vllm/vllm-openai:latest"}, prefill={"tensorParallelSize": 2}))
    observed = fold(report=report)
    c = conds(observed)
    assert c["Compatible"]["status"] == "Unknown" and c["Compatible"]["reason"] == "NotChecked"
    assert "[vllm-version-unknown]" in c["Compatible"]["message"] and "hetero-tp-p-gt-d-unsupported" in c["Compatible"]["message"]
    assert c["Degraded"]["status"] == "False"  # nothing is refused: the children are applied as for a compatible spec
    pinned = conds(fold(report=evaluate(make_spec(prefill={"tensorParallelSize": 2}))))
    assert pinned["Compatible"]["status"] == "True"


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


# -- kstatus: Reconciling and Stalled ----------------------------------------------------------------


def kstatus(status: dict) -> tuple[str | None, str | None]:
    """(Reconciling, Stalled) status values."""
    c = conds(status)
    return c["Reconciling"]["status"], c["Stalled"]["status"]


def test_conditions_in_order_with_the_kstatus_ones():
    assert [c["type"] for c in fold()["conditions"]] == list(CONDITION_TYPES[:-1])


def test_a_rolled_out_deployment_is_neither_reconciling_nor_stalled():
    c = conds(fold())
    assert kstatus(fold()) == ("False", "False")
    assert c["Reconciling"]["reason"] == "Reconciled" and c["Stalled"]["reason"] == "AsExpected"


def test_a_new_deployment_is_reconciling_until_rolled_out():
    # first status of a brand-new object: children applied, no pod ready yet
    new = RoleObservation.from_deployment(dep(ready=0, updated=0, current=0, observed=0))
    c = conds(fold(prefill=new, decode=new))
    assert kstatus(fold(prefill=new, decode=new)) == ("True", "False")
    assert c["Reconciling"]["reason"] == "RollingOut" and "prefill: 0/1 ready" in c["Reconciling"]["message"]
    # Deployments not created yet: still reconciling, the operator creates them
    missing = fold(prefill=RoleObservation(), decode=RoleObservation())
    assert kstatus(missing) == ("True", "False") and conds(missing)["Reconciling"]["reason"] == "ChildMissing"
    # a generation the children are not rendered from yet
    assert kstatus(fold(generation=2, applied=1)) == ("True", "False")
    assert conds(fold(generation=2, applied=1))["Reconciling"]["reason"] == "Applying"


def test_scaling_up_is_reconciling_and_unschedulable_pods_too():
    assert kstatus(fold(decode=obs(replicas=2, ready=1, updated=2))) == ("True", "False")
    pod = {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                      "message": "0/5 nodes are available"}]}}
    decode = RoleObservation.from_deployment(dep(replicas=1, ready=0, updated=1), pods=[pod])
    assert kstatus(fold(decode=decode)) == ("True", "False")


def test_an_incompatible_spec_is_stalled_not_reconciling():
    status = fold(report=BAD, previous=fold(), generation=2, applied=1, now=T1)
    c = conds(status)
    assert kstatus(status) == ("False", "True")
    assert c["Stalled"]["reason"] == "Incompatible" and c["Reconciling"]["reason"] == "Incompatible"
    assert "[tp-divisibility]" in c["Stalled"]["message"] and "until the spec changes" in c["Stalled"]["message"]
    assert c["Stalled"]["lastTransitionTime"] == T1 and c["Stalled"]["observedGeneration"] == 2
    # refused from the start: nothing created, same verdict
    assert kstatus(fold(report=BAD, applied=None, prefill=RoleObservation(), decode=RoleObservation())) == (
        "False", "True")


def test_an_invalid_spec_is_stalled_with_its_fields():
    status = fold(report=INVALID, applied=None, prefill=RoleObservation(), decode=RoleObservation())
    c = conds(status)
    assert kstatus(status) == ("False", "True")
    assert c["Stalled"]["reason"] == "InvalidSpec" and "spec.prefill.tensorParallelSize" in c["Stalled"]["message"]
    assert (c["Compatible"]["status"], c["Compatible"]["reason"]) == ("False", "InvalidSpec")
    assert c["Degraded"]["reason"] == "InvalidSpec" and c["Ready"]["reason"] == "InvalidSpec"


def test_a_rollout_past_its_deadline_is_stalled():
    stuck = obs(ready=0, updated=1, conditions=[{"type": "Progressing", "status": "False",
                                                  "reason": "ProgressDeadlineExceeded"}])
    status = fold(prefill=stuck)
    assert kstatus(status) == ("False", "True")
    assert conds(status)["Stalled"]["reason"] == "ProgressDeadlineExceeded"
    assert conds(status)["Ready"]["status"] == "False"


def test_a_fixed_spec_goes_from_stalled_back_to_reconciling():
    stalled = fold(report=BAD, previous=fold(), generation=2, applied=1, now=T1)
    fixed = fold(previous=stalled, generation=3, applied=3, now="2026-11-29T10:10:00Z",
                 decode=obs(replicas=1, ready=0, updated=1, current=2))
    c = conds(fixed)
    assert kstatus(fixed) == ("True", "False")
    assert c["Reconciling"]["lastTransitionTime"] == c["Stalled"]["lastTransitionTime"] == "2026-11-29T10:10:00Z"


# -- the status is the model's wire form and fits the CRD's status schema ----------------------------

CRD_STATUS = yaml.safe_load((ROOT / "crds" / "pddeployment.yaml").read_text().split("\n", 1)[1])[
    "spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
_TYPES = {"object": dict, "array": list, "string": str, "integer": int, "boolean": bool}


def outside_schema(schema: dict, value, path: str = "status") -> list[str]:
    """Paths of ``value`` the apiserver would prune (a key no ``properties`` names) or refuse (a wrong
    type, a value not in ``enum``, a missing ``required`` key), checked against a structural schema."""
    problems = []
    want = schema.get("type")
    if want and not (isinstance(value, _TYPES[want]) and not (want == "integer" and isinstance(value, bool))):
        return [f"{path}: {type(value).__name__} is not {want}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        problems += [f"{path}.{k}: required" for k in schema.get("required", []) if k not in value]
        for key, sub in value.items():
            if key in props:
                problems += outside_schema(props[key], sub, f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                problems += outside_schema(schema["additionalProperties"], sub, f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                problems.append(f"{path}.{key}: pruned")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            problems += outside_schema(schema.get("items", {}), item, f"{path}[{i}]")
    return problems


def test_the_schema_check_catches_a_pruned_key_and_a_wrong_type():
    status = fold()
    assert outside_schema(CRD_STATUS, status) == []
    assert outside_schema(CRD_STATUS, {**status, "phase": "Ready"}) == ["status.phase: pruned"]
    bad = {**status, "conditions": [{**status["conditions"][0], "status": "Yes", "severity": "x"}]}
    assert outside_schema(CRD_STATUS, bad) == ["status.conditions[0].status: 'Yes' not in ['True', 'False', 'Unknown']",
                                               "status.conditions[0].severity: pruned"]


FINDINGS = [
    *BAD.findings, *evaluate(make_spec(engine={"image": "vllm/vllm-openai:v0.30.0"}, prefill={"blockSize": 16})).findings,
    *INVALID.findings,
    *invalid_report({"prefill": {"tolerations": [{"effect": "Sometimes"}]}}).findings,
    *evaluate(make_spec(engine={"image": "vllm/vllm-openai:latest"})).findings,
    model_config_from_configmap("{", "cm", "config.json")[1],
]
observations = st.builds(
    RoleObservation, exists=st.booleans(), replicas=st.integers(0, 4), ready=st.integers(0, 4),
    updated=st.integers(0, 4), current=st.integers(0, 6), observed=st.booleans(), deadline_exceeded=st.booleans(),
    replica_failure=st.sampled_from(["", 'pods "x" is forbidden: exceeded quota']),
    unschedulable=st.sampled_from(["", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."]),
)
reports = st.builds(CompatReport, version=st.sampled_from(["0.20.2", "unknown"]),
                    findings=st.lists(st.sampled_from(FINDINGS), max_size=4),
                    not_evaluated=st.lists(st.sampled_from(["block-size-hma"]), max_size=1))
verdicts = st.fixed_dictionaries(
    {"reason": st.sampled_from(["RDMAReady", "TCPFallback", "NoRDMADevice", "SomethingNew"]), "ready": st.booleans()},
    optional={"transport": st.sampled_from(["rdma", "tcp"]), "message": st.text(max_size=20)},
)
inputs = st.fixed_dictionaries({
    "generation": st.integers(1, 5), "report": reports, "applied_generation": st.none() | st.integers(1, 5),
    "observations": st.fixed_dictionaries({"prefill": observations, "decode": observations}),
    "preflight": st.none() | st.lists(st.tuples(st.sampled_from(["p-0", "d-0"]), verdicts), max_size=3),
    "endpoint": st.none() | st.just("http://demo-router.serving.svc:8000"),
})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=inputs, after=inputs)
def test_every_folded_status_fits_the_crd_schema_and_is_stable(before, after):
    first = fold_status(previous={}, now=T0, **before)
    second = fold_status(previous=first, now=T1, **after)
    for status in (first, second):
        assert outside_schema(CRD_STATUS, status) == []
        assert PDDeploymentStatus.model_validate(status).wire() == status
        c = conds(status)
        assert not (c["Reconciling"]["status"] == "True" and c["Stalled"]["status"] == "True")
        assert all(x["observedGeneration"] == status["observedGeneration"] for x in status["conditions"])
    # the same observations later give the same status: no write
    assert fold_status(previous=second, now="2026-11-29T11:00:00Z", **after) == second
    # a condition's time moves only when its status does
    old = conds(first)
    for cond in second["conditions"]:
        before_cond = old.get(cond["type"])
        moved = before_cond is None or before_cond["status"] != cond["status"]
        assert cond["lastTransitionTime"] == (T1 if moved else T0)


def test_a_spec_whose_flag_value_is_in_a_secret_is_not_checked_and_says_why():
    # --kv-events-config from a Secret: the listener-port rules cannot read its endpoint
    env = [{"name": "EVENTS", "valueFrom": {"secretKeyRef": {"name": "events", "key": "config.json"}}}]
    spec = make_spec(engine={"image": "vllm/vllm-openai:v0.28.0", "env": env},
                     prefill={"extraArgs": ["--kv-events-config", "$(EVENTS)"]})
    report = evaluate(spec)
    c = conds(fold(report=report))
    assert c["Compatible"]["status"] == "Unknown" and c["Compatible"]["reason"] == "NotChecked", c
    assert c["Compatible"]["message"].startswith("Prefill's --kv-events-config is the value of $EVENTS"), c
    assert "listener-port-conflict" in c["Compatible"]["message"] and not report.errors
