"""Rollouts under load, measured: streaming requests go through the router (a pod of the dev node agent)
to fake engines (pods too) while each kind of change is rolled out: a role scaled up and down, a change
that may differ between the roles (rolled in place), and changes that must match on both roles (a new
compat hash: model.dtype, model.revision, engine.image), which the operator rolls out into the other
revision slot while the old prefill and decode keep serving (pdd_operator.controller.rollout).

Each fake engine knows its pod's compat hash (``FAKE_REVISION`` from the downward API): a decode
given KV of another revision answers 409, so a cross-revision pair is a counted failure. The engines
die at SIGTERM at once; what keeps requests alive is the router dropping terminating pods and the
pods' preStop drain (pdd_operator.render.drain), which waits for the fake's ``vllm:num_requests_running``.

Asserted: 0 failed requests, 0 cross-revision pairs and 0 requests served by one engine alone (the
router's fallback, ``X-PDD-Fallback``: a request without KV transfer; a pair stays usable throughout, and at a
must-match change's slot switch the old slot's decode outlives its prefill, issue 13) in every phase, the
status Ready with the expected replicas afterwards. Never timings; they are printed (``-s``) and, with
``PDD_ROLLOUT_RESULTS=<file>``, written as JSON for bench/bench_rollout.py.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.conftest import audit_writes, condition, pdd_status, wait_for
from tests.e2e.load import Load, deploy_fake_engines, p99
from tests.e2e.node_agent import FAKE_ENGINE_IMAGE_NEXT, node_agent  # noqa: F401 (fixture)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1200)]

#: Seconds of load before each change: the steady-state latency of the same run.
STEADY_SECONDS = 5
CROSS = "cross-revision pair"


def summary(done: list[tuple[float, float, str]], changed_at: float, settled_at: float) -> dict:
    """Counts over the whole phase; p99 latency of the requests started before the change (steady) and
    of those started between the change and the end of the rollout (during)."""
    reasons: dict[str, int] = {}
    for _, _, e in done:
        if e:
            reasons[e[:120]] = reasons.get(e[:120], 0) + 1
    return {
        "sent": len(done), "failed": sum(1 for *_, e in done if e),
        "cross_revision": sum(1 for *_, e in done if CROSS in e),
        "p99_steady_ms": p99([s for t, s, e in done if t < changed_at and not e]),
        "p99_rollout_ms": p99([s for t, s, e in done if changed_at <= t <= settled_at and not e]),
        "rollout_s": round(settled_at - changed_at, 1), "reasons": reasons,
    }


def settled(cluster, namespace: str, name: str, replicas: dict[str, int], compat_hash: str | None = None):
    """Every role has exactly ``replicas`` pods, all Ready, none terminating (and, with ``compat_hash``, all
    engine pods with that hash); returns the engine pods' hashes."""
    pods = cluster.core.list_namespaced_pod(namespace, label_selector=f"app.kubernetes.io/instance={name}").items
    hashes = set()
    for role, n in replicas.items():
        mine = [p for p in pods if p.metadata.labels.get("app.kubernetes.io/component") == role]
        if len(mine) != n:
            return None
        for p in mine:
            if p.metadata.deletion_timestamp or not any(
                    c.type == "Ready" and c.status == "True" for c in p.status.conditions or []):
                return None
            if role != "router":
                hashes.add(p.metadata.labels.get("pdd-operator.dev/compat-hash"))
    if compat_hash is not None and hashes != {compat_hash}:
        return None
    return hashes


# (label, spec patch, replicas afterwards, whether the compat hash changes)
PHASES = [
    ("scale decode up 2 -> 3", {"decode": {"replicas": 3}}, (2, 3), False),
    ("scale decode down 3 -> 1", {"decode": {"replicas": 1}}, (2, 1), False),
    ("scale prefill down 2 -> 1", {"prefill": {"replicas": 1}}, (1, 1), False),
    ("scale prefill up 1 -> 2", {"prefill": {"replicas": 2}}, (2, 1), False),
    ("role-only change (decode.gpuMemoryUtilization)", {"decode": {"gpuMemoryUtilization": 0.8}}, (2, 1), False),
    ("must-match: model.dtype", {"model": {"dtype": "float16"}}, (2, 1), True),
    ("must-match: model.revision", {"model": {"revision": "r2"}}, (2, 1), True),
    ("must-match: engine.image", {"engine": {"image": FAKE_ENGINE_IMAGE_NEXT}}, (2, 1), True),
]


