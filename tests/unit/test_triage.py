"""Which reconcile work a watch event asks for: children to write, a status to update, or nothing."""

from __future__ import annotations

import copy

import pytest

from pdd_operator.controller.cache import pod_view
from pdd_operator.controller.rollout import deployment_status_view, observe
from pdd_operator.controller.status import RoleObservation
from pdd_operator.controller.triage import child_work, pdd_work, pod_inert, pod_work
from pdd_operator.controller.workqueue import Priority

W, S = Priority.WRITE, Priority.STATUS
OWNER = [{"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "name": "a", "uid": "u",
          "controller": True}]


def deployment(role="decode", rv=10, status=None, annotations=None, labels=None, replicas=1, **meta):
    return {"kind": "Deployment",
            "metadata": {"name": f"a-{role}", "namespace": "ns", "resourceVersion": str(rv), "generation": 2,
                         "labels": {"pdd-operator.dev/role": role, **(labels or {})}, "ownerReferences": OWNER,
                         "annotations": {"pdd-operator.dev/generation": "2", **(annotations or {})},
                         "managedFields": [{"manager": "pdd-operator"}], **meta},
            "spec": {"replicas": replicas, "template": {"metadata": {"labels": {"pdd-operator.dev/role": role}}}},
            "status": status if status is not None else {"replicas": 1, "updatedReplicas": 1, "readyReplicas": 0,
                                                         "observedGeneration": 2}}


READY = {"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "observedGeneration": 2}
BASE = {"replicas": 1, "updatedReplicas": 1, "readyReplicas": 0, "observedGeneration": 2}


def cond(type_, status="True", reason="", message="", t="2026-12-05T00:00:00Z"):
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastUpdateTime": t,
            "lastTransitionTime": t}


@pytest.mark.parametrize(("cached", "new", "work"), [
    # children to write: gone, unknown, or what the operator applies or compares changed
    (deployment(), None, W),
    (None, deployment(managedFields=[{"manager": "kubectl"}]), W),  # someone else's object with our labels
    (None, deployment(managedFields=[]), W),
    (None, deployment(), S),  # the echo of the operator's own create, before the apply's answer
    (deployment(), deployment(rv=11, replicas=3), W),  # a hand edit of the spec: reverted
    (deployment(), deployment(rv=11, labels={"x": "y"}), W),
    (deployment(), deployment(rv=11, annotations={"pdd-operator.dev/generation": "1"}), W),  # the operator's own
    (deployment(), deployment(rv=11, deletionTimestamp="2026-12-05T00:00:00Z"), W),
    (deployment(), deployment(rv=11, ownerReferences=[]), W),
    # status the reconcile reads: only a status update
    (deployment(), deployment(rv=11, status=READY), S),
    (deployment(), deployment(rv=11, status={**BASE, "observedGeneration": 1}), S),
    (deployment(), deployment(rv=11, status={**BASE, "conditions": [cond("Progressing", "False",
                                                                           "ProgressDeadlineExceeded")]}), S),
    (deployment(), deployment(rv=11, status={**BASE, "conditions": [cond("ReplicaFailure", message="quota")]}), S),
    (deployment("router"), deployment("router", rv=11, status=READY), S),  # Ready waits for the router
    # another manager's annotation and a status update at once: still only the status
    (deployment(), deployment(rv=11, status=READY, annotations={"deployment.kubernetes.io/revision": "1"}), S),
    # nothing a reconcile writes or reads
    (deployment(), deployment(rv=11), None),  # resourceVersion only
    (deployment(), deployment(rv=11, managedFields=[{"manager": "kubectl"}]), None),
    (deployment(), deployment(rv=11, annotations={"deployment.kubernetes.io/revision": "1"}), None),
    (deployment(), deployment(rv=11, status={**BASE, "availableReplicas": 0, "unavailableReplicas": 1}), None),
    (deployment(), deployment(rv=11, status={**BASE, "conditions": [cond("Available", "False",
                                                                           "MinimumReplicasUnavailable")]}), None),
    (deployment(), deployment(rv=11, status={**BASE, "conditions": [cond("Progressing", reason="NewReplicaSetAvailable",
                                                                           t="2026-12-05T00:00:09Z")]}), None),
    (deployment(), deployment(rv=11, status={**BASE, "conditions": [cond("ReplicaFailure", "False")]}), None),
    (deployment("other"), deployment("other", rv=11, status=READY), None),  # no role of ours: status unread
])
def test_child_work(cached, new, work):
    assert child_work("Deployment", cached, new) is work


def service(rv=5, **extra):
    return {"kind": "Service", "metadata": {"name": "a-router", "namespace": "ns", "resourceVersion": str(rv),
                                            "labels": {"pdd-operator.dev/role": "router"}, "ownerReferences": OWNER},
            "spec": {"ports": [{"port": 8000}]}, **extra}


@pytest.mark.parametrize(("cached", "new", "work"), [
    (service(), service(6, status={"loadBalancer": {"ingress": [{"ip": "10.0.0.9"}]}}), None),  # unread
    (service(), service(6, spec={"ports": [{"port": 8000}, {"port": 9}]}), W),  # a port added by hand
    (service(), None, W),
])
def test_child_work_of_a_service(cached, new, work):
    assert child_work("Service", cached, new) is work


