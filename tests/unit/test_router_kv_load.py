"""A decode whose KV load failed: the router runs the request again through a new prefill leg.

vLLM (0.26.0 and 0.32.0, ``kv_load_failure_policy`` "fail", their default) answers a request whose prompt KV
could not be loaded from prefill with ``finish_reason="error"`` before any token: HTTP 500 and its
``GenerationError`` body, or, streamed, an error event (after chat's role-only chunk) and ``[DONE]``
(``pdd_operator/router/retry.py``'s docstring has the source). The pure classifier is tested on those bytes,
exactly as each version's own serializers wrote them; then the router against the fakes of
:mod:`tests.unit.test_router`, whose decode answers so for the KV of a prefill named in ``unreadable`` (a
prefill killed after answering its leg) and checks every ``kv_transfer_params`` it gets against what a
prefill issued for the same ``X-Request-Id``.
"""

from __future__ import annotations

import time

import aiohttp
import pytest

from pdd_operator.router.proxy import FALLBACK_HEADER, RouterConfig
from pdd_operator.router.retry import (
    ANSWER,
    HOLD,
    KV_LOAD_FAILED,
    RETRY_HEADER,
    RETRY_ON,
    kv_load_failed_answer,
    stream_start,
)
from tests.fakes.fake_engine import GENERATION_ERROR_BODY, GENERATION_ERROR_EVENT, vllm_role_chunk
from tests.unit.test_router import bodies, rid, run, stack

pytestmark = pytest.mark.timeout(60)

#: What the client of a decode gets for a failed KV load, per vLLM version: the bytes its own code wrote
#: (``create_error_response`` / ``JSONResponse``, ``ChatCompletionStreamResponse.model_dump_json(
#: exclude_unset=True)``, run from each wheel). They are equal in the two versions.
VLLM_BYTES = {
    version: {
        "whole": b'{"error":{"message":"Internal server error","type":"InternalServerError","param":null,"code":500}}',
        "event": b'data: {"error": {"message": "Internal server error", "type": "InternalServerError", '
                 b'"param": null, "code": 500}}\n\n',
        "role": b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"M","choices":'
                b'[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],'
                b'"prompt_token_ids":null,"prompt_text":null}\n\n',
    }
    for version in ("0.26.0", "0.32.0")
}
DONE = b"data: [DONE]\n\n"
TEXT = b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"M","choices":[{"index":0,"text":" Paris"}]}\n\n'
CHAT_TEXT = (b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"M","choices":'
             b'[{"index":0,"delta":{"content":" Paris"},"logprobs":null,"finish_reason":null}]}\n\n')


def test_the_fakes_send_vllms_bytes():
    want = VLLM_BYTES["0.32.0"]
    assert GENERATION_ERROR_BODY == want["whole"] and GENERATION_ERROR_EVENT == want["event"]
    assert vllm_role_chunk("1", 1, "M") == want["role"]


@pytest.mark.parametrize("version", sorted(VLLM_BYTES))
def test_a_whole_answer_is_a_failed_kv_load_only_as_vllms_500(version):
    whole = VLLM_BYTES[version]["whole"]
    assert kv_load_failed_answer(500, whole)
    assert not kv_load_failed_answer(502, whole)  # a gateway's, not vLLM's (retried as gateway_error)
    assert not kv_load_failed_answer(500, b'{"error":{"message":"EngineCore encountered an issue","type":'
                                          b'"InternalServerError","param":null,"code":500}}')
    assert not kv_load_failed_answer(500, b'{"error":{"message":"injected failure"}}')
    assert not kv_load_failed_answer(500, b"Internal Server Error")  # not JSON


@pytest.mark.parametrize("version", sorted(VLLM_BYTES))
@pytest.mark.parametrize("chat", [False, True])
def test_a_streams_error_event_before_any_text_is_a_failed_kv_load_at_every_read_boundary(version, chat):
    b = VLLM_BYTES[version]
    raw = (b["role"] if chat else b"") + b["event"] + DONE
    assert stream_start(raw) == KV_LOAD_FAILED
    for cut in range(len(raw)):  # however the reads split it, the router never relays it as an answer
        assert stream_start(raw[:cut]) in (HOLD, KV_LOAD_FAILED), cut
    assert stream_start(raw[:len(raw) - len(DONE)]) == KV_LOAD_FAILED


