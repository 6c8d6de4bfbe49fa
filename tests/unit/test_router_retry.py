"""The router's retries: a request whose engine failed before the client got a byte is sent again once.

The decision is a pure function (:mod:`pdd_operator.router.retry`), tested on its own; then the router
against the in-process fakes of :mod:`tests.unit.test_router`, which die on cue (``die_before``). The
fake decode answers 400 unless it got exactly the ``kv_transfer_params`` prefill issued for its
``X-Request-Id``, so a 200 after a retry proves the retry ran a new prefill leg under a new id.
"""

from __future__ import annotations

import aiohttp
import pytest

from pdd_operator.router.proxy import FALLBACK_HEADER, RouterConfig
from pdd_operator.router.retry import (
    CONNECT_FAILURE,
    GATEWAY_ERROR,
    RESET,
    RETRIABLE_STATUS,
    RETRY_HEADER,
    TIMEOUT,
    failure_reason,
    may_retry,
)
from tests.unit.test_router import bodies, rid, run, stack

pytestmark = pytest.mark.timeout(60)


def _connector_error() -> aiohttp.ClientConnectorError:
    key = aiohttp.client_reqrep.ConnectionKey("h", 1, False, True, None, None, None)
    return aiohttp.ClientConnectorError(key, ConnectionRefusedError(111, "refused"))


@pytest.mark.parametrize(("role", "status", "error", "want"), [
    ("decode", None, _connector_error(), CONNECT_FAILURE),
    ("decode", None, aiohttp.ServerDisconnectedError(), RESET),
    ("decode", None, aiohttp.ClientPayloadError("Response payload is not completed"), RESET),
    ("decode", None, aiohttp.ClientOSError(104, "Connection reset by peer"), RESET),
    ("prefill", None, ConnectionResetError(), RESET),
    ("decode", None, TimeoutError(), TIMEOUT),
    ("decode", None, aiohttp.SocketTimeoutError(), TIMEOUT),
    ("decode", None, ValueError("not the transport's"), None),
    ("decode", 502, None, GATEWAY_ERROR),
    ("decode", 503, None, GATEWAY_ERROR),
    ("prefill", 504, None, GATEWAY_ERROR),
    ("prefill", 429, None, RETRIABLE_STATUS),
    ("prefill", 500, None, RETRIABLE_STATUS),
    ("decode", 500, None, None),  # decode's verdict on the request
    ("decode", 429, None, None),
    ("decode", 400, None, None),
    ("prefill", 404, None, None),
    ("decode", 200, None, None),
])
def test_failure_reason(role, status, error, want):
    assert failure_reason(role, status=status, error=error) == want


@pytest.mark.parametrize(("reason", "got_bytes", "retries", "elapsed", "want"), [
    (RESET, False, 0, 0.5, True),
    (GATEWAY_ERROR, False, 0, 0.5, True),
    (CONNECT_FAILURE, False, 0, 0.5, True),
    (RESET, True, 0, 0.5, False),  # never once the client has a byte
    (RESET, False, 1, 0.5, False),  # one retry
    (RESET, False, 0, 30.0, False),  # the deadline
    (TIMEOUT, False, 0, 0.5, False),  # the engine may still be working on it
    (None, False, 0, 0.5, False),
])
def test_may_retry(reason, got_bytes, retries, elapsed, want):
    assert may_retry(reason, client_got_bytes=got_bytes, retries=retries, max_retries=1, elapsed=elapsed,
                     deadline=30.0) is want
    assert may_retry(reason, client_got_bytes=got_bytes, retries=retries, max_retries=0, elapsed=elapsed,
                     deadline=30.0) is False  # retries 0: off


def retries(router, role: str, reason: str) -> float:
    return router.metrics.retries.labels(role, reason)._value.get()


async def complete(s, c, stream: bool = False) -> tuple[int, dict, str]:
    body = {"model": "m", "prompt": "hello", "max_tokens": 10, "stream": stream}
    async with c.post(s.url + "/v1/completions", json=body) as r:
        return r.status, r.headers.copy(), await r.text()


