"""End to end on the real control plane: apply -> children -> pods on GPU nodes -> Ready; edit;
child deleted; incompatible spec; delete; operator restart without writes."""

from __future__ import annotations

import time

import pytest
import yaml

from tests.e2e.conftest import ROOT, audit_writes, condition, pdd_status, wait_for, wait_no_namespace_terminating

pytestmark = pytest.mark.cluster

NEMOTRON = (ROOT / "examples" / "nemotron-nano-pd.yaml").read_text()
LLAMA = (ROOT / "examples" / "llama-dense-pd.yaml").read_text()


def ready(cluster, ns, name, generation=None):
    def check():
        st = pdd_status(cluster, ns, name)
        ok = condition(st, "Ready").get("status") == "True"
        return ok and (generation is None or st.get("observedGeneration") == generation) and st
    return check


def gpu_nodes(cluster) -> set[str]:
    return {n.metadata.name for n in cluster.core.list_node().items
            if int((n.status.allocatable or {}).get("nvidia.com/gpu", "0")) > 0}


def pods(cluster, ns, role):
    return cluster.core.list_namespaced_pod(ns, label_selector=f"app.kubernetes.io/component={role}").items


def test_apply_becomes_ready_on_gpu_nodes(cluster, operator, namespace):
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=NEMOTRON)
    cluster.kubectl("wait", "-n", namespace, "--for=condition=Ready", "--timeout=120s", "pdd/nemotron-nano")
    st = pdd_status(cluster, namespace, "nemotron-nano")
    assert st["prefill"]["ready"] == "1/1" and st["decode"]["ready"] == "1/1"
    assert st["observedGeneration"] == 1 and st["appliedGeneration"] == 1
    assert condition(st, "Compatible")["status"] == "True"
    assert (condition(st, "Reconciling")["status"], condition(st, "Stalled")["status"]) == ("False", "False")
    for role in ("prefill", "decode"):
        dep = cluster.apps.read_namespaced_deployment(f"nemotron-nano-{role}", namespace)
        owner = dep.metadata.owner_references[0]
        assert (owner.kind, owner.name, owner.controller) == ("PDDeployment", "nemotron-nano", True)
        svc = cluster.core.read_namespaced_service(f"nemotron-nano-{role}", namespace)
        assert svc.spec.cluster_ip == "None"
        role_pods = pods(cluster, namespace, role)
        assert len(role_pods) == 1
        pod = role_pods[0]
        assert pod.status.phase == "Running" and pod.spec.node_name in gpu_nodes(cluster)
        c = pod.spec.containers[0]
        assert c.resources.limits["nvidia.com/gpu"] == "2" and c.resources.limits["rdma/ib"] == "1"
        assert "--no-disable-hybrid-kv-cache-manager" in c.args
        env = {e.name: e for e in c.env}
        assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"].value_from.field_ref.field_path == "status.podIP"
        assert env["VLLM_SSM_CONV_STATE_LAYOUT"].value == "DS"
        assert c.security_context.capabilities.add == ["IPC_LOCK"] and not c.security_context.privileged
    table = cluster.kubectl("get", "pdd", "-n", namespace).stdout.split("\n")
    assert table[0].split()[:5] == ["NAME", "READY", "PREFILL", "DECODE", "COMPATIBLE"]
    assert table[1].split()[:5] == ["nemotron-nano", "True", "1/1", "1/1", "True"]


def test_pods_never_land_on_cpu_nodes_and_oversized_pods_stay_pending(cluster, operator, namespace):
    doc = yaml.safe_load(LLAMA)
    doc["spec"]["prefill"]["replicas"] = 4
    doc["spec"]["decode"]["tensorParallelSize"] = 16  # no node has 16 GPUs
    # A release whose NIXL handshake allows decode TP past the model's 8 KV heads (on 0.20.2 the spec is
    # refused by hetero-tp-kv-replicated before any pod is made, vllm#45330).
    doc["spec"]["engine"]["image"] = "vllm/vllm-openai:v0.32.0"
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    wait_for(lambda: len([p for p in pods(cluster, namespace, "prefill") if p.status.phase == "Running"]) == 4,
             120, what="4 running prefill pods")
    assert {p.spec.node_name for p in pods(cluster, namespace, "prefill")} <= gpu_nodes(cluster)

    def unschedulable():
        for p in pods(cluster, namespace, "decode"):
            for c in p.status.conditions or []:
                if c.type == "PodScheduled" and c.reason == "Unschedulable":
                    return c.message
        return None
    message = wait_for(unschedulable, 120, what="decode pod unschedulable")
    assert "nvidia.com/gpu" in message
    st = wait_for(lambda: (s := pdd_status(cluster, namespace, "llama-8b")) and
                  condition(s, "Degraded").get("reason") == "Unschedulable" and s, 90, what="Degraded=Unschedulable")
    assert "Insufficient nvidia.com/gpu" in condition(st, "Degraded")["message"]
    assert condition(st, "Ready")["status"] == "False" and st["decode"]["ready"] == "0/1"


