"""When the router sends a request again: what failed, and whether a retry is safe (pure functions).

Terms follow Envoy's ``retry_on`` conditions (``x-envoy-retry-on``), which llm-d's and Istio's
gateways configure the same way:

- ``connect_failure`` (Envoy ``connect-failure``): the connection could not be opened (refused,
  unreachable, connect timeout). The engine never got the request.
- ``reset`` (Envoy ``reset``): the connection was closed or reset before the engine's answer began
  (no response head; for a stream, no first chunk). An engine process that died with the request
  in hand.
- ``timeout``: no answer within the router's own limit (``--prefill-timeout``, ``--decode-timeout``).
  Envoy counts a read timeout as ``reset``; here it is apart, because the engine may still be
  working on the request: a prefill leg is tried on another prefill, but a timeout is never a
  reason to resend a whole request or to fall back to one role (:data:`RETRY_ON`).
- ``gateway_error`` (Envoy ``gateway-error``): the engine answered 502, 503 or 504: the answer of a
  server (or a proxy in front of it) that cannot serve now, not a verdict on the request.
- ``retriable_status`` (Envoy ``retriable-status-codes``): a prefill leg answered 429 or 500 (its answer
  goes to no client: another prefill may serve it). A decode's 500 is its verdict, and is relayed.
- ``bad_answer``: a prefill leg answered 200 without a JSON object (the router's own judgement, not a
  :func:`failure_reason`); tried on another prefill.
- ``kv_load_failed``: a decode that had the request could not load the prompt's KV from its prefill
  and said so before generating anything (:func:`kv_load_failed_answer`, :func:`stream_start`; the
  section below). The whole request is sent again through a new prefill leg, and the prefill is set
  aside: it is the engine whose KV could not be read (most often a process that died after answering
  its leg, before decode's NIXL read completed).
- ``pair_gone``: a prefill leg ran, and then no decode of that prefill's compat hash was Ready any more,
  while a prefill and a decode of another compat hash were (a coordinated rollout retiring the
  prefill's revision, docs/rollouts.md). The router's own judgement, not a :func:`failure_reason`: the
  whole request is sent again as a new P/D request (a new request id, a new prefill leg, never the
  first leg's ``kv_transfer_params``), which can only go to a pair of a revision that has one; nothing is
  set aside. Without such a pair, or with the retry budget spent, the prefill serves the request alone
  (the fallback), as before.

Safe means the client has received nothing: Envoy, too, never retries once response headers went
downstream. The router holds the client's response head until decode's first chunk (a stream) or its
whole answer, so everything before that can be sent again. A decode that received the request has
pulled (or was pulling) the prompt's KV from its prefill, and vLLM frees those blocks on prefill once
decode's read completes (``nixl/pull_worker.py`` ``_read_blocks`` ``send_notif``, vLLM 0.32) or when
their lease ends (``kv_lease_duration``, 30 s, ``nixl/pull_scheduler.py`` ``request_finished``): the
same ``kv_transfer_params`` may name freed blocks, so a decode failure is retried as a whole new P/D
request (a new prefill leg, a new request id), never by handing the old KV to another decode.

What a client of decode sees when decode's KV load fails (read in vLLM 0.26.0 and 0.32.0; the same in both)
---------------------------------------------------------------------------------------------------------

A failed load reaches the scheduler two ways: a NIXL transfer or handshake that failed (the prefill's side
channel refused, its agent gone: ``nixl/base_worker.py`` ``_failed_recv_reqs`` / ``get_finished``, the
blocks reported as ``invalid_block_ids``; 0.32 also ``KVConnectorOutput.failed_recving``), handled in
``v1/core/sched/scheduler.py`` ``update_from_output`` by ``_handle_invalid_blocks`` (and, 0.32,
``_handle_failed_recving``). What follows is decided by ``KVTransferConfig.kv_load_failure_policy``
(``config/kv_transfer.py``, ``--kv-transfer-config '{"kv_load_failure_policy": ...}'``; the scheduler's
``recompute_kv_load_failures``), whose default is ``"fail"`` in both versions:

- ``"fail"``: the request is finished with ``RequestStatus.FINISHED_ERROR`` and no token
  (``EngineCoreOutput(new_token_ids=[], finish_reason=FinishReason.ERROR)``, logged "Failing N request(s)
  due to KV load failure"); the output processor (``v1/engine/output_processor.py``) passes
  ``finish_reason="error"`` on. The OpenAI serving layer turns that into ``GenerationError("Internal server
  error")`` (``_raise_if_error``, ``entrypoints/generate/base/serving.py``; the class is in
  ``entrypoints/openai/engine/protocol.py`` in 0.26.0 and ``vllm/exceptions.py`` in 0.32.0), before any
  text of that request:

  - not streamed: HTTP 500 with ``{"error":{"message":"Internal server error","type":"InternalServerError",
    "param":null,"code":500}}`` (the app's ``generation_error_handler``: ``JSONResponse`` of
    ``create_error_response``; ``entrypoints/serve/utils/server_utils.py`` in 0.26.0,
    ``entrypoints/serve/exception_handling/handlers/vllm_error.py`` in 0.32.0);
  - streamed ``/v1/completions``: HTTP 200 ``text/event-stream`` whose first event is
    ``data: {"error": {"message": "Internal server error", "type": "InternalServerError", "param": null,
    "code": 500}}`` (``_convert_generation_error_to_streaming_response``: ``json.dumps``), then
    ``data: [DONE]`` (``entrypoints/openai/completion/serving.py``);
  - streamed ``/v1/chat/completions``: the same, after the opening role-only chunk (``"delta": {"role":
    "assistant", "content": ""}``, one per choice), which vLLM sends on the first output whatever it holds
    (``entrypoints/openai/chat_completion/serving.py`` ``first_iteration``, then ``_raise_if_error``).

  vLLM finishes a request with ``finish_reason="error"`` for a few other causes too (a grammar that did not
  compile, in 0.32.0 an encoder-cache mismatch), with the same bytes: a client cannot tell them apart. The
  router takes that answer from a decode it sent prefill's ``kv_transfer_params`` to, before any text,
  as a failed KV load: a retry of another cause fails the same way, within ``RouterConfig.retries``.
- ``"recompute"``: the request's computed tokens are reset to 0 and it is scheduled again
  (``failed_recving_kv_req_ids``, "Recovered from KV load failure: N request(s) rescheduled"): decode
  computes the whole prompt itself and the client gets a normal answer. Nothing in the answer says so (only
  decode's logs and metrics), so the router cannot retry it, and that request's KV did not come from
  prefill. The operator leaves vLLM's default (``"fail"``) in place: docs/router.md "KV load failures".
"""

