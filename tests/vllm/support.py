"""Support for the real-vLLM prefill/decode tests: what the tests check about a rendered pair run on
loopback (dev/local_pd.py starts it) and requests through the project's router; the minimal P/D
client and the engines' metrics are dev/pd_client.py's (re-exported here)."""

from __future__ import annotations

import asyncio
import json
import os
import uuid

from dev.local_pd import LocalEngine, kubelet_expand
from dev.pd_client import (  # noqa: F401 (the tests use them as support.*)
    EXTERNAL_SHORTFALL,
    NIXL_FAILURES,
    PREFILL_KV_PARAMS,
    Result,
    delta,
    metrics,
    metrics_text,
    parse_metrics,
    pd_completion,
    prompt_of,
    prompt_tokens_by_source,
    read_sse,
    run_requests,
)

STARTUP_TIMEOUT = 420  # both engines healthy (measured 75-95 s on 2 cores, started in parallel)
METRICS_TIMEOUT = 30  # engine metrics are published with the next stats update

# The rendered values a local process may differ in, and nothing else (asserted by the tests).
ALLOWED_ARG_CHANGES = {"--host", "--port"}
ALLOWED_ENV_CHANGES = {"VLLM_NIXL_SIDE_CHANNEL_HOST", "VLLM_NIXL_SIDE_CHANNEL_PORT"}


def diff_against_rendered(container: dict, local: LocalEngine, expand: bool = False) -> tuple[set[str], set[str]]:
    """``(changed flags, changed env names)`` between a rendered container and its local process.

    Fails if anything beyond a value changed (a flag or variable added, removed or moved). With
    ``expand``, the rendered command and args are first expanded with the local env the way the
    kubelet expands ``$(VAR)``, so a value that only differs by that expansion is not a change.
    """
    rendered = list(container["command"]) + list(container["args"])
    if expand:
        rendered = [kubelet_expand(a, local.env) for a in rendered]
    assert len(rendered) == len(local.argv), (rendered, local.argv)
    flags: set[str] = set()
    for i, (a, b) in enumerate(zip(rendered, local.argv, strict=True)):
        if a != b:
            assert i > 0 and rendered[i - 1].startswith("--"), f"argument {i} changed: {a!r} -> {b!r}"
            flags.add(rendered[i - 1])
    names = [v["name"] for v in container["env"]]
    assert names == list(local.env), (names, list(local.env))
    changed_env = {v["name"] for v in container["env"] if v.get("value") != local.env[v["name"]]}
    return flags, changed_env


# ---------------------------------------------------------------------------------------------
# Requests through the project's router
# ---------------------------------------------------------------------------------------------

def router_available() -> bool:
    """True when this checkout has ``pdd router`` (and PDD_VLLM_VIA is not ``client``)."""
    if os.environ.get("PDD_VLLM_VIA", "") == "client":
        return False
    import importlib.util

    return importlib.util.find_spec("pdd_operator.router.server") is not None


async def router_completion(session, router_url: str, model: str, prompt: str, max_tokens: int = 16,
                            stream: bool = False) -> Result:
    """One ordinary OpenAI completion sent to the router, which runs both legs."""
    rid = f"pdd-test-{uuid.uuid4()}"
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    async with session.post(f"{router_url}/v1/completions", json=body, headers={"X-Request-Id": rid}) as r:
        if not stream:
            text = await r.text()
            assert r.status == 200, f"router {r.status}: {text}"
            d = json.loads(text)
            return Result(rid, d["usage"]["prompt_tokens"], d["choices"][0]["text"], d["usage"]["completion_tokens"], {})
        assert r.status == 200, f"router {r.status}: {await r.text()}"
        assert r.headers.get("Content-Type", "").startswith("text/event-stream"), r.headers
        out, chunks, usage = await read_sse(r)
        return Result(rid, usage["prompt_tokens"], "".join(out), usage["completion_tokens"], {}, chunks)


async def run_via_router(router_url: str, model: str, prompts: list[str], concurrency: int, max_tokens: int,
                         stream: bool) -> list[Result]:
    import aiohttp

    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=180)) as session:
        async def one(prompt: str) -> Result:
            async with sem:
                return await router_completion(session, router_url, model, prompt, max_tokens, stream)
        return await asyncio.gather(*(one(p) for p in prompts))
