"""The P/D router against real aiohttp fake engines on 127.0.0.1 that speak vLLM's P/D protocol.

The fake decode checks that it receives exactly the ``kv_transfer_params`` the fake prefill issued for
the same ``X-Request-Id`` (and answers 400 otherwise), so every 200 below proves the pull protocol.
Waits are on conditions (events set by the fakes), never on fixed sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import time

import aiohttp
import pytest

from pdd_operator.router.endpoints import Endpoint, NoEndpoint, Registry, parse_static
from pdd_operator.router.proxy import PULL_PREFILL_PARAMS, Router, RouterConfig, dumps, loads, push_decode_params, start
from tests.fakes.fake_engine import FakeEngine, serve

pytestmark = pytest.mark.timeout(60)


def run(coro):
    return asyncio.run(coro)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    """Fake engines + a router on 127.0.0.1; ``url`` is the router's base URL."""

    def __init__(self) -> None:
        self.engines: dict[str, FakeEngine] = {}
        self.urls: dict[str, str] = {}
        self.issued: dict = {}
        self.changed = asyncio.Event()
        self.runners = []
        self.registry = Registry(rng=random.Random(7))
        self.router: Router | None = None
        self.url = ""

    async def engine(self, name: str, role: str, **kw) -> FakeEngine:
        eng = FakeEngine(role=role, issued=kw.pop("issued", self.issued), changed=self.changed, **kw)
        runner, port = await serve(eng)
        self.runners.append(runner)
        self.engines[name] = eng
        self.urls[name] = f"http://127.0.0.1:{port}"
        return eng

    async def start_router(self, config: RouterConfig | None = None, **endpoints: list) -> None:
        """``endpoints``: ``prefill=[(name, hash), ...]``, ``decode=[...]``; a name not started is a dead URL."""
        for role, items in endpoints.items():
            eps = []
            for name, chash in items:
                url = self.urls.get(name) or f"http://127.0.0.1:{free_port()}"
                eng = self.engines.get(name)
                eps.append(Endpoint(url=url, role=role, compat_hash=chash, name=name, kv_host="127.0.0.1",
                                    kv_port=eng.kv_port if eng else None, tp_size=eng.tp_size if eng else 1))
            self.registry.replace(role, eps)
        self.router = Router(self.registry, config or RouterConfig())
        port = free_port()
        self.runners.append(await start(self.router, "127.0.0.1", port))
        self.url = f"http://127.0.0.1:{port}"

    def learned(self) -> None:
        """As if the router had learned every prefill fake's engine id from an answer already."""
        for ep in self.registry.endpoints("prefill"):
            ep.engine_id = self.engines[ep.name].engine_id

    async def wait_for(self, predicate, timeout: float = 10.0) -> None:
        """Wait until ``predicate()`` holds; re-checked whenever a fake engine records something."""
        async def loop():
            while not predicate():
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(loop(), timeout)

    async def close(self) -> None:
        for runner in reversed(self.runners):
            await runner.cleanup()


@contextlib.asynccontextmanager
async def stack():
    s = Stack()
    try:
        yield s
    finally:
        await s.close()


def bodies(engine: FakeEngine) -> list[dict]:
    return [b for _, b in engine.requests if b is not None]


def rid(engine: FakeEngine, i: int = -1) -> str:
    return engine.requests[i][0]["X-Request-Id"]


# -- pull mode -----------------------------------------------------------------------------------


def test_pull_non_streaming_completion_hands_kv_params_over_unchanged():
    async def go():
        async with stack() as s:
            p = await s.engine("p0", "prefill", tp_size=2)
            d = await s.engine("d0", "decode", tokens=4)
            await s.start_router(prefill=[("p0", "h")], decode=[("d0", "h")])
            req = {"model": "m", "prompt": "hello", "max_tokens": 5, "min_tokens": 2,
                   "stream_options": {"include_usage": True}, "temperature": 0}
            async with aiohttp.ClientSession() as c:
                async with c.post(s.url + "/v1/completions", json=req,
                                  headers={"Authorization": "Bearer sk-test"}) as r:
                    assert r.status == 200, await r.text()
                    answer = await r.json()
                    router_rid = r.headers["X-Request-Id"]
            assert answer["choices"][0]["text"] == "tok " * 4
            (pb,), (db,) = bodies(p), bodies(d)
            # prefill leg: max_tokens 1, no stream, the pull params, no min_tokens/stream_options
            assert pb["max_tokens"] == 1 and pb["stream"] is False
            assert pb["kv_transfer_params"] == PULL_PREFILL_PARAMS
            assert "min_tokens" not in pb and "stream_options" not in pb
            assert pb["prompt"] == "hello" and pb["temperature"] == 0
            # decode leg: the original request plus prefill's params, unchanged (tp_size included)
            issued = s.issued[rid(p)]
            assert issued["tp_size"] == 2
            assert db == {**req, "kv_transfer_params": issued}
            # one X-Request-Id for both legs (and for the client), Authorization forwarded to both
            assert rid(p) == rid(d) == router_rid
            for eng in (p, d):
                assert eng.requests[0][0]["Authorization"] == "Bearer sk-test"
    run(go())