from __future__ import annotations

import asyncio

import aiohttp
import orjson

#: Response header of an answer the router got on a retry: ``<role>=<reason>`` of what failed first.
RETRY_HEADER = "X-PDD-Retry"
CONNECT_FAILURE, RESET, TIMEOUT = "connect_failure", "reset", "timeout"
GATEWAY_ERROR, RETRIABLE_STATUS, BAD_ANSWER = "gateway_error", "retriable_status", "bad_answer"
KV_LOAD_FAILED, PAIR_GONE = "kv_load_failed", "pair_gone"
#: Every reason, as the ``reason`` label of ``pdd_router_retries_total``.
REASONS = (CONNECT_FAILURE, RESET, TIMEOUT, GATEWAY_ERROR, RETRIABLE_STATUS, BAD_ANSWER, KV_LOAD_FAILED, PAIR_GONE)
#: The reasons a whole request is sent again for, or served by the fallback in its place (:func:`may_retry`).
RETRY_ON = frozenset({CONNECT_FAILURE, RESET, GATEWAY_ERROR, RETRIABLE_STATUS, KV_LOAD_FAILED, PAIR_GONE})
#: Statuses of an engine that is going away or overloaded (Envoy ``gateway-error``).
GATEWAY_STATUS = frozenset({502, 503, 504})
#: Further statuses a prefill leg is retried for (Envoy ``retriable-status-codes``): overload, server error.
PREFILL_STATUS = frozenset({429, 500})
#: Failures that mean the request never reached the engine: refused, unreachable, or the connect timed out.
NOT_CONNECTED = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
#: The ``error`` object of vLLM's answer to a request finished with ``finish_reason="error"``
#: (``GenerationError``, module docstring), ``param`` aside.
GENERATION_ERROR = {"message": "Internal server error", "type": "InternalServerError", "code": 500}
#: :func:`stream_start` verdicts besides :data:`KV_LOAD_FAILED`: read more, or relay (a real answer).
HOLD, ANSWER = "hold", "answer"
#: The most bytes of a stream's start held back for :func:`stream_start` (vLLM's opening chunks are a few
#: hundred bytes; more is not vLLM's start of a stream, and it is relayed).
MAX_HELD_BYTES = 64 * 1024
#: Chat delta keys of vLLM's opening role-only chunk.
_ROLE_DELTA_KEYS = frozenset({"role", "content"})


