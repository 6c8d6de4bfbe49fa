"""A fake vLLM engine that speaks the P/D request protocol, for the router's tests and benchmark.

Not a model: a prefill fake answers a ``max_tokens`` 1 request with ``kv_transfer_params`` as vLLM's
NixlConnector does (``remote_engine_id``, ``remote_block_ids``, ``remote_request_id``,
``remote_host``, ``remote_port``, ``tp_size``, ...); a decode fake streams (SSE) or returns a fixed
number of tokens. When the fakes share an ``issued`` dict (one process), decode checks that it got
exactly the parameters prefill issued for the same ``X-Request-Id`` and answers 400 otherwise.
Either role also serves a plain request (no ``kv_transfer_params``: the router's fallback) as a whole
engine does, computing the prompt itself, and counts it in ``plain``; a decode does so only when no
prefill issued parameters for that ``X-Request-Id`` (a dropped hand-off still answers 400).

``.venv/bin/python -m tests.fakes.fake_engine --role decode --port 8200 --tokens 16`` (from the repository
root) runs one. Test code only: the shipped package never imports it.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import socket
import time
from dataclasses import dataclass, field

from aiohttp import web

#: vLLM's answer to a request finished with ``finish_reason="error"`` (a failed KV load under
#: ``kv_load_failure_policy`` "fail"), byte for byte as vLLM 0.26.0 and 0.32.0 serialize it (their own
#: ``create_error_response``, run; pdd_operator/router/retry.py's docstring has the source): not streamed,
#: starlette's ``JSONResponse`` (compact) with HTTP 500; streamed, ``json.dumps`` in one SSE event, then
#: ``[DONE]``.
GENERATION_ERROR_BODY = b'{"error":{"message":"Internal server error","type":"InternalServerError","param":null,"code":500}}'
GENERATION_ERROR_EVENT = (b'data: {"error": {"message": "Internal server error", "type": "InternalServerError", '
                          b'"param": null, "code": 500}}\n\n')


def vllm_role_chunk(request_id: str, created: int, model: str) -> bytes:
    """vLLM's opening chat chunk (``model_dump_json(exclude_unset=True)`` of 0.26.0 and 0.32.0, run)."""
    return (b'data: {"id":"chatcmpl-' + request_id.encode() + b'","object":"chat.completion.chunk","created":'
            + str(created).encode() + b',"model":' + json.dumps(model).encode() + b',"choices":[{"index":0,'
            b'"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],'
            b'"prompt_token_ids":null,"prompt_text":null}\n\n')