def test_pull_streaming_chat_passes_sse_through():
    async def go():
        async with stack() as s:
            p = await s.engine("p0", "prefill")
            await s.engine("d0", "decode", tokens=6)
            await s.start_router(prefill=[("p0", "")], decode=[("d0", "")])
            req = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                   "max_completion_tokens": 6}
            async with aiohttp.ClientSession() as c:
                async with c.post(s.url + "/v1/chat/completions", json=req) as r:
                    assert r.status == 200
                    assert r.headers["Content-Type"].startswith("text/event-stream")
                    raw = await r.read()
            events = [e for e in raw.decode().split("\n\n") if e]
            assert events[-1] == "data: [DONE]"
            deltas = [json.loads(e[len("data: "):])["choices"][0]["delta"]["content"] for e in events[:-1]]
            assert deltas == [f"tok{i} " for i in range(6)]
            (pb,) = bodies(p)
            assert pb["max_tokens"] == 1 and pb["max_completion_tokens"] == 1 and pb["stream"] is False
    run(go())


def test_streaming_bytes_are_identical_to_decode_direct():
    """The router relays decode's stream byte for byte (compared with decode answering the same request id)."""
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            d = await s.engine("d0", "decode", tokens=5)
            await s.start_router(prefill=[("p0", "")], decode=[("d0", "")])
            req = {"model": "m", "prompt": "x", "stream": True}
            async with aiohttp.ClientSession() as c:
                async with c.post(s.url + "/v1/completions", json=req) as r:
                    via_router = await r.read()
                # Same request straight to decode, replaying what the router sent (same id and params).
                headers, body = d.requests[-1]
                async with c.post(s.urls["d0"] + "/v1/completions", json=body,
                                  headers={"X-Request-Id": headers["X-Request-Id"]}) as r:
                    direct = await r.read()
            strip = lambda b: [json.loads(e[6:]) | {"created": 0} if e != "data: [DONE]" else e  # noqa: E731
                               for e in b.decode().split("\n\n") if e]
            assert strip(via_router) == strip(direct)
            assert via_router.count(b"\n\n") == direct.count(b"\n\n")
    run(go())


def test_prefill_failure_is_retried_on_another_prefill_endpoint():
    async def go():
        async with stack() as s:
            bad = await s.engine("bad", "prefill", fail_status=503)
            good = await s.engine("good", "prefill")
            await s.engine("d0", "decode")
            # "dead" is a port nobody listens on: connection refused.
            await s.start_router(prefill=[("bad", ""), ("dead", ""), ("good", "")], decode=[("d0", "")])
            async with aiohttp.ClientSession() as c:
                for _ in range(12):
                    async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}) as r:
                        assert r.status == 200, await r.text()
            assert len(bad.requests) > 0, "the seeded choice should have tried the failing endpoint"
            assert len(good.requests) == 12
            metrics = s.router.metrics
            assert metrics.prefill_retries._value.get() >= len(bad.requests)
    run(go())


def test_a_decode_that_refuses_the_connection_is_replaced_by_another_decode():
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            good = await s.engine("good", "decode")
            # "dead" is a port nobody listens on: a decode process that just died, still listed.
            await s.start_router(prefill=[("p0", "")], decode=[("dead", ""), ("good", "")])
            async with aiohttp.ClientSession() as c:
                for _ in range(12):
                    body = {"model": "m", "prompt": "x", "stream": True}
                    async with c.post(s.url + "/v1/completions", json=body) as r:
                        assert r.status == 200, await r.text()
                        assert (await r.text()).rstrip().endswith("data: [DONE]")
            assert len(good.requests) == 12
            assert s.router.metrics.decode_retries._value.get() > 0  # the seeded choice tried "dead"
    run(go())


