"""Kubernetes discovery of the router: which pods become endpoints, and with what metadata."""

from __future__ import annotations

from pdd_operator.api.constants import LABEL_COMPAT_HASH, LABEL_COMPONENT, LABEL_INSTANCE, LABEL_MANAGED_BY
from pdd_operator.router.discovery import (
    ANNOTATION_PP,
    ANNOTATION_TP,
    apply_pods,
    endpoint_of_pod,
    endpoints_of_pods,
    pod_selector,
)
from pdd_operator.router.endpoints import Registry


def pod(name, role, ip="10.1.0.5", ready=True, phase="Running", chash="abc", annotations=None, deleting=False,
        uid="uid-1", restarts=0):
    meta = {"name": name, "uid": uid, "labels": {LABEL_INSTANCE: "demo", LABEL_COMPONENT: role, LABEL_COMPAT_HASH: chash,
                                     LABEL_MANAGED_BY: "pdd-operator"},
            "annotations": annotations or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T10:00:00Z"
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": "vllm", "ports": [{"name": "http", "containerPort": 8000},
                                                          {"name": "nixl", "containerPort": 5600}]}]},
        "status": {"phase": phase, "podIP": ip,
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                   "containerStatuses": [{"name": "preflight-sidecar", "restartCount": 7},
                                         {"name": "vllm", "restartCount": restarts}]},
    }


def test_only_running_ready_not_terminating_pods_with_an_ip_are_endpoints():
    assert endpoint_of_pod(pod("a", "prefill")).url == "http://10.1.0.5:8000"
    assert endpoint_of_pod(pod("a", "prefill", ready=False)) is None
    assert endpoint_of_pod(pod("a", "prefill", phase="Pending")) is None
    assert endpoint_of_pod(pod("a", "prefill", ip=None)) is None
    assert endpoint_of_pod(pod("a", "prefill", deleting=True)) is None
    assert endpoint_of_pod(pod("a", "router")) is None
    assert endpoint_of_pod(pod("a", "decode", ip="fd00::5")).url == "http://[fd00::5]:8000"


def test_push_metadata_comes_from_annotations_and_ports():
    ep = endpoint_of_pod(pod("p-1", "prefill", annotations={ANNOTATION_TP: "4", ANNOTATION_PP: "2"}))
    assert (ep.engine_id, ep.kv_host, ep.kv_port, ep.tp_size, ep.pp_size, ep.compat_hash, ep.name) == (
        None, "10.1.0.5", 5600, 4, 2, "abc", "p-1")  # the engine id is learned from the engine, never the pod
    assert ep.push_ready
    # an old release's annotation is not believed: a restarted container reused that id
    assert endpoint_of_pod(pod("p-1", "prefill", annotations={"pdd-operator.dev/engine-id": "p-1"})).engine_id is None


def test_instance_is_the_pod_uid_and_the_engine_containers_restarts():
    assert endpoint_of_pod(pod("p", "prefill")).instance == "uid-1/0"
    assert endpoint_of_pod(pod("p", "prefill", restarts=2)).instance == "uid-1/2"  # not the sidecar's 7
    assert endpoint_of_pod(pod("p", "prefill", uid="uid-2")).instance == "uid-2/0"


def test_a_restarted_container_forgets_the_learned_engine_id_and_nothing_else_does():
    reg = Registry()
    apply_pods(reg, [pod("p", "prefill")])
    (ep,) = reg.endpoints("prefill")
    ep.engine_id = "engine-a"  # learned from an answer of the process now running
    apply_pods(reg, [pod("p", "prefill", chash="abc")])  # any other update of the same process
    assert reg.endpoints("prefill")[0] is ep and ep.engine_id == "engine-a"
    apply_pods(reg, [pod("p", "prefill", restarts=1)])  # the container restarted: a new process
    assert reg.endpoints("prefill")[0] is ep and ep.engine_id is None
    ep.engine_id = "engine-b"
    apply_pods(reg, [pod("p", "prefill", restarts=1, ready=False)])  # not Ready: dropped
    apply_pods(reg, [pod("p", "prefill", restarts=1)])
    assert reg.endpoints("prefill")[0].engine_id is None


def test_render_helper_publishes_what_discovery_reads():
    from pdd_operator.render.engine import router_pod_annotations
    from tests.helpers import make_spec

    push = make_spec(engine={"image": "vllm/vllm-openai:v0.24.0"}, kvTransfer={"connector": "NixlPushConnector"},
                     prefill={"tensorParallelSize": 2})
    ann = router_pod_annotations(push, "prefill")
    ep = endpoint_of_pod(pod("demo-prefill-abc", "prefill", annotations=ann))
    assert (ep.engine_id, ep.kv_port, ep.tp_size, ep.pp_size) == (None, 5600, 2, 1)
    assert ep.push_ready
    assert router_pod_annotations(push, "decode") == {} and router_pod_annotations(make_spec(), "prefill") == {}


