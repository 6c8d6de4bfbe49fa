"""A minimal prefill/decode client for real vLLM engines on loopback (pull mode), and their metrics.

Used by the real-vLLM tests (tests/vllm/support.py re-exports it) and by the conformance run
(dev/conformance.py); the project's router is tested separately. Protocol: vllm-nixl-facts.md
section 6.1 and ../shared/docs/cpu-pd.md "The request protocol (pull mode)".
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
import uuid
from dataclasses import dataclass

#: Per prompt, the tokens decode gets from prefill: all of them for a dense model; a hybrid model
#: recomputes the last prompt token on decode by design (vllm-nixl-facts.md section 4.2).
EXTERNAL_SHORTFALL = {"llama": 0, "nemotron_h": 1}
#: NIXL counters that must stay 0 on a healthy pair.
NIXL_FAILURES = ("vllm:nixl_num_failed_transfers_total", "vllm:nixl_num_failed_notifications_total",
                 "vllm:nixl_num_kv_expired_reqs_total")



PREFILL_KV_PARAMS = {
    "do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
    "remote_block_ids": None, "remote_host": None, "remote_port": None,
}


@dataclass
class Result:
    request_id: str
    prompt_tokens: int
    text: str
    completion_tokens: int
    kv_transfer_params: dict
    chunks: int = 0


async def pd_completion(session, prefill_url: str, decode_url: str, model: str, prompt: str,
                        max_tokens: int = 16, stream: bool = False) -> Result:
    """One completion through P then D: prefill with max_tokens 1 and do_remote_decode, then decode
    with prefill's kv_transfer_params unchanged, one X-Request-Id for both legs."""
    rid = f"pdd-test-{uuid.uuid4()}"
    headers = {"X-Request-Id": rid}
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True}
    p_body = {**body, "max_tokens": 1, "stream": False, "kv_transfer_params": dict(PREFILL_KV_PARAMS)}
    p_body.pop("ignore_eos")
    async with session.post(f"{prefill_url}/v1/completions", json=p_body, headers=headers) as r:
        text = await r.text()
        assert r.status == 200, f"prefill leg {r.status}: {text}"
        p = json.loads(text)
    kv = p.get("kv_transfer_params")
    assert kv and kv.get("do_remote_prefill") and kv.get("remote_block_ids"), f"prefill returned {kv!r}"
    prompt_tokens = p["usage"]["prompt_tokens"]
    d_body = {**body, "kv_transfer_params": kv, "stream": stream}
    if stream:
        d_body["stream_options"] = {"include_usage": True}
    async with session.post(f"{decode_url}/v1/completions", json=d_body, headers=headers) as r:
        if not stream:
            text = await r.text()
            assert r.status == 200, f"decode leg {r.status}: {text}"
            d = json.loads(text)
            return Result(rid, prompt_tokens, d["choices"][0]["text"], d["usage"]["completion_tokens"], kv)
        assert r.status == 200, f"decode leg {r.status}: {await r.text()}"
        out, chunks, usage = await read_sse(r)
        return Result(rid, prompt_tokens, "".join(out), usage["completion_tokens"], kv, chunks)


async def run_requests(prefill_url: str, decode_url: str, model: str, prompts: list[str],
                       concurrency: int, max_tokens: int, stream: bool) -> list[Result]:
    import aiohttp

    sem = asyncio.Semaphore(concurrency)
    timeout = aiohttp.ClientTimeout(total=180)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async def one(prompt: str) -> Result:
            async with sem:
                return await pd_completion(session, prefill_url, decode_url, model, prompt, max_tokens, stream)
        return await asyncio.gather(*(one(p) for p in prompts))


_METRIC = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def metrics_text(url: str) -> str:
    """The Prometheus text of ``url``/metrics (one scrape)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        return r.read().decode()


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text summed over label sets per metric name."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _METRIC.match(line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
    return out


#: ``vllm:prompt_tokens_by_source_total{source=...}`` (vllm/v1/metrics/loggers.py, 0.26 and 0.32): where each
#: prompt token an engine scheduled came from: ``local_compute``, ``local_cache_hit`` or
#: ``external_kv_transfer`` (pulled from prefill through the KV connector).
_BY_SOURCE = re.compile(r'^vllm:prompt_tokens_by_source_total\{[^}]*source="([a-z_]+)"[^}]*\}\s+(\S+)')


def prompt_tokens_by_source(text: str) -> dict[str, float]:
    """Prompt tokens per source from one scrape's Prometheus text: ``{"external_kv_transfer": 646.0,
    "local_compute": 0.0, ...}``, summed over the other labels (engine index, model name); empty when the
    engine publishes no such counter (vLLM before the by-source counter)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if found := _BY_SOURCE.match(line):
            out[found.group(1)] = out.get(found.group(1), 0.0) + float(found.group(2))
    return out


def metrics(url: str) -> dict[str, float]:
    """``url``/metrics summed over label sets per metric name (:func:`parse_metrics` of one scrape)."""
    return parse_metrics(metrics_text(url))


def delta(after: dict[str, float], before: dict[str, float], name: str) -> float:
    return after.get(name, 0.0) - before.get(name, 0.0)




async def read_sse(r) -> tuple[list[str], int, dict]:
    """Read an OpenAI SSE completion stream: (text pieces, choice events, usage). Asserts it ends
    with ``[DONE]`` and carries usage."""
    out, chunks, usage, done = [], 0, None, False
    async for raw in r.content:
        line = raw.decode().strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            done = True
            break
        ev = json.loads(data)
        if ev.get("usage"):
            usage = ev["usage"]
        for c in ev.get("choices", []):
            out.append(c.get("text") or "")
            chunks += 1
    assert done, "stream ended without [DONE]"
    assert usage, "no usage in the stream"
    return out, chunks, usage


def prompt_of(i: int, words: int = 100) -> str:
    """A distinct prompt per request (no prefix shared with another request's prompt)."""
    return f"Request {i} {uuid.uuid4().hex}: " + " ".join(f"word{(i * 7 + k) % 97}" for k in range(words))
