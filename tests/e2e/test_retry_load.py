"""Retries under load, on and off in the same run: two ``pdd router`` processes follow the same
PDDeployment (Kubernetes discovery of its pods, as the rendered router does), one with the default
``--retries 1`` and one with ``--retries 0``, each under its own streaming load, while a decode engine
process and then the only prefill engine process are killed (SIGKILL; the node agent restarts the
container, as the kubelet would). Both routers see the same faults at the same moments.

The fake engines (:mod:`tests.e2e.fake_vllm_serve`) behave as vLLM's do in the window that matters:
decode sends its response head, then waits (``FAKE_FIRST_TOKEN_DELAY``, as vLLM's decode waits for the
prompt's KV) before its first token, and prefill takes ``FAKE_PREFILL_DELAY``; so most requests a killed
engine holds have sent the client nothing yet.

Reported per router and fault (``-s``; with ``PDD_RETRY_RESULTS=<file>`` as JSON): requests sent,
failed, failed before the client got a byte (``before_first_byte``: not a 200) and after
(``mid_stream``), the router's retries by role and reason, answers one role served alone. Asserted:
with retries on, no request failed before its first byte (a stream a killed decode was sending is
resumed on the other decode within the same retry budget, docs/router.md "Stream resumption"; with
``--retries 0`` it is cut); both recover and then serve every request.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import ROOT, _free_port, wait_for
from tests.e2e.load import Load, deploy_fake_engines
from tests.e2e.node_agent import node_agent  # noqa: F401 (fixture)
from tests.e2e.test_faults_load import _pod, _ready

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

#: The fakes: a decode waits 1 s between its head and its first token, then streams 16 tokens 10 ms apart.
ENGINE_ENV = {"FAKE_FIRST_TOKEN_DELAY": "1.0", "FAKE_PREFILL_DELAY": "0.3", "FAKE_INTER_TOKEN_DELAY": "0.01"}
#: Requests each load completes before a kill, and after the recovery (all must succeed).
STEADY, AFTER = 8, 8
#: Requests the engine must hold when it is killed (8 in flight: about 4 on each decode, 1-2 on prefill).
HELD = {"decode": 3, "prefill": 2}


class LocalRouter:
    """A ``pdd router --pddeployment`` process on 127.0.0.1 with the cluster's kubeconfig."""

    def __init__(self, cluster, namespace: str, name: str, log: Path, *args: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = log.open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pdd_operator.cli", "router", "--pddeployment", name, "--namespace", namespace,
             "--host", "127.0.0.1", "--port", str(self.port), *args],
            cwd=ROOT, env=cluster.env, stdout=self._log, stderr=subprocess.STDOUT)

    def health(self) -> dict:
        with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
            return json.loads(r.read())

    def counters(self) -> dict[tuple[str, tuple], float]:
        """``pdd_router_*_total`` samples by (name, sorted labels)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=5) as r:
            text = r.read().decode()
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for f in text_string_to_metric_families(text) for s in f.samples if s.name.endswith("_total")}

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(20)
        self._log.close()


def _running(pod) -> float:
    """The fake engine's ``vllm:num_requests_running`` (its /metrics at the pod's address)."""
    port = pod.spec.containers[0].ports[0].container_port
    with urllib.request.urlopen(f"http://{pod.status.pod_ip}:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("vllm:num_requests_running"):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def _summary(load: Load, before: dict, after: dict, recovered_at: float) -> dict:
    failed = [e for _, _, e in load.done if e]
    retries = {f"{dict(k[1])['role']}={dict(k[1])['reason']}": v - before.get(k, 0.0)
               for k, v in after.items() if k[0] == "pdd_router_retries_total" and v > before.get(k, 0.0)}
    return {
        "sent": len(load.done), "failed": len(failed),
        "before_first_byte": sum(1 for e in failed if not e.startswith("200:")),
        "mid_stream": sum(1 for e in failed if e.startswith("200:")),
        "failed_after_recovery": sum(1 for t, _, e in load.done if e and t >= recovered_at),
        "retries": retries, "alone": dict(load.alone),
        "reasons": sorted({e[:100] for e in failed}),
    }


def _kill_under_load(cluster, namespace: str, name: str, component: str, routers: dict[str, LocalRouter]) -> dict:
    """SIGKILL the first ``component`` engine process while each router has its own load and the engine
    holds :data:`HELD` requests; wait until it is back and every router pairs again, then until each
    load completed :data:`AFTER` requests started later. Returns :func:`_summary` per router label."""
    pod = wait_for(lambda: (p := _pod(cluster, namespace, name, component)) and _ready(p) and p, 120,
                   what=f"a Ready {component} pod")
    [cs] = pod.status.container_statuses
    restarts, pid = cs.restart_count, int(cs.container_id.removeprefix("pdd-agent://"))
    before = {label: r.counters() for label, r in routers.items()}
    loads = {label: Load(r.url) for label, r in routers.items()}
    for load in loads.values():
        load.__enter__()
    try:
        wait_for(lambda: all(len(ld.done) >= STEADY for ld in loads.values()), 120, interval=0.1,
                 what="steady requests through both routers")
        wait_for(lambda: _running(pod) >= HELD[component], 60, interval=0.02,
                 what=f"{component} holding {HELD[component]} requests")
        os.kill(pid, signal.SIGKILL)

        def recovered():
            q = cluster.core.read_namespaced_pod(pod.metadata.name, namespace)
            return q.status.container_statuses[0].restart_count == restarts + 1 and _ready(q)

        wait_for(recovered, 120, interval=0.25, what=f"{component} restarted and Ready")
        wait_for(lambda: all(r.health()["pairs"] == 2 for r in routers.values()), 60, what="both routers pairing again")
        recovered_at = time.monotonic()
        wait_for(lambda: all(sum(1 for t, *_ in ld.done if t >= recovered_at) >= AFTER for ld in loads.values()),
                 120, interval=0.1, what="requests after the recovery")
    finally:
        for load in loads.values():
            load.__exit__(None, None, None)
    return {label: _summary(loads[label], before[label], r.counters(), recovered_at) for label, r in routers.items()}


def test_retries_cut_the_failures_of_killed_engines(cluster, operator, namespace, node_agent, tmp_path):  # noqa: F811
    name, _ = deploy_fake_engines(cluster, namespace, tmp_path, prefill=1, decode=2, env=ENGINE_ENV)
    routers = {"retry on": LocalRouter(cluster, namespace, name, tmp_path / "router-on.log"),
               "retry off": LocalRouter(cluster, namespace, name, tmp_path / "router-off.log", "--retries", "0")}
    results: dict[str, dict] = {}
    try:
        for r in routers.values():
            wait_for(lambda r=r: (h := r.health()) and h["prefill"] == 1 and h["decode"] == 2, 60,
                     what=f"router {r.url} to see 1 prefill and 2 decodes")
        for component in ("decode", "prefill"):
            for label, r in _kill_under_load(cluster, namespace, name, component, routers).items():
                results[f"kill {component}, {label}"] = r
    finally:
        for r in routers.values():
            r.stop()
        print("\n" + "\n".join((tmp_path / f"router-{k}.log").read_text()[-3000:] for k in ("on", "off")))
    for label, r in results.items():
        print(f"\n[retry under load] {label}: {json.dumps(r)}")
    if os.environ.get("PDD_RETRY_RESULTS"):
        Path(os.environ["PDD_RETRY_RESULTS"]).write_text(json.dumps(results, indent=1))
    for label, r in results.items():
        assert r["sent"] > 0 and r["failed_after_recovery"] == 0, (label, r)
        if label.endswith("retry on"):
            assert r["before_first_byte"] == 0, (label, r)
        else:  # only the retries on another endpoint of the same role, which --retries does not govern
            assert not [k for k in r["retries"] if not k.endswith("=connect_failure")], (label, r)
