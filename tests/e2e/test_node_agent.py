"""The dev node agent plays the kubelet of its node: pods bound to it really run, on their own loopback
addresses, with init containers, volumes, the downward API, probes, restarts and graceful deletion; pods it
cannot run are refused with the reason in their status."""

from __future__ import annotations

import ipaddress
import os
import urllib.request

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.node_agent import PLACEMENT, POD_CIDR, node_agent  # noqa: F401 (fixture)

pytestmark = pytest.mark.cluster

IMAGE = "ghcr.io/pdd-operator/pdd-operator:v0.1.0"


def web_pod(name: str, marker: str) -> dict:
    """An init container writes what the pod sees into an emptyDir; the main container serves that
    directory over HTTP on 0.0.0.0:8000 (the same port in every such pod)."""
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {
            **PLACEMENT,
            "terminationGracePeriodSeconds": 5,
            "initContainers": [{
                "name": "init", "image": IMAGE,
                "command": ["sh", "-c", "echo \"$POD_IP $(POD_NAME) $(NS)\" > /data/info && "
                            "cat /var/run/secrets/kubernetes.io/serviceaccount/namespace > /data/sa-namespace && "
                            "test -s /var/run/secrets/kubernetes.io/serviceaccount/token"],
                "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
                "volumeMounts": [{"name": "work", "mountPath": "/data"}],
            }],
            "containers": [{
                "name": "web", "image": IMAGE,
                "command": ["python", "-m", "http.server", "8000", "--bind", "0.0.0.0", "--directory", "/data"],
                "env": [{"name": "MARKER", "value": marker},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "ports": [{"name": "http", "containerPort": 8000}],
                "volumeMounts": [{"name": "work", "mountPath": "/data"}],
                "readinessProbe": {"httpGet": {"path": "/info", "port": "http"}, "periodSeconds": 1},
                "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "echo $POD_NAME > $MARKER"]}}},
            }],
            "volumes": [{"name": "work", "emptyDir": {}}],
        },
    }


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def ready(cluster, ns: str, name: str):
    p = cluster.core.read_namespaced_pod(name, ns)
    ok = any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    return p if ok else None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_pods_run_on_their_own_addresses(cluster, namespace, node_agent, tmp_path):  # noqa: F811
    for name in ("web-a", "web-b"):
        cluster.core.create_namespaced_pod(namespace, web_pod(name, str(tmp_path / f"{name}.prestop")))
    pods = {n: wait_for(lambda n=n: ready(cluster, namespace, n), 60, what=f"{n} Ready") for n in ("web-a", "web-b")}
    ips = {n: p.status.pod_ip for n, p in pods.items()}
    assert len(set(ips.values())) == 2, ips
    for name, p in pods.items():
        assert ipaddress.ip_address(p.status.pod_ip) in ipaddress.ip_network(POD_CIDR)
        assert p.status.phase == "Running" and p.spec.node_name == "e2e-agent"
        assert p.status.init_container_statuses[0].state.terminated.exit_code == 0
        # The init container saw its pod IP and name (downward API, $(VAR) expansion) and the service
        # account volume; the main container serves on the pod's own address, port 8000 in both pods.
        assert get(f"http://{p.status.pod_ip}:8000/info").split() == [p.status.pod_ip, name, namespace]
        assert get(f"http://{p.status.pod_ip}:8000/sa-namespace").strip() == namespace

    # A container that dies is restarted, and the restart is counted.
    [cs] = pods["web-a"].status.container_statuses
    pid = int(cs.container_id.removeprefix("pdd-agent://"))
    os.kill(pid, 9)

    def restarted():
        p = cluster.core.read_namespaced_pod("web-a", namespace)
        [c] = p.status.container_statuses
        return c if c.restart_count == 1 and c.ready else None

    cs = wait_for(restarted, 60, what="web-a restarted and Ready again")
    assert cs.last_state.terminated.exit_code == 137 and not alive(pid)

    # Deletion: preStop hook, then the process stops and the pod object goes away.
    pid = int(cs.container_id.removeprefix("pdd-agent://"))
    cluster.core.delete_namespaced_pod("web-a", namespace)

    def gone():
        return not any(p.metadata.name == "web-a" for p in cluster.core.list_namespaced_pod(namespace).items)

    wait_for(gone, 60, what="web-a removed by the agent")
    assert not alive(pid)
    assert (tmp_path / "web-a.prestop").read_text().strip() == "web-a"
    assert get(f"http://{ips['web-b']}:8000/info").split()[1] == "web-b"  # the other pod is untouched


def test_unrunnable_pods_are_refused_with_a_reason(cluster, namespace, node_agent):  # noqa: F811
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "other-image"},
           "spec": {**PLACEMENT, "containers": [{"name": "c", "image": "example.invalid/thing:1", "command": ["x"]}]}}
    cluster.core.create_namespaced_pod(namespace, pod)

    def refused():
        p = cluster.core.read_namespaced_pod("other-image", namespace)
        st = p.status.container_statuses
        return st[0].state.waiting if st and st[0].state.waiting and st[0].state.waiting.reason == "ErrImagePull" else None

    waiting = wait_for(refused, 30, what="ErrImagePull in other-image's status")
    assert "no local runtime stands for image 'example.invalid/thing:1'" in waiting.message
    p = cluster.core.read_namespaced_pod("other-image", namespace)
    assert p.status.phase == "Pending" and not p.status.pod_ip


def test_liveness_failure_restarts_and_the_node_heartbeats(cluster, namespace, node_agent):  # noqa: F811
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "unhealthy"},
           "spec": {**PLACEMENT, "terminationGracePeriodSeconds": 2, "containers": [{
               "name": "web", "image": IMAGE, "command": ["python", "-m", "http.server", "8000"],
               "livenessProbe": {"httpGet": {"path": "/no-such-file", "port": 8000}, "periodSeconds": 1,
                                 "failureThreshold": 2}}]}}
    cluster.core.create_namespaced_pod(namespace, pod)

    def restarted():
        st = cluster.core.read_namespaced_pod("unhealthy", namespace).status.container_statuses
        return st[0] if st and st[0].restart_count >= 1 else None

    cs = wait_for(restarted, 60, what="unhealthy restarted after failing its liveness probe")
    assert cs.last_state.terminated is not None, cs  # it was killed (SIGTERM), then restarted
    assert "failed its liveness probe" in node_agent.log_tail(20000)

    lease = client_lease(cluster, node_agent.node)
    assert lease.spec.holder_identity == node_agent.node and lease.spec.lease_duration_seconds == 40
    wait_for(lambda: client_lease(cluster, node_agent.node).spec.renew_time > lease.spec.renew_time, 30,
             what="the node's Lease renewed (every 10 s)")


def client_lease(cluster, node: str):
    from kubernetes import client

    return client.CoordinationV1Api(cluster.api).read_namespaced_lease(node, "kube-node-lease")