def test_pod_changes_replace_the_registry_endpoints_without_restart():
    reg = Registry()
    pods = [pod("p1", "prefill", ip="10.0.0.1"), pod("d1", "decode", ip="10.0.0.2")]
    apply_pods(reg, pods)
    assert reg.pairs() == 1
    d1 = reg.endpoints("decode")[0]
    d1.outstanding = 3
    # a new revision rolls out: new pods with a new hash, the old decode becomes unready
    pods += [pod("p2", "prefill", ip="10.0.0.3", chash="new"), pod("d2", "decode", ip="10.0.0.4", chash="new")]
    apply_pods(reg, pods)
    assert reg.pairs() == 2 and reg.endpoints("decode")[0] is d1 and d1.outstanding == 3
    pods[1] = pod("d1", "decode", ip="10.0.0.2", ready=False)
    apply_pods(reg, pods)
    assert [e.url for e in reg.endpoints("decode")] == ["http://10.0.0.4:8000"]
    # old prefill has no decode of its hash any more: only the new one is chosen
    assert {reg.pick_prefill().url for _ in range(20)} == {"http://10.0.0.3:8000"}
    assert endpoints_of_pods([])["prefill"] == []


def test_selector_names_the_pddeployment_engine_pods():
    assert pod_selector("demo") == ("app.kubernetes.io/instance=demo,app.kubernetes.io/managed-by=pdd-operator,"
                                    "app.kubernetes.io/component in (prefill,decode)")


def test_registry_generation_counts_updates():
    reg = Registry()
    apply_pods(reg, [])
    assert reg.generation == 2


# -- what the operator renders for the router ------------------------------------------------------

def test_router_deployment_and_service_are_rendered_per_pddeployment():
    from pdd_operator.compat import evaluate
    from pdd_operator.controller.status import RoleObservation, fold_status
    from pdd_operator.pins import operator_image
    from pdd_operator.render.workloads import Owner, render_children, router_endpoint
    from tests.helpers import make_spec

    owner = Owner("demo", "serving", uid="u1", generation=3)
    spec = make_spec()
    by_key = {(c["kind"], c["metadata"]["name"]): c for c in render_children(owner, spec)}
    dep, svc = by_key[("Deployment", "demo-router")], by_key[("Service", "demo-router")]
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == operator_image()
    assert c["command"] == ["pdd", "router", "--pddeployment", "demo", "--namespace", "serving",
                            "--port", "8000", "--kv-mode", "pull", "--retries", "1", "--retry-deadline", "30"]
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
    assert c["resources"]["requests"] == {"cpu": "250m", "memory": "256Mi"}
    # ready only when it can route (GET /ready), alive while it serves (GET /health)
    assert c["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    # its own ServiceAccount, allowed to get/list/watch pods in its namespace and nothing else
    assert pod["serviceAccountName"] == "demo-router"
    sa, role, binding = (by_key[(k, "demo-router")] for k in ("ServiceAccount", "Role", "RoleBinding"))
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "demo-router"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "demo-router", "namespace": "serving"}]
    for obj in (sa, role, binding):
        assert obj["metadata"]["namespace"] == "serving" and obj["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert dep["metadata"]["ownerReferences"][0]["uid"] == "u1"
    # the router's pods are not engine pods: the discovery selector never matches them
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == "router" and "pdd-operator.dev/compat-hash" not in labels
    assert svc["spec"]["type"] == "ClusterIP" and svc["spec"]["ports"][0]["port"] == 8000
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    assert router_endpoint(owner, spec) == "http://demo-router.serving.svc:8000"

    push = make_spec(engine={"image": "vllm/vllm-openai:v0.24.0"}, kvTransfer={"connector": "NixlPushConnector"},
                     router={"replicas": 2, "port": 9000, "serviceAccountName": "pdd-router",
                             "resources": {"requests": {"cpu": 2}}})
    by_key = {(c["kind"], c["metadata"]["name"]): c for c in render_children(owner, push)}
    dep = by_key[("Deployment", "demo-router")]
    # a ServiceAccount the user manages: no RBAC objects of ours
    assert not {k for k, _ in by_key} & {"ServiceAccount", "Role", "RoleBinding"}
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert dep["spec"]["replicas"] == 2 and c["command"][7:10] == ["9000", "--kv-mode", "push"]
    assert c["resources"] == {"requests": {"cpu": 2}}
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "pdd-router"

    obs = {r: RoleObservation() for r in ("prefill", "decode")}
    status = fold_status(generation=1, previous={}, report=evaluate(spec), applied_generation=1,
                         observations=obs, now="2026-11-29T10:00:00Z", endpoint=router_endpoint(owner, spec))
    assert status["endpoint"] == "http://demo-router.serving.svc:8000"
    assert "endpoint" not in fold_status(generation=1, previous={}, report=evaluate(spec), applied_generation=1,
                                         observations=obs, now="2026-11-29T10:00:00Z")