def test_an_endpoint_that_refused_a_connection_is_set_aside_then_tried_again():
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            good = await s.engine("good", "decode")
            # long enough for 20 requests on a loaded machine (0.5 s was not: seen failing at load 18)
            await s.start_router(RouterConfig(unreachable_seconds=3), prefill=[("p0", "")],
                                 decode=[("dead", ""), ("good", "")])
            dead = next(e for e in s.registry.endpoints("decode") if e.name == "dead")
            async with aiohttp.ClientSession() as c:
                async def send(n: int) -> None:
                    for _ in range(n):
                        async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}) as r:
                            assert r.status == 200, await r.text()

                while s.router.metrics.decode_retries._value.get() == 0:
                    await send(1)  # until the seeded choice has tried "dead" once
                await send(20)
                # set aside: the 20 requests after it went to "good" without a retry
                assert s.router.metrics.decode_retries._value.get() == 1
                assert s.router.metrics.set_aside._value.get() == 1
                # after unreachable_seconds it is a candidate again (a restarted process may be back)
                while dead.unreachable_until > time.monotonic():
                    await asyncio.sleep(0.05)
                while s.router.metrics.decode_retries._value.get() == 1:
                    await send(1)
            assert dead.unreachable_until > 0 and len(good.requests) >= 22
    run(go())


def test_set_aside_endpoints_are_still_chosen_when_no_other_is_left():
    from pdd_operator.router.endpoints import reachable

    a, b = Endpoint(url="http://a", role="decode"), Endpoint(url="http://b", role="decode")
    a.unreachable_until = 10.0
    assert reachable([a, b], now=5.0) == [b]
    assert reachable([a], now=5.0) == [a]
    assert reachable([a, b], now=10.0) == [a, b]


def test_a_decode_answering_an_error_about_the_request_is_not_retried():
    """500 and 4xx are decode's verdict on the request (502-504 are retried: test_router_retry.py)."""
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            bad = await s.engine("bad", "decode", fail_status=500)
            await s.start_router(prefill=[("p0", "")], decode=[("bad", "")])
            async with aiohttp.ClientSession() as c:
                async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}) as r:
                    assert r.status == 500 and "X-PDD-Retry" not in r.headers
            assert len(bad.requests) == 1 and s.router.metrics.decode_retries._value.get() == 0
            assert not s.router.metrics.retries._metrics
    run(go())


def test_no_reachable_decode_gives_the_502():
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            await s.start_router(RouterConfig(fallback=False), prefill=[("p0", "")],
                                 decode=[("dead", ""), ("dead2", "")])
            async with aiohttp.ClientSession() as c:
                async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}) as r:
                    assert r.status == 502
                    assert "decode endpoint" in (await r.json())["error"]["message"]
    run(go())


def test_the_fakes_fail_a_cross_revision_pair():
    """The rollout e2e counts cross-revision pairs with this check: pods labelled alike (one compat hash,
    so the router pairs them) but running different revisions make the request fail with 409."""
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill", revision="rev-a")
            await s.engine("other", "decode", revision="rev-b")
            await s.engine("same", "decode", revision="rev-a")
            for decode, status in (("other", 409), ("same", 200)):
                await s.start_router(prefill=[("p0", "h")], decode=[(decode, "h")])
                async with aiohttp.ClientSession() as c:
                    async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}) as r:
                        assert r.status == status, await r.text()
                        assert ("cross-revision pair" in await r.text()) == (status == 409)
    run(go())


def test_all_prefills_failing_gives_an_openai_error():
    async def go():
        async with stack() as s:
            await s.engine("bad1", "prefill", fail_status=500)
            await s.engine("bad2", "prefill", fail_status=503)
            d = await s.engine("d0", "decode")
            await s.start_router(RouterConfig(prefill_retries=5), prefill=[("bad1", ""), ("bad2", "")],
                                 decode=[("d0", "")])
            async with aiohttp.ClientSession() as c:
                async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}) as r:
                    assert r.status == 502
                    err = (await r.json())["error"]
            assert set(err) == {"message", "type", "param", "code"}
            assert "answered HTTP 50" in err["message"]
            assert len(s.engines["bad1"].requests) == len(s.engines["bad2"].requests) == 1  # each tried once
            assert d.requests == []
    run(go())


def test_prefill_client_error_is_passed_through_not_retried():
    async def go():
        async with stack() as s:
            p1 = await s.engine("p1", "prefill", fail_status=400)
            p2 = await s.engine("p2", "prefill", fail_status=400)
            await s.engine("d0", "decode")
            await s.start_router(prefill=[("p1", ""), ("p2", "")], decode=[("d0", "")])
            async with aiohttp.ClientSession() as c:
                async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}) as r:
                    assert r.status == 400
                    assert (await r.json())["error"]["message"] == "injected failure"
            assert len(p1.requests) + len(p2.requests) == 1
    run(go())