def pod(rv=3, deleting=False, **status):
    meta = {"name": "a-decode-x", "namespace": "ns", "resourceVersion": str(rv), "uid": "p",
            "labels": {"pdd-operator.dev/instance": "a"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-05T00:00:00Z"
    return pod_view({"kind": "Pod", "metadata": meta, "status": {"phase": "Pending", **status}})


UNSCHEDULABLE = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": "0/3 nodes are available"}]}
CRASHING = {"containerStatuses": [{"name": "vllm", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                                   "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}
VERDICT = {"initContainerStatuses": [{"name": "preflight",
                                      "state": {"terminated": {"message": '{"reason": "RDMAReady"}'}}}]}


@pytest.mark.parametrize(("cached", "new", "work"), [
    # a pod free of trouble adds nothing to what status reads of pods, whatever happens to it
    (None, pod(), None),
    (pod(), pod(4, conditions=[{"type": "PodScheduled", "status": "True"}]), None),
    (pod(), pod(4, phase="Running", conditions=[{"type": "Ready", "status": "True"}], podIP="10.0.0.1"), None),
    (pod(4, deleting=True), pod(5, deleting=True), None),
    # ... but one that starts to terminate or goes away changes its slot's pod count (rollout retire order, Ready)
    (pod(), pod(4, deleting=True), S),
    (pod(), None, S),
    (pod(4, deleting=True), None, S),
    # what status reads of a pod appeared, changed or went
    (None, pod(**UNSCHEDULABLE), S),
    (pod(), pod(4, **UNSCHEDULABLE), S),
    (pod(**UNSCHEDULABLE), pod(4, conditions=[{"type": "PodScheduled", "status": "True"}]), S),
    (pod(**UNSCHEDULABLE), pod(4, deleting=True, **UNSCHEDULABLE), S),  # a pod being deleted is not reported
    (pod(**UNSCHEDULABLE), None, S),
    (pod(), pod(4, **CRASHING), S),
    (pod(), pod(4, **VERDICT), S),
    (pod(**VERDICT), pod(4, deleting=True, **VERDICT), S),  # the verdict counts while it stops: view changed
    # trouble that did not change
    (pod(**CRASHING), pod(4, **CRASHING), None),
])
def test_pod_work(cached, new, work):
    assert pod_work(cached, new) is work


@pytest.mark.parametrize(("status", "inert"), [
    ({}, True),
    ({"initContainerStatuses": [{"name": "preflight", "state": {"terminated": {"message": "not json"}}}]}, True),
    ({"containerStatuses": [{"name": "vllm", "state": {"waiting": {"reason": "ContainerCreating"}}}]}, True),
    (UNSCHEDULABLE, False), (CRASHING, False), (VERDICT, False),
])
def test_pod_inert(status, inert):
    assert pod_inert(pod(**status)) is inert


@pytest.mark.parametrize(("cached", "new", "work"), [
    (None, {"metadata": {"name": "a", "resourceVersion": "1"}, "spec": {}}, W),  # new: create its children
    ({"metadata": {"name": "a", "resourceVersion": "1"}, "spec": {}},
     {"metadata": {"name": "a", "resourceVersion": "2"}, "spec": {}, "status": {"x": 1}}, None),  # a status write
    ({"metadata": {"name": "a", "resourceVersion": "1"}, "spec": {}},
     {"metadata": {"name": "a", "resourceVersion": "2", "generation": 2}, "spec": {"a": 1}}, W),
    ({"metadata": {"name": "a", "resourceVersion": "1"}, "spec": {}},
     {"metadata": {"name": "a", "resourceVersion": "2", "labels": {"x": "y"}}, "spec": {}}, W),
])
def test_pdd_work(cached, new, work):
    assert pdd_work(cached, new) is work


@pytest.mark.parametrize("other", [
    {**READY, "availableReplicas": 1, "conditions": [cond("Available"), cond("Progressing", reason="NewReplicaSetAvailable")]},
    {**READY, "unavailableReplicas": 0, "collisionCount": 2, "terminatingReplicas": 0},
    {**READY, "conditions": [cond("ReplicaFailure", "False", message="old")]},
])
def test_statuses_with_equal_views_give_the_reconcile_equal_observations(other):
    """What makes a Deployment status update outside the view safe to drop: the reconcile's readers of
    a Deployment's status see nothing else."""
    plain, extra = deployment(status=dict(READY)), deployment(status=other)
    assert deployment_status_view(plain) == deployment_status_view(extra)
    assert RoleObservation.from_deployment(plain) == RoleObservation.from_deployment(extra)
    assert observe(plain) == observe(extra)
    assert child_work("Deployment", plain, extra) is None


def test_a_view_change_changes_what_the_reconcile_sees():
    before = deployment(status=dict(BASE))
    for field, value in (("readyReplicas", 1), ("updatedReplicas", 0), ("replicas", 2), ("observedGeneration", 1)):
        after = copy.deepcopy(before)
        after["status"][field] = value
        assert RoleObservation.from_deployment(before) != RoleObservation.from_deployment(after) or \
            observe(before) != observe(after), field
        assert child_work("Deployment", before, after) is S
