"""The router's fallback: one role serves requests alone while the other has no usable endpoint.

Against the in-process fake engines of :mod:`tests.unit.test_router`: a fake of either role serves a
plain request (no ``kv_transfer_params``) whole and counts it in ``plain``, and a fake decode still
answers 400 to a request whose KV hand-off was dropped, so every 200 here says which path ran.
"""

from __future__ import annotations

import logging

import aiohttp
import pytest

from pdd_operator.router.endpoints import Endpoint, NoEndpoint, Registry
from pdd_operator.router.proxy import FALLBACK_HEADER, RouterConfig
from tests.unit.test_router import bodies, run, stack

pytestmark = pytest.mark.timeout(60)


def fallback_count(router, reason: str, role: str) -> float:
    return router.metrics.fallback.labels(reason, role)._value.get()


async def post(s, c, **extra) -> tuple[int, str | None, dict | str]:
    body = {"model": "m", "prompt": "hello", "max_tokens": 3, **extra}
    async with c.post(s.url + "/v1/completions", json=body) as r:
        payload = await r.text() if extra.get("stream") else await r.json()
        return r.status, r.headers.get(FALLBACK_HEADER), payload


def test_no_ready_prefill_decode_serves_the_plain_request_alone():
    async def go():
        async with stack() as s:
            d = await s.engine("d0", "decode", tokens=8)
            await s.start_router(decode=[("d0", "h")])
            async with aiohttp.ClientSession() as c:
                # a client's own kv_transfer_params are not passed on: decode must not wait for remote KV
                status, header, answer = await post(s, c, kv_transfer_params={"do_remote_prefill": True})
                assert (status, header) == (200, "decode-only"), answer
                assert answer["choices"][0]["text"] == "tok " * 3
                status, header, text = await post(s, c, stream=True)
                assert (status, header) == (200, "decode-only") and text.endswith("data: [DONE]\n\n")
            assert d.plain == 2 and all("kv_transfer_params" not in b for b in bodies(d))
            assert fallback_count(s.router, "no_ready", "decode") == 2
    run(go())


def test_no_ready_decode_prefill_serves_the_plain_request_alone():
    async def go():
        async with stack() as s:
            p = await s.engine("p0", "prefill", tokens=4)
            await s.start_router(prefill=[("p0", "h")])
            async with aiohttp.ClientSession() as c:
                status, header, answer = await post(s, c)
            assert (status, header) == (200, "prefill-only"), answer
            assert answer["choices"][0]["text"] == "tok " * 3
            assert p.plain == 1 and bodies(p)[0]["max_tokens"] == 3  # the whole request, not a prefill leg
            assert fallback_count(s.router, "no_ready", "prefill") == 1
    run(go())


def test_refused_prefills_fall_back_to_decode_and_pairs_serve_again_once_one_is_back(caplog):
    """Every prefill refusing the connection (a killed process its pod still lists) falls back like
    none Ready, and while all are set aside they are not tried again for each request; the transition
    is logged once each way, and /ready reports it meanwhile."""
    async def go():
        async with stack() as s:
            d = await s.engine("d0", "decode")
            await s.start_router(RouterConfig(unreachable_seconds=600), prefill=[("dead", "h"), ("dead2", "h")],
                                 decode=[("d0", "h")])
            async with aiohttp.ClientSession() as c:
                for _ in range(3):
                    status, header, answer = await post(s, c)
                    assert (status, header) == (200, "decode-only"), answer
                async with c.get(s.url + "/ready") as r:
                    assert r.status == 200
                    assert (await r.json())["fallback"] == {
                        "role": "decode", "reason": "every prefill endpoint refused the connection"}
                p = await s.engine("p0", "prefill")
                s.registry.replace("prefill", [Endpoint(url=s.urls["p0"], role="prefill", compat_hash="h", name="p0")])
                for _ in range(2):
                    status, header, answer = await post(s, c)
                    assert (status, header) == (200, None), answer
                async with c.get(s.url + "/ready") as r:
                    assert (await r.json())["fallback"] is None
            assert d.plain == 3 and len(bodies(p)) == 2
            # only the first request tried the refusing prefills; the next ones went to decode at once
            assert s.router.metrics.set_aside._value.get() == 2
            assert fallback_count(s.router, "refused", "decode") == 3
            assert fallback_count(s.router, "no_ready", "decode") == 0
    with caplog.at_level(logging.WARNING, logger="pdd_operator.router"):
        run(go())
    assert sum("serve requests alone" in m for m in caplog.messages) == 1
    assert sum("P/D pairs serve again" in m for m in caplog.messages) == 1


def test_refused_decodes_after_prefill_fall_back_to_a_prefill_engine():
    async def go():
        async with stack() as s:
            p = await s.engine("p0", "prefill")
            await s.start_router(prefill=[("p0", "h")], decode=[("dead", "h")])
            async with aiohttp.ClientSession() as c:
                status, header, answer = await post(s, c)
            assert (status, header) == (200, "prefill-only"), answer
            assert len(bodies(p)) == 2 and p.plain == 1  # the prefill leg, then the whole request
            assert fallback_count(s.router, "refused", "prefill") == 1
    run(go())