@dataclass
class FakeEngine:
    """Behaviour and observations of one fake engine.

    Attributes:
        role: ``prefill`` or ``decode``.
        engine_id: the NIXL engine id it reports (prefill).
        kv_port: the side-channel port it reports (prefill).
        tp_size: TP size it reports (prefill).
        prefill_delay: seconds a prefill takes.
        tokens: tokens a decode produces (unless the request's ``max_tokens`` is smaller).
        inter_token_delay: seconds between two streamed tokens.
        fail_status: answer every completion with this HTTP status (0: don't).
        drop_after: a streaming decode drops its connection after this many tokens (0: never); a
            non-streaming one after its head and half its answer.
        die_before: the engine drops the connection of every completion request it got before its
            answer begins: ``"head"`` (before the response head, as a process killed with the request
            in hand), ``"first_token"`` (a stream, after its head and before the first token, as a
            decode killed while it loads the KV), ``"first_event"`` (a stream, after its head, a chat's
            role-only delta and half its first token's event, then waits for ``cut`` to be set and drops
            the connection: a decode killed as it wrote, after the client had the head), ``"done"`` (a
            stream, after its last token and before ``[DONE]``), ``"answer"`` (a prefill, after its KV is
            handed off and ``answer_delay`` passed, as a push prefill killed before its request
            finished); ``""``: never.
        answer_delay: seconds a prefill waits between handing its KV off (``issued``) and its answer.
        gate: a prefill leg received waits for this event to be set before it runs (``None``: it does
            not wait), so a test can change the router's endpoints while the leg is in progress.
        first_token_delay: seconds a streaming answer waits between its head and the first token (as
            vLLM's decode sends its head, then waits for the prompt's KV).
        issued: shared dict ``X-Request-Id -> kv_transfer_params`` prefill issued (checks on decode).
        requests: ``(headers, body)`` of every completion request received.
        cancelled: ``X-Request-Id`` of every request whose client (the router) went away.
        revision: the compat hash of the pod it runs in (``""``: unknown). A prefill sends it along in
            ``kv_transfer_params`` (``fake_revision``); a decode of another revision answers 409
            "cross-revision pair", so a test counts pairs the router should never have made.
        running: completion requests in progress, served on ``/metrics`` as vLLM's
            ``vllm:num_requests_running`` gauge (what the engine pods' preStop drain waits on).
        push: decode in push mode: it checks it was told prefill's coordinates and, like vLLM's push
            decode, finishes only once that prefill (in ``issued``) has completed the same request id.
        plain: plain requests (no ``kv_transfer_params``) it served whole, prompt computed locally.
        tokens_per_chunk: streamed tokens per event (vLLM merges the tokens of a lagging reader).
            With ``stream_options.continuous_usage_stats`` every event carries ``usage`` (a prompt of one
            token plus the continued ones).
        tokenized: bodies of ``/tokenize`` requests.
        eof_delay: seconds a stream's end (the last chunk of its chunked body) comes after ``[DONE]``.
        peers: the client address of each completion request (a reused connection shows the same one).
        role_chunk: a streamed chat answer opens with a role-only delta (``{"role": "assistant",
            "content": ""}``), as vLLM's does.
        unreadable: engine ids of prefills whose KV this decode cannot load (their process died after
            answering the leg): a request naming one (``remote_engine_id``) is answered as vLLM's decode
            answers a failed KV load under ``kv_load_failure_policy`` "fail" (:data:`GENERATION_ERROR_BODY`
            with HTTP 500; streamed, a chat's role chunk, :data:`GENERATION_ERROR_EVENT` and ``[DONE]``),
            and counted in ``load_failures``.

    Tokens are ``tok0 tok1 ...``; a continuation (a prompt, or with ``continue_final_message`` a final
    assistant message, that ends in such tokens) goes on numbering after them, as a model continuing
    that text would, so a resumed stream's text equals an uninterrupted one's.
    """

    role: str
    engine_id: str = "prefill-engine-0"
    kv_port: int = 5600
    tp_size: int = 1
    prefill_delay: float = 0.0
    tokens: int = 8
    inter_token_delay: float = 0.0
    fail_status: int = 0
    drop_after: int = 0
    die_before: str = ""
    first_token_delay: float = 0.0
    answer_delay: float = 0.0
    gate: asyncio.Event | None = None
    issued: dict | None = None
    push: bool = False
    record: bool = True
    requests: list = field(default_factory=list)
    cancelled: list = field(default_factory=list)
    changed: asyncio.Event | None = None
    revision: str = ""
    running: int = 0
    plain: int = 0
    role_chunk: bool = False
    tokens_per_chunk: int = 1
    tokenized: list = field(default_factory=list)
    peers: list = field(default_factory=list)
    eof_delay: float = 0.0
    unreadable: set = field(default_factory=set)
    load_failures: int = 0
    cut: asyncio.Event = field(default_factory=asyncio.Event)
    _blocks: itertools.count = field(default_factory=lambda: itertools.count(1))

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/completions", self.handle)
        app.router.add_post("/v1/chat/completions", self.handle)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/tokenize", self.tokenize)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.metrics)
        return app

    def _notify(self) -> None:
        if self.changed is not None:
            self.changed.set()

    async def health(self, _r: web.Request) -> web.Response:
        return web.Response(text="")

    async def metrics(self, _r: web.Request) -> web.Response:
        labels = '{engine="0",model_name="fake"}'
        return web.Response(text=f"vllm:num_requests_running{labels} {float(self.running)}\n"
                                 f"vllm:num_requests_waiting{labels} 0.0\n")

    async def models(self, request: web.Request) -> web.Response:
        if self.record:
            self.requests.append((request.headers.copy(), None))
        return web.json_response({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    async def tokenize(self, request: web.Request) -> web.Response:
        """vLLM's ``/tokenize`` for the fake's text: one token per word (``{"count", "tokens"}``)."""
        body = await request.json()
        self.tokenized.append(body)
        words = str(body.get("prompt", "")).split()
        return web.json_response({"count": len(words), "tokens": list(range(len(words))), "max_model_len": 1024})

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        rid = request.headers.get("X-Request-Id", "")
        if self.record:
            self.requests.append((request.headers.copy(), body))
            self.peers.append(request.transport.get_extra_info("peername") if request.transport else None)
            self._notify()
        self.running += 1
        try:
            if self.fail_status:
                return web.json_response({"error": {"message": "injected failure"}}, status=self.fail_status)
            if self.die_before == "head":
                request.transport.abort()
                return web.Response()
            if body.get("kv_transfer_params") is None and not (
                    self.role == "decode" and self.issued is not None and rid in self.issued):
                self.plain += 1
                return await self._generate(request, body, rid)
            if self.role == "prefill":
                return await self._prefill(request, body, rid)
            return await self._decode(request, body, rid)
        except asyncio.CancelledError:
            self.cancelled.append(rid)
            self._notify()
            raise
        finally:
            self.running -= 1

    async def _prefill(self, request: web.Request, body: dict, rid: str) -> web.Response:
        kv = body.get("kv_transfer_params") or {}
        if not kv.get("do_remote_decode") or body.get("stream") or body.get("max_tokens") != 1:
            return web.json_response({"error": {"message": f"not a prefill leg: {body}"}}, status=400)
        if self.gate is not None:
            await self.gate.wait()
        if self.prefill_delay:
            await asyncio.sleep(self.prefill_delay)
        n = next(self._blocks)
        params = {
            "do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": [[n, n + 1, n + 2]],
            "remote_engine_id": self.engine_id, "remote_request_id": f"cmpl-{rid}-0-abcdef12",
            "remote_host": request.transport.get_extra_info("sockname")[0] if request.transport else "127.0.0.1",
            "remote_port": self.kv_port, "tp_size": self.tp_size, "pp_size": 1, "remote_num_tokens": 5,
        }
        if self.revision:
            params["fake_revision"] = self.revision
        if self.issued is not None:
            self.issued[rid] = params
            self._notify()
        if self.answer_delay:
            await asyncio.sleep(self.answer_delay)
        if self.die_before == "answer":
            request.transport.abort()
            return web.Response()
        return web.json_response({"id": f"cmpl-{rid}", "object": "text_completion", "model": body.get("model"),
                                  "choices": [{"index": 0, "text": "x", "finish_reason": "length"}],
                                  "kv_transfer_params": params})

    async def _decode(self, request: web.Request, body: dict, rid: str) -> web.StreamResponse:
        if self.push:
            kv = body.get("kv_transfer_params") or {}
            # remote_request_id: the shared X-Request-Id (both legs at once), or prefill's own id when
            # the router ran prefill first and passed its kv_transfer_params on (engine id unknown).
            if not (kv.get("do_remote_prefill") and kv.get("remote_engine_id") and kv.get("remote_host")
                    and kv.get("remote_port") and "tp_size" in kv
                    and kv.get("remote_request_id") in (rid, f"cmpl-{rid}-0-abcdef12")):
                return web.json_response({"error": {"message": f"not a push decode leg: {kv!r}"}}, status=400)
            while rid not in self.issued:  # the KV arrives when prefill has run
                self.changed.clear()
                await self.changed.wait()
            if self.issued[rid]["remote_engine_id"] != kv["remote_engine_id"]:
                return web.json_response({"error": {"message": "told the wrong prefill engine"}}, status=400)
        elif self.issued is not None:
            got = body.get("kv_transfer_params")
            want = self.issued.get(rid)
            if got != want:
                return web.json_response({"error": {"message": f"kv_transfer_params {got!r} != issued {want!r} "
                                                               f"for X-Request-Id {rid!r}"}}, status=400)
        if (body.get("kv_transfer_params") or {}).get("remote_engine_id") in self.unreadable:
            return await self._kv_load_failed(request, body, rid)
        theirs = (body.get("kv_transfer_params") or {}).get("fake_revision")
        if self.revision and theirs and theirs != self.revision:
            return web.json_response({"error": {"message": f"cross-revision pair: KV of revision {theirs} on a "
                                                           f"decode of revision {self.revision}"}}, status=409)
        return await self._generate(request, body, rid)

    async def _kv_load_failed(self, request: web.Request, body: dict, rid: str) -> web.StreamResponse:
        """vLLM's decode answer when the prompt's KV could not be loaded (policy "fail")."""
        self.load_failures += 1
        self._notify()
        if not body.get("stream"):
            return web.Response(body=GENERATION_ERROR_BODY, status=500, content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await resp.prepare(request)
        if request.path.endswith("/chat/completions"):
            await resp.write(vllm_role_chunk(rid, int(time.time()), str(body.get("model"))))
        await resp.write(GENERATION_ERROR_EVENT)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def _generate(self, request: web.Request, body: dict, rid: str) -> web.StreamResponse:
        """Produce the tokens (streamed or not) of a request that may be answered."""
        chat = request.path.endswith("/chat/completions")
        first = _generated(body, chat)
        n = min(self.tokens - first, int(body.get("max_tokens") or body.get("max_completion_tokens") or self.tokens))
        created = int(time.time())
        if not body.get("stream"):
            if self.inter_token_delay:
                await asyncio.sleep(self.inter_token_delay * n)
            text = "tok " * n
            choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
                      if chat else {"index": 0, "text": text, "finish_reason": "length"})
            answer = {"id": f"cmpl-{rid}", "object": "chat.completion" if chat else "text_completion",
                      "created": created, "model": body.get("model"), "choices": [choice],
                      "usage": {"completion_tokens": n}}
            if self.drop_after:  # dies mid-answer: the head and half the body sent
                raw = json.dumps(answer).encode()
                resp = web.StreamResponse(headers={"Content-Type": "application/json"})
                resp.content_length = len(raw)
                await resp.prepare(request)
                await resp.write(raw[:len(raw) // 2])
                request.transport.abort()
                return resp
            return web.json_response(answer)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await resp.prepare(request)
        if self.die_before == "first_token":
            request.transport.abort()
            return resp
        if self.first_token_delay:
            await asyncio.sleep(self.first_token_delay)
        if chat and self.role_chunk:
            role = {"id": f"cmpl-{rid}", "created": created, "model": body.get("model"),
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
            await resp.write(b"data: " + json.dumps(role).encode() + b"\n\n")
        pending = ""
        for i in range(n):
            if self.drop_after and i == self.drop_after:
                request.transport.abort()  # the engine dies mid-stream
                return resp
            if self.inter_token_delay:
                await asyncio.sleep(self.inter_token_delay)
            pending += f"tok{first + i} "
            if (i + 1) % self.tokens_per_chunk and i + 1 < n:
                continue
            delta = ({"index": 0, "delta": {"content": pending}, "finish_reason": None} if chat
                     else {"index": 0, "text": pending, "finish_reason": None})
            pending = ""
            chunk = {"id": f"cmpl-{rid}", "created": created, "model": body.get("model"), "choices": [delta]}
            if (body.get("stream_options") or {}).get("continuous_usage_stats"):
                chunk["usage"] = {"prompt_tokens": 1 + first, "completion_tokens": i + 1, "total_tokens": 2 + first + i}
            event = b"data: " + json.dumps(chunk).encode() + b"\n\n"
            if self.die_before == "first_event":
                await resp.write(event[:len(event) // 2])
                await self.cut.wait()
                request.transport.abort()
                return resp
            await resp.write(event)
        if self.die_before == "done":
            request.transport.abort()
            return resp
        await resp.write(b"data: [DONE]\n\n")
        if self.eof_delay:
            await asyncio.sleep(self.eof_delay)
        await resp.write_eof()
        return resp


def _generated(body: dict, chat: bool) -> int:
    """How many of the fake's tokens (``tokN ``) a continuation's prompt already ends with."""
    if chat:
        messages = body.get("messages") or [{}]
        text = messages[-1].get("content") if body.get("continue_final_message") else ""
    else:
        text = body.get("prompt")
    return text.count("tok") if isinstance(text, str) else 0


async def serve(engine: FakeEngine, host: str = "127.0.0.1", port: int = 0) -> tuple[web.AppRunner, int]:
    """Serve ``engine``; returns the runner and the port it listens on (``port`` 0: a free one).

    ``host`` ``::`` opens one dual-stack socket (IPV6_V6ONLY off), as vLLM's ``--host ::`` does
    (``vllm/entrypoints/openai/api_server.py`` ``create_server_socket``), so IPv4 clients reach it too.
    """
    runner = web.AppRunner(engine.app(), handler_cancellation=True, access_log=None)
    await runner.setup()
    if host == "::":
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(("::", port))
        site: web.BaseSite = web.SockSite(runner, sock, backlog=1024)
    else:
        site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--role", choices=["prefill", "decode"], required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--prefill-delay", type=float, default=0.0, help="seconds")
    p.add_argument("--tokens", type=int, default=8)
    p.add_argument("--inter-token-delay", type=float, default=0.0, help="seconds")
    a = p.parse_args()
    engine = FakeEngine(role=a.role, prefill_delay=a.prefill_delay, tokens=a.tokens,
                        inter_token_delay=a.inter_token_delay, record=False)

    async def run() -> None:
        await serve(engine, a.host, a.port)
        await asyncio.Event().wait()

    try:
        import uvloop  # as vLLM's uvicorn server runs
    except ImportError:
        asyncio.run(run())
    else:
        uvloop.run(run())


if __name__ == "__main__":
    main()