@pytest.mark.parametrize("version", sorted(VLLM_BYTES))
def test_a_stream_with_text_first_is_an_answer(version):
    b = VLLM_BYTES[version]
    assert stream_start(TEXT + b["event"] + DONE) == ANSWER  # an error after text reached the client is relayed
    assert stream_start(b["role"] + CHAT_TEXT + b["event"]) == ANSWER
    assert stream_start(b["role"]) == HOLD  # only the role chunk: not decided yet
    assert stream_start(DONE) == ANSWER
    assert stream_start(b": a comment\n\n" + b["event"]) == ANSWER  # not vLLM's framing
    assert stream_start(b'data: {"error": {"message": "boom", "type": "BadRequestError", "param": null, '
                        b'"code": 400}}\n\n') == ANSWER
    finished = (b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
                b'"finish_reason":"stop"}]}\n\n')
    assert stream_start(finished) == ANSWER
    assert stream_start(b"data: " + b"x" * (70 * 1024)) == ANSWER  # undecided too long: relayed
    assert KV_LOAD_FAILED in RETRY_ON


# -- the router --------------------------------------------------------------------------------------

def _first_choice(s, role: str, name: str) -> None:
    """Make ``name`` the ``role`` endpoint the first try picks: power of two choices takes the less loaded."""
    for ep in s.registry.endpoints(role):
        if ep.name != name:
            ep.outstanding = 10**6


def _endpoint(s, role: str, name: str):
    [ep] = [e for e in s.registry.endpoints(role) if e.name == name]
    return ep


async def _post(s, c, path: str, stream: bool) -> tuple[int, dict, bytes]:
    body = {"model": "m", "max_tokens": 5, "stream": stream}
    body.update({"messages": [{"role": "user", "content": "hi"}]} if path.endswith("chat/completions")
                else {"prompt": "hello"})
    async with c.post(s.url + path, json=body) as r:
        return r.status, r.headers.copy(), await r.read()


CASES = [("/v1/completions", False), ("/v1/completions", True), ("/v1/chat/completions", False),
         ("/v1/chat/completions", True)]


@pytest.mark.parametrize(("path", "stream"), CASES)
def test_a_failed_kv_load_runs_the_request_again_through_a_new_prefill_leg_on_another_prefill(path, stream):
    async def go():
        async with stack() as s:
            dead = await s.engine("p0", "prefill", engine_id="p0-engine")
            good = await s.engine("p1", "prefill", engine_id="p1-engine")
            d = await s.engine("d0", "decode", unreadable={"p0-engine"}, role_chunk=True)
            await s.start_router(prefill=[("p0", "h"), ("p1", "h")], decode=[("d0", "h")])
            _first_choice(s, "prefill", "p0")
            async with aiohttp.ClientSession() as c:
                status, headers, raw = await _post(s, c, path, stream)
            assert status == 200, raw
            assert b"error" not in raw and (raw.endswith(DONE) if stream else b"tok" in raw)
            assert headers[RETRY_HEADER] == "decode=kv_load_failed" and FALLBACK_HEADER not in headers
            # the retry: a new request id, a new prefill leg on the other prefill, whose KV (and only it) the
            # decode got; the fake decode answers 400 to kv_transfer_params no prefill issued for that id
            assert d.load_failures == 1 and len(bodies(d)) == 2
            assert rid(dead) == rid(d, 0) != rid(d, 1) == rid(good) == headers["X-Request-Id"]
            assert bodies(d)[1]["kv_transfer_params"]["remote_engine_id"] == "p1-engine"
            assert s.router.metrics.retries.labels("decode", KV_LOAD_FAILED)._value.get() == 1
            # the prefill whose KV could not be read is set aside at once; the decode, which is fine, is not
            assert _endpoint(s, "prefill", "p0").unreachable_until > time.monotonic()
            assert _endpoint(s, "decode", "d0").unreachable_until == 0
    run(go())


@pytest.mark.parametrize(("path", "stream"), CASES)
def test_without_retries_the_client_gets_decodes_own_answer(path, stream):
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill", engine_id="p0-engine")
            await s.engine("p1", "prefill", engine_id="p1-engine")
            d = await s.engine("d0", "decode", unreadable={"p0-engine", "p1-engine"}, role_chunk=True)
            await s.start_router(RouterConfig(retries=0), prefill=[("p0", "h"), ("p1", "h")], decode=[("d0", "h")])
            async with aiohttp.ClientSession() as c:
                status, headers, raw = await _post(s, c, path, stream)
            assert RETRY_HEADER not in headers and d.load_failures == 1
            if not stream:
                assert (status, raw) == (500, GENERATION_ERROR_BODY)
            else:
                assert status == 200 and raw.endswith(GENERATION_ERROR_EVENT + DONE), raw
                assert raw.startswith(b'data: {"id":"chatcmpl-') == path.endswith("chat/completions")
    run(go())