def test_zero_failed_requests_through_every_kind_of_rollout(cluster, operator, namespace, node_agent,  # noqa: F811
                                                            tmp_path):
    started = time.time()
    name, url = deploy_fake_engines(cluster, namespace, tmp_path, prefill=2, decode=2)
    [current] = wait_for(lambda: settled(cluster, namespace, name, {"prefill": 2, "decode": 2, "router": 1}), 60,
                         what="2 prefill, 2 decode, 1 router Ready") - {None}
    results: dict[str, dict] = {}

    for label, patch, (prefill, decode), new_hash in PHASES:
        replicas = {"prefill": prefill, "decode": decode, "router": 1}
        with Load(url) as load:
            time.sleep(STEADY_SECONDS)
            changed_at = time.monotonic()
            cluster.kubectl("patch", "-n", namespace, "pdd", name, "--type", "merge", "-p", json.dumps({"spec": patch}))
            generation = cluster.custom.get_namespaced_custom_object(
                "pdd-operator.dev", "v1alpha1", namespace, "pddeployments", name)["metadata"]["generation"]

            def done(old=current, new_hash=new_hash, replicas=replicas, generation=generation):
                # The status says the new generation is rolled out (every Deployment's pods updated and
                # Ready, the previous slot empty) and the pods agree: the counts, Ready, the hash.
                st = pdd_status(cluster, namespace, name)
                if st.get("observedGeneration") != generation or condition(st, "Ready").get("status") != "True":
                    return None
                if (st["prefill"]["readyReplicas"], st["decode"]["readyReplicas"]) != (
                        replicas["prefill"], replicas["decode"]):
                    return None
                hashes = settled(cluster, namespace, name, replicas)
                if not hashes or len(hashes) != 1 or (old in hashes) == new_hash:
                    return None
                return hashes

            [current] = wait_for(done, 300, interval=0.25, what=f"{label}: rolled out, status Ready")
            settled_at = time.monotonic()
            time.sleep(2)  # and after it
        results[label] = summary(load.done, changed_at, settled_at) | {"alone": sum(load.alone.values())}
        print(f"\n[rollout under load] {label}: {json.dumps(results[label])}")
    if os.environ.get("PDD_ROLLOUT_RESULTS"):
        Path(os.environ["PDD_ROLLOUT_RESULTS"]).write_text(json.dumps(results, indent=1))
    print(f"\n[rollout under load] summary: {json.dumps(results)}")
    # Three hash changes went a -> b -> a -> b: slot b serves, slot a is kept at 0 replicas, nothing deleted.
    replicas = {d.metadata.name: d.spec.replicas for d in cluster.apps.list_namespaced_deployment(
        namespace, label_selector=f"app.kubernetes.io/instance={name},app.kubernetes.io/name=vllm").items}
    assert replicas == {f"{name}-prefill": 0, f"{name}-decode": 0, f"{name}-prefill-b": 2, f"{name}-decode-b": 1}
    assert [e["objectRef"] for e in audit_writes(cluster, namespace, started) if e["verb"] == "delete"] == []
    for label, r in results.items():
        assert r["sent"] > 0, (label, r)
        assert r["cross_revision"] == 0, (label, r)
        assert r["failed"] == 0, (label, r)
        assert r["alone"] == 0, (label, r)


def _pair_gone_retries(url: str) -> float:
    """``pdd_router_retries_total{role="decode",reason="pair_gone"}`` of the router at ``url``."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("pdd_router_retries_total{") and 'reason="pair_gone"' in line)


def test_the_slot_switch_with_slow_prefill_legs_serves_nothing_alone(
        cluster, operator, namespace, node_agent, tmp_path):  # noqa: F811
    """Issue 13: at a must-match change's slot switch, prefill legs still running on the old prefill must
    find the old decode. With fake prefill legs of 1.5 s (a real prompt's prefill on the CPU takes about
    that), 4 at a time on one prefill and one decode, some leg is always running when the old slot is
    retired. Before the fix the operator scaled the old prefill and decode to 0 together and those
    requests were served by prefill alone (``X-PDD-Fallback``); now the old decode stops only once the old
    prefill pod is gone, and any request that still finds no decode of its revision runs again on the new
    pair (``pair_gone``, printed)."""
    name, url = deploy_fake_engines(cluster, namespace, tmp_path, prefill=1, decode=1,
                                    env={"FAKE_PREFILL_DELAY": "1.5"})
    [old] = wait_for(lambda: settled(cluster, namespace, name, {"prefill": 1, "decode": 1, "router": 1}), 60,
                     what="1 prefill, 1 decode, 1 router Ready") - {None}
    replicas = {"prefill": 1, "decode": 1, "router": 1}
    with Load(url) as load:
        time.sleep(STEADY_SECONDS)
        changed_at = time.monotonic()
        cluster.kubectl("patch", "-n", namespace, "pdd", name, "--type", "merge", "-p",
                        json.dumps({"spec": {"model": {"dtype": "float16"}}}))

        def done():
            st = pdd_status(cluster, namespace, name)
            if condition(st, "Ready").get("status") != "True":
                return None
            hashes = settled(cluster, namespace, name, replicas)
            return hashes if hashes and old not in hashes else None

        wait_for(done, 300, interval=0.25, what="rolled out into the other slot, status Ready")
        settled_at = time.monotonic()
        time.sleep(2)
    result = summary(load.done, changed_at, settled_at) | {"alone": dict(load.alone),
                                                          "pair_gone": _pair_gone_retries(url)}
    print(f"\n[slot switch, 1.5 s prefill legs] {json.dumps(result)}")
    assert result["sent"] > 0 and result["failed"] == 0 and result["cross_revision"] == 0, result
    assert result["alone"] == {}, result
