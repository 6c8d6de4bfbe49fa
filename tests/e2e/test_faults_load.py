"""Faults under load, measured: a prefill process, a decode process and the router process are killed
(SIGKILL, the pod stays: its container restarts, as the kubelet would restart it) while streaming
requests go through the router to fake engines on pods of the dev node agent (2 prefill, 2 decode,
1 router).

Reported per fault (``-s``; with ``PDD_FAULT_RESULTS=<file>`` as JSON): requests sent and failed, the
failure reasons, the seconds from the kill to the pod being Ready again with one more restart
(``recovered_s``) and to the last failed request (``last_failure_s``). Asserted: the pod recovers by
itself, and afterwards requests succeed again with no failure in a steady window. The counts of
failures are measured, not asserted: a killed engine drops the streams it was serving.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.load import Load, deploy_fake_engines
from tests.e2e.node_agent import node_agent  # noqa: F401 (fixture)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

#: Seconds of load before the fault, and of load that must all succeed once the pod has recovered.
STEADY_SECONDS = 5
AFTER_SECONDS = 5


def _pod(cluster, namespace: str, name: str, component: str):
    pods = cluster.core.list_namespaced_pod(
        namespace, label_selector=f"app.kubernetes.io/instance={name},app.kubernetes.io/component={component}").items
    return sorted(pods, key=lambda p: p.metadata.name)[0]


def _ready(pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def test_requests_recover_after_a_prefill_a_decode_and_the_router_are_killed(
        cluster, operator, namespace, node_agent, tmp_path):  # noqa: F811
    name, url = deploy_fake_engines(cluster, namespace, tmp_path, prefill=2, decode=2)
    results: dict[str, dict] = {}
    for component in ("prefill", "decode", "router"):
        pod = wait_for(lambda c=component: (p := _pod(cluster, namespace, name, c)) and _ready(p) and p, 60,
                       what=f"a Ready {component} pod")
        [cs] = pod.status.container_statuses
        restarts, pid = cs.restart_count, int(cs.container_id.removeprefix("pdd-agent://"))
        with Load(url) as load:
            time.sleep(STEADY_SECONDS)
            killed_at = time.monotonic()
            os.kill(pid, signal.SIGKILL)  # the engine (or router) process the node agent started for this pod

            def recovered(pod_name=pod.metadata.name, restarts=restarts):
                p = cluster.core.read_namespaced_pod(pod_name, namespace)
                [c] = p.status.container_statuses
                return c.restart_count == restarts + 1 and _ready(p)

            wait_for(recovered, 120, interval=0.25, what=f"{component} pod restarted and Ready")
            recovered_at = time.monotonic()
            # Discovery and readiness settle; then a window in which every request must succeed.
            time.sleep(2)
            window_start = time.monotonic()
            time.sleep(AFTER_SECONDS)
        failures = [(t, e) for t, _, e in load.done if e]
        reasons: dict[str, int] = {}
        for _, e in failures:
            reasons[e[:120]] = reasons.get(e[:120], 0) + 1
        results[f"kill {component}"] = {
            "sent": len(load.done), "failed": len(failures),
            "recovered_s": round(recovered_at - killed_at, 1),
            "last_failure_s": round(max(t for t, _ in failures) - killed_at, 1) if failures else None,
            "failed_after_recovery": sum(1 for t, _ in failures if t >= window_start), "reasons": reasons,
        }
        print(f"\n[fault under load] kill {component}: {json.dumps(results[f'kill {component}'])}")
    if os.environ.get("PDD_FAULT_RESULTS"):
        Path(os.environ["PDD_FAULT_RESULTS"]).write_text(json.dumps(results, indent=1))
    for label, r in results.items():
        assert r["sent"] > 0, (label, r)
        assert r["failed_after_recovery"] == 0, (label, r)