def test_pairs_only_endpoints_with_the_same_compat_hash():
    async def go():
        async with stack() as s:
            for name, role in (("pa", "prefill"), ("pb", "prefill"), ("pc", "prefill"),
                               ("da", "decode"), ("db", "decode")):
                await s.engine(name, role)
            hashes = {"pa": "old", "pb": "new", "pc": "orphan", "da": "old", "db": "new"}
            await s.start_router(prefill=[(n, hashes[n]) for n in ("pa", "pb", "pc")],
                                 decode=[(n, hashes[n]) for n in ("da", "db")])
            async with aiohttp.ClientSession() as c:
                for _ in range(20):
                    async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}) as r:
                        assert r.status == 200
            seen = {}
            for name in ("pa", "pb", "da", "db"):
                for headers, _ in s.engines[name].requests:
                    seen.setdefault(headers["X-Request-Id"], []).append(hashes[name])
            assert len(seen) == 20
            assert all(len(v) == 2 and v[0] == v[1] for v in seen.values())
            assert {v[0] for v in seen.values()} == {"old", "new"}
            assert s.engines["pc"].requests == []  # no decode of its hash: never chosen
    run(go())


def test_registry_explains_why_nothing_pairs():
    reg = Registry()
    with pytest.raises(NoEndpoint, match="no ready prefill"):
        reg.pick_prefill()
    reg.replace("prefill", [Endpoint("http://a:1", "prefill", "h1")])
    with pytest.raises(NoEndpoint, match="no ready decode"):
        reg.pick_prefill()
    reg.replace("decode", [Endpoint("http://b:1", "decode", "h2")])
    with pytest.raises(NoEndpoint, match="same compat hash"):
        reg.pick_prefill()
    assert reg.pairs() == 0
    reg.replace("decode", [Endpoint("http://b:1", "decode", "h1")])
    assert reg.pick_prefill().url == "http://a:1" and reg.pairs() == 1
    with pytest.raises(NoEndpoint, match="side channel"):
        reg.pick_prefill(push=True)


def test_power_of_two_choices_prefers_the_less_loaded_endpoint():
    reg = Registry(rng=random.Random(1))
    eps = [Endpoint(f"http://e{i}:1", "decode") for i in range(2)]
    eps[0].outstanding = 5
    reg.replace("decode", eps)
    assert all(reg.pick_decode("") is eps[1] for _ in range(20))
    # A refresh keeps the in-flight counts of endpoints that stay.
    reg.replace("decode", [Endpoint("http://e0:1", "decode", name="renamed")])
    (kept,) = reg.endpoints("decode")
    assert kept is eps[0] and kept.outstanding == 5 and kept.name == "renamed"


def test_least_loaded_spread_under_concurrency():
    """Slow decode requests in flight steer new requests to the other decode endpoint."""
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            d_slow = await s.engine("d_slow", "decode", tokens=1000, inter_token_delay=0.5)
            d_fast = await s.engine("d_fast", "decode", tokens=2)
            await s.start_router(prefill=[("p0", "")], decode=[("d_slow", ""), ("d_fast", "")])
            slow_ep, fast_ep = s.registry.endpoints("decode")
            s.registry.replace("decode", [slow_ep])  # first only d_slow is ready
            async with aiohttp.ClientSession() as c:
                streams = [await c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x", "stream": True})
                           for _ in range(2)]
                assert len(d_slow.requests) == 2 and slow_ep.outstanding == 2
                s.registry.replace("decode", [slow_ep, fast_ep])  # d_fast becomes ready
                for _ in range(10):
                    async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}) as r:
                        assert r.status == 200
                assert len(d_slow.requests) == 2 and len(d_fast.requests) == 10
                for r in streams:
                    r.close()
    run(go())


# -- failures, limits, disconnects -----------------------------------------------------------------


def test_client_disconnect_during_decode_cancels_the_decode_leg():
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            d = await s.engine("d0", "decode", tokens=10_000, inter_token_delay=0.05)
            await s.start_router(prefill=[("p0", "")], decode=[("d0", "")])
            async with aiohttp.ClientSession() as c:
                r = await c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x", "stream": True})
                assert r.status == 200
                await r.content.readuntil(b"\n\n")  # the first token arrived
                r.close()  # the client goes away
            await s.wait_for(lambda: len(d.cancelled) == 1)
            assert d.cancelled == [rid(d)]
            await s.wait_for(lambda: s.router.metrics.disconnects._value.get() == 1)
    run(go())


