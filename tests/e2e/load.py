"""Steady streaming load through a PDDeployment's router, every request timed and kept (the rollout and
fault measurements under load)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable

import aiohttp
import yaml

from dev.cluster_example import manifest, service_url
from tests.e2e.conftest import condition, pdd_status, wait_for
from tests.e2e.node_agent import FAKE_ENGINE_IMAGE

#: Concurrent streaming clients.
CONCURRENCY = 4


class Load:
    """Streaming completions through the router, ``concurrency`` at a time, in a thread, until stopped.

    Every request is kept as ``(start, seconds, error or "")`` (``time.monotonic`` clock). ``model`` is the
    served model name (the fakes take any). With ``unique_prompts`` every prompt starts with its own
    tag and number, so no two (of any Load) share a KV block: decode cannot serve one from its local prefix cache, and every
    prompt token it has must have come from prefill (decode's ``vllm:external_prefix_cache_hits_total``).

    ``url`` is one router address, or a function returning the Service's current endpoints
    (dev/cluster_example.py ``service_urls``), which stands for kube-proxy: it is read every 0.5 s and each
    request goes to the next endpoint in turn. ``retry_refused`` resends a request whose connection was
    refused (it never reached a router: a client retrying, and kube-proxy choosing again), at most 3
    times, each to the next endpoint; ``self.refused_retries`` counts them. ``keepalive`` False opens a
    connection per request (so a router's death only cuts the requests it was serving).

    ``self.alone`` counts the answers one engine served alone (the router's fallback) by their
    ``X-PDD-Fallback`` header (``decode-only``, ``prefill-only``)."""

    def __init__(self, url: str | Callable[[], list[str]], model: str = "m", concurrency: int = CONCURRENCY,
                 unique_prompts: bool = False, timeout: float = 30, retry_refused: bool = False,
                 keepalive: bool = True) -> None:
        self.model, self.concurrency = model, concurrency
        self.unique_prompts, self.timeout, self.retry_refused, self.keepalive = (
            unique_prompts, timeout, retry_refused, keepalive)
        self._resolve = url if callable(url) else None
        self._targets: list[str] = [] if callable(url) else [url]
        self.refused_retries = 0
        self.alone: dict[str, int] = {}
        self._n = 0
        self._tag = uuid.uuid4().hex[:8]  # unique prompts stay unique across Loads
        self.done: list[tuple[float, float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _one(self, session) -> None:
        self._n += 1
        prompt = (f"{self._tag}-{self._n} " if self.unique_prompts else "") + "hello " * 20
        body = {"model": self.model, "prompt": prompt, "max_tokens": 16, "stream": True}
        t0 = time.monotonic()
        error = ""
        for attempt in range(4 if self.retry_refused else 1):
            targets = self._targets
            if not targets:
                error = "no ready endpoint behind the Service"
                break
            target = targets[(self._n + attempt) % len(targets)]
            try:
                async with session.post(f"{target}/v1/completions", json=body,
                                        headers={"X-Request-Id": f"load-{uuid.uuid4()}"}) as r:
                    text = await r.text()
                    if alone := r.headers.get("X-PDD-Fallback"):
                        self.alone[alone] = self.alone.get(alone, 0) + 1
                    if r.status != 200 or not text.rstrip().endswith("data: [DONE]") or '"error"' in text:
                        error = f"{r.status}: {text[-200:]!r}"
                break
            except aiohttp.ClientConnectorError as exc:  # refused: the request never reached a router
                error = f"{type(exc).__name__}: {exc}"
                if attempt < 3 and self.retry_refused:
                    self.refused_retries += 1
                    error = ""
                    continue
            except Exception as exc:  # noqa: BLE001 - every failure is counted and shown
                error = f"{type(exc).__name__}: {exc}"
            break
        self.done.append((t0, time.monotonic() - t0, error))
        if error:
            await asyncio.sleep(0.1)  # a client's pause before its next request, not a tight loop of failures

    def _refresh(self) -> None:
        while not self._stop.wait(0.5):
            try:
                self._targets = self._resolve()
            except Exception:  # noqa: BLE001 - the apiserver busy: keep the last endpoints, as kube-proxy does
                pass

    async def _run(self) -> None:
        connector = aiohttp.TCPConnector(force_close=not self.keepalive)
        async with aiohttp.ClientSession(connector=connector,
                                         timeout=aiohttp.ClientTimeout(total=self.timeout)) as session:
            async def worker() -> None:
                while not self._stop.is_set():
                    await self._one(session)
            await asyncio.gather(*(worker() for _ in range(self.concurrency)))

    def __enter__(self) -> Load:
        if self._resolve is not None:
            self._targets = self._resolve()
            threading.Thread(target=self._refresh, daemon=True).start()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(self.timeout + 30)  # the requests in flight finish


def p99(latencies: list[float]) -> float | None:
    """The 99th percentile (nearest rank) in milliseconds, or ``None`` without samples."""
    if not latencies:
        return None
    ordered = sorted(latencies)
    return round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000, 1)


def fake_engines_doc(tmp_path, prefill: int, decode: int, routers: int = 1, env: dict[str, str] | None = None) -> dict:
    """The CPU example PDDeployment with the fake engine image, ``prefill``/``decode`` pods, ``routers``
    router pods, small requests and a 10 s drain (what :func:`deploy_fake_engines` applies); ``env``: more
    environment for the engines (the fakes' ``FAKE_*`` settings, :mod:`tests.e2e.fake_vllm_serve`)."""
    doc, _ = manifest(tmp_path / "model", "llama", "NixlConnector")
    spec = doc["spec"]
    spec["engine"]["image"] = FAKE_ENGINE_IMAGE
    spec["engine"]["env"] = [*spec["engine"].get("env", []), {"name": "FAKE_REVISION", "valueFrom": {
        "fieldRef": {"fieldPath": "metadata.labels['pdd-operator.dev/compat-hash']"}}},
        *({"name": k, "value": v} for k, v in (env or {}).items())]
    for role, n in (("prefill", prefill), ("decode", decode)):
        spec[role]["replicas"] = n
        spec[role]["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
        spec[role]["extraArgs"] = []
        spec[role]["drainSeconds"] = 10  # a fake request lasts well under a second
    spec["router"]["replicas"] = routers
    return doc


def deploy_fake_engines(cluster, namespace: str, tmp_path, prefill: int, decode: int,
                        routers: int = 1, env: dict[str, str] | None = None) -> tuple[str, str]:
    """Apply the CPU example with the fake engine image, ``prefill``/``decode`` pods, ``routers`` router
    pods and a 10 s drain; wait until it is Ready with every pod Ready; return ``(PDDeployment name, router
    URL)`` (the first ready endpoint of ``status.endpoint``).

    The fakes learn their revision (the pod's compat-hash label) from the downward API, so a decode
    given KV of another revision fails the request (``cross-revision pair``)."""
    doc = fake_engines_doc(tmp_path, prefill, decode, routers, env)
    name = doc["metadata"]["name"]
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))

    def ready():
        st = pdd_status(cluster, namespace, name)
        routers_ready = [p for p in cluster.core.list_namespaced_pod(namespace, label_selector=(
            f"app.kubernetes.io/instance={name},app.kubernetes.io/component=router")).items
            if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]
        return (condition(st, "Ready").get("status") == "True" and st["prefill"]["readyReplicas"] == prefill
                and st["decode"]["readyReplicas"] == decode and len(routers_ready) == routers)

    wait_for(ready, 120, interval=0.5, what=f"pdd/{name} Ready with {prefill} prefill, {decode} decode")
    endpoint = pdd_status(cluster, namespace, name)["endpoint"]
    url = wait_for(lambda: service_url(cluster.core, endpoint), 60, what=f"an endpoint of {endpoint}")
    return name, url