def test_a_router_no_node_can_take_is_degraded_naming_its_pod_until_the_spec_is_fixed(cluster, operator, namespace):
    """The router is the endpoint: when its pod cannot be scheduled, status says so as it does for an
    engine pod (Degraded=True Unschedulable, the pod, the field to fix) and Ready=False names the router;
    removing the nodeSelector makes it Ready."""
    doc = yaml.safe_load(LLAMA)
    doc["spec"]["router"] = {"nodeSelector": {"pdd-operator.dev/test-pool": "no-such-node"}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))

    def degraded():
        c = condition(pdd_status(cluster, namespace, "llama-8b"), "Degraded")
        return c if c.get("reason") == "Unschedulable" else None

    c = wait_for(degraded, 120, interval=0.5, what="Degraded=Unschedulable for the router")
    (router_pod,) = [p.metadata.name for p in pods(cluster, namespace, "router")]
    assert c["status"] == "True"
    assert f"router: pod {router_pod}: " in c["message"] and "node affinity/selector" in c["message"], c["message"]
    assert "(fix: spec.router.nodeSelector)" in c["message"], c["message"]
    assert "prefill:" not in c["message"] and "decode:" not in c["message"], c["message"]
    # The engines roll out meanwhile; then the router is all that Ready waits for.
    st = wait_for(lambda: (s := pdd_status(cluster, namespace, "llama-8b")) and
                  condition(s, "Ready")["message"].startswith("Waiting for router: ") and s, 120, interval=0.5,
                  what="Ready waiting for the router alone")
    assert condition(st, "Ready")["status"] == "False"
    assert (st["prefill"]["ready"], st["decode"]["ready"]) == ("2/2", "1/1")
    assert condition(st, "Degraded")["reason"] == "Unschedulable"

    cluster.kubectl("patch", "-n", namespace, "pdd/llama-8b", "--type=merge",
                    "-p", '{"spec": {"router": {"nodeSelector": null}}}')
    st = wait_for(ready(cluster, namespace, "llama-8b", 2), 120, interval=0.5, what="Ready once the router fits")
    assert condition(st, "Degraded")["reason"] == "AsExpected"


def test_a_router_service_account_that_does_not_exist_is_a_replica_failure_until_created(cluster, operator, namespace):
    """The ServiceAccount admission plugin refuses a pod whose ServiceAccount is missing, so the router has
    no pod to tell of: its Deployment's ReplicaFailure does (Degraded=True ReplicaFailure, the field to fix)."""
    doc = yaml.safe_load(LLAMA)
    doc["spec"]["router"] = {"serviceAccountName": "my-router"}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))

    def degraded():
        c = condition(pdd_status(cluster, namespace, "llama-8b"), "Degraded")
        return c if c.get("reason") == "ReplicaFailure" else None

    c = wait_for(degraded, 120, interval=0.5, what="Degraded=ReplicaFailure for the router")
    assert c["status"] == "True" and c["message"].startswith("router: "), c["message"]
    assert 'serviceaccount "my-router" not found' in c["message"], c["message"]
    assert c["message"].endswith("(fix: spec.router.serviceAccountName)"), c["message"]
    assert condition(pdd_status(cluster, namespace, "llama-8b"), "Ready")["status"] == "False"

    cluster.kubectl("create", "serviceaccount", "-n", namespace, "my-router")
    st = wait_for(ready(cluster, namespace, "llama-8b"), 120, interval=0.5, what="Ready once the ServiceAccount exists")
    assert condition(st, "Degraded")["reason"] == "AsExpected"