def test_client_disconnect_during_prefill_cancels_the_prefill_leg_and_skips_decode():
    async def go():
        async with stack() as s:
            p = await s.engine("p0", "prefill", prefill_delay=3600)
            d = await s.engine("d0", "decode")
            await s.start_router(prefill=[("p0", "")], decode=[("d0", "")])
            async with aiohttp.ClientSession() as c:
                task = asyncio.ensure_future(c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}))
                await s.wait_for(lambda: len(p.requests) == 1)
                task.cancel()  # closes the client's connection
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await s.wait_for(lambda: len(p.cancelled) == 1)
            assert d.requests == []
    run(go())


def test_decode_unreachable_gives_an_openai_error():
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            await s.start_router(RouterConfig(fallback=False), prefill=[("p0", "")], decode=[("dead", "")])
            async with aiohttp.ClientSession() as c:
                async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x", "stream": True}) as r:
                    assert r.status == 502
                    err = (await r.json())["error"]
            assert "decode endpoint" in err["message"] and err["type"] == "server_error"
    run(go())


def test_decode_dying_mid_stream_with_resumption_off_ends_the_stream_with_an_error_event():
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            await s.engine("d0", "decode", tokens=10, drop_after=3)
            await s.start_router(RouterConfig(resume=False), prefill=[("p0", "")], decode=[("d0", "")])
            async with aiohttp.ClientSession() as c:
                async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x", "stream": True}) as r:
                    assert r.status == 200
                    raw = await r.read()
            events = [e for e in raw.decode().split("\n\n") if e]
            assert len(events) == 4 and "[DONE]" not in raw.decode()
            err = json.loads(events[-1][len("data: "):])["error"]
            assert "decode endpoint d0" in err["message"] and err["code"] == 502
            assert s.router.metrics.decode_errors._value.get() == 1
    run(go())


def test_prefill_timeout_is_retried_then_reported():
    async def go():
        async with stack() as s:
            p = await s.engine("p0", "prefill", prefill_delay=3600)
            await s.engine("d0", "decode")
            await s.start_router(RouterConfig(prefill_timeout=0.2, prefill_retries=1),
                                 prefill=[("p0", "")], decode=[("d0", "")])
            async with aiohttp.ClientSession() as c:
                async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}) as r:
                    assert r.status == 504
                    assert "timed out" in (await r.json())["error"]["message"]
            await s.wait_for(lambda: len(p.cancelled) == 1)  # the timed-out leg was closed
    run(go())


def test_body_limit_bad_json_and_no_endpoints():
    async def go():
        async with stack() as s:
            await s.start_router(RouterConfig(max_body_bytes=1000))
            async with aiohttp.ClientSession() as c:
                async with c.post(s.url + "/v1/completions", json={"prompt": "x" * 2000}) as r:
                    assert r.status == 413
                    assert (await r.json())["error"]["code"] == "request_too_large"
                async with c.post(s.url + "/v1/completions", data=b"{not json",
                                  headers={"Content-Type": "application/json"}) as r:
                    assert r.status == 400 and (await r.json())["error"]["type"] == "invalid_request_error"
                async with c.post(s.url + "/v1/completions", json=[1, 2]) as r:
                    assert r.status == 400
                async with c.post(s.url + "/v1/completions", json={"prompt": "x"}) as r:
                    assert r.status == 503
                    assert "no ready prefill endpoint" in (await r.json())["error"]["message"]
                async with c.get(s.url + "/v1/models") as r:
                    assert r.status == 503
    run(go())


def test_json_bodies_keep_wide_integers_and_refuse_nan():
    wide = {"prompt": "x", "seed": 2**70, "logit_bias": {"7": -100}, "temperature": 0.5, "text": "é ✓"}
    raw = json.dumps(wide).encode()
    assert loads(raw) == wide  # beyond orjson's 64-bit integers: the standard library takes over
    assert json.loads(dumps(loads(raw))) == wide
    assert json.loads(dumps({"a": [1, 2.5, None, True]})) == {"a": [1, 2.5, None, True]}
    for bad in (b'{"temperature": NaN}', b'{"x": Infinity}', b"{not json", b""):
        with pytest.raises(ValueError):
            loads(bad)