def test_one_retry_then_the_second_failure_is_the_answer():
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill", engine_id="p0-engine")
            await s.engine("p1", "prefill", engine_id="p1-engine")
            d = await s.engine("d0", "decode", unreadable={"p0-engine", "p1-engine"})
            await s.start_router(prefill=[("p0", "h"), ("p1", "h")], decode=[("d0", "h")])
            async with aiohttp.ClientSession() as c:
                status, headers, raw = await _post(s, c, "/v1/completions", True)
            assert status == 200 and raw == GENERATION_ERROR_EVENT + DONE, raw
            assert headers[RETRY_HEADER] == "decode=kv_load_failed" and d.load_failures == 2
            assert {b["kv_transfer_params"]["remote_engine_id"] for b in bodies(d)} == {"p0-engine", "p1-engine"}
    run(go())


def test_with_the_only_prefill_set_aside_decode_serves_the_retry_alone():
    """No other prefill is ready: the fallback serves (decode computes the prompt; counted and marked)."""
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill", engine_id="p0-engine")
            d = await s.engine("d0", "decode", unreadable={"p0-engine"})
            await s.start_router(prefill=[("p0", "h")], decode=[("d0", "h")])
            async with aiohttp.ClientSession() as c:
                status, headers, raw = await _post(s, c, "/v1/completions", False)
            assert status == 200 and b"tok" in raw, raw
            assert headers[RETRY_HEADER] == "decode=kv_load_failed" and headers[FALLBACK_HEADER] == "decode-only"
            assert d.load_failures == 1 and d.plain == 1
    run(go())


def test_a_plain_request_served_alone_is_never_judged_a_failed_kv_load():
    """Only a decode sent prefill's KV can have failed to load it: the fallback's answer is relayed."""
    async def go():
        async with stack() as s:
            p = await s.engine("p0", "prefill", fail_status=500)
            await s.start_router(RouterConfig(retries=0), prefill=[], decode=[("p0", "h")])
            async with aiohttp.ClientSession() as c:
                status, headers, raw = await _post(s, c, "/v1/completions", False)
            assert status == 500 and RETRY_HEADER not in headers and len(p.requests) == 1
    run(go())


def test_push_mode_a_failed_kv_load_sends_both_legs_again_with_another_prefill():
    async def go():
        async with stack() as s:
            dead = await s.engine("p0", "prefill", engine_id="p0-engine")
            good = await s.engine("p1", "prefill", engine_id="p1-engine")
            d = await s.engine("d0", "decode", push=True, unreadable={"p0-engine"}, role_chunk=True)
            await s.start_router(RouterConfig(mode="push"), prefill=[("p0", "h"), ("p1", "h")], decode=[("d0", "h")])
            s.learned()
            _first_choice(s, "prefill", "p0")
            async with aiohttp.ClientSession() as c:
                status, headers, raw = await _post(s, c, "/v1/chat/completions", True)
            assert status == 200 and raw.endswith(DONE) and b"error" not in raw, raw
            assert headers[RETRY_HEADER] == "decode=kv_load_failed" and d.load_failures == 1
            assert len(bodies(dead)) == 1 and rid(good) == headers["X-Request-Id"] != rid(dead)
            told = [b["kv_transfer_params"]["remote_engine_id"] for b in bodies(d)]
            assert told == ["p0-engine", "p1-engine"]
            # set aside, and its engine id forgotten: its next request learns it again (pull order)
            p0 = _endpoint(s, "prefill", "p0")
            assert p0.unreachable_until > time.monotonic() and p0.engine_id is None
    run(go())


def test_a_prefill_whose_connection_reset_mid_leg_is_set_aside_at_once():
    async def go():
        async with stack() as s:
            dead = await s.engine("p0", "prefill", die_before="head")
            good = await s.engine("p1", "prefill")
            await s.engine("d0", "decode")
            await s.start_router(prefill=[("p0", "h"), ("p1", "h")], decode=[("d0", "h")])
            _first_choice(s, "prefill", "p0")
            async with aiohttp.ClientSession() as c:
                for _ in range(3):
                    status, headers, raw = await _post(s, c, "/v1/completions", False)
                    assert status == 200, raw
            # the first request found p0 dying (reset) and used p1; the next ones went to p1 straight away
            assert len(dead.requests) == 1 and len(bodies(good)) == 3
            assert _endpoint(s, "prefill", "p0").unreachable_until > time.monotonic()
            assert s.router.metrics.set_aside._value.get() == 1
    run(go())
