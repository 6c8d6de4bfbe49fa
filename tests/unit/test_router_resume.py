"""Stream resumption: a decode that dies mid-stream is continued from another decode in the same response.

The pure parts (:mod:`pdd_operator.router.resume`) on plain data; then the router against the in-process
fakes of :mod:`tests.unit.test_router`: ``drop_after=N`` makes a decode abort its connection after N
streamed tokens (a process killed mid-stream). The fake numbers its tokens ``tok0 tok1 ...`` and goes on
after those a continuation's prompt ends with, as a model continuing that text would, so a correctly
resumed stream reads exactly like an uninterrupted one; a fake decode answers 400 unless it got the
``kv_transfer_params`` prefill issued for its request id, so a resumed 200 proves a new P/D pair ran.
"""

from __future__ import annotations

import json

import aiohttp
import pytest

from pdd_operator.router.proxy import FALLBACK_HEADER, RouterConfig
from pdd_operator.router.resume import StreamTracker, continuation_body, excluded
from pdd_operator.router.retry import RESET
from tests.unit.test_router import bodies, rid, run, stack

pytestmark = pytest.mark.timeout(60)

COMPLETIONS, CHAT = "/v1/completions", "/v1/chat/completions"


def _sse(*chunks: dict | str) -> bytes:
    return b"".join(b"data: " + (c.encode() if isinstance(c, str) else json.dumps(c).encode()) + b"\n\n"
                    for c in chunks)


def _text_chunk(text: str, **extra) -> dict:
    return {"id": "cmpl-1", "created": 7, "model": "m",
            "choices": [{"index": 0, "text": text, "finish_reason": None}], **extra}


# -- pure parts --------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "body", "why"), [
    (COMPLETIONS, {"prompt": "a", "stream": True}, None),
    (COMPLETIONS, {"prompt": "a", "stream": True, "n": 1, "logprobs": None, "response_format": {"type": "text"}},
     None),
    (CHAT, {"messages": [{"role": "user", "content": "hi"}], "stream": True}, None),
    (COMPLETIONS, {"prompt": "a"}, "not streamed"),
    (COMPLETIONS, {"prompt": "a", "stream": True, "n": 2}, "n>1"),
    (COMPLETIONS, {"prompt": "a", "stream": True, "best_of": 3}, "best_of>1"),
    (COMPLETIONS, {"prompt": "a", "stream": True, "logprobs": 0}, "logprobs"),
    (CHAT, {"messages": [{"role": "user", "content": "hi"}], "stream": True, "logprobs": True}, "logprobs"),
    (COMPLETIONS, {"prompt": "a", "stream": True, "echo": True}, "echo"),
    (COMPLETIONS, {"prompt": [1, 2, 3], "stream": True}, "prompt is not one string"),
    (CHAT, {"messages": [{"role": "user", "content": "hi"}], "stream": True, "tools": [{"type": "function"}]},
     "tools"),
    (CHAT, {"messages": [{"role": "user", "content": "hi"}], "stream": True,
            "response_format": {"type": "json_object"}}, "response_format"),
])
def test_excluded(path, body, why):
    assert excluded(path, body) == why


def test_completion_continuation_carries_prompt_plus_generated_and_the_remaining_tokens():
    body = {"model": "m", "prompt": "Once", "max_tokens": 10, "min_tokens": 4, "stream": True}
    assert continuation_body(COMPLETIONS, body, " upon a", 2) == {
        "model": "m", "prompt": "Once upon a", "max_tokens": 8, "min_tokens": 2, "stream": True}
    # vLLM's default max_tokens (16) for completions when the client gave none
    assert continuation_body(COMPLETIONS, {"prompt": "a", "stream": True}, "b", 5)["max_tokens"] == 11
    # nothing generated yet (the client got the head only): the request again, whole
    assert continuation_body(COMPLETIONS, body, "", 0) == body
    assert continuation_body(COMPLETIONS, body, "x" * 10, 10) is None  # no token left


def test_chat_continuation_adds_the_partial_assistant_message_to_continue():
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 6,
            "stream": True}
    cont = continuation_body(CHAT, body, "Hel", 1)
    assert cont["messages"] == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hel"}]
    assert cont["continue_final_message"] is True and cont["add_generation_prompt"] is False
    assert cont["max_completion_tokens"] == 5 and "max_tokens" not in cont  # chat has no default limit
    assert body["messages"] == [{"role": "user", "content": "hi"}]  # the client's body is not changed
    # the client's own continued message grows instead of a second assistant message
    mine = {**body, "messages": [*body["messages"], {"role": "assistant", "content": "Sure:"}],
            "continue_final_message": True, "add_generation_prompt": False}
    assert continuation_body(CHAT, mine, " yes", 1)["messages"][-1] == {"role": "assistant", "content": "Sure: yes"}


