"""Rollouts under load, measured: streaming requests go through the router (a pod of the dev node agent)
to fake engines (pods too) while each kind of change is rolled out: a role scaled up and down, a change
that may differ between the roles (rolled in place), and changes that must match on both roles (a new
compat hash: model.dtype, model.revision, engine.image), which the operator rolls out into the other
revision slot while the old prefill and decode keep serving (pdd_operator.controller.rollout).

Each fake engine knows its pod's compat hash (``FAKE_REVISION`` from the downward API): a decode
given KV of another revision answers 409, so a cross-revision pair is a counted failure. The engines
die at SIGTERM at once; what keeps requests alive is the router dropping terminating pods and the
pods' preStop drain (pdd_operator.render.drain), which waits for the fake's ``vllm:num_requests_running``.

Asserted: 0 failed requests and 0 cross-revision pairs in every phase, the status Ready with the
expected replicas afterwards. Never timings; they are printed (``-s``) and, with
``PDD_ROLLOUT_RESULTS=<file>``, written as JSON for bench/bench_rollout.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml

from dev.cluster_example import manifest, service_url
from tests.e2e.conftest import condition, pdd_status, wait_for
from tests.e2e.node_agent import FAKE_ENGINE_IMAGE, FAKE_ENGINE_IMAGE_NEXT, node_agent  # noqa: F401 (fixture)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1200)]

CONCURRENCY = 4
#: Seconds of load before each change: the steady-state latency of the same run.
STEADY_SECONDS = 5
CROSS = "cross-revision pair"


class Load:
    """Streaming completions through the router, ``CONCURRENCY`` at a time, in a thread, until stopped.

    Every request is kept as ``(start, seconds, error or "")`` (``time.monotonic`` clock)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.done: list[tuple[float, float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _one(self, session) -> None:
        body = {"model": "m", "prompt": "hello " * 20, "max_tokens": 16, "stream": True}
        t0 = time.monotonic()
        error = ""
        try:
            async with session.post(f"{self.url}/v1/completions", json=body,
                                    headers={"X-Request-Id": f"load-{uuid.uuid4()}"}) as r:
                text = await r.text()
                if r.status != 200 or not text.rstrip().endswith("data: [DONE]"):
                    error = f"{r.status}: {text[-200:]!r}"
        except Exception as exc:  # noqa: BLE001 - every failure is counted and shown
            error = f"{type(exc).__name__}: {exc}"
        self.done.append((t0, time.monotonic() - t0, error))

    async def _run(self) -> None:
        import aiohttp

        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            async def worker() -> None:
                while not self._stop.is_set():
                    await self._one(session)
            await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(60)


def p99(latencies: list[float]) -> float | None:
    """The 99th percentile (nearest rank) in milliseconds, or ``None`` without samples."""
    if not latencies:
        return None
    ordered = sorted(latencies)
    return round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000, 1)


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
    doc, _ = manifest(tmp_path / "model", "llama", "NixlConnector")
    name = doc["metadata"]["name"]
    spec = doc["spec"]
    spec["engine"]["image"] = FAKE_ENGINE_IMAGE
    # The fakes learn their revision from their pod's label, as the downward API gives it.
    spec["engine"]["env"] = [*spec["engine"].get("env", []), {"name": "FAKE_REVISION", "valueFrom": {
        "fieldRef": {"fieldPath": "metadata.labels['pdd-operator.dev/compat-hash']"}}}]
    for role in ("prefill", "decode"):
        spec[role]["replicas"] = 2
        spec[role]["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
        spec[role]["extraArgs"] = []
        spec[role]["drainSeconds"] = 10  # a fake request lasts well under a second
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    wait_for(lambda: condition(pdd_status(cluster, namespace, name), "Ready").get("status") == "True", 120,
             interval=0.5, what=f"pdd/{name} Ready")
    [current] = wait_for(lambda: settled(cluster, namespace, name, {"prefill": 2, "decode": 2, "router": 1}), 60,
                         what="2 prefill, 2 decode, 1 router Ready") - {None}
    endpoint = pdd_status(cluster, namespace, name)["endpoint"]
    url = wait_for(lambda: service_url(cluster.core, endpoint), 60, what=f"an endpoint of {endpoint}")
    results: dict[str, dict] = {}

    for label, patch, (prefill, decode), new_hash in PHASES:
        replicas = {"prefill": prefill, "decode": decode, "router": 1}
        with Load(url) as load:
            time.sleep(STEADY_SECONDS)
            changed_at = time.monotonic()
            cluster.kubectl("patch", "-n", namespace, "pdd", name, "--type", "merge", "-p", json.dumps({"spec": patch}))

            def done(old=current, new_hash=new_hash, replicas=replicas):
                hashes = settled(cluster, namespace, name, replicas)
                if not hashes or len(hashes) != 1 or (old in hashes) == new_hash:
                    return None
                return hashes

            [current] = wait_for(done, 300, interval=0.25, what=f"{label}: settled")
            settled_at = time.monotonic()
            time.sleep(2)  # and after it
        results[label] = summary(load.done, changed_at, settled_at)
        print(f"\n[rollout under load] {label}: {json.dumps(results[label])}")
        generation = cluster.custom.get_namespaced_custom_object(
            "pdd-operator.dev", "v1alpha1", namespace, "pddeployments", name)["metadata"]["generation"]

        def truthful(generation=generation, prefill=prefill, decode=decode):
            st = pdd_status(cluster, namespace, name)
            return (st.get("observedGeneration") == generation and condition(st, "Ready").get("status") == "True"
                    and st["prefill"]["readyReplicas"] == prefill and st["decode"]["readyReplicas"] == decode)

        wait_for(truthful, 60, interval=0.5, what=f"{label}: status Ready with {prefill} prefill, {decode} decode")
    if os.environ.get("PDD_ROLLOUT_RESULTS"):
        Path(os.environ["PDD_ROLLOUT_RESULTS"]).write_text(json.dumps(results, indent=1))
    print(f"\n[rollout under load] summary: {json.dumps(results)}")
    for label, r in results.items():
        assert r["sent"] > 0, (label, r)
        assert r["cross_revision"] == 0, (label, r)
        assert r["failed"] == 0, (label, r)