def test_edit_rolls_out_and_advances_observed_generation(cluster, operator, namespace):
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=LLAMA)
    wait_for(ready(cluster, namespace, "llama-8b", 1), 120, what="Ready at generation 1")
    doc = yaml.safe_load(LLAMA)
    doc["spec"]["decode"].update(replicas=2, tensorParallelSize=4)
    doc["spec"]["engine"]["image"] = "vllm/vllm-openai:v0.20.1"
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    st = wait_for(ready(cluster, namespace, "llama-8b", 2), 180, what="Ready at generation 2")
    assert st["decode"]["ready"] == "2/2" and st["appliedGeneration"] == 2
    # A new image is a new compat hash: rolled out into revision slot b of both roles; slot a, which
    # served meanwhile, is scaled to 0 (kept, not deleted).
    dep = cluster.apps.read_namespaced_deployment("llama-8b-decode-b", namespace)
    c = dep.spec.template.spec.containers[0]
    assert dep.spec.replicas == 2 and c.image == "vllm/vllm-openai:v0.20.1"
    assert c.resources.limits["nvidia.com/gpu"] == "4"
    prefill_b = cluster.apps.read_namespaced_deployment("llama-8b-prefill-b", namespace)
    assert prefill_b.spec.replicas == doc["spec"]["prefill"].get("replicas", 1)
    assert [cluster.apps.read_namespaced_deployment(f"llama-8b-{r}", namespace).spec.replicas
            for r in ("prefill", "decode")] == [0, 0]
    running = [p for p in pods(cluster, namespace, "decode") if p.metadata.deletion_timestamp is None]
    assert all(p.spec.containers[0].image == "vllm/vllm-openai:v0.20.1" for p in running)


def test_child_deleted_by_hand_comes_back(cluster, operator, namespace):
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=LLAMA)
    wait_for(ready(cluster, namespace, "llama-8b"), 120, what="Ready")
    old_dep = cluster.apps.read_namespaced_deployment("llama-8b-decode", namespace).metadata.uid
    old_svc = cluster.core.read_namespaced_service("llama-8b-prefill", namespace).metadata.uid
    cluster.kubectl("delete", "-n", namespace, "deployment/llama-8b-decode", "service/llama-8b-prefill")
    wait_for(lambda: cluster.apps.read_namespaced_deployment("llama-8b-decode", namespace).metadata.uid != old_dep,
             60, what="decode Deployment recreated")
    wait_for(lambda: cluster.core.read_namespaced_service("llama-8b-prefill", namespace).metadata.uid != old_svc,
             60, what="prefill Service recreated")
    wait_for(ready(cluster, namespace, "llama-8b"), 120, what="Ready again")


def test_incompatible_edit_touches_nothing_and_says_why(cluster, operator, namespace):
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=NEMOTRON)
    wait_for(ready(cluster, namespace, "nemotron-nano", 1), 120, what="Ready")
    before = {r: cluster.apps.read_namespaced_deployment(f"nemotron-nano-{r}", namespace).metadata
              for r in ("prefill", "decode")}
    doc = yaml.safe_load(NEMOTRON)
    doc["spec"]["kvCache"] = {"ssmConvStateLayout": "SD"}  # vLLM >= 0.20 asserts DS for Mamba layers
    doc["spec"]["decode"]["blockSize"] = 256               # HMA needs equal block sizes before 0.27
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))

    def refused():
        st = pdd_status(cluster, namespace, "nemotron-nano")
        return st.get("observedGeneration") == 2 and condition(st, "Compatible").get("status") == "False" and st
    st = wait_for(refused, 60, what="Compatible=False at generation 2")
    message = condition(st, "Compatible")["message"]
    assert "[ssm-conv-layout-ds]" in message and "[block-size-hma]" in message and "Fix:" in message
    assert condition(st, "Degraded")["reason"] == "IncompatibleSpec"
    assert "keep running generation 1" in condition(st, "Degraded")["message"]
    stalled = condition(st, "Stalled")
    assert (stalled["status"], stalled["reason"], stalled["observedGeneration"]) == ("True", "Incompatible", 2)
    assert "[ssm-conv-layout-ds]" in stalled["message"] and condition(st, "Reconciling")["status"] == "False"
    assert st["appliedGeneration"] == 1 and st["prefill"]["ready"] == "1/1"
    assert {f["rule"] for f in st["compatibility"]} >= {"ssm-conv-layout-ds", "block-size-hma"}
    for r in ("prefill", "decode"):
        after = cluster.apps.read_namespaced_deployment(f"nemotron-nano-{r}", namespace).metadata
        assert after.generation == before[r].generation
        assert after.annotations["pdd-operator.dev/generation"] == "1"
    # A child deleted while the spec is incompatible comes back on the last compatible spec.
    old_uid = cluster.apps.read_namespaced_deployment("nemotron-nano-prefill", namespace).metadata.uid
    cluster.kubectl("delete", "-n", namespace, "deployment/nemotron-nano-prefill")
    restored = wait_for(lambda: (d := cluster.apps.read_namespaced_deployment("nemotron-nano-prefill", namespace))
                        .metadata.uid != old_uid and d, 60, what="prefill restored")
    assert restored.metadata.annotations["pdd-operator.dev/generation"] == "1"
    assert "VLLM_SSM_CONV_STATE_LAYOUT" in {e.name for e in restored.spec.template.spec.containers[0].env}
    assert {e.value for e in restored.spec.template.spec.containers[0].env
            if e.name == "VLLM_SSM_CONV_STATE_LAYOUT"} == {"DS"}
    wait_for(lambda: pdd_status(cluster, namespace, "nemotron-nano")["prefill"]["ready"] == "1/1", 60,
             what="restored prefill ready")
    # Going back to a compatible spec applies it again.
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=NEMOTRON)
    st = wait_for(ready(cluster, namespace, "nemotron-nano", 3), 120, what="Ready at generation 3")
    assert condition(st, "Compatible")["status"] == "True" and st["appliedGeneration"] == 3


