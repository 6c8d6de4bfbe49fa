"""A router pod that cannot run is told in status as an engine pod is: ``Degraded=True`` with the same
reasons (``Unschedulable``, ``ContainersFailing``, ``ReplicaFailure``), the pod, and the spec field to
fix; ``Ready=False`` names the router as what it waits for. Inputs are API-shaped pods and Deployments,
the pods run through the cache's pod view (what a reconcile reads)."""

from __future__ import annotations

import pytest

from pdd_operator.controller import cache as caching
from pdd_operator.controller.pod_failures import fix_fields, unschedulable
from pdd_operator.controller.status import RoleObservation, fold_status
from pdd_operator.render.workloads import router_labels, router_selector_labels, selector_labels
from tests.unit.test_status import GOOD, T0, dep

#: kube-scheduler's words for a pod whose nodeSelector no node has (nodeaffinity plugin, ErrReasonPod).
NO_NODE = ("0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes "
           "are available: 3 Preemption is not helpful for scheduling.")
#: What the ReplicaSet controller reports when the ServiceAccount admission plugin refuses its pods.
NO_SA = ('pods "m-router-6b7f9c8d5-" is forbidden: error looking up service account ns/pdd-router: '
         'serviceaccount "pdd-router" not found')


def pending(name: str, message: str, labels: dict) -> dict:
    """A Pending pod as the API returns it, the scheduler's verdict in ``PodScheduled``, seen through the cache."""
    return caching.pod_view({
        "kind": "Pod", "metadata": {"name": name, "namespace": "ns", "labels": labels, "uid": "u-" + name},
        "spec": {"nodeSelector": {"pool": "cpu"}, "containers": [{"name": "router"}]},
        "status": {"phase": "Pending", "qosClass": "Burstable", "conditions": [
            {"type": "PodScheduled", "status": "False", "lastProbeTime": None,
             "lastTransitionTime": "2026-12-02T04:00:00Z", "reason": "Unschedulable", "message": message}]}})


def waiting(name: str, container: str, reason: str, message: str = "", last: dict | None = None) -> dict:
    """A pod whose ``container`` waits with ``reason`` (the kubelet's words), seen through the cache."""
    st = {"name": container, "ready": False, "restartCount": 4, "image": "x", "imageID": "",
          "state": {"waiting": {"reason": reason, **({"message": message} if message else {})}}}
    if last:
        st["lastState"] = {"terminated": last}
    return caching.pod_view({"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "labels": router_labels("m")},
                             "status": {"phase": "Running", "containerStatuses": [st]}})


def folded(router: RoleObservation, prefill: RoleObservation | None = None) -> dict[str, dict]:
    """Conditions by type of a status whose engines are rolled out and whose router is ``router``."""
    status = fold_status(generation=1, previous={}, report=GOOD, applied_generation=1, now=T0, fallback=True,
                         observations={"prefill": prefill or RoleObservation.from_deployment(dep()),
                                       "decode": RoleObservation.from_deployment(dep())}, router=router)
    return {c["type"]: c for c in status["conditions"]}


def router_obs(pods: list[dict], **deployment) -> RoleObservation:
    return RoleObservation.from_deployment(dep(**{"ready": 0, **deployment}), pods, desired=1)


def test_an_unschedulable_router_pod_is_degraded_with_the_pod_and_the_field_to_fix():
    c = folded(router_obs([pending("m-router-5c9d-x2", NO_NODE, router_labels("m"))]))
    assert (c["Degraded"]["status"], c["Degraded"]["reason"]) == ("True", "Unschedulable")
    assert c["Degraded"]["message"] == (f"Pods cannot be scheduled: router: pod m-router-5c9d-x2: {NO_NODE} "
                                        "(fix: spec.router.nodeSelector)")
    assert (c["Ready"]["status"], c["Ready"]["reason"]) == ("False", "ReplicasNotReady")
    assert c["Ready"]["message"].startswith("Waiting for router: prefill: 1/1 ready")
    assert c["Reconciling"]["status"] == "True" and c["Stalled"]["status"] == "False"


def test_engine_and_router_pods_are_told_in_one_format():
    """The same scheduler verdict on an engine pod and a router pod: one line each, differing only in the
    part and in the fields that part's spec sets."""
    prefill = RoleObservation.from_deployment(dep(ready=0), [pending("m-prefill-1", NO_NODE, selector_labels("m", "prefill"))])
    c = folded(router_obs([pending("m-router-1", NO_NODE, router_labels("m"))]), prefill=prefill)
    assert c["Degraded"]["message"] == (
        "Pods cannot be scheduled: "
        f"prefill: pod m-prefill-1: {NO_NODE} (fix: spec.prefill.nodeSelector, spec.placement.gpuProduct); "
        f"router: pod m-router-1: {NO_NODE} (fix: spec.router.nodeSelector)")
    assert c["Ready"]["message"].startswith("Waiting for prefill, router: ")


