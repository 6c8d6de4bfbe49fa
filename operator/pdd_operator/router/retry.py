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

Safe means the client has received nothing: Envoy, too, never retries once response headers went
downstream. The router holds the client's response head until decode's first chunk (a stream) or its
whole answer, so everything before that can be sent again. A decode that received the request has
pulled (or was pulling) the prompt's KV from its prefill, and vLLM frees those blocks on prefill once
decode's read completes (``nixl/pull_worker.py`` ``_read_blocks`` ``send_notif``, vLLM 0.32) or when
their lease ends (``kv_lease_duration``, 30 s, ``nixl/pull_scheduler.py`` ``request_finished``): the
same ``kv_transfer_params`` may name freed blocks, so a decode failure is retried as a whole new P/D
request (a new prefill leg, a new request id), never by handing the old KV to another decode.
"""

from __future__ import annotations

import asyncio

import aiohttp

#: Response header of an answer the router got on a retry: ``<role>=<reason>`` of what failed first.
RETRY_HEADER = "X-PDD-Retry"
CONNECT_FAILURE, RESET, TIMEOUT = "connect_failure", "reset", "timeout"
GATEWAY_ERROR, RETRIABLE_STATUS, BAD_ANSWER = "gateway_error", "retriable_status", "bad_answer"
#: Every reason, as the ``reason`` label of ``pdd_router_retries_total``.
REASONS = (CONNECT_FAILURE, RESET, TIMEOUT, GATEWAY_ERROR, RETRIABLE_STATUS, BAD_ANSWER)
#: The reasons a whole request is sent again for, or served by the fallback in its place (:func:`may_retry`).
RETRY_ON = frozenset({CONNECT_FAILURE, RESET, GATEWAY_ERROR, RETRIABLE_STATUS})
#: Statuses of an engine that is going away or overloaded (Envoy ``gateway-error``).
GATEWAY_STATUS = frozenset({502, 503, 504})
#: Further statuses a prefill leg is retried for (Envoy ``retriable-status-codes``): overload, server error.
PREFILL_STATUS = frozenset({429, 500})
#: Failures that mean the request never reached the engine: refused, unreachable, or the connect timed out.
NOT_CONNECTED = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)


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