def test_incompatible_from_the_start_creates_nothing(cluster, operator, namespace):
    doc = yaml.safe_load(LLAMA)
    doc["spec"]["model"] = {"name": "openai/whisper-large-v3", "hfArchitecture": "WhisperForConditionalGeneration"}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    st = wait_for(lambda: condition(pdd_status(cluster, namespace, "llama-8b"), "Compatible").get("status") == "False"
                  and pdd_status(cluster, namespace, "llama-8b"), 60, what="Compatible=False")
    assert "[architecture-unsupported]" in condition(st, "Compatible")["message"]
    cluster.kubectl("wait", "-n", namespace, "--for=condition=Degraded", "--timeout=10s", "pdd/llama-8b")
    cluster.kubectl("wait", "-n", namespace, "--for=condition=Stalled", "--timeout=10s", "pdd/llama-8b")
    assert st["prefill"]["ready"] == "0/2" and st["decode"]["ready"] == "0/1"  # desired, though nothing exists
    assert cluster.apps.list_namespaced_deployment(namespace).items == []
    assert cluster.core.list_namespaced_service(namespace).items == []
    assert "endpoint" not in st  # no router Service exists, so no endpoint is published


def test_malformed_model_config_map_is_a_warning_not_a_crash(cluster, operator, namespace):
    cluster.core.create_namespaced_config_map(namespace, {
        "metadata": {"name": "llama-config"}, "data": {"config.json": "[" * 100_000}})
    doc = yaml.safe_load(LLAMA)
    doc["spec"]["model"]["configMapRef"] = {"name": "llama-config"}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    st = wait_for(ready(cluster, namespace, "llama-8b", 1), 120, what="Ready despite the bad config.json")
    (finding,) = [f for f in st["compatibility"] if f["rule"] == "model-config-unavailable"]
    assert finding["severity"] == "warning"
    assert finding["message"].startswith("ConfigMap 'llama-config' key 'config.json': JSON nested too deeply")
    assert condition(st, "Compatible")["reason"] == "CompatibleWithWarnings"
    assert "[model-config-unavailable]" in condition(st, "Compatible")["message"]


def test_delete_garbage_collects_children(cluster, operator, namespace):
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=LLAMA)
    wait_for(ready(cluster, namespace, "llama-8b"), 120, what="Ready")
    cluster.kubectl("delete", "-n", namespace, "pdd/llama-8b", "--wait=true")
    wait_for(lambda: not cluster.apps.list_namespaced_deployment(namespace).items
             and not cluster.core.list_namespaced_service(namespace).items, 120, what="children garbage-collected")
    wait_for(lambda: not pods(cluster, namespace, "prefill") and not pods(cluster, namespace, "decode"),
             120, what="pods gone")


