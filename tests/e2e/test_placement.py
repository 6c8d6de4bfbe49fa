"""Placement on the kwok cluster: one topology domain for the whole P/D pair, and honest Pending."""

from __future__ import annotations

import pytest
import yaml

from tests.e2e.conftest import ROOT, condition, pdd_status, wait_for

pytestmark = pytest.mark.cluster

LLAMA = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())
RACK = "network.topology.kubernetes.io/block"


def running_pods(cluster, ns):
    selector = "app.kubernetes.io/instance=llama-8b,app.kubernetes.io/name=vllm"
    return [p for p in cluster.core.list_namespaced_pod(ns, label_selector=selector).items
            if p.status.phase == "Running" and p.metadata.deletion_timestamp is None]


def test_prefill_and_decode_stay_in_one_rack(cluster, operator, namespace):
    doc = yaml.safe_load(yaml.safe_dump(LLAMA))
    doc["spec"]["placement"] = {"topologyKey": RACK, "gpuProduct": "NVIDIA-H200"}
    doc["spec"]["prefill"]["replicas"] = 3
    doc["spec"]["decode"]["replicas"] = 2
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    pods = wait_for(lambda: (p := running_pods(cluster, namespace)) and len(p) == 5 and p, 120, what="5 running pods")
    racks = {cluster.core.read_node(p.spec.node_name).metadata.labels[RACK] for p in pods}
    assert len(racks) == 1, racks
    prefill_nodes = {p.spec.node_name for p in pods if p.metadata.labels["app.kubernetes.io/component"] == "prefill"}
    assert len(prefill_nodes) == 2  # spread over both nodes of the rack
    wait_for(lambda: condition(pdd_status(cluster, namespace, "llama-8b"), "Ready").get("status") == "True", 60,
             what="Ready")


def test_a_deployment_that_cannot_fit_says_why(cluster, operator, namespace):
    doc = yaml.safe_load(yaml.safe_dump(LLAMA))
    doc["spec"]["placement"] = {"gpuProduct": "NVIDIA-B200"}  # no such nodes
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))

    def degraded():
        st = pdd_status(cluster, namespace, "llama-8b")
        return condition(st, "Degraded").get("reason") == "Unschedulable" and st
    st = wait_for(degraded, 120, what="Degraded=Unschedulable")
    assert "node affinity/selector" in condition(st, "Degraded")["message"]
    assert condition(st, "Ready")["status"] == "False"


def test_engines_tolerate_gpu_taints_by_default(cluster, operator, namespace):
    """GPU nodes tainted nvidia.com/gpu=present:NoSchedule (as GKE taints them): the real scheduler
    still places the engines there, because the operator adds the toleration for what they request."""
    nodes = [n.metadata.name for n in cluster.core.list_node().items
             if int((n.status.allocatable or {}).get("nvidia.com/gpu", "0")) > 0]
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}

    def set_taints(name, add):
        node = cluster.core.read_node(name)
        kept = [cluster.api.sanitize_for_serialization(t) for t in node.spec.taints or [] if t.key != taint["key"]]
        cluster.core.patch_node(name, {"spec": {"taints": kept + ([taint] if add else [])}})

    try:
        for n in nodes:
            set_taints(n, True)
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(LLAMA))
        def why() -> str:
            out = []
            for p in cluster.core.list_namespaced_pod(namespace).items:
                conds = [f"{c.type}={c.status} {c.reason or ''} {c.message or ''}" for c in p.status.conditions or []]
                out.append(f"{p.metadata.name} {p.status.phase} on {p.spec.node_name}: {conds}")
            return "; ".join(out) or "no pods"

        try:
            want = LLAMA["spec"]["prefill"]["replicas"] + LLAMA["spec"]["decode"]["replicas"]
            pods = wait_for(lambda: (p := running_pods(cluster, namespace)) and len(p) == want and p, 120,
                            what=f"all {want} engine pods running on tainted GPU nodes")
        except BaseException:
            print("pods:", why())
            raise
        assert {p.spec.node_name for p in pods} <= set(nodes)
        for p in pods:
            assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in [
                cluster.api.sanitize_for_serialization(t) for t in p.spec.tolerations]
    finally:
        for n in nodes:
            set_taints(n, False)
