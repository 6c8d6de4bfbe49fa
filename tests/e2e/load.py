"""Steady streaming load through a PDDeployment's router, every request timed and kept (the rollout and
fault measurements under load)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import yaml

from dev.cluster_example import manifest, service_url
from tests.e2e.conftest import condition, pdd_status, wait_for
from tests.e2e.node_agent import FAKE_ENGINE_IMAGE

#: Concurrent streaming clients.
CONCURRENCY = 4


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


def deploy_fake_engines(cluster, namespace: str, tmp_path, prefill: int, decode: int) -> tuple[str, str]:
    """Apply the CPU example with the fake engine image, ``prefill``/``decode`` pods and a 10 s drain;
    wait until it is Ready with every pod Ready; return ``(PDDeployment name, router URL)``.

    The fakes learn their revision (the pod's compat-hash label) from the downward API, so a decode
    given KV of another revision fails the request (``cross-revision pair``)."""
    doc, _ = manifest(tmp_path / "model", "llama", "NixlConnector")
    name = doc["metadata"]["name"]
    spec = doc["spec"]
    spec["engine"]["image"] = FAKE_ENGINE_IMAGE
    spec["engine"]["env"] = [*spec["engine"].get("env", []), {"name": "FAKE_REVISION", "valueFrom": {
        "fieldRef": {"fieldPath": "metadata.labels['pdd-operator.dev/compat-hash']"}}}]
    for role, n in (("prefill", prefill), ("decode", decode)):
        spec[role]["replicas"] = n
        spec[role]["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
        spec[role]["extraArgs"] = []
        spec[role]["drainSeconds"] = 10  # a fake request lasts well under a second
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))

    def ready():
        st = pdd_status(cluster, namespace, name)
        return (condition(st, "Ready").get("status") == "True" and st["prefill"]["readyReplicas"] == prefill
                and st["decode"]["readyReplicas"] == decode)

    wait_for(ready, 120, interval=0.5, what=f"pdd/{name} Ready with {prefill} prefill, {decode} decode")
    endpoint = pdd_status(cluster, namespace, name)["endpoint"]
    url = wait_for(lambda: service_url(cluster.core, endpoint), 60, what=f"an endpoint of {endpoint}")
    return name, url