def test_operator_restart_makes_no_duplicates_and_no_writes(cluster, operator, namespace):
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=NEMOTRON)
    wait_for(ready(cluster, namespace, "nemotron-nano"), 120, what="Ready")
    # Earlier tests' namespaces may still be terminating: their PDDeployments' statuses follow the
    # children being removed, writes that are no restart's doing (the write counter is operator-wide).
    wait_no_namespace_terminating(cluster)
    # Once the operator has nothing left to write, restart it and watch the idle window.
    operator.wait_quiet()
    operator.stop()
    since = time.time()
    rv_before = cluster.custom.get_namespaced_custom_object(
        "pdd-operator.dev", "v1alpha1", namespace, "pddeployments", "nemotron-nano")["metadata"]["resourceVersion"]
    operator.start()
    start = operator.reconciles()
    # The initial listing plus at least two resync rounds (PDD_RESYNC_SECONDS=2) reconcile it again.
    wait_for(lambda: operator.reconciles() >= start + 3, 60, what="three reconciles after restart")
    assert len(cluster.apps.list_namespaced_deployment(namespace).items) == 3  # prefill, decode, router
    assert len(cluster.core.list_namespaced_service(namespace).items) == 3
    assert len(pods(cluster, namespace, "prefill")) == 1 and len(pods(cluster, namespace, "decode")) == 1
    rv_after = cluster.custom.get_namespaced_custom_object(
        "pdd-operator.dev", "v1alpha1", namespace, "pddeployments", "nemotron-nano")["metadata"]["resourceVersion"]
    assert rv_after == rv_before
    writes = audit_writes(cluster, namespace, since)
    assert writes == [], [(w["verb"], w["objectRef"], w["user"]["username"]) for w in writes]
    m = operator.metrics()
    assert m.get("pdd_child_applies_total", 0) == 0 and m.get("pdd_status_writes_total", 0) == 0
    # Control: the same audit query does see the operator's writes once there is something to do.
    cluster.kubectl("patch", "-n", namespace, "pdd/nemotron-nano", "--type=merge", "-p", '{"spec":{"decode":{"replicas":2}}}')
    wait_for(ready(cluster, namespace, "nemotron-nano", 2), 120, what="Ready at generation 2")
    agents = {(w["userAgent"].split("/")[0], w["objectRef"]["resource"], w["objectRef"].get("subresource"))
              for w in audit_writes(cluster, namespace, since)}
    assert ("OpenAPI-Generator", "deployments", None) in agents
    assert ("OpenAPI-Generator", "pddeployments", "status") in agents


@pytest.mark.parametrize(
    "patch, rule",
    [
        ({"prefill": {"tensorParallelSize": 2}, "decode": {"tensorParallelSize": 3}}, "tp-divisibility"),
        ({"decode": {"pipelineParallelSize": 2}}, "pp-decode-unsupported"),
        ({"prefill": {"blockSize": 32}, "decode": {"blockSize": 16}}, "block-size-direction"),
    ],
)
def test_api_server_refuses_version_independent_faults(cluster, namespace, patch, rule):
    """CEL rules in the CRD: refused by the API server itself, even with no operator running."""
    doc = yaml.safe_load(LLAMA)
    for role, values in patch.items():
        doc["spec"][role].update(values)
    proc = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc), check=False)
    assert proc.returncode != 0 and f"[{rule}]" in proc.stderr, proc.stderr
    # The refusal names the field and says what to do (api/spec.py CEL_RULES).
    line = next(x for x in proc.stderr.splitlines() if f"[{rule}]" in x)
    assert f"spec.{next(iter(patch))}." in line and " Fix: " in line, line
    assert cluster.custom.list_namespaced_custom_object(
        "pdd-operator.dev", "v1alpha1", namespace, "pddeployments")["items"] == []


def test_preflight_verdicts_become_the_kv_transport_condition(cluster, operator, namespace):
    """The kubelet would put the preflight's JSON in the init container's termination message; here
    the test writes it into the pod status (kwok runs no containers) and the operator folds it."""
    import json

    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=NEMOTRON)
    wait_for(ready(cluster, namespace, "nemotron-nano"), 120, what="Ready")
    st = pdd_status(cluster, namespace, "nemotron-nano")
    assert condition(st, "KVTransportReady")["reason"] == "NoPreflightResult"
    verdict = {"reason": "TCPFallback", "ready": False, "transport": "tcp", "message": "No RDMA port is ACTIVE."}
    pod = pods(cluster, namespace, "decode")[0]
    init = pod.status.init_container_statuses[0]
    cluster.core.patch_namespaced_pod_status(pod.metadata.name, namespace, {"status": {"initContainerStatuses": [{
        "name": "preflight", "image": init.image, "imageID": init.image_id or "", "ready": True, "restartCount": 0,
        "state": {"terminated": {"exitCode": 0, "reason": "Completed", "message": json.dumps(verdict),
                                 "startedAt": "2026-11-29T10:00:00Z", "finishedAt": "2026-11-29T10:00:01Z"}}}]}})

    def folded():
        c = condition(pdd_status(cluster, namespace, "nemotron-nano"), "KVTransportReady")
        return c.get("reason") == "TCPFallback" and c
    c = wait_for(folded, 60, what="KVTransportReady=False TCPFallback")
    assert c["status"] == "False" and pod.metadata.name in c["message"]