def test_tracker_relays_whole_events_and_counts_what_the_client_got():
    t = StreamTracker(chat=False)
    raw = _sse(_text_chunk("a"), _text_chunk("b"))
    assert t.feed(raw[:10]) == b""  # half an event is held back
    assert t.feed(raw[10:-5]) == raw[:raw.index(b"\n\n") + 2]
    assert t.feed(raw[-5:]) == raw[raw.index(b"\n\n") + 2:]
    assert (t.id, t.created, t.model, t.text, t.tokens) == ("cmpl-1", 7, "m", "ab", 2)
    t.feed(_sse(_text_chunk("", usage={"completion_tokens": 5, "prompt_tokens": 3})))
    assert t.tokens == 5  # continuous usage stats count exactly
    t.feed(_sse({**_text_chunk("c"), "choices": [{"index": 0, "text": "c", "finish_reason": "length"}]}))
    assert t.finished and not t.done
    t.feed(_sse("[DONE]"))
    assert t.done and t.unsupported is None


def test_splice_keeps_the_original_id_and_adds_the_tokens_before_the_join_to_usage():
    t = StreamTracker(chat=True)
    t.feed(_sse({"id": "chatcmpl-A", "created": 1, "model": "m",
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}, "finish_reason": None}]}))
    t.feed(b"data: {\"id\": \"chatcmpl-A\", \"cho")  # cut by the dying engine: never relayed
    t.resume()
    theirs = {"id": "chatcmpl-B", "created": 2, "model": "m2"}
    out = t.feed(_sse(
        {**theirs, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        {**theirs, "choices": [{"index": 0, "delta": {"content": " there"}, "finish_reason": "stop"}]},
        {**theirs, "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13}},
        "[DONE]"), splice=True)
    events = out.decode().split("\n\n")[:-1]
    assert len(events) == 3 and events[-1] == "data: [DONE]"  # the role-only delta is dropped
    first, usage = (json.loads(e[len("data: "):]) for e in events[:2])
    assert (first["id"], first["created"], first["model"]) == ("chatcmpl-A", 1, "m")
    assert first["choices"][0]["delta"] == {"content": " there"}
    assert usage["usage"] == {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}
    assert t.text == "Hi there" and t.done


def test_tracker_marks_what_cannot_be_continued():
    t = StreamTracker(chat=True)
    t.feed(_sse({"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0}]}}]}))
    assert t.unsupported == "a delta with ['tool_calls']"
    t = StreamTracker(chat=False)
    t.feed(_sse({"id": "x", "choices": [{"index": 1, "text": "a"}]}))
    assert t.unsupported == "several choices"


# -- the router ----------------------------------------------------------------------------------


def _events(raw: bytes) -> list[str]:
    return [e for e in raw.decode().split("\n\n") if e]


def _data(events: list[str]) -> list[dict]:
    return [json.loads(e[len("data: "):]) for e in events if e.startswith("data: {")]


def resumed(router) -> float:
    return router.metrics.resumed.labels(RESET)._value.get()


async def _stream(s, path: str, body: dict) -> tuple[int, dict, bytes]:
    async with aiohttp.ClientSession() as c, c.post(s.url + path, json=body) as r:
        return r.status, r.headers.copy(), await r.read()


def _first_choice(s, name: str) -> None:
    for ep in s.registry.endpoints("decode"):
        if ep.name != name:
            ep.outstanding = 10**6


@pytest.mark.parametrize("mode", ["pull", "push"])
def test_a_decode_dying_mid_stream_is_resumed_in_the_same_stream_from_a_new_pd_pair(mode):
    async def go():
        async with stack() as s:
            push = mode == "push"
            p = await s.engine("p0", "prefill")
            dying = await s.engine("dying", "decode", tokens=10, drop_after=3, push=push)
            good = await s.engine("good", "decode", tokens=10, push=push)
            await s.start_router(RouterConfig(mode=mode), prefill=[("p0", "h")],
                                 decode=[("dying", "h"), ("good", "h")])
            if push:
                s.learned()
            _first_choice(s, "dying")
            body = {"model": "m", "prompt": "hello", "max_tokens": 10, "stream": True}
            status, headers, raw = await _stream(s, "/v1/completions", body)
            assert status == 200
            events = _events(raw)
            assert events[-1] == "data: [DONE]" and not any('"error"' in e for e in events)
            chunks = _data(events)
            # one stream: the text of an uninterrupted one, under the first response's id
            assert "".join(c["choices"][0]["text"] for c in chunks) == "".join(f"tok{i} " for i in range(10))
            assert {c["id"] for c in chunks} == {f"cmpl-{rid(dying)}"} == {f"cmpl-{headers['X-Request-Id']}"}
            assert events[3] == f": pdd-resumed attempt=1 tokens=3 reason={RESET}"
            # the continuation: prompt + generated, max_tokens less the 3 tokens sent, a new P/D request
            (cont,) = [b for b in bodies(good)]
            assert cont["prompt"] == "hello" + "tok0 tok1 tok2 " and cont["max_tokens"] == 7
            assert rid(good) != rid(dying) and len(bodies(p)) == 2 and bodies(p)[1]["prompt"] == cont["prompt"]
            assert resumed(s.router) == 1 and s.router.metrics.retries.labels("decode", RESET)._value.get() == 1
            [ep] = [e for e in s.registry.endpoints("decode") if e.name == "dying"]
            assert ep.unreachable_until > 0  # set aside like a decode retried before its first byte
    run(go())


def test_a_chat_stream_is_resumed_with_the_partial_assistant_message_to_continue():
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            dying = await s.engine("dying", "decode", tokens=6, drop_after=2, role_chunk=True)
            good = await s.engine("good", "decode", tokens=6, role_chunk=True)
            await s.start_router(prefill=[("p0", "h")], decode=[("dying", "h"), ("good", "h")])
            _first_choice(s, "dying")
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                    "max_completion_tokens": 6}
            status, _headers, raw = await _stream(s, "/v1/chat/completions", body)
            assert status == 200 and _events(raw)[-1] == "data: [DONE]"
            deltas = [c["choices"][0]["delta"] for c in _data(_events(raw))]
            # one role delta (the first decode's), then the text of an uninterrupted answer
            assert deltas[0] == {"role": "assistant", "content": ""} and all("role" not in d for d in deltas[1:])
            assert "".join(d["content"] for d in deltas) == "tok0 tok1 tok2 tok3 tok4 tok5 "
            (cont,) = bodies(good)
            assert cont["messages"][-1] == {"role": "assistant", "content": "tok0 tok1 "}
            assert cont["continue_final_message"] is True and cont["add_generation_prompt"] is False
            assert cont["max_completion_tokens"] == 4
            assert {c["id"] for c in _data(_events(raw))} == {f"cmpl-{rid(dying)}"}
    run(go())


def test_with_no_other_decode_a_prefill_continues_the_stream_alone():
    async def go():
        async with stack() as s:
            p = await s.engine("p0", "prefill", tokens=10)
            await s.engine("dying", "decode", tokens=10, drop_after=4)
            await s.start_router(prefill=[("p0", "h")], decode=[("dying", "h")])
            status, _headers, raw = await _stream(s, "/v1/completions",
                                                  {"model": "m", "prompt": "x", "max_tokens": 10, "stream": True})
            assert status == 200 and _events(raw)[-1] == "data: [DONE]"
            assert "".join(c["choices"][0]["text"] for c in _data(_events(raw))) == "".join(
                f"tok{i} " for i in range(10))
            assert p.plain == 1 and bodies(p)[-1]["max_tokens"] == 6  # served alone, counted as the fallback
            assert s.router.metrics.fallback.labels("refused", "prefill")._value.get() == 1
    run(go())


def test_a_decode_dying_after_the_head_before_any_text_is_sent_again_whole_in_the_same_stream():
    """The client has the response head and a chat's role-only delta but no text when the engine dies
    mid-event: its half-written event is dropped and the request goes again, whole, in the same stream.
    Without a ready prefill decode serves alone and its answer is relayed from its first bytes (with a
    prefill, the router holds a stream until its first whole event: :func:`~pdd_operator.router.retry.
    stream_start`); before, such a stream ended "not resumed: nothing left to continue". (A completion
    has no role delta: with nothing relayed, aiohttp has not sent the head either, the same path, which
    the test cannot tell apart from the outside.)"""
    path = CHAT
    async def go():
        async with stack() as s:
            dying = await s.engine("dying", "decode", tokens=6, die_before="first_event", role_chunk=True)
            good = await s.engine("good", "decode", tokens=6, role_chunk=True)
            await s.start_router(prefill=[], decode=[("dying", "h"), ("good", "h")])
            _first_choice(s, "dying")
            body = ({"model": "m", "prompt": "hi", "max_tokens": 6, "stream": True} if path == COMPLETIONS else
                    {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                     "max_completion_tokens": 6})
            async with aiohttp.ClientSession() as c, c.post(s.url + path, json=body) as r:
                dying.cut.set()  # the client has the head (the router relayed it): now the decode dies
                status, raw = r.status, await r.read()
            events = _events(raw)
            assert status == 200 and events[-1] == "data: [DONE]" and not any('"error"' in e for e in events)
            assert f": pdd-resumed attempt=1 tokens=0 reason={RESET}" in events
            chunks = _data(events)
            if path == CHAT:
                deltas = [c["choices"][0]["delta"] for c in chunks]
                assert deltas[0] == {"role": "assistant", "content": ""} and all("role" not in d for d in deltas[1:])
                text = "".join(d["content"] for d in deltas)
            else:
                text = "".join(c["choices"][0]["text"] for c in chunks)
            assert text == "tok0 tok1 tok2 tok3 tok4 tok5 "
            assert bodies(good) == [body]  # the client's own request, not a continuation of nothing
            assert rid(good) != rid(dying) and resumed(s.router) == 1
    run(go())


@pytest.mark.parametrize("path", [COMPLETIONS, CHAT])
def test_a_stream_cut_after_its_last_token_ends_at_its_length_without_a_continuation(path):
    """Every token the client asked for was sent and only the finish and ``[DONE]`` were lost: the stream
    ends with a ``finish_reason: "length"`` chunk and ``[DONE]``, and no engine is asked for more."""
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            dying = await s.engine("dying", "decode", tokens=10, die_before="done", role_chunk=True)
            good = await s.engine("good", "decode", tokens=10)
            await s.start_router(prefill=[("p0", "h")], decode=[("dying", "h"), ("good", "h")])
            _first_choice(s, "dying")
            body = ({"model": "m", "prompt": "hi", "max_tokens": 4, "stream": True} if path == COMPLETIONS else
                    {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 4})
            status, _headers, raw = await _stream(s, path, body)
            events = _events(raw)
            assert status == 200 and events[-1] == "data: [DONE]" and not any('"error"' in e for e in events)
            chunks = _data(events)
            last = chunks[-1]
            assert last["choices"][0]["finish_reason"] == "length" and last["id"] == f"cmpl-{rid(dying)}"
            assert last["object"] == ("chat.completion.chunk" if path == CHAT else "text_completion")
            assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
            key = "delta" if path == CHAT else None
            text = "".join((c["choices"][0][key].get("content") or "") if key else c["choices"][0]["text"]
                           for c in chunks)
            assert text == "tok0 tok1 tok2 tok3 "
            assert not bodies(good) and resumed(s.router) == 0 and b"pdd-resumed" not in raw
    run(go())


@pytest.mark.parametrize("config", [RouterConfig(retries=1), RouterConfig(retry_deadline=0)])
def test_a_spent_retry_budget_still_cuts_the_stream(config):
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            await s.engine("d0", "decode", tokens=10, drop_after=2)
            await s.engine("d1", "decode", tokens=10, drop_after=5)
            await s.start_router(config, prefill=[("p0", "h")], decode=[("d0", "h"), ("d1", "h")])
            _first_choice(s, "d0")
            status, _headers, raw = await _stream(s, "/v1/completions",
                                                  {"model": "m", "prompt": "x", "max_tokens": 10, "stream": True})
            assert status == 200 and b"[DONE]" not in raw
            events = _events(raw)
            err = json.loads(events[-1][len("data: "):])["error"]
            assert "not resumed: the retry budget is spent" in err["message"]
            texts = "".join(c["choices"][0]["text"] for c in _data(events) if "choices" in c)
            if config.retry_deadline > 0:  # one continuation (d1), which died too after 5 more tokens
                assert resumed(s.router) == 1 and texts == "".join(f"tok{i} " for i in range(7))
            else:
                assert resumed(s.router) == 0 and texts == "tok0 tok1 "
    run(go())


@pytest.mark.parametrize("extra", [{"n": 2}, {"logprobs": 1}, {"best_of": 2}])
def test_excluded_requests_are_not_resumed(extra):
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            await s.engine("d0", "decode", tokens=10, drop_after=3)
            good = await s.engine("good", "decode")
            await s.start_router(prefill=[("p0", "h")], decode=[("d0", "h"), ("good", "h")])
            _first_choice(s, "d0")
            status, headers, raw = await _stream(
                s, "/v1/completions", {"model": "m", "prompt": "x", "max_tokens": 10, "stream": True, **extra})
            assert status == 200 and b"[DONE]" not in raw and b'"error"' in raw
            assert b"pdd-resumed" not in raw and not bodies(good) and resumed(s.router) == 0
            assert FALLBACK_HEADER not in headers
    run(go())


def test_tokens_sent_in_merged_chunks_are_counted_by_an_engine_tokenizing_the_text():
    """vLLM merges the tokens of a lagging reader into one event: chunks undercount, /tokenize does not."""
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            dying = await s.engine("dying", "decode", tokens=10, drop_after=6, tokens_per_chunk=3)
            good = await s.engine("good", "decode", tokens=10)
            await s.start_router(prefill=[("p0", "h")], decode=[("dying", "h"), ("good", "h")])
            _first_choice(s, "dying")
            status, _headers, raw = await _stream(s, "/v1/completions",
                                                  {"model": "m", "prompt": "x", "max_tokens": 10, "stream": True})
            assert status == 200 and _events(raw)[-1] == "data: [DONE]"
            assert "".join(c["choices"][0]["text"] for c in _data(_events(raw))) == "".join(
                f"tok{i} " for i in range(10))
            assert ": pdd-resumed attempt=1 tokens=6 reason=reset" in _events(raw)
            (cont,) = bodies(good)
            assert cont["max_tokens"] == 4  # 10 less the 6 tokens of two chunks
            assert good.tokenized == [{"model": "m", "prompt": "tok0 tok1 tok2 tok3 tok4 tok5 ",
                                       "add_special_tokens": False}] and not dying.tokenized
    run(go())


def test_continuous_usage_counts_exactly_without_tokenizing_and_spliced_usage_counts_from_the_start():
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            await s.engine("dying", "decode", tokens=10, drop_after=4, tokens_per_chunk=2)
            good = await s.engine("good", "decode", tokens=10)
            await s.start_router(prefill=[("p0", "h")], decode=[("dying", "h"), ("good", "h")])
            _first_choice(s, "dying")
            status, _headers, raw = await _stream(s, "/v1/completions", {
                "model": "m", "prompt": "x", "max_tokens": 10, "stream": True,
                "stream_options": {"include_usage": True, "continuous_usage_stats": True}})
            assert status == 200 and _events(raw)[-1] == "data: [DONE]"
            assert ": pdd-resumed attempt=1 tokens=4 reason=reset" in _events(raw)
            assert not good.tokenized and bodies(good)[0]["max_tokens"] == 6
            # the client's usage counts from the stream's start, across the join
            assert [c["usage"]["completion_tokens"] for c in _data(_events(raw))] == [2, 4, *range(5, 11)]
            assert {c["usage"]["prompt_tokens"] for c in _data(_events(raw))} == {1}
    run(go())


def test_a_stream_without_event_boundaries_is_relayed_anyway_and_not_resumed():
    from pdd_operator.router.resume import MAX_EVENT_BYTES

    t = StreamTracker(chat=False)
    assert t.feed(b"x" * MAX_EVENT_BYTES) == b""
    assert t.feed(b"y") == b"x" * MAX_EVENT_BYTES + b"y" and t.unsupported == "no SSE event boundary"


def test_a_non_streaming_answer_cut_mid_way_is_retried_as_a_whole():
    """Nothing reached the client (the router holds the whole answer): a plain retry, not a resumption."""
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            await s.engine("dying", "decode", tokens=10, drop_after=3)
            good = await s.engine("good", "decode", tokens=10)
            await s.start_router(prefill=[("p0", "h")], decode=[("dying", "h"), ("good", "h")])
            _first_choice(s, "dying")
            async with aiohttp.ClientSession() as c, c.post(
                    s.url + "/v1/completions", json={"model": "m", "prompt": "x", "max_tokens": 10}) as r:
                assert r.status == 200, await r.text()
                answer = await r.json()
                assert r.headers["X-PDD-Retry"] == "decode=reset"
            assert answer["choices"][0]["text"] == "tok " * 10 and bodies(good)[0]["prompt"] == "x"
            assert resumed(s.router) == 0
    run(go())


def test_a_finished_resumable_stream_leaves_its_decode_connection_for_the_next_request():
    """The router reads decode's answer to its end after [DONE], so the pooled connection is reused."""
    async def go():
        async with stack() as s:
            await s.engine("p0", "prefill")
            # the end of the body comes apart from [DONE], as from vLLM (a separate write)
            d = await s.engine("d0", "decode", tokens=4, eof_delay=0.05)
            await s.start_router(prefill=[("p0", "h")], decode=[("d0", "h")])
            for _ in range(3):
                status, _headers, raw = await _stream(s, "/v1/completions",
                                                      {"model": "m", "prompt": "x", "max_tokens": 4, "stream": True})
                assert status == 200 and _events(raw)[-1] == "data: [DONE]"
            assert len(d.peers) == 3 and len(set(d.peers)) == 1, d.peers
            assert not d.cancelled
    run(go())