def _first_choice(s, name: str) -> None:
    """Make ``name`` the decode the first try picks: power of two choices takes the less loaded one."""
    for ep in s.registry.endpoints("decode"):
        if ep.name != name:
            ep.outstanding = 10**6


@pytest.mark.parametrize(("die_before", "stream"), [("head", False), ("head", True), ("first_token", True)])
def test_a_decode_that_dies_before_the_client_got_a_byte_is_retried_as_a_new_pd_request(die_before, stream):
    async def go():
        async with stack() as s:
            p = await s.engine("p0", "prefill")
            dead = await s.engine("dead", "decode", die_before=die_before)
            good = await s.engine("good", "decode")
            await s.start_router(prefill=[("p0", "h")], decode=[("dead", "h"), ("good", "h")])
            _first_choice(s, "dead")
            async with aiohttp.ClientSession() as c:
                status, headers, text = await complete(s, c, stream)
            assert status == 200, text
            assert text.endswith("data: [DONE]\n\n") if stream else '"text"' in text
            assert headers[RETRY_HEADER] == "decode=reset" and FALLBACK_HEADER not in headers
            # a new prefill leg under a new request id, whose KV the good decode got
            assert len(bodies(p)) == 2 and rid(p, 0) != rid(p, 1)
            assert rid(dead) == rid(p, 0) and rid(good) == rid(p, 1) == headers["X-Request-Id"]
            assert retries(s.router, "decode", RESET) == 1
            [dead_ep] = [e for e in s.registry.endpoints("decode") if e.name == "dead"]
            assert dead_ep.unreachable_until > 0  # set aside: chosen last for a while
    run(go())


def test_the_only_decode_answering_503_the_prefill_serves_alone_as_the_retry():
    async def go():
        async with stack() as s:
            p = await s.engine("p0", "prefill")
            bad = await s.engine("bad", "decode", fail_status=503)
            await s.start_router(prefill=[("p0", "h")], decode=[("bad", "h")])
            async with aiohttp.ClientSession() as c:
                status, headers, text = await complete(s, c, stream=True)
            assert status == 200 and text.endswith("data: [DONE]\n\n"), text
            assert headers[FALLBACK_HEADER] == "prefill-only" and headers[RETRY_HEADER] == "decode=gateway_error"
            assert len(bad.requests) == 1 and p.plain == 1
            assert retries(s.router, "decode", GATEWAY_ERROR) == 1
    run(go())


def test_with_resumption_off_a_decode_dying_mid_stream_is_not_retried():
    """(With resumption on, it is continued: tests/unit/test_router_resume.py.)"""
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            await s.engine("d0", "decode", tokens=10, drop_after=3)
            await s.engine("d1", "decode")
            await s.start_router(RouterConfig(resume=False), prefill=[("p0", "h")], decode=[("d0", "h")])
            async with aiohttp.ClientSession() as c:
                status, headers, text = await complete(s, c, stream=True)
            assert status == 200 and '"error"' in text and "[DONE]" not in text
            assert RETRY_HEADER not in headers and not s.router.metrics.retries._metrics
    run(go())


@pytest.mark.parametrize("config", [RouterConfig(retries=0), RouterConfig(retry_deadline=0)])
def test_retries_off_or_past_the_deadline_the_client_gets_the_failure(config):
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            dead = await s.engine("dead", "decode", die_before="head")
            await s.engine("good", "decode")
            await s.start_router(config, prefill=[("p0", "h")], decode=[("dead", "h")])
            async with aiohttp.ClientSession() as c:
                status, headers, text = await complete(s, c)
            assert status == 502 and "decode endpoint dead" in text and RETRY_HEADER not in headers
            assert len(dead.requests) == 1 and not s.router.metrics.retries._metrics
    run(go())