def failure_reason(role: str, status: int | None = None, error: BaseException | None = None) -> str | None:
    """The retry condition a failed leg matches, or ``None`` when it is not one to retry.

    Args:
        role: ``prefill`` or ``decode``, the leg's role.
        status: the HTTP status the engine answered (``None``: it answered nothing).
        error: the exception that ended the leg before its answer began (``None``: it answered).

    Returns:
        One of :data:`REASONS`, or ``None``: an answer that is the engine's verdict on the request
        (2xx, 4xx but 429, a decode's 500), or an error that is not the transport's.
    """
    if error is not None:
        if isinstance(error, NOT_CONNECTED):
            return CONNECT_FAILURE
        if isinstance(error, asyncio.TimeoutError):  # aiohttp's read timeouts are TimeoutErrors too
            return TIMEOUT
        if isinstance(error, (aiohttp.ClientError, ConnectionError)):
            return RESET
        return None
    if status in GATEWAY_STATUS:
        return GATEWAY_ERROR
    if role == "prefill" and status in PREFILL_STATUS:
        return RETRIABLE_STATUS
    return None


def may_retry(reason: str | None, *, client_got_bytes: bool, retries: int, max_retries: int,
              elapsed: float, deadline: float) -> bool:
    """Whether a failed request is sent again as a whole (or served by the fallback in its place).

    Args:
        reason: :func:`failure_reason` of the failure; only :data:`RETRY_ON` are retried.
        client_got_bytes: whether any byte of the response has gone to the client (then never).
        retries: retries already made for this request.
        max_retries: the bound (``RouterConfig.retries``; 0 turns retries off).
        elapsed: seconds since the request arrived.
        deadline: no retry starts later than this many seconds after the request arrived.
    """
    return reason in RETRY_ON and not client_got_bytes and retries < max_retries and elapsed < deadline


def is_generation_error(obj: object) -> bool:
    """Whether ``obj`` (a parsed JSON body or SSE event) is vLLM's answer to a request that finished with
    ``finish_reason="error"``: ``{"error": {"message": "Internal server error", "type":
    "InternalServerError", "param": null, "code": 500}}`` (:data:`GENERATION_ERROR`; module docstring)."""
    if not isinstance(obj, dict) or set(obj) != {"error"} or not isinstance(obj["error"], dict):
        return False
    error = obj["error"]
    return all(error.get(k) == v for k, v in GENERATION_ERROR.items()) and error.get("param") is None


def kv_load_failed_answer(status: int, body: bytes) -> bool:
    """Whether a decode's whole (not streamed) answer is vLLM's failed KV load: HTTP 500 with the
    :func:`is_generation_error` body (module docstring; vLLM 0.26.0 and 0.32.0). Only a decode that was
    sent prefill's ``kv_transfer_params`` may be judged so (the caller's part).

    Args:
        status: the HTTP status decode answered.
        body: its whole body.
    """
    if status != 500:
        return False
    try:
        return is_generation_error(orjson.loads(body))
    except orjson.JSONDecodeError:
        return False


def stream_start(held: bytes) -> str:
    """What the start of a decode's SSE stream is, from the bytes read so far (nothing relayed yet).

    Args:
        held: the stream's first bytes, as read (whole events end with a blank line, ``\n\n``).

    Returns:
        :data:`KV_LOAD_FAILED`: vLLM's error event (:func:`is_generation_error`) came before any text,
        after nothing or only chat's opening role-only chunks (module docstring); :data:`ANSWER`: an event
        with anything else (text, a ``finish_reason``, ``[DONE]``, something that is not vLLM's), or more
        than :data:`MAX_HELD_BYTES` undecided: relay it all; :data:`HOLD`: only role-only chunks, or no
        whole event yet: read more (at the stream's end, relay what there is).
    """
    for event in held.split(b"\n\n")[:-1]:
        event = event.strip()
        if not event:
            continue
        if not event.startswith(b"data:") or b"\n" in event:
            return ANSWER  # vLLM sends one-line data events only
        data = event[5:].strip()
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return ANSWER  # [DONE], or not JSON
        if is_generation_error(chunk):
            return KV_LOAD_FAILED
        if not _role_only(chunk):
            return ANSWER
    return HOLD if len(held) <= MAX_HELD_BYTES else ANSWER


def _role_only(chunk: object) -> bool:
    """Whether ``chunk`` is vLLM's opening chat chunk: each choice's delta only ``role`` and an empty
    ``content``, no ``finish_reason`` (``chat_completion/serving.py`` ``first_iteration``)."""
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    if not isinstance(choices, list) or not choices:
        return False
    for choice in choices:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if (not isinstance(delta, dict) or not delta.keys() <= _ROLE_DELTA_KEYS or delta.get("content")
                or choice.get("finish_reason") is not None):
            return False
    return True
