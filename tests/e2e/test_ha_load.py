"""Router high availability and the loss of a whole node, measured under load: fake engines (2 prefill,
2 decode) and ``spec.router.replicas: 2`` on two dev node agents, streaming requests sent to the router
Service's endpoints as kube-proxy spreads connections (each request to the next ready endpoint,
dev/cluster_example.py ``service_urls``, a new connection per request), by a client that resends a
request whose connection was refused (it never reached a router).

1. One router process is killed (SIGKILL; its container restarts, as the kubelet would).
2. A whole node is lost: its node agent is killed (SIGKILL: every process of its pods dies with it, and
   nobody reports for the node any more); the node lifecycle controller marks the Node NotReady when its
   Lease expires, and the Node is then deleted, as the cloud node controller does for a machine that is
   gone; its pods are removed (pod garbage collection) and their Deployments start replacements on the
   other node.

Reported per fault (``-s``; with ``PDD_HA_RESULTS=<file>`` as JSON): requests sent and failed, the
failure reasons, refused connections resent, the router's retries, and the seconds from the fault to
the recovery (the router pod Ready again; for the node: NotReady, then every replacement Ready).
Asserted: recovery with no help, every request after it succeeds, and no request fails while the
other router and the other node's engines serve except the streams the dead processes were serving
(at most the load's concurrency).
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from dev.cluster_example import service_urls
from tests.e2e.conftest import condition, pdd_status, wait_for
from tests.e2e.load import CONCURRENCY, Load, deploy_fake_engines
from tests.e2e.node_agent import NodeAgentProcess

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

#: Requests that must complete before the fault, and after the recovery (all must succeed).
BEFORE, AFTER = 50, 100
NODES = {"e2e-ha-a": "127.0.101.0/24", "e2e-ha-b": "127.0.102.0/24"}


@pytest.fixture(scope="module")
def agents(cluster, tmp_path_factory) -> Iterator[dict[str, NodeAgentProcess]]:
    started: dict[str, NodeAgentProcess] = {}
    try:
        for node, cidr in NODES.items():
            started[node] = NodeAgentProcess(cluster, node, tmp_path_factory.mktemp(node), pod_cidr=cidr)
        yield started
    finally:
        for agent in started.values():
            agent.stop()
        for node in NODES:
            cluster.kubectl("delete", "node", node, "--ignore-not-found", "--wait=false")


def _pods(cluster, namespace: str, name: str) -> list:
    return cluster.core.list_namespaced_pod(namespace, label_selector=f"app.kubernetes.io/instance={name}").items


def _ready(pod) -> bool:
    return not pod.metadata.deletion_timestamp and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _role(pod) -> str:
    return pod.metadata.labels["app.kubernetes.io/component"]


def _router_counters(urls: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for url in urls:
        try:
            with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("pdd_router_") and "_total" in line.split(" ")[0]:
                key, _, value = line.rpartition(" ")
                out[key.split("{")[0]] = out.get(key.split("{")[0], 0.0) + float(value)
    return out


def _measure(load: Load, n0: int, fault_at: float, recovered_at: float, refused0: int) -> dict:
    done = load.done[n0:]
    failed = [(t, e) for t, _, e in done if e]
    reasons: dict[str, int] = {}
    for _, e in failed:
        reasons[e[:140]] = reasons.get(e[:140], 0) + 1
    return {"sent": len(done), "failed": len(failed),
            "failed_after_recovery": sum(1 for t, _ in failed if t >= recovered_at),
            "refused_resent": load.refused_retries - refused0,
            "recovered_s": round(recovered_at - fault_at, 1),
            "last_failure_s": round(max(t for t, _ in failed) - fault_at, 1) if failed else None,
            "reasons": reasons}


def test_a_router_and_a_whole_node_lost_under_load(cluster, operator, namespace, agents, tmp_path):
    name, _ = deploy_fake_engines(cluster, namespace, tmp_path, prefill=2, decode=2, routers=2)
    endpoint = pdd_status(cluster, namespace, name)["endpoint"]

    def resolve() -> list[str]:
        return service_urls(cluster.core, endpoint)

    wait_for(lambda: len(resolve()) == 2, 60, what="both routers behind the Service")
    placed = {(p.spec.node_name, _role(p)) for p in _pods(cluster, namespace, name)}
    print(f"\n[ha] placement: {sorted(placed)}")
    results: dict[str, dict] = {}

    with Load(resolve, retry_refused=True, keepalive=False) as load:
        # 1. kill one router.
        wait_for(lambda: len(load.done) >= BEFORE, 60, what="steady requests")
        [router, *_] = sorted((p for p in _pods(cluster, namespace, name) if _role(p) == "router"),
                              key=lambda p: p.metadata.name)
        [cs] = router.status.container_statuses
        n0, refused0, counters0 = len(load.done), load.refused_retries, _router_counters(resolve())
        fault_at = time.monotonic()
        os.kill(int(cs.container_id.removeprefix("pdd-agent://")), signal.SIGKILL)

        def router_back(restarts=cs.restart_count):
            p = cluster.core.read_namespaced_pod(router.metadata.name, namespace)
            [c] = p.status.container_statuses
            return c.restart_count == restarts + 1 and _ready(p) and len(resolve()) == 2

        wait_for(router_back, 120, interval=0.25, what="the killed router restarted and Ready")
        recovered_at = time.monotonic()
        wait_for(lambda: sum(1 for t, *_ in load.done[n0:] if t >= recovered_at) >= AFTER, 120,
                 what="requests after the router's recovery")
        results["kill one of 2 routers"] = r = _measure(load, n0, fault_at, recovered_at, refused0)
        print(f"\n[ha] kill one of 2 routers: {json.dumps(r)}")

        # 2. lose the node of the first router, with everything on it.
        lost = router.spec.node_name
        [survivor] = set(NODES) - {lost}
        on_lost = sorted(f"{_role(p)}/{p.metadata.name}" for p in _pods(cluster, namespace, name)
                         if p.spec.node_name == lost)
        n0, refused0 = len(load.done), load.refused_retries
        fault_at = time.monotonic()
        agents[lost].proc.kill()  # SIGKILL: its pods' processes die with it (PR_SET_PDEATHSIG)

        def not_ready():
            node = cluster.core.read_node(lost)
            return any(c.type == "Ready" and c.status != "True" for c in node.status.conditions or [])

        wait_for(not_ready, 180, interval=0.5, what=f"node {lost} NotReady (its Lease expired)")
        not_ready_at = time.monotonic()
        # The machine is gone: the cloud node controller deletes its Node; pod GC removes its pods.
        cluster.kubectl("delete", "node", lost, "--wait=false")

        def replaced():
            pods = _pods(cluster, namespace, name)
            st = pdd_status(cluster, namespace, name)
            roles = sorted(_role(p) for p in pods if _ready(p) and p.spec.node_name == survivor)
            return (roles == ["decode", "decode", "prefill", "prefill", "router", "router"] and len(pods) == 6
                    and condition(st, "Ready").get("status") == "True" and len(resolve()) == 2)

        wait_for(replaced, 300, interval=0.5, what=f"every pod of {lost} replaced on {survivor} and Ready")
        recovered_at = time.monotonic()
        wait_for(lambda: sum(1 for t, *_ in load.done[n0:] if t >= recovered_at) >= AFTER, 120,
                 what="requests after the node's replacement")
        r = _measure(load, n0, fault_at, recovered_at, refused0)
        r.update({"not_ready_s": round(not_ready_at - fault_at, 1), "pods_on_lost_node": on_lost})
        results["lose a node (SIGKILL its agent, Node deleted once NotReady)"] = r
        print(f"\n[ha] lose a node: {json.dumps(r)}")
    counters = _router_counters(resolve())
    results["router counters (surviving routers, totals)"] = {
        k: v - counters0.get(k, 0.0) for k, v in counters.items()
        if k in ("pdd_router_prefill_retries_total", "pdd_router_decode_retries_total")}
    print(f"\n[ha] summary: {json.dumps(results)}")
    if os.environ.get("PDD_HA_RESULTS"):
        Path(os.environ["PDD_HA_RESULTS"]).write_text(json.dumps(results, indent=1))
    for label, r in results.items():
        if "sent" not in r:
            continue
        assert r["sent"] > 0, (label, r)
        assert r["failed_after_recovery"] == 0, (label, r)
        # Only the streams a dead process was serving may fail: at most one per client.
        assert r["failed"] <= CONCURRENCY, (label, r)