def test_one_retry_only():
    """Both decodes die with the request in hand: the second failure is the client's answer."""
    async def go():
        async with stack() as s:
            p = await s.engine("p0", "prefill")
            d0 = await s.engine("d0", "decode", die_before="head")
            d1 = await s.engine("d1", "decode", die_before="head")
            await s.start_router(RouterConfig(fallback=False), prefill=[("p0", "h")], decode=[("d0", "h"), ("d1", "h")])
            async with aiohttp.ClientSession() as c:
                status, headers, text = await complete(s, c)
            assert status == 502, text
            assert headers[RETRY_HEADER] == "decode=reset"
            assert len(d0.requests) + len(d1.requests) == 2 and len(d0.requests) == len(d1.requests) == 1
            assert len(bodies(p)) == 2 and retries(s.router, "decode", RESET) == 1
    run(go())


def test_the_only_prefill_dying_with_the_leg_in_hand_decode_serves_alone():
    async def go():
        async with stack() as s:
            p = await s.engine("p0", "prefill", die_before="head")
            d = await s.engine("d0", "decode")
            await s.start_router(prefill=[("p0", "h")], decode=[("d0", "h")])
            async with aiohttp.ClientSession() as c:
                status, headers, text = await complete(s, c, stream=True)
                assert status == 200 and text.endswith("data: [DONE]\n\n"), text
                assert headers[FALLBACK_HEADER] == "decode-only" and headers[RETRY_HEADER] == "prefill=reset"
                assert s.router.metrics.fallback.labels("failed", "decode")._value.get() == 1
            assert len(p.requests) == 1 and d.plain == 1
    run(go())

    async def off():  # without retries, the client gets the prefill's failure (as before)
        async with stack() as s:
            await s.engine("p0", "prefill", die_before="head")
            d = await s.engine("d0", "decode")
            await s.start_router(RouterConfig(retries=0), prefill=[("p0", "h")], decode=[("d0", "h")])
            async with aiohttp.ClientSession() as c:
                status, headers, text = await complete(s, c)
            assert status == 502 and "prefill endpoint p0" in text and d.requests == []
    run(off())


def test_push_mode_a_decode_dying_before_its_first_token_is_retried_with_both_legs_again():
    async def go():
        async with stack() as s:
            p = await s.engine("p0", "prefill")
            dead = await s.engine("dead", "decode", push=True, die_before="first_token")
            good = await s.engine("good", "decode", push=True)
            await s.start_router(RouterConfig(mode="push"), prefill=[("p0", "h")],
                                 decode=[("dead", "h"), ("good", "h")])
            s.learned()
            _first_choice(s, "dead")
            async with aiohttp.ClientSession() as c:
                status, headers, text = await complete(s, c, stream=True)
            assert status == 200 and text.endswith("data: [DONE]\n\n"), text
            assert headers[RETRY_HEADER] == "decode=reset" and FALLBACK_HEADER not in headers
            assert len(bodies(p)) == 2 and rid(good) == rid(p, 1) == headers["X-Request-Id"] != rid(dead)
            # both attempts told decode prefill's coordinates, each under its own request id
            assert [b["kv_transfer_params"]["remote_request_id"] for b in bodies(dead) + bodies(good)] == [
                rid(dead), rid(good)]
    run(go())


def test_push_mode_a_prefill_dying_after_decode_had_the_kv_and_streamed_does_not_cut_the_stream():
    """Push decode streams only once prefill's KV arrived; prefill's own HTTP answer failing after that
    (its process killed before its request finished) costs the client nothing."""
    async def go():
        async with stack() as s:
            p = await s.engine("p0", "prefill", die_before="answer", answer_delay=1.0)
            d = await s.engine("d0", "decode", push=True, tokens=10, inter_token_delay=0.3)
            await s.start_router(RouterConfig(mode="push"), prefill=[("p0", "h")], decode=[("d0", "h")])
            s.learned()
            async with aiohttp.ClientSession() as c:
                status, headers, text = await complete(s, c, stream=True)
            assert status == 200 and text.endswith("data: [DONE]\n\n") and '"error"' not in text, text
            assert RETRY_HEADER not in headers and FALLBACK_HEADER not in headers
            assert len(p.requests) == len(d.requests) == 1
    run(go())
