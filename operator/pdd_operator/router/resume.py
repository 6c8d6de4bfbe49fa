"""Stream resumption: a streamed answer whose decode died after the client got tokens goes on from another
decode, in the same response (pure functions and one parser; the router wires them, :mod:`.proxy`).

A decode killed mid-stream leaves the client with part of an answer and no ``data: [DONE]``. The router
keeps what it relayed (:class:`StreamTracker`: the response's ``id``/``created``/``model``, the text sent
and how many tokens that was) and sends a *continuation*: the same request whose prompt is the original
one plus the text generated so far (:func:`continuation_body`), as a whole new P/D request (a new prefill
leg and request id: the dead decode's KV hand-off is spent, :mod:`.retry`). Its chunks are spliced into
the open stream under the original ``id``/``created``/``model`` (:meth:`StreamTracker.splice`), so the
client reads one stream that ends in ``[DONE]``.

- ``/v1/completions``: ``prompt + generated``; ``max_tokens`` (vLLM's default 16 when absent:
  ``CompletionRequest.max_tokens``, ``entrypoints/openai/completion/protocol.py``, vLLM 0.32) and
  ``min_tokens`` reduced by the tokens already sent.
- ``/v1/chat/completions``: the messages plus a partial assistant message holding the generated text,
  with ``continue_final_message: true, add_generation_prompt: false`` (vLLM 0.32
  ``ChatCompletionRequest``, ``entrypoints/openai/chat_completion/protocol.py``: the chat template leaves
  the final message open, without EOS, and the model continues it; setting both to true is refused
  with 400). The field came with vllm-project/vllm#8942 (first in 0.6.3); 0.6.3 also echoed the
  continued message in the answer (vllm-project/vllm#10111, fixed by #10180): every version this
  project supports (0.8.5+) has both. On an older vLLM the field is ignored as an unknown one and the
  model would start a *new* assistant turn after the partial one: the joined text is then wrong
  (``RouterConfig.resume`` off for such engines).
  ``max_tokens``/``max_completion_tokens``/``min_tokens`` are reduced like above when present.

Tokens sent: the last ``usage.completion_tokens`` of a chunk when the client asked for
``stream_options.continuous_usage_stats`` (exact); otherwise the text sent, tokenized by an engine of the
model (vLLM's ``/tokenize``, ``count``; the router asks at the join), and never fewer than the chunks that
carried text (each carries at least one token: vLLM's ``completion/serving.py`` skips steps with no text
and no tokens; several when the reader lags, under speculative decoding or with ``--stream-interval``).
Tokenizing the text again is approximate at token boundaries, so a resumed stream may end a token or so
off ``max_tokens``; with no engine answering ``/tokenize``, the chunk count (low) is used.

What cannot be spliced is not resumed (:func:`excluded`): several choices (``n``, ``best_of``), beam
search, logprobs (the continuation's would start at the join, not the stream's start), ``echo`` and
``suffix``, token-id or list prompts, tools and structured output (a grammar restarts at its beginning),
and any chunk that carries more than text (tool-call or reasoning deltas). Those fail as before: the
stream ends with an error event and no ``[DONE]``.

At the join the client can tell: the router writes an SSE comment line
``: pdd-resumed attempt=N tokens=T reason=R`` (SSE comments are ignored by ``EventSource`` and by
OpenAI's client libraries; response headers and trailers cannot be sent once a stream began), and counts
``pdd_router_resumed_streams_total``. Sampling: even a greedy stream may differ from an uninterrupted one
at the join, because the text sent is tokenized again as part of the prompt and need not come back as
the same tokens (a word split across two tokens, or a multi-byte character).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

#: The SSE event that ends an OpenAI stream.
DONE = b"data: [DONE]"
#: Bytes held back waiting for the end of an SSE event before they are relayed anyway (and the stream is
#: not resumed): vLLM ends every event with a blank line, so only another framing gets here.
MAX_EVENT_BYTES = 1 << 20
#: Delta keys that are plain text (anything else in a chat delta stops resumption).
TEXT_DELTA_KEYS = frozenset({"role", "content"})
#: Request fields whose presence (not ``None``/``False``/0/empty) keeps a request out of resumption.
EXCLUDING_FIELDS = ("logprobs", "top_logprobs", "prompt_logprobs", "echo", "suffix", "use_beam_search", "tools",
                    "functions", "guided_json", "guided_regex", "guided_choice", "guided_grammar",
                    "structured_outputs", "response_format")


def excluded(path: str, body: dict) -> str | None:
    """Why a request's stream may not be resumed, or ``None`` when it may.

    Args:
        path: ``/v1/completions`` or ``/v1/chat/completions``.
        body: the client's request body (a JSON object).

    Returns:
        A short reason (``not streamed``, ``n>1``, ``logprobs``, ...), or ``None``.
    """
    if not body.get("stream"):
        return "not streamed"
    for key in ("n", "best_of"):
        value = body.get(key)
        if value not in (None, 1):
            return f"{key}>1"
    for key in EXCLUDING_FIELDS:
        value = body.get(key)
        if key == "logprobs" and value is not None and value is not False:
            return key  # completions' logprobs=0 still returns the sampled token's logprob
        if key == "response_format" and isinstance(value, dict) and value.get("type") in (None, "text"):
            continue
        if value not in (None, False, 0, "", [], {}):
            return key
    if path.endswith("/chat/completions"):
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "messages"
        if body.get("continue_final_message") and not isinstance(messages[-1].get("content") if isinstance(
                messages[-1], dict) else None, str):
            return "continue_final_message with a non-text final message"
        return None
    if not isinstance(body.get("prompt"), str):
        return "prompt is not one string"
    return None


@dataclass
class StreamTracker:
    """What the client got of one streamed answer, parsed from the SSE bytes relayed to it.

    Attributes:
        chat: the stream is a chat completion (``delta.content``) rather than a completion (``text``).
        id, created, model: the response's, from its first chunk (kept on spliced chunks).
        tokens: tokens the client got (module docstring: exact with continuous usage, else chunks).
        finished: a chunk carried a ``finish_reason``: nothing is left to generate.
        done: ``data: [DONE]`` was relayed.
        unsupported: why what was relayed cannot be continued (``None``: it can).
        base_tokens: tokens sent before the current continuation (added to its ``usage``).
        resumed: continuations started.
        exact: ``tokens`` came from continuous usage stats (no need to tokenize the text).
    """

    chat: bool
    id: str | None = None
    created: int | None = None
    model: str | None = None
    tokens: int = 0
    finished: bool = False
    done: bool = False
    unsupported: str | None = None
    base_tokens: int = 0
    resumed: int = 0
    exact: bool = False
    _buffer: bytes = field(default=b"", repr=False)
    _pieces: list = field(default_factory=list, repr=False)

    def feed(self, chunk: bytes, splice: bool = False) -> bytes:
        """Take bytes read from an engine's stream; return the bytes to write to the client now: whole
        events only (an event cut by a dying engine never reaches the client, so a continuation starts
        on an event boundary). ``splice``: the bytes come from a continuation (:meth:`splice`)."""
        if not self._buffer and chunk.endswith(b"\n\n") and not splice:  # the usual case: whole events
            if chunk.count(b"\n\n") == 1:
                self._observe(chunk[:-2])
            else:
                for event in chunk.split(b"\n\n")[:-1]:
                    self._observe(event)
            return chunk
        self._buffer += chunk
        end = self._buffer.rfind(b"\n\n")
        if end < 0:
            if len(self._buffer) <= MAX_EVENT_BYTES:
                return b""
            # not vLLM's framing (``data: ...\n\n``): relay as it comes, and do not resume it
            self.unsupported = self.unsupported or "no SSE event boundary"
            events, self._buffer = self._buffer, b""
            return events
        events, self._buffer = self._buffer[:end + 2], self._buffer[end + 2:]
        if not splice:
            for event in events.split(b"\n\n")[:-1]:
                self._observe(event)
            return events
        out = [self.splice(event) for event in events.split(b"\n\n")[:-1]]
        return b"".join(e + b"\n\n" for e in out if e is not None)

    def resume(self) -> None:
        """A continuation starts: what follows is spliced onto what was sent (an unfinished event of the
        dead stream is dropped)."""
        self._buffer = b""
        self.base_tokens = self.tokens
        self.resumed += 1

    def splice(self, event: bytes) -> bytes | None:
        """A continuation's event as the client gets it: the original ``id``/``created``/``model``, a
        chat's opening role-only delta dropped (the client had it), ``usage`` counting the tokens sent
        before the join too (``prompt_tokens`` less them: the continuation's prompt held them). ``None``:
        drop the event."""
        chunk = _chunk(event)
        if not isinstance(chunk, dict):
            self._observe(event)
            return event
        chunk.update({k: v for k, v in (("id", self.id), ("created", self.created), ("model", self.model))
                      if v is not None})
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if isinstance(delta, dict):
                delta.pop("role", None)
                if not delta.get("content") and choice.get("finish_reason") is None and not set(delta) - {"content"}:
                    return None
        usage = chunk.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            usage["completion_tokens"] += self.base_tokens
            if isinstance(usage.get("prompt_tokens"), int):
                usage["prompt_tokens"] = max(0, usage["prompt_tokens"] - self.base_tokens)
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        event = b"data: " + orjson.dumps(chunk)
        self._observe(event, spliced=True)
        return event

    def _observe(self, event: bytes, spliced: bool = False) -> None:
        """Take one whole event the client gets (the hot path: every event of every resumable stream)."""
        if event.startswith(b"data: {") and b"\n" not in event:  # vLLM's one-line events
            if self.unsupported is not None:
                return  # nothing more to learn: it will not be resumed
            try:
                chunk = orjson.loads(event[6:])
            except orjson.JSONDecodeError:
                chunk = None
        elif event.strip() == DONE:
            self.done = True
            return
        else:
            chunk = _chunk(event)
            if chunk is None:
                return  # a comment, or not a data event
        if not isinstance(chunk, dict) or "error" in chunk:
            self.unsupported = self.unsupported or "an error event"
            return
        if self.id is None:
            self.id, self.created, self.model = chunk.get("id"), chunk.get("created"), chunk.get("model")
        usage = chunk.get("usage")
        counted = isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int)
        if counted:
            # continuous usage: exact (a spliced chunk's count already includes the tokens before the join)
            self.tokens = usage["completion_tokens"]
            self.exact = True
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                self.unsupported = self.unsupported or "several choices"
                continue
            if choice.get("logprobs") is not None:
                self.unsupported = self.unsupported or "logprobs"
            if self.chat:
                delta = choice.get("delta") or {}
                if len(delta) > 2 or not delta.keys() <= TEXT_DELTA_KEYS:
                    other = sorted(k for k, v in delta.items() if v not in (None, "", []) and k not in TEXT_DELTA_KEYS)
                    if other:
                        self.unsupported = self.unsupported or f"a delta with {other}"
                text = delta.get("content")
            else:
                text = choice.get("text")
            if text:
                self._pieces.append(text)
                if not counted:
                    self.tokens += 1
            if choice.get("finish_reason") is not None:
                self.finished = True

    @property
    def text(self) -> str:
        """The generated text the client got."""
        if len(self._pieces) > 1:
            self._pieces[:] = ["".join(self._pieces)]
        return self._pieces[0] if self._pieces else ""

    def counted(self, tokens: int | None) -> None:
        """The text sent so far is ``tokens`` tokens (an engine's ``/tokenize``; ``None``: unknown): used
        unless continuous usage counted exactly, and never below the chunks counted."""
        if tokens is not None and not self.exact:
            self.tokens = max(self.tokens, tokens)

    def length_end(self) -> bytes:
        """The events that end a stream whose token budget was spent before its engine sent the
        ``finish_reason``: a last chunk with no text and ``finish_reason: "length"`` (vLLM's shape for
        the choice, ``completion/protocol.py`` / ``chat_completion/protocol.py``, 0.32) under the
        stream's ``id``/``created``/``model``, and ``data: [DONE]``. A usage chunk asked for with
        ``stream_options.include_usage`` is not made up."""
        choice = ({"index": 0, "delta": {"content": ""}} if self.chat else {"index": 0, "text": ""})
        choice.update(logprobs=None, finish_reason="length", stop_reason=None)
        chunk = {"id": self.id, "object": "chat.completion.chunk" if self.chat else "text_completion",
                 "created": self.created, "model": self.model, "choices": [choice]}
        self.finished = True
        return b"data: " + orjson.dumps(chunk) + b"\n\n" + DONE + b"\n\n"

    def continuation(self, path: str, body: dict) -> dict | None:
        """:func:`continuation_body` of what was sent so far."""
        return continuation_body(path, body, self.text, self.tokens)


def continuation_body(path: str, body: dict, text: str, tokens: int) -> dict | None:
    """The request that continues a stream which sent ``text`` (``tokens`` tokens) of the answer to
    ``body`` (module docstring), or ``None`` when no token budget is left (the answer is complete at
    its length limit: :meth:`StreamTracker.length_end`). With no text sent yet (the client got the
    response head, and a chat's role-only delta, before the engine died) it is ``body`` itself, sent
    again whole.

    Args:
        path: ``/v1/completions`` or ``/v1/chat/completions``.
        body: the client's request (not changed).
        text: the generated text the client got.
        tokens: how many tokens that was.
    """
    cont = dict(body)
    if not text:
        return cont
    for key in ("max_tokens", "max_completion_tokens"):
        limit = body.get(key, 16 if key == "max_tokens" and not path.endswith("/chat/completions") else None)
        if isinstance(limit, int):
            if limit - tokens <= 0:
                return None
            cont[key] = limit - tokens
    if isinstance(body.get("min_tokens"), int) and body["min_tokens"]:
        cont["min_tokens"] = max(0, body["min_tokens"] - tokens)
    if path.endswith("/chat/completions"):
        messages = list(body["messages"])
        if body.get("continue_final_message"):
            last = dict(messages[-1])
            last["content"] = last["content"] + text
            messages[-1] = last
        else:
            messages.append({"role": "assistant", "content": text})
        cont.update(messages=messages, continue_final_message=True, add_generation_prompt=False)
    else:
        cont["prompt"] = body["prompt"] + text
    return cont


def _chunk(event: bytes) -> object:
    """The JSON of an SSE ``data:`` event (``None``: a comment, ``[DONE]`` or no data)."""
    data = [line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:")]
    if not data or data == [b"[DONE]"]:
        return None
    try:
        return orjson.loads(b"\n".join(data))
    except orjson.JSONDecodeError:
        return "not JSON"
