"""Rollouts under load, measured: streaming requests go through the router (a pod of the dev node agent)
to fake engines (pods too) while a role is scaled and while a must-match setting changes (every pod of
both roles is replaced, with a new compat hash). Each phase reports how many requests failed and why.

What is asserted is only what holds by construction (see the numbers printed with ``-s``): scaling up
loses no request. Losses on scale-down and on a must-match rollout are reported, not hidden; the fake
engines die at SIGTERM at once (no drain), so they measure the worst case of the engine's shutdown.

Measured on the 2-core test machine (2026-11-30, concurrency 4, 16-token streams): decode 2 -> 3:
0 of 277 failed; decode 3 -> 1: 0 of 337; prefill 2 -> 1: 0 of 317; a must-match change (model.dtype)
with one pod per role: 50 of 366 failed, all 503 "no ready prefill and decode endpoints with the same
compat hash": each role's Deployment rolls on its own (maxSurge 1, maxUnavailable 0), so the old
prefill is gone before the new decode is Ready and for a while no pair shares a hash.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid

import pytest
import yaml

from dev.cluster_example import manifest, service_url
from tests.e2e.conftest import condition, pdd_status, wait_for
from tests.e2e.node_agent import FAKE_ENGINE_IMAGE, node_agent  # noqa: F401 (fixture)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

CONCURRENCY = 4


class Load:
    """Streaming completions through the router, ``CONCURRENCY`` at a time, in a thread, until stopped."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.ok = 0
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _one(self, session) -> None:
        body = {"model": "m", "prompt": "hello " * 20, "max_tokens": 16, "stream": True}
        try:
            async with session.post(f"{self.url}/v1/completions", json=body,
                                    headers={"X-Request-Id": f"load-{uuid.uuid4()}"}) as r:
                text = await r.text()
                if r.status != 200 or not text.rstrip().endswith("data: [DONE]"):
                    self.failed.append(f"{r.status}: {text[-200:]!r}")
                    return
                self.ok += 1
        except Exception as exc:  # noqa: BLE001 - every failure is counted and shown
            self.failed.append(f"{type(exc).__name__}: {exc}")

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

    def report(self) -> dict:
        reasons: dict[str, int] = {}
        for f in self.failed:
            reasons[f[:120]] = reasons.get(f[:120], 0) + 1
        return {"ok": self.ok, "failed": len(self.failed), "reasons": reasons}


def settled(cluster, namespace: str, name: str, replicas: dict[str, int], compat_hash: str | None = None):
    """Every role has exactly ``replicas`` pods, all Ready, none terminating (and, with ``compat_hash``, all
    with that hash); returns the engine pods' hashes."""
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
            hashes.add(p.metadata.labels.get("pdd-operator.dev/compat-hash"))
    if compat_hash is not None and hashes != {compat_hash}:
        return None
    return hashes


def test_failed_requests_during_scaling_and_a_must_match_rollout(cluster, operator, namespace, node_agent,  # noqa: F811
                                                                  tmp_path):
    doc, _ = manifest(tmp_path / "model", "llama", "NixlConnector")
    name = doc["metadata"]["name"]
    spec = doc["spec"]
    spec["engine"]["image"] = FAKE_ENGINE_IMAGE
    for role in ("prefill", "decode"):
        spec[role]["replicas"] = 2
        spec[role]["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
        spec[role]["extraArgs"] = []
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    wait_for(lambda: condition(pdd_status(cluster, namespace, name), "Ready").get("status") == "True", 120,
             interval=0.5, what=f"pdd/{name} Ready")
    [old_hash] = wait_for(lambda: settled(cluster, namespace, name, {"prefill": 2, "decode": 2, "router": 1}), 60,
                          what="2 prefill, 2 decode, 1 router Ready") - {None}
    endpoint = pdd_status(cluster, namespace, name)["endpoint"]
    url = wait_for(lambda: service_url(cluster.core, endpoint), 60, what=f"an endpoint of {endpoint}")
    results = {}

    def phase(label: str, patch: dict, replicas: dict[str, int], new_hash: bool = False) -> dict:
        with Load(url) as load:
            time.sleep(2)  # load running before the change
            t0 = time.monotonic()
            cluster.kubectl("patch", "-n", namespace, "pdd", name, "--type", "merge", "-p", json.dumps({"spec": patch}))

            def done():
                hashes = settled(cluster, namespace, name, replicas)
                return hashes if hashes and (not new_hash or old_hash not in hashes) else None

            wait_for(done, 180, interval=0.5, what=f"{label}: settled")
            took = time.monotonic() - t0
            time.sleep(2)  # and after it
        results[label] = {**load.report(), "settled_after_s": round(took, 1)}
        print(f"\n[rollout under load] {label}: {json.dumps(results[label])}")
        assert load.ok > 0, results[label]
        return results[label]

    up = phase("decode 2 -> 3", {"decode": {"replicas": 3}}, {"prefill": 2, "decode": 3, "router": 1})
    phase("decode 3 -> 1", {"decode": {"replicas": 1}}, {"prefill": 2, "decode": 1, "router": 1})
    phase("prefill 2 -> 1", {"prefill": {"replicas": 1}}, {"prefill": 1, "decode": 1, "router": 1})
    phase("must-match change (model.dtype float16)", {"model": {"dtype": "float16"}},
          {"prefill": 1, "decode": 1, "router": 1}, new_hash=True)
    print(f"\n[rollout under load] summary: {json.dumps(results)}")
    assert up["failed"] == 0, up  # scaling up never takes a serving pod away