def test_wide_integer_fields_reach_both_legs_unchanged():
    async def go():
        async with stack() as s:
            p0 = await s.engine("p0", "prefill")
            d0 = await s.engine("d0", "decode")
            await s.start_router(prefill=[("p0", "h")], decode=[("d0", "h")])
            async with aiohttp.ClientSession() as c:
                async with c.post(s.url + "/v1/completions", data=json.dumps(
                        {"prompt": "x", "max_tokens": 2, "seed": 2**70}).encode(),
                        headers={"Content-Type": "application/json"}) as r:
                    assert r.status == 200, await r.text()
            assert bodies(p0)[-1]["seed"] == 2**70 and bodies(d0)[-1]["seed"] == 2**70
    run(go())


def test_models_health_and_metrics():
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            d = await s.engine("d0", "decode")
            await s.start_router(prefill=[("p0", "")], decode=[("d0", "")])
            async with aiohttp.ClientSession() as c:
                async with c.get(s.url + "/v1/models", headers={"Authorization": "Bearer k"}) as r:
                    assert r.status == 200 and (await r.json())["data"][0]["id"] == "fake-model"
                assert d.requests[-1][0]["Authorization"] == "Bearer k"
                async with c.get(s.url + "/health") as r:
                    assert await r.json() == {"status": "ok", "mode": "pull", "synced": True, "prefill": 1,
                                              "decode": 1, "pairs": 1, "fallback": None}
                async with c.get(s.url + "/ready") as r:
                    assert r.status == 200 and await r.json() == {"ready": True, "pairs": 1, "fallback": None}
                async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}) as r:
                    assert r.status == 200
                async with c.get(s.url + "/metrics") as r:
                    text = await r.text()
            assert 'pdd_router_requests_total{code="200",route="/v1/completions"} 1.0' in text
            assert 'pdd_router_endpoints{role="decode"} 1.0' in text
    run(go())


def test_ready_only_when_a_request_could_be_routed():
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill", kv_port=0)  # publishes no side channel: unusable for push
            await s.engine("d0", "decode")
            synced = [False]
            await s.start_router(RouterConfig(mode="push"), prefill=[("p0", "h1")], decode=[("d0", "h2")])
            s.router.synced = lambda: synced[0]

            async def ready() -> tuple[int, dict]:
                async with aiohttp.ClientSession() as c, c.get(s.url + "/ready") as r:
                    return r.status, await r.json()

            assert await ready() == (503, {"ready": False, "reason": "the engine pods have not been listed yet"})
            synced[0] = True
            status, body = await ready()
            assert status == 503 and "same compat hash" in body["reason"]  # h1 vs h2: nothing pairs
            s.registry.replace("decode", [Endpoint(url=s.urls["d0"], role="decode", compat_hash="h1", name="d0")])
            status, body = await ready()
            assert status == 503 and "side channel" in body["reason"]  # pairs, but not for push
            s.router.config = RouterConfig(mode="pull")
            assert await ready() == (200, {"ready": True, "pairs": 1, "fallback": None})
            s.registry.replace("prefill", [])
            # decode can serve alone (the default fallback) and says so; without fallback, nothing can.
            assert await ready() == (200, {"ready": True, "pairs": 0, "fallback": {
                "role": "decode", "reason": "no ready prefill endpoint"}})
            s.router.config = RouterConfig(mode="pull", fallback=False)
            assert await ready() == (503, {"ready": False, "reason": "no ready prefill endpoint"})
    run(go())


# -- push mode -------------------------------------------------------------------------------------


def test_push_mode_learns_the_engine_id_from_prefill_then_sends_both_legs_with_prefill_coordinates():
    async def go():
        async with stack() as s:
            p = await s.engine("p0", "prefill", engine_id="engine-p0", kv_port=5601, tp_size=4, prefill_delay=0.2)
            d = await s.engine("d0", "decode", push=True, tokens=3)
            await s.start_router(RouterConfig(mode="push"), prefill=[("p0", "")], decode=[("d0", "")])
            async with aiohttp.ClientSession() as c:
                for _ in range(2):
                    async with c.post(s.url + "/v1/completions",
                                      json={"model": "m", "prompt": "x", "stream": True}) as r:
                        assert r.status == 200
                        assert (await r.read()).endswith(b"data: [DONE]\n\n")
            (pb1, pb2), (db1, db2) = bodies(p), bodies(d)
            assert pb1["kv_transfer_params"] == pb2["kv_transfer_params"] == PULL_PREFILL_PARAMS
            assert pb2["max_tokens"] == 1
            # First request: the engine id is unknown, so prefill ran first and decode got its answer's
            # kv_transfer_params, as in pull mode (sent only after prefill answered).
            assert db1["kv_transfer_params"] == s.issued[rid(p, 0)]
            assert rid(d, 0) == rid(p, 0)
            # Then both legs at once, decode told the engine id prefill reported.
            request_id = rid(p)
            assert rid(d) == request_id
            assert db2["kv_transfer_params"] == {
                "do_remote_decode": False, "do_remote_prefill": True, "remote_engine_id": "engine-p0",
                "remote_host": "127.0.0.1", "remote_port": 5601, "tp_size": 4, "pp_size": 1,
                "remote_request_id": request_id,
            }
    run(go())


