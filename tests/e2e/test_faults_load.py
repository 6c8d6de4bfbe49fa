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
from tests.e2e.load import CONCURRENCY, Load, deploy_fake_engines
from tests.e2e.node_agent import node_agent  # noqa: F401 (fixture)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

#: Seconds of load before the fault, and of load that must all succeed once the pod has recovered.
STEADY_SECONDS = 5
AFTER_SECONDS = 5


def _pod(cluster, namespace: str, name: str, component: str):
    pods = cluster.core.list_namespaced_pod(
        namespace, label_selector=f"app.kubernetes.io/instance={name},app.kubernetes.io/component={component}").items
    return sorted(pods, key=lambda p: p.metadata.name)[0]


#: Requests in a row that must succeed after a recovery before the measured window starts.
SETTLED = 10


def _settled(load: Load, since: float) -> bool:
    """The last :data:`SETTLED` requests of ``load`` that started at or after ``since`` (``time.monotonic()``)
    have all finished, without an error."""
    after = [e for t, _, e in list(load.done) if t >= since][-SETTLED:]
    return len(after) == SETTLED and not any(after)


def _ready(pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _kill_under_load(cluster, namespace: str, name: str, component: str, url: str) -> dict:
    """SIGKILL the process of the first Ready ``component`` pod under steady load through ``url``; wait
    until it is Ready again with one more restart, then keep the load for a window in which every
    request must succeed. Returns sent, failed, recovered_s, last_failure_s, failed_after_recovery,
    the failure reasons and ``alone`` (answers one engine served alone: the router's fallback)."""
    pod = wait_for(lambda: (p := _pod(cluster, namespace, name, component)) and _ready(p) and p, 60,
                   what=f"a Ready {component} pod")
    [cs] = pod.status.container_statuses
    restarts, pid = cs.restart_count, int(cs.container_id.removeprefix("pdd-agent://"))
    with Load(url) as load:
        time.sleep(STEADY_SECONDS)  # steady load before the fault: a measured window, not a wait for a result
        killed_at = time.monotonic()
        os.kill(pid, signal.SIGKILL)  # the engine (or router) process the node agent started for this pod

        def recovered():
            p = cluster.core.read_namespaced_pod(pod.metadata.name, namespace)
            [c] = p.status.container_statuses
            return c.restart_count == restarts + 1 and _ready(p)

        wait_for(recovered, 120, interval=0.25, what=f"{component} pod restarted and Ready")
        recovered_at = time.monotonic()
        # Discovery and readiness settle (the router sees the restarted pod: SETTLED requests in a row
        # that started after the recovery succeed); then a window in which every request must succeed.
        wait_for(lambda: _settled(load, recovered_at), 60, interval=0.1,
                 what=f"{SETTLED} requests in a row served after the {component} recovered")
        window_start = time.monotonic()
        time.sleep(AFTER_SECONDS)  # the measured window under load, not a wait for a result
    failures = [(t, e) for t, _, e in load.done if e]
    reasons: dict[str, int] = {}
    for _, e in failures:
        reasons[e[:120]] = reasons.get(e[:120], 0) + 1
    return {
        "sent": len(load.done), "failed": len(failures), "alone": dict(load.alone),
        "recovered_s": round(recovered_at - killed_at, 1),
        "last_failure_s": round(max(t for t, _ in failures) - killed_at, 1) if failures else None,
        "failed_after_recovery": sum(1 for t, _ in failures if t >= window_start), "reasons": reasons,
    }


def _report(results: dict[str, dict]) -> None:
    for label, r in results.items():
        print(f"\n[fault under load] {label}: {json.dumps(r)}")
    if os.environ.get("PDD_FAULT_RESULTS"):
        path = Path(os.environ["PDD_FAULT_RESULTS"])
        old = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps({**old, **results}, indent=1))


def test_requests_recover_after_a_prefill_a_decode_and_the_router_are_killed(
        cluster, operator, namespace, node_agent, tmp_path):  # noqa: F811
    name, url = deploy_fake_engines(cluster, namespace, tmp_path, prefill=2, decode=2)
    results = {f"kill {c}": _kill_under_load(cluster, namespace, name, c, url) for c in ("prefill", "decode", "router")}
    _report(results)
    for label, r in results.items():
        assert r["sent"] > 0, (label, r)
        assert r["failed_after_recovery"] == 0, (label, r)


def _router_with_fallback(cluster, namespace: str, name: str, on: bool, port: int) -> str:
    """Set ``spec.router.fallback`` and wait until the one router pod is Ready with that setting (its
    command has ``--no-fallback`` or not) and the old one is gone; returns that pod's URL."""
    patch = json.dumps({"spec": {"router": {"fallback": on}}})
    cluster.kubectl("patch", "pddeployment", name, "-n", namespace, "--type", "merge", "-p", patch)

    def router():
        pods = cluster.core.list_namespaced_pod(namespace, label_selector=(
            f"app.kubernetes.io/instance={name},app.kubernetes.io/component=router")).items
        if len(pods) != 1 or pods[0].metadata.deletion_timestamp or not _ready(pods[0]):
            return None
        return (("--no-fallback" in pods[0].spec.containers[0].command) is not on) and pods[0]

    pod = wait_for(router, 120, interval=0.5, what=f"one Ready router with fallback {on}")
    return f"http://{pod.status.pod_ip}:{port}"


def test_killing_the_only_prefill_or_decode_with_and_without_fallback(
        cluster, operator, namespace, node_agent, tmp_path):  # noqa: F811
    """One pod per role: a killed prefill (or decode) leaves no engine of that role until it restarts.
    With the router's fallback (the default) the other role serves each request alone meanwhile, so
    only the streams the killed engine was serving fail (at most the load's concurrency); without it
    (``spec.router.fallback: false``) every request until the restart fails. Both in one run."""
    name, url = deploy_fake_engines(cluster, namespace, tmp_path, prefill=1, decode=1)
    port = int(url.rsplit(":", 1)[1])
    results: dict[str, dict] = {}
    for on in (True, False):
        if not on:
            url = _router_with_fallback(cluster, namespace, name, False, port)
        for component in ("prefill", "decode"):
            results[f"fallback {'on' if on else 'off'}: kill the only {component}"] = _kill_under_load(
                cluster, namespace, name, component, url)
    _report(results)
    for label, r in results.items():
        assert r["sent"] > 0 and r["failed_after_recovery"] == 0, (label, r)
    # The operator surfaced each outage: Degraded became True with the role's reason (a Warning Event,
    # saying who served meanwhile), and False again (Recovered).
    events = [e for e in cluster.core.list_namespaced_event(namespace).items if e.involved_object.name == name]
    by_reason: dict[str, list[str]] = {}
    for e in events:
        by_reason.setdefault(e.reason, []).append(e.message)
    assert any("decode engine alone" in m for m in by_reason.get("PrefillUnavailable", [])), by_reason
    assert any("prefill engine alone" in m for m in by_reason.get("DecodeUnavailable", [])), by_reason
    assert any("answers 503" in m for m in by_reason["PrefillUnavailable"] + by_reason["DecodeUnavailable"]), by_reason
    assert "Recovered" in by_reason, by_reason
    for component, alone in (("prefill", "decode-only"), ("decode", "prefill-only")):
        on, off = results[f"fallback on: kill the only {component}"], results[f"fallback off: kill the only {component}"]
        # the streams in flight on the killed engine, no more; and the other role served alone meanwhile
        assert on["failed"] <= CONCURRENCY and on["alone"].get(alone, 0) > 0, (component, on)
        assert off["alone"] == {}, (component, off)