def test_a_prefill_that_answers_an_error_is_not_replaced_by_decode():
    """Only a prefill the request never reached counts as unusable: a 5xx is the engine's own answer."""
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill", fail_status=500)
            d = await s.engine("d0", "decode")
            await s.start_router(RouterConfig(prefill_retries=0), prefill=[("p0", "h")], decode=[("d0", "h")])
            async with aiohttp.ClientSession() as c:
                status, header, _ = await post(s, c)
            assert (status, header) == (502, None) and d.requests == []
    run(go())


def test_fallback_off_fails_as_before():
    async def go():
        async with stack() as s:
            d = await s.engine("d0", "decode")
            await s.start_router(RouterConfig(fallback=False), prefill=[("dead", "h")], decode=[("d0", "h")])
            async with aiohttp.ClientSession() as c:
                status, header, _ = await post(s, c)
                assert (status, header) == (502, None)
                s.registry.replace("prefill", [])
                status, header, answer = await post(s, c)
                assert (status, header) == (503, None) and answer["error"]["message"] == "no ready prefill endpoint"
            assert d.requests == []
            assert fallback_count(s.router, "no_ready", "decode") == 0
    run(go())


def test_push_mode_falls_back_both_ways():
    async def go():
        async with stack() as s:
            d = await s.engine("d0", "decode", push=True)
            await s.start_router(RouterConfig(mode="push"), prefill=[("dead", "h")], decode=[("d0", "h")])
            (dead,) = s.registry.endpoints("prefill")
            dead.kv_host, dead.kv_port, dead.engine_id = "127.0.0.1", 5601, "engine-dead"
            async with aiohttp.ClientSession() as c:
                status, header, answer = await post(s, c)
                assert (status, header) == (200, "decode-only"), answer
                s.registry.replace("prefill", [])
                status, header, answer = await post(s, c)
                assert (status, header) == (200, "decode-only"), answer
            assert d.plain == 2
            assert fallback_count(s.router, "refused", "decode") == 1
            assert fallback_count(s.router, "no_ready", "decode") == 1
        async with stack() as s:
            p = await s.engine("p0", "prefill", engine_id="engine-p0", kv_port=5601)
            await s.start_router(RouterConfig(mode="push"), prefill=[("p0", "h")], decode=[("dead", "h")])
            s.learned()
            async with aiohttp.ClientSession() as c:
                status, header, answer = await post(s, c)
            assert (status, header) == (200, "prefill-only"), answer
            assert p.plain == 1 and fallback_count(s.router, "refused", "prefill") == 1
    run(go())


def test_fallback_keeps_the_pairing_rule():
    """While the missing role still has endpoints (refusing), only engines of their compat hash serve
    alone; with none at all, any may; an engine of another hash is never used."""
    reg = Registry()
    reg.replace("prefill", [Endpoint(url="http://p", role="prefill", compat_hash="new")])
    reg.replace("decode", [Endpoint(url="http://old", role="decode", compat_hash="old"),
                           Endpoint(url="http://new", role="decode", compat_hash="new")])
    assert {reg.pick_alone("decode").url for _ in range(20)} == {"http://new"}
    with pytest.raises(NoEndpoint) as exc:
        reg.pick_alone("decode", exclude={"http://new"})
    assert exc.value.missing == "decode" and "new" in str(exc.value)
    reg.replace("prefill", [])
    assert {reg.pick_alone("decode").url for _ in range(40)} == {"http://old", "http://new"}
    with pytest.raises(NoEndpoint):
        reg.pick_alone("prefill")


def test_an_engine_serving_alone_that_refuses_is_replaced():
    async def go():
        async with stack() as s:
            d = await s.engine("d0", "decode")
            await s.start_router(decode=[("dead", "h"), ("d0", "h")])
            s.registry.endpoints("decode")[1].outstanding = 1  # so the dead one is chosen first
            async with aiohttp.ClientSession() as c:
                for _ in range(4):
                    status, header, answer = await post(s, c)
                    assert (status, header) == (200, "decode-only"), answer
            assert d.plain == 4 and s.router.metrics.set_aside._value.get() == 1
            assert fallback_count(s.router, "no_ready", "decode") == 4
    run(go())


def test_spec_router_fallback_reaches_the_router_process():
    """``spec.router.fallback`` (default true) renders as the router's ``--fallback`` flag (default on)
    and ``--no-fallback``, which :func:`pdd_operator.router.server.build` turns into the config."""
    import argparse

    from pdd_operator.render.workloads import Owner, render_children
    from pdd_operator.router.server import add_arguments, build
    from tests.helpers import make_spec

    def command(**router) -> list[str]:
        children = {(c["kind"], c["metadata"]["name"]): c
                    for c in render_children(Owner(name="demo", namespace="ns"), make_spec(router=router))}
        return children[("Deployment", "demo-router")]["spec"]["template"]["spec"]["containers"][0]["command"]

    p = argparse.ArgumentParser()
    add_arguments(p)
    static = ["--static-prefill", "http://p:1", "--static-decode", "http://d:1"]
    for router, on in (({}, True), ({"fallback": True}, True), ({"fallback": False}, False)):
        cmd = command(**router)
        assert cmd[:2] == ["pdd", "router"] and ("--no-fallback" in cmd) is not on
        assert p.parse_args(cmd[2:]).fallback is on
        flags = [] if on else ["--no-fallback"]
        assert build(p.parse_args(static + flags))[0].config.fallback is on
