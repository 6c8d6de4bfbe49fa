"""``spec.router.retries`` on the real control plane: the apiserver bounds it (the CRD schema, no
webhook), the operator renders it into the router Deployment's command, and an edit of it rolls the
router alone: every engine Deployment keeps its pod template and generation, and its pods stay."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.e2e.conftest import ROOT, condition, pdd_status, wait_for

pytestmark = pytest.mark.cluster

NAME = "llama-8b"
LLAMA = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())


def ready_at(cluster, ns: str, generation: int):
    """Ready, observed and applied at ``generation`` (Ready waits for the router's Deployment too)."""
    def check():
        st = pdd_status(cluster, ns, NAME)
        return (condition(st, "Ready").get("status") == "True" and st.get("observedGeneration") == generation
                and st.get("appliedGeneration") == generation and st)
    return check


def deployments(cluster, ns: str, selector: str) -> dict[str, dict]:
    """The Deployments matching ``selector`` by name, as the apiserver returns them (JSON)."""
    out = cluster.kubectl("get", "deployments", "-n", ns, "-l", selector, "-o", "json").stdout
    return {d["metadata"]["name"]: d for d in json.loads(out)["items"]}


def router_command(cluster, ns: str) -> list[str]:
    dep = deployments(cluster, ns, "app.kubernetes.io/component=router")[f"{NAME}-router"]
    return dep["spec"]["template"]["spec"]["containers"][0]["command"]


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def engine_pods(cluster, ns: str) -> set[str]:
    return {p.metadata.uid for p in cluster.core.list_namespaced_pod(ns, label_selector="app.kubernetes.io/name=vllm").items
            if p.metadata.deletion_timestamp is None}


def router_pods(cluster, ns: str) -> list:
    return [p for p in cluster.core.list_namespaced_pod(ns, label_selector="app.kubernetes.io/component=router").items
            if p.metadata.deletion_timestamp is None]


def test_router_retries_reach_the_router_and_an_edit_rolls_only_the_router(cluster, operator, namespace):
    doc = json.loads(json.dumps(LLAMA))
    doc["spec"]["router"] = {"retries": {"attempts": 6}}
    refused = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc), check=False)
    assert refused.returncode != 0 and "spec.router.retries.attempts" in refused.stderr, refused.stderr

    doc["spec"]["router"] = {"retries": {"attempts": 3, "deadlineSeconds": 90}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    wait_for(ready_at(cluster, namespace, 1), 120, what="Ready at generation 1")
    command = router_command(cluster, namespace)
    assert command[:2] == ["pdd", "router"]
    assert (flag(command, "--retries"), flag(command, "--retry-deadline")) == ("3", "90")
    engines = deployments(cluster, namespace, "app.kubernetes.io/name=vllm")
    assert set(engines) == {f"{NAME}-prefill", f"{NAME}-decode"}
    pods_before = engine_pods(cluster, namespace)
    assert len(pods_before) == 3  # 2 prefill, 1 decode
    router_before = deployments(cluster, namespace, "app.kubernetes.io/component=router")[f"{NAME}-router"]

    # A merge patch of one field: the apiserver keeps deadlineSeconds (90) and defaults nothing else.
    cluster.kubectl("patch", "pdd", NAME, "-n", namespace, "--type", "merge",
                    "-p", json.dumps({"spec": {"router": {"retries": {"attempts": 0}}}}))
    command = wait_for(lambda: (c := router_command(cluster, namespace)) and flag(c, "--retries") == "0" and c,
                       60, what="the router Deployment with --retries 0")
    assert flag(command, "--retry-deadline") == "90"
    wait_for(ready_at(cluster, namespace, 2), 120, what="Ready at generation 2")
    router_after = deployments(cluster, namespace, "app.kubernetes.io/component=router")[f"{NAME}-router"]
    assert router_after["metadata"]["generation"] > router_before["metadata"]["generation"]
    wait_for(lambda: [flag(p.spec.containers[0].command, "--retries") for p in router_pods(cluster, namespace)] == ["0"],
             60, what="one router pod, with --retries 0")

    after = deployments(cluster, namespace, "app.kubernetes.io/name=vllm")
    assert set(after) == set(engines)  # no slot b: the compat hash did not change
    for name, dep in engines.items():
        assert after[name]["spec"]["template"] == dep["spec"]["template"], name
        assert after[name]["metadata"]["generation"] == dep["metadata"]["generation"], name
    assert engine_pods(cluster, namespace) == pods_before