def test_push_mode_prefill_failure_cancels_decode_and_retries():
    async def go():
        async with stack() as s:
            bad = await s.engine("bad", "prefill", engine_id="bad", fail_status=503)
            good = await s.engine("good", "prefill", engine_id="good")
            # like vLLM's push decode, the fake decode answers only after its prefill has succeeded
            d = await s.engine("d0", "decode", push=True, tokens=2)
            await s.start_router(RouterConfig(mode="push"), prefill=[("bad", ""), ("good", "")], decode=[("d0", "")])
            s.learned()  # both legs at once from the first request on
            async with aiohttp.ClientSession() as c:
                for _ in range(6):
                    async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}) as r:
                        assert r.status == 200
                        assert (await r.json())["choices"][0]["text"] == "tok tok "
            assert bad.requests, "the seeded choice should have tried the failing prefill"
            await s.wait_for(lambda: len(d.cancelled) == len(bad.requests))
            ok = [b["kv_transfer_params"]["remote_engine_id"] for b in bodies(d)]
            assert ok.count("good") == 6 and ok.count("bad") == len(bad.requests)
            assert len(good.requests) == 6
    run(go())


def test_push_mode_a_decode_that_refuses_the_connection_is_replaced_and_its_prefill_leg_cancelled():
    async def go():
        async with stack() as s:
            # prefill answers after 0.3 s: its leg is still running when the refused decode is noticed
            p = await s.engine("p0", "prefill", engine_id="engine-p0", kv_port=5601, prefill_delay=0.3)
            good = await s.engine("good", "decode", push=True, tokens=2)
            # "dead" is a port nobody listens on: a decode process that just died, still listed.
            await s.start_router(RouterConfig(mode="push"), prefill=[("p0", "")], decode=[("dead", ""), ("good", "")])
            s.learned()
            async with aiohttp.ClientSession() as c:
                for _ in range(12):
                    async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}) as r:
                        assert r.status == 200, await r.text()
                        assert (await r.json())["choices"][0]["text"] == "tok tok "
            retries = s.router.metrics.decode_retries._value.get()
            assert retries > 0  # the seeded choice tried "dead"
            assert len(good.requests) == 12
            # Each prefill leg sent along with the dead decode was cancelled (vLLM aborts it), none answered twice.
            assert len(p.requests) == 12 + retries
            await s.wait_for(lambda: len(p.cancelled) == retries)
    run(go())


def test_push_mode_a_restarted_prefill_is_used_only_once_its_new_engine_id_is_learned():
    """A prefill process that died and came back on the same address draws a new engine id (vLLM's
    default; the operator pins none). The connection failure makes the router forget the old id, and
    decode is never told it again: the next request runs prefill first and learns the new one."""
    async def go():
        async with stack() as s:
            old = await s.engine("p0", "prefill", engine_id="engine-old", kv_port=5601)
            d = await s.engine("d0", "decode", push=True, tokens=2)
            await s.start_router(RouterConfig(mode="push", prefill_retries=0, fallback=False), prefill=[("p0", "")],
                                 decode=[("d0", "")])
            (ep,) = s.registry.endpoints("prefill")
            port = int(s.urls["p0"].rsplit(":", 1)[1])

            async def post(c) -> int:
                async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}) as r:
                    return r.status

            async with aiohttp.ClientSession() as c:
                assert [await post(c) for _ in range(3)] == [200, 200, 200]
                assert ep.engine_id == "engine-old"
                await s.runners.pop(0).cleanup()  # the prefill process dies
                assert await post(c) == 502  # refused, and no other prefill
                assert ep.engine_id is None
                new = FakeEngine(role="prefill", engine_id="engine-new", kv_port=5601, issued=s.issued,
                                 changed=s.changed)
                runner, _ = await serve(new, port=port)  # it comes back on the same address
                s.runners.append(runner)
                assert [await post(c) for _ in range(3)] == [200, 200, 200]
            # The decode leg sent along with the refused prefill leg was cancelled (vLLM aborts it).
            await s.wait_for(lambda: len(d.cancelled) == 1)
            told = [b["kv_transfer_params"]["remote_engine_id"] for h, b in d.requests
                    if h["X-Request-Id"] not in d.cancelled]
            assert told == ["engine-old"] * 3 + ["engine-new"] * 3, told
            assert len(old.requests) == 3 and len(new.requests) == 3
            assert ep.engine_id == "engine-new"
            assert s.router.metrics.engine_id_changes._value.get() == 0
    run(go())