@pytest.mark.parametrize(("pod", "text", "field"), [
    (waiting("m-router-a", "router", "ImagePullBackOff", 'Back-off pulling image "ghcr.io/x/pdd:nope"'),
     'pod m-router-a container router: ImagePullBackOff: Back-off pulling image "ghcr.io/x/pdd:nope"',
     "spec.router.image"),
    (waiting("m-router-a", "router", "CrashLoopBackOff", "back-off 40s restarting failed container=router",
             {"exitCode": 137, "reason": "OOMKilled"}),
     "pod m-router-a container router: CrashLoopBackOff (last exit 137, OOMKilled)", "spec.router.resources"),
])
def test_a_router_container_that_cannot_run_is_containers_failing(pod, text, field):
    c = folded(router_obs([pod]))
    assert (c["Degraded"]["status"], c["Degraded"]["reason"]) == ("True", "ContainersFailing")
    assert c["Degraded"]["message"] == f"Containers cannot run: router: {text} (fix: {field})"
    assert c["Ready"]["status"] == "False" and c["Ready"]["message"].startswith("Waiting for router: ")


def test_a_missing_service_account_is_a_router_replica_failure():
    """The ServiceAccount admission plugin refuses the pods, so there is no pod: the ReplicaSet's
    FailedCreate, which the Deployment controller copies into the Deployment's conditions, tells it."""
    refused = router_obs([], current=0, updated=0, conditions=[
        {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"},
        {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": NO_SA}])
    c = folded(refused)
    assert (c["Degraded"]["status"], c["Degraded"]["reason"]) == ("True", "ReplicaFailure")
    assert c["Degraded"]["message"] == f"router: {NO_SA} (fix: spec.router.serviceAccountName)"


def test_a_router_past_its_progress_deadline_is_stalled():
    stuck = router_obs([], conditions=[{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}])
    c = folded(stuck)
    assert c["Stalled"]["reason"] == "ProgressDeadlineExceeded" and "router" in c["Stalled"]["message"]


def test_a_running_router_changes_nothing():
    c = folded(RoleObservation.from_deployment(dep(), [waiting("m-router-a", "router", "ContainerCreating")]))
    assert (c["Degraded"]["reason"], c["Ready"]["status"]) == ("AsExpected", "True")


def test_the_first_unschedulable_pod_by_name_is_told_and_deleted_pods_are_not():
    a, b = pending("m-router-b", "0/1 nodes: b", {}), pending("m-router-a", "0/1 nodes: a", {})
    assert unschedulable([a, b]) == unschedulable([b, a]) == "pod m-router-a: 0/1 nodes: a"
    b["metadata"]["deletionTimestamp"] = T0
    assert unschedulable([b]) == ""


@pytest.mark.parametrize(("part", "text", "fields"), [
    ("router", NO_NODE, ["spec.router.nodeSelector"]),
    ("decode", "0/5 nodes are available: 2 Insufficient nvidia.com/gpu, 3 Insufficient rdma/ib.",
     ["spec.decode.tensorParallelSize", "spec.decode.pipelineParallelSize", "spec.network.rdma.resourceName"]),
    ("router", "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory.", ["spec.router.resources"]),
    ("prefill", "0/2 nodes are available: 2 node(s) had untolerated taint {gpu: true}.", ["spec.prefill.tolerations"]),
    ("router", "0/2 nodes are available: 2 node(s) had untolerated taint {gpu: true}.", ["spec.router.tolerations"]),
    ("decode", "0/4 nodes are available: 4 node(s) didn't match pod anti-affinity rules.", ["spec.placement"]),
    ("prefill", "0/4 nodes are available: 4 node(s) didn't have free ports for the requested pod ports.",
     ["spec.network.hostNetwork"]),
    ("prefill", 'pod p container preflight: ErrImagePull: not found', ["spec.engine.image", "spec.engine.imagePullSecrets"]),
    ("router", 'pod p container router: InvalidImageName: bad', ["spec.router.image"]),
    ("router", "pod p container router: CrashLoopBackOff (last exit 1)", []),
    ("decode", NO_SA, []),  # the engines run under the namespace's default ServiceAccount
])
def test_fix_fields(part, text, fields):
    assert fix_fields(part, text) == fields


def test_router_pods_are_in_the_pod_cache_under_their_owner_apart_from_the_engines():
    """The pod watch's selector (managed-by) and index key (the instance label) hold router pods; each
    selector reads only its own part's pods."""
    cache = caching.ClusterCache()
    router = {"kind": "Pod", "metadata": {"name": "m-router-1", "namespace": "ns", "resourceVersion": "5",
                                          "labels": router_labels("m")}, "status": {}}
    engine = {"kind": "Pod", "metadata": {"name": "m-prefill-1", "namespace": "ns", "resourceVersion": "6",
                                          "labels": {**selector_labels("m", "prefill"),
                                                     "app.kubernetes.io/managed-by": "pdd-operator"}}, "status": {}}
    assert router_labels("m")["app.kubernetes.io/managed-by"] == "pdd-operator"
    assert cache.observe("Pod", router) and cache.observe("Pod", engine)
    assert [p["metadata"]["name"] for p in cache.pods("ns", router_selector_labels("m"))] == ["m-router-1"]
    assert [p["metadata"]["name"] for p in cache.pods("ns", selector_labels("m", "prefill"))] == ["m-prefill-1"]
    scheduled = {**router, "status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                                      "reason": "Unschedulable", "message": NO_NODE}]}}
    assert cache.observe("Pod", scheduled)  # the scheduler's verdict changes the view: a reconcile is queued