def test_push_mode_an_unseen_engine_id_change_costs_one_request_and_is_counted():
    """A process replaced without the router seeing a failure (nor, in a cluster, a restart count):
    decode was told the old id for that one request and fails it (the fake decode, like vLLM's, checks
    the id against the engine that served prefill); the answer teaches the router the new id."""
    async def go():
        async with stack() as s:
            p = await s.engine("p0", "prefill", engine_id="engine-a", kv_port=5601)
            await s.engine("d0", "decode", push=True, tokens=2)
            await s.start_router(RouterConfig(mode="push"), prefill=[("p0", "")], decode=[("d0", "")])
            async with aiohttp.ClientSession() as c:
                statuses = []
                for engine_id in ("engine-a", "engine-a", "engine-b", "engine-b", "engine-b"):
                    p.engine_id = engine_id
                    async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}) as r:
                        statuses.append(r.status)
            assert statuses == [200, 200, 400, 200, 200], statuses
            assert s.router.metrics.engine_id_changes._value.get() == 1
    run(go())


def test_push_mode_no_reachable_decode_gives_the_502():
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill", engine_id="engine-p0", kv_port=5601)
            await s.start_router(RouterConfig(mode="push", fallback=False), prefill=[("p0", "")],
                                 decode=[("dead", ""), ("dead2", "")])
            async with aiohttp.ClientSession() as c:
                async with c.post(s.url + "/v1/completions", json={"model": "m", "prompt": "x"}) as r:
                    assert r.status == 502
                    assert "decode endpoint" in (await r.json())["error"]["message"]
    run(go())


# -- static endpoints --------------------------------------------------------------------------------


def test_parse_static_endpoints():
    # engine_id (needed by earlier releases) is ignored: the router learns it from the engine
    ep = parse_static("prefill", "http://10.0.0.1:8100?engine_id=p0&kv_host=10.0.0.1&kv_port=5600&tp=2&pp=2")
    assert (ep.url, ep.engine_id, ep.kv_host, ep.kv_port, ep.tp_size, ep.pp_size) == (
        "http://10.0.0.1:8100", None, "10.0.0.1", 5600, 2, 2)
    ep.engine_id = "p0"
    assert parse_static("decode", " http://[::1]:8200 ").url == "http://[::1]:8200"
    with pytest.raises(ValueError):
        parse_static("decode", "10.0.0.1:8200")
    assert push_decode_params(ep, "r")["pp_size"] == 2


# -- connections to the engines ------------------------------------------------------------------


def test_router_closes_an_idle_engine_connection_before_vllm_keep_alive_would():
    """vLLM's API server closes a connection idle for 5 s (``VLLM_HTTP_TIMEOUT_KEEP_ALIVE``); a router that
    reuses one later races that close and fails a request on a healthy engine. The engine here never closes:
    the router itself must drop its idle connection, well before the 30 s its pool kept one before (aiohttp's default: 15 s)."""
    from pdd_operator.router.proxy import ENGINE_KEEPALIVE_S

    assert ENGINE_KEEPALIVE_S < 5  # vllm/envs.py VLLM_HTTP_TIMEOUT_KEEP_ALIVE default (0.26.0, 0.32.0)
    body = b'{"object": "list", "data": [{"id": "m", "object": "model"}]}'

    async def go():
        closed_by_router = asyncio.Event()
        served = []

        async def engine(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            served.append(head.split(b"\r\n", 1)[0])
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            await reader.read()  # keep-alive, never closed from this side: returns at the router's close
            closed_by_router.set()
            writer.close()

        server = await asyncio.start_server(engine, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with stack() as s:
                s.urls["d0"] = f"http://127.0.0.1:{port}"
                await s.start_router(decode=[("d0", "h")])
                async with aiohttp.ClientSession() as c, c.get(s.url + "/v1/models") as r:
                    assert r.status == 200 and (await r.json())["data"][0]["id"] == "m"
                assert served == [b"GET /v1/models HTTP/1.1"]
                await asyncio.wait_for(closed_by_router.wait(), timeout=20)
        finally:
            server.close()
            await server.wait_closed()
    run(go())
