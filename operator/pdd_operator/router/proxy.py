"""The router's HTTP server (aiohttp) and the P/D request protocols.

Pull mode (``NixlConnector``; vllm-nixl-facts.md section 6.1, cpu-pd.md "The request protocol"):

1. prefill leg: the client's body with ``max_tokens`` 1 (and ``max_completion_tokens`` 1 when
   present), ``stream`` false, no ``stream_options``/``min_tokens``/``min_completion_tokens``, and
   ``kv_transfer_params`` = ``{do_remote_decode: true, do_remote_prefill: false, remote_*: null}``;
2. decode leg: the client's body unchanged plus the ``kv_transfer_params`` prefill returned, unchanged
   (``tp_size``, ``dcp_size``, ``pp_size`` and every other key kept); its answer, streamed or not, goes
   back to the client byte for byte.

Push mode (``NixlPushConnector``, vLLM >= 0.24; section 6.2): both legs at once; decode is told
prefill's engine id, side-channel host and port, TP and PP and ``remote_request_id`` = the shared
``X-Request-Id``. The host, port, TP and PP come from discovery (:mod:`pdd_operator.router.discovery`);
the engine id only from the engine process itself: each vLLM process draws its own, and a prefill
answer names it (``kv_transfer_params.remote_engine_id``, ``push_scheduler.py`` ``request_finished``,
vLLM 0.24-0.33). A prefill endpoint whose engine id the router has not learned (new, restarted, or
not connectable since) gets the pull order instead: prefill first, then decode with the
``kv_transfer_params`` prefill returned, which vLLM's push decode accepts as well (it registers with
the engine they name, and prefill matches the registration to the blocks it holds by request id,
``push_worker.py`` ``_pop_matching_finished_blocks``). So decode is never told an engine id that no
engine reported: vLLM 0.32 keeps the NIXL agent of an engine id it handshook with until
``engine_ttl`` even after that process died (``base_worker.py`` ``_track_remote_engine_replacement``:
"TODO: Also handle push mode"), so a reused id would send its registrations to the dead agent.

Both legs carry the same ``X-Request-Id`` (generated here) and the client's ``Authorization``. A
prefill leg that fails (connection error, timeout, 5xx, 429) is retried on another prefill endpoint
(bounded). A decode that failed with the request in hand before the client got a byte (reset, 502-504),
or answered that it could not load the prompt's KV (``kv_load_failed``: vLLM's ``finish_reason`` "error"
before any token; the prefill is then set aside), makes the whole request run again once, under a new id
and through a new prefill leg (:mod:`pdd_operator.router.retry`, :meth:`Router._completion`); so does a
prefill leg after which no decode of the prefill's compat hash is Ready any more while another compat hash
has a full pair (``pair_gone``: a coordinated rollout retiring that revision; nothing is set aside, and
the fallback serves it only when no pair is left or the retry budget is spent); any other failure before
the first byte reaches the client is an OpenAI-shaped JSON error.
When the client goes away, the handler is cancelled, which closes both upstream connections: vLLM
aborts a request whose connection closes.

Fallback (``RouterConfig.fallback``, on by default; ``spec.router.fallback``): when no prefill endpoint
is usable (none Ready, or every one tried refused the connection), a decode endpoint serves the request
alone, and when no decode endpoint is usable, a prefill endpoint does: the client's body as a plain
request, without ``kv_transfer_params``. Both roles are full engines: with NixlConnector and
NixlPushConnector (vLLM 0.32), a request without ``do_remote_prefill`` loads nothing from a remote
engine (``nixl/pull_scheduler.py`` and ``nixl/push_scheduler.py`` ``get_num_new_matched_tokens``
return 0 external tokens, so the scheduler computes the prompt locally and never waits for KV), and
one without ``do_remote_decode`` holds no blocks for a decode (``request_finished`` returns
``False, None`` for a request with no params): normal generation. The answer carries
``X-PDD-Fallback: decode-only`` (or ``prefill-only``), ``pdd_router_fallback_requests_total{reason,role}``
counts it, the router logs once when it starts and once when P/D serving resumes, and ``/ready`` stays
200 with ``fallback`` saying which role serves alone (:meth:`Router.handle_ready`). Only a prefill leg
that never reached an engine (refused, unreachable, connect timeout) counts as "refused": a prefill that
answered 5xx is not replaced by decode. Compat: :meth:`~pdd_operator.router.endpoints.Registry.pick_alone`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import aiohttp
import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from pdd_operator.api.constants import ROLES, ROUTER_RETRY_ATTEMPTS, ROUTER_RETRY_DEADLINE_SECONDS, other_role
from pdd_operator.router.endpoints import Endpoint, NoEndpoint, Registry
from pdd_operator.router.resume import StreamTracker, excluded
from pdd_operator.router.retry import (
    ANSWER,
    BAD_ANSWER,
    CONNECT_FAILURE,
    GATEWAY_ERROR,
    GATEWAY_STATUS,
    HOLD,
    KV_LOAD_FAILED,
    NOT_CONNECTED,
    PAIR_GONE,
    PREFILL_STATUS,
    REASONS,
    RESET,
    RETRY_HEADER,
    RETRY_ON,
    failure_reason,
    kv_load_failed_answer,
    may_retry,
    stream_start,
)

log = logging.getLogger("pdd_operator.router")

PULL_PREFILL_PARAMS = {
    "do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
    "remote_block_ids": None, "remote_host": None, "remote_port": None,
}
#: Fields the prefill leg must not carry (vLLM's toy proxy: "not supported for P").
PREFILL_DROPPED = ("stream_options", "min_tokens", "min_completion_tokens")
#: Prefill statuses worth another prefill endpoint: overload and server-side failures.
RETRYABLE_STATUS = GATEWAY_STATUS | PREFILL_STATUS
#: Failures of a prefill leg after which decode may serve the request alone (the engine is gone or
#: going away), as opposed to an answer about the request, or a slow engine.
TRANSPORT_REASONS = frozenset({CONNECT_FAILURE, RESET, GATEWAY_ERROR})
#: Request-scoped keys (``request[...]``): every retry made (``RETRY_HEADER`` values), the retries that
#: count against ``RouterConfig.retries``, the arrival time (``time.monotonic()``).
_RETRIED = web.RequestKey("pdd_retried", tuple)
_WHOLE = web.RequestKey("pdd_retries", int)
_STARTED = web.RequestKey("pdd_started", float)
#: The client's stream, when it may be resumed (:mod:`pdd_operator.router.resume`): what it got so far.
_STREAM = web.RequestKey("pdd_stream", object)
#: Seconds the router keeps an idle connection to an engine for reuse: under the engines' own keep-alive.
#: vLLM's API server (uvicorn) closes a connection idle for ``VLLM_HTTP_TIMEOUT_KEEP_ALIVE`` seconds, 5 by
#: default (``vllm/envs.py``, 0.26.0 and 0.32.0; ``entrypoints/launchers/api_server/entry.py`` passes it as
#: ``timeout_keep_alive``). A pool that keeps connections longer reuses one the engine is closing, and the
#: request sent on it fails with a reset (aiohttp's ``ServerDisconnectedError``) though the engine is healthy.
#: Closing first, the router opens a new connection instead.
ENGINE_KEEPALIVE_S = 4.0
#: Response header of a request served by one engine alone (fallback): ``decode-only`` or ``prefill-only``.
FALLBACK_HEADER = "X-PDD-Fallback"
HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "te", "trailer",
                        "upgrade", "proxy-authenticate", "proxy-authorization", "server", "date"})


@dataclass(frozen=True)
class RouterConfig:
    """Router settings (``pdd router`` flags).

    Attributes:
        mode: ``pull`` (NixlConnector) or ``push`` (NixlPushConnector).
        fallback: when one role has no usable endpoint, the other serves requests alone (module
            docstring); ``False``: answer 503 instead (e.g. for latency SLOs that colocated serving breaks).
        prefill_retries: extra prefill endpoints to try when a prefill leg fails; also extra
            decode endpoints (of the same compat hash) to try when a decode cannot be connected to
            (it never got the request: a process that just died, before discovery drops it); in
            push mode the prefill leg sent with that decode is cancelled and both legs sent again.
        max_body_bytes: largest accepted request body.
        connect_timeout: seconds to open a connection to an engine.
        prefill_timeout: seconds for a whole prefill leg.
        decode_timeout: seconds without a byte from decode (between stream chunks, or for a whole
            non-streaming answer) before the request fails.
        unreachable_seconds: how long an endpoint that could not be connected to is set aside
            (:func:`pdd_operator.router.endpoints.reachable`).
        retries: how many times a request is sent again as a whole (a new prefill leg and request id)
            after its decode, or the engine serving it alone, failed before the client got a byte, or
            its prefill's revision lost its decodes after the prefill leg (``pair_gone``)
            (:mod:`pdd_operator.router.retry`), and whether a prefill leg that failed so (reset,
            502-504) with no other prefill left falls back to decode alone; 0 turns both off (the
            retries on another endpoint of the same role, ``prefill_retries``, stay).
        retry_deadline: no such retry starts later than this many seconds after the request arrived.
        resume: a streamed answer whose decode failed after the client got tokens goes on from another
            decode in the same response (:mod:`pdd_operator.router.resume`); each continuation is one of
            the ``retries``, within ``retry_deadline``. ``False``: the stream ends with an error event
            (for engines without ``continue_final_message``, or to keep answers byte for byte).
    """

    mode: str = "pull"
    fallback: bool = True
    prefill_retries: int = 2
    max_body_bytes: int = 16 * 1024 * 1024
    connect_timeout: float = 5.0
    prefill_timeout: float = 600.0
    decode_timeout: float = 600.0
    unreachable_seconds: float = 5.0
    retries: int = ROUTER_RETRY_ATTEMPTS
    retry_deadline: float = float(ROUTER_RETRY_DEADLINE_SECONDS)
    resume: bool = True


class Metrics:
    """Prometheus metrics of one router (own registry, so several routers can live in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("pdd_router_requests", "Client requests by route and HTTP status.",
                                ["route", "code"], registry=self.registry)
        self.latency = Histogram("pdd_router_request_seconds", "Client request duration (to the last byte).",
                                 ["route"], registry=self.registry,
                                 buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300))
        self.upstream_errors = Counter("pdd_router_upstream_errors", "Failed legs by role.", ["role"],
                                       registry=self.registry)
        self.prefill_retries = Counter("pdd_router_prefill_retries", "Prefill legs retried on another endpoint.",
                                       registry=self.registry)
        self.retries = Counter(
            "pdd_router_retries",
            "Requests and legs sent again after a failure before the client got a byte; role: the role of "
            "the leg that failed, reason: " + ", ".join(REASONS) + " (Envoy retry_on terms).",
            ["role", "reason"], registry=self.registry)
        self.decode_retries = Counter("pdd_router_decode_retries",
                                      "Decode legs sent to another endpoint after a refused connection.",
                                      registry=self.registry)
        self.set_aside = Counter("pdd_router_endpoints_set_aside",
                                 "Endpoints set aside after a failed connection (chosen last for a few seconds).",
                                 registry=self.registry)
        self.no_kv_params = Counter("pdd_router_prefill_without_kv_params",
                                    "Prefill answers without kv_transfer_params (decode recomputes the prompt).",
                                    registry=self.registry)
        self.engine_id_changes = Counter(
            "pdd_router_prefill_engine_id_changes",
            "Push mode: prefill answers naming another engine id than the one decode was told (the "
            "process was replaced unseen: that request's decode was told the old process's id).",
            registry=self.registry)
        self.resumed = Counter(
            "pdd_router_resumed_streams",
            "Streamed answers continued from another decode after theirs failed mid-stream (one per "
            "continuation; reason: the failure, as in pdd_router_retries_total).",
            ["reason"], registry=self.registry)
        self.fallback = Counter(
            "pdd_router_fallback_requests",
            "Requests served by one engine alone, as plain requests, because the other role had no usable "
            "endpoint; role: the role that served, reason: no_ready (none Ready), refused (every one tried "
            "refused the connection) or failed (the leg failed before answering: reset, 502-504).",
            ["reason", "role"], registry=self.registry)
        self.disconnects = Counter("pdd_router_client_disconnects", "Requests cancelled by the client going away.",
                                   registry=self.registry)
        self.endpoints = Gauge("pdd_router_endpoints", "Ready endpoints by role.", ["role"], registry=self.registry)
        self.in_flight = Gauge("pdd_router_in_flight", "Requests in flight by role.", ["role"], registry=self.registry)
        # Label children resolved once: labels() costs tens of microseconds per call.
        self.prefill_errors, self.decode_errors = (self.upstream_errors.labels(r) for r in ("prefill", "decode"))
        self.prefill_in_flight, self.decode_in_flight = (self.in_flight.labels(r) for r in ("prefill", "decode"))
        self._requests: dict[tuple[str, int], Counter] = {}
        self._latency: dict[str, Histogram] = {}

    def observe(self, route: str, status: int, seconds: float) -> None:
        """Count one client request and its duration."""
        key = (route, status)
        child = self._requests.get(key)
        if child is None:
            child = self._requests[key] = self.requests.labels(route, str(status))
        child.inc()
        hist = self._latency.get(route)
        if hist is None:
            hist = self._latency[route] = self.latency.labels(route)
        hist.observe(seconds)


def loads(raw: bytes) -> object:
    """Parse a JSON body (orjson; the standard library only for integers wider than 64 bits).

    Raises ``ValueError`` for anything that is not JSON, ``NaN`` and ``Infinity`` included.
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw, parse_constant=_reject_constant)


def dumps(obj: object) -> bytes:
    """Serialize a JSON body (orjson; the standard library for integers wider than 64 bits)."""
    try:
        return orjson.dumps(obj)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(obj).encode()


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def openai_error(status: int, message: str, type_: str = "server_error", code: str | None = None,
                 headers: dict | None = None) -> web.Response:
    """An OpenAI-shaped error response: ``{"error": {"message", "type", "param", "code"}}``."""
    body = {"error": {"message": message, "type": type_, "param": None, "code": code or status}}
    return web.json_response(body, status=status, headers=headers)


@contextlib.contextmanager
def _in_flight(ep: Endpoint, gauge) -> Iterator[None]:
    """Count a leg on its endpoint (for the load-aware choice) and in the role's in-flight gauge."""
    ep.outstanding += 1
    gauge.inc()
    try:
        yield
    finally:
        ep.outstanding -= 1
        gauge.dec()


class _LegFailed(Exception):
    """A prefill leg failed; ``response`` is what the client should get if nothing else is tried;
    ``reason``: the retry condition it matched (:func:`~pdd_operator.router.retry.failure_reason`, or
    ``bad_answer`` for a 200 without a JSON object), ``None`` for the client's own error (4xx)."""

    def __init__(self, message: str, response: web.Response, reason: str | None) -> None:
        super().__init__(message)
        self.response = response
        self.reason = reason
        self.retryable = reason is not None
        #: The leg never reached the engine (:data:`NOT_CONNECTED`).
        self.refused = reason == CONNECT_FAILURE


class _DecodeFailed(Exception):
    """A decode leg (or an engine serving a request alone) failed before the client got a byte of the
    answer, for a reason worth a retry (``reason``: :func:`~pdd_operator.router.retry.failure_reason`,
    or ``kv_load_failed``; the engine got the request, so its KV hand-off is spent). ``response``: the
    client's answer if the request is not sent again; ``endpoint``: the engine that failed; ``kv_from``:
    the prefill whose KV it was sent to load (``None``: none)."""

    def __init__(self, message: str, response: web.Response, reason: str, endpoint: Endpoint,
                 kv_from: Endpoint | None = None) -> None:
        super().__init__(message)
        self.response = response
        self.reason = reason
        self.endpoint = endpoint
        self.kv_from = kv_from

    @property
    def suspect(self) -> Endpoint:
        """The engine to set aside before the request is sent again: the prefill whose KV could not be
        loaded (``kv_load_failed``: decode is healthy and said so), else the engine that failed."""
        return self.kv_from if self.reason == KV_LOAD_FAILED and self.kv_from is not None else self.endpoint


class _StreamBroken(_DecodeFailed):
    """A resumable stream's decode failed after the client got part of the answer (the connection closed
    or reset, or ended without ``[DONE]``): the client's response is open (``request[_STREAM]``)."""

    def __init__(self, message: str, reason: str, endpoint: Endpoint) -> None:
        super().__init__(message, None, reason, endpoint)


class _PairGone(Exception):
    """A prefill leg ran, then its compat hash had no Ready decode left, while another compat hash has a
    full P/D pair; the retry is already counted (:meth:`Router._pull`): :meth:`Router._completion` sends
    the request again as a new P/D request (reason ``pair_gone``, :mod:`pdd_operator.router.retry`)."""


class _Unreachable(Exception):
    """A decode endpoint could not be connected to (it never got the request); ``response`` is the 502
    the client gets if no other decode is tried."""

    def __init__(self, message: str, response: web.Response) -> None:
        super().__init__(message)
        self.response = response


class _RelayResponse(web.StreamResponse):
    """The streamed answer to the client, its head sent together with the first chunk (one send, so one
    wake-up of the client instead of two), as aiohttp's own ``web.Response`` does.

    Decode's response head has already arrived when this is prepared; only its first chunk is awaited
    before anything reaches the client, which gets both at once."""

    _send_headers_immediately = False


class _ClientStream:
    """The client's streamed answer while it may be resumed: ``tracker`` (what it got), ``out`` (its
    response once prepared: every continuation writes into it)."""

    def __init__(self, tracker: StreamTracker) -> None:
        self.tracker = tracker
        self.out: web.StreamResponse | None = None

    async def fail(self, message: str) -> None:
        """End the stream with an OpenAI-shaped error event and no ``[DONE]`` (as an unresumed one ends)."""
        err = {"error": {"message": message, "type": "server_error", "param": None, "code": 502}}
        await self.out.write_eof(b"data: " + dumps(err) + b"\n\n")


class Router:
    """The router: a :class:`Registry` of endpoints, a pooled client session and the request handlers."""

    def __init__(self, registry: Registry, config: RouterConfig | None = None) -> None:
        self.registry = registry
        self.config = config or RouterConfig()
        #: Whether the registry holds the endpoints' current state: static endpoints always do; with
        #: Kubernetes discovery, :func:`pdd_operator.router.server.serve` points this at its first list.
        self.synced: Callable[[], bool] = lambda: True
        self.metrics = Metrics()
        #: The role that served the last routed request alone (fallback), or ``None`` while pairs serve.
        self.serving_alone: str | None = None
        self.session: aiohttp.ClientSession | None = None
        c = self.config
        self._prefill_timeout = aiohttp.ClientTimeout(total=c.prefill_timeout, connect=c.connect_timeout)
        self._decode_timeout = aiohttp.ClientTimeout(total=None, connect=c.connect_timeout, sock_read=c.decode_timeout)
        self._models_timeout = aiohttp.ClientTimeout(total=30, connect=c.connect_timeout)

    # -- application -------------------------------------------------------------------------

    def app(self) -> web.Application:
        """The aiohttp application (run it with ``handler_cancellation=True``, see :func:`serve`)."""
        app = web.Application(client_max_size=self.config.max_body_bytes)
        app.router.add_post("/v1/completions", self.handle_completion)
        app.router.add_post("/v1/chat/completions", self.handle_completion)
        app.router.add_get("/v1/models", self.handle_models)
        app.router.add_get("/health", self.handle_health)
        app.router.add_get("/ready", self.handle_ready)
        app.router.add_get("/metrics", self.handle_metrics)
        app.cleanup_ctx.append(self._session_ctx)
        return app

    async def _session_ctx(self, _app: web.Application):
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=ENGINE_KEEPALIVE_S,
                                         enable_cleanup_closed=True)
        self.session = aiohttp.ClientSession(
            connector=connector, auto_decompress=False, skip_auto_headers=("User-Agent",),
            cookie_jar=aiohttp.DummyCookieJar(),  # never carry one client's cookies into another's request
            timeout=aiohttp.ClientTimeout(total=None, connect=self.config.connect_timeout),
        )
        yield
        await self.session.close()

    # -- small handlers ------------------------------------------------------------------------

    async def handle_health(self, _request: web.Request) -> web.Response:
        """Liveness: the process serves. Says how many endpoints and pairs are ready."""
        return web.json_response({
            "status": "ok", "mode": self.config.mode, "synced": self.synced(),
            "prefill": len(self.registry.endpoints("prefill")), "decode": len(self.registry.endpoints("decode")),
            "pairs": self.registry.pairs(), "fallback": self._fallback_state(),
        })

    async def handle_ready(self, _request: web.Request) -> web.Response:
        """Readiness: 200 when a request could be routed now (discovery has listed the pods, and a prefill
        endpoint has a decode endpoint of its compat hash and, in push mode, publishes its coordinates,
        or, with fallback, an engine of one role could serve it alone); otherwise 503 with the reason, so
        a router that cannot serve (no engines, no permission to list pods) takes no traffic from its
        Service and does not replace a working one in a rollout.

        Body: ``{"ready": true, "pairs": N, "fallback": null}``, or ``"fallback": {"role": "decode",
        "reason": "..."}`` while one role serves alone (no Ready prefill, or the last request found every
        prefill refusing connections); ``{"ready": false, "reason": "..."}`` with 503."""
        if not self.synced():
            return web.json_response({"ready": False, "reason": "the engine pods have not been listed yet"},
                                     status=503)
        unservable, state = self.registry.unservable(push=self.config.mode == "push"), self._fallback_state()
        if unservable is None or state is not None:
            return web.json_response({"ready": True, "pairs": self.registry.pairs(), "fallback": state})
        return web.json_response({"ready": False, "reason": str(unservable)}, status=503)

    def _fallback_state(self) -> dict | None:
        """``{"role", "reason"}`` when requests are (or would now be) served by one role alone, else ``None``.

        From the registry (a role has no Ready endpoint and the other could serve alone) or, failing
        that, from the last routed request (:attr:`serving_alone`: every endpoint tried refused)."""
        if not self.config.fallback:
            return None
        exc = self.registry.unservable(push=self.config.mode == "push")
        if exc is not None and exc.missing is not None:
            role = other_role(exc.missing)
            try:
                self.registry.pick_alone(role)
            except NoEndpoint:
                return None
            return {"role": role, "reason": str(exc)}
        if self.serving_alone is not None and exc is None:
            missing = other_role(self.serving_alone)
            return {"role": self.serving_alone, "reason": f"every {missing} endpoint refused the connection"}
        return None

    async def handle_metrics(self, _request: web.Request) -> web.Response:
        for role in ("prefill", "decode"):
            self.metrics.endpoints.labels(role).set(len(self.registry.endpoints(role)))
        return web.Response(body=generate_latest(self.metrics.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def handle_models(self, request: web.Request) -> web.Response:
        """``/v1/models`` from a decode endpoint (both roles serve the same model)."""
        try:
            ep = self.registry.any_decode()
        except NoEndpoint as exc:
            return openai_error(503, str(exc), code="no_endpoint")
        try:
            async with self.session.get(ep.target("/v1/models"), headers=self._forward_headers(request, None),
                                        timeout=self._models_timeout) as r:
                raw = await r.read()
                return web.Response(body=raw, status=r.status, headers=self._response_headers(r, None))
        except (TimeoutError, aiohttp.ClientError) as exc:
            self.metrics.decode_errors.inc()
            return openai_error(502, f"decode endpoint {ep.name}: {_describe(exc)}", code="upstream_error")

    # -- completions -----------------------------------------------------------------------------

    async def handle_completion(self, request: web.Request) -> web.StreamResponse:
        """``/v1/completions`` and ``/v1/chat/completions``: the P/D protocol of the configured mode."""
        start = time.perf_counter()
        route = request.path
        response: web.StreamResponse | None = None
        try:
            response = await self._completion(request)
            return response
        except (asyncio.CancelledError, ConnectionResetError):
            self.metrics.disconnects.inc()  # the client went away (the legs are closed on the way out)
            raise
        finally:
            self.metrics.observe(route, response.status if response is not None else 499, time.perf_counter() - start)

    async def _completion(self, request: web.Request) -> web.StreamResponse:
        try:
            body = loads(await request.read())
        except web.HTTPRequestEntityTooLarge:
            return openai_error(413, f"request body larger than {self.config.max_body_bytes} bytes",
                                "invalid_request_error", "request_too_large")
        except ValueError as exc:
            return openai_error(400, f"request body is not valid JSON: {exc}", "invalid_request_error", "invalid_json")
        if not isinstance(body, dict):
            return openai_error(400, "request body must be a JSON object", "invalid_request_error", "invalid_json")
        request[_STARTED] = time.monotonic()
        request_id = str(uuid.uuid4())
        route = self._push if self.config.mode == "push" else self._pull
        if self.config.resume and excluded(request.path, body) is None:
            request[_STREAM] = _ClientStream(StreamTracker(chat=request.path.endswith("/chat/completions")))
        sent = body
        while True:
            stream = request.get(_STREAM)
            try:
                response = await route(request, sent, self._forward_headers(request, request_id), request_id)
            except _PairGone as exc:
                # Nothing reached the client and no engine failed: a whole new P/D request, under a new id
                # (the first prefill's blocks stay held until their KV lease ends), on a pair that exists.
                retry_id = str(uuid.uuid4())
                log.warning("request %s: %s: sent again as %s", request_id, exc, retry_id)
                request_id = retry_id
                continue
            except _DecodeFailed as exc:
                log.warning("request %s: %s", request_id, exc)
                if stream is not None and stream.out is not None:
                    sent = await self._resume(request, body, stream, exc)
                    if sent is None:
                        return stream.out
                    retry_id = str(uuid.uuid4())
                    log.warning("request %s: its stream (%s) goes on as %s", request_id, stream.tracker.id, retry_id)
                    request_id = retry_id
                    continue
                if not self._retry(request, exc.endpoint.role, exc.reason, exc.response.prepared):
                    response = exc.response
                else:
                    # The engine had the request: its KV hand-off is spent. A whole new P/D request, under
                    # a new id (the failed one may still hold blocks on prefill), chosen without the engine
                    # that failed (set aside; with none of its role left, the fallback serves): for a
                    # failed KV load that is the prefill, and the new prefill leg goes to another one.
                    self._set_aside(exc.suspect)
                    retry_id = str(uuid.uuid4())
                    log.warning("request %s: sent again as %s", request_id, retry_id)
                    request_id = retry_id
                    continue
            if stream is not None and stream.out is not None and response is not stream.out:
                # a continuation was answered otherwise (no endpoint, the engine's verdict): end the stream
                await stream.fail(f"the stream could not be resumed: HTTP {response.status} "
                                  f"{_snippet(getattr(response, 'body', b'') or b'')}")
                return stream.out
            if request.get(_RETRIED) and not response.prepared:
                response.headers[RETRY_HEADER] = ", ".join(request[_RETRIED])
            return response

    async def _resume(self, request: web.Request, body: dict, stream: _ClientStream,
                      exc: _DecodeFailed) -> dict | None:
        """The client's stream broke (``exc``) after it got part of the answer: the continuation to send
        (:mod:`pdd_operator.router.resume`), counted as one of the request's retries and marked at the
        join with an SSE comment (with no text sent yet, the request itself); or ``None`` when the stream
        ends here: ``[DONE]`` when the answer had finished; a ``finish_reason: "length"`` chunk and
        ``[DONE]`` when every token asked for was sent; an error event when what was sent cannot be
        continued or the retry budget is spent."""
        tracker = stream.tracker
        if tracker.finished:
            # the answer was complete (its finish_reason sent); only the end was lost
            await stream.out.write_eof(b"data: [DONE]\n\n")
            return None
        if tracker.unsupported is None and not tracker.exact and tracker.text:
            tracker.counted(await self._count_tokens(request, body, tracker.text, exc.endpoint))
        if tracker.unsupported is not None:
            await stream.fail(f"{exc} (not resumed: {tracker.unsupported})")
            return None
        cont = tracker.continuation(request.path, body)
        if cont is None:
            # every token the client asked for was sent; only the finish_reason and the end were lost
            await stream.out.write_eof(tracker.length_end())
            return None
        if not self._retry(request, exc.endpoint.role, exc.reason):
            if exc.reason not in RETRY_ON:
                why = f"a {exc.reason} is not retried"
            else:
                why = "the retry budget is spent"
            await stream.fail(f"{exc} (not resumed: {why})")
            return None
        self._set_aside(exc.suspect)
        tracker.resume()
        self.metrics.resumed.labels(exc.reason).inc()
        await stream.out.write(f": pdd-resumed attempt={tracker.resumed} tokens={tracker.tokens} "
                               f"reason={exc.reason}\n\n".encode())
        return cont

    async def _count_tokens(self, request: web.Request, body: dict, text: str, failed: Endpoint) -> int | None:
        """How many tokens ``text`` is for the model, from vLLM's ``/tokenize`` (``{"count": N}``, vLLM
        0.32 ``entrypoints/serve/tokenize``) on a live engine other than ``failed`` (a decode first, then
        a prefill; at most two asked, each within ``connect_timeout``); ``None`` when none answers."""
        now = time.monotonic()
        candidates = [ep for role in ("decode", "prefill") for ep in self.registry.endpoints(role)
                      if ep.url != failed.url and ep.unreachable_until <= now][:2]
        ask = dumps({"model": body.get("model"), "prompt": text, "add_special_tokens": False})
        timeout = aiohttp.ClientTimeout(total=self.config.connect_timeout)
        for ep in candidates:
            try:
                async with self.session.post(ep.target("/tokenize"), data=ask, timeout=timeout,
                                             headers=self._forward_headers(request, None)) as r:
                    answer = loads(await r.read()) if r.status == 200 else None
            except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                log.info("tokenize on %s failed: %s", ep.name, _describe(exc))
                continue
            if isinstance(answer, dict) and isinstance(answer.get("count"), int):
                return answer["count"]
        return None

    def _retry(self, request: web.Request, role: str, reason: str | None, client_got_bytes: bool = False) -> bool:
        """Whether the request is sent again as a whole after a ``role`` leg failed for ``reason``
        (:func:`~pdd_operator.router.retry.may_retry`: at most ``config.retries`` times, within
        ``config.retry_deadline``); if so, the retry is counted and marked (:meth:`_retried`)."""
        if not may_retry(reason, client_got_bytes=client_got_bytes, retries=request.get(_WHOLE, 0),
                         max_retries=self.config.retries, elapsed=time.monotonic() - request[_STARTED],
                         deadline=self.config.retry_deadline):
            return False
        request[_WHOLE] = request.get(_WHOLE, 0) + 1
        self._retried(request, role, reason)
        return True

    def _retried(self, request: web.Request, role: str, reason: str) -> None:
        """Count a retry (``pdd_router_retries_total{role,reason}``) and mark the answer (:data:`RETRY_HEADER`)."""
        self.metrics.retries.labels(role, reason).inc()
        request[_RETRIED] = (*request.get(_RETRIED, ()), f"{role}={reason}")

    def _prefill_body(self, body: dict) -> bytes:
        leg = {k: v for k, v in body.items() if k not in PREFILL_DROPPED}
        leg["kv_transfer_params"] = dict(PULL_PREFILL_PARAMS)
        leg["stream"] = False
        leg["max_tokens"] = 1
        if "max_completion_tokens" in leg:
            leg["max_completion_tokens"] = 1
        return dumps(leg)

    async def _prefill_leg(self, ep: Endpoint, path: str, data: bytes, headers: dict) -> dict:
        """Run one prefill leg; return prefill's JSON answer. Raises :class:`_LegFailed`.

        A prefill that could not be connected to, or whose connection closed or reset with the leg in
        hand (a process that died; its KV, if any was handed off, goes with it), is set aside at once
        (:meth:`_set_aside`); it is chosen again after ``unreachable_seconds``, or at once when no other
        prefill is left."""
        with _in_flight(ep, self.metrics.prefill_in_flight):
            try:
                async with self.session.post(
                    ep.target(path), data=data, headers=headers, timeout=self._prefill_timeout,
                ) as resp:
                    raw = await resp.read()
                    if resp.status != 200:
                        self.metrics.prefill_errors.inc()
                        if resp.status in RETRYABLE_STATUS:
                            raise _LegFailed(f"prefill {ep.name} answered {resp.status}",
                                             openai_error(502, f"prefill endpoint {ep.name} answered HTTP {resp.status}: "
                                                          f"{_snippet(raw)}", code="upstream_error"),
                                             failure_reason("prefill", status=resp.status))
                        # The client's request is wrong (4xx): give the client prefill's own answer.
                        raise _LegFailed(f"prefill {ep.name} refused the request ({resp.status})",
                                         web.Response(body=raw, status=resp.status,
                                                      headers=self._response_headers(resp, None)),
                                         None)
                    try:
                        answer = loads(raw)
                    except ValueError:
                        answer = None
                    if not isinstance(answer, dict):
                        self.metrics.prefill_errors.inc()
                        raise _LegFailed(f"prefill {ep.name} answered no JSON object",
                                         openai_error(502, f"prefill endpoint {ep.name} answered no JSON object",
                                                      code="upstream_error"), BAD_ANSWER)
                    return answer
            except (TimeoutError, aiohttp.ClientError) as exc:
                self.metrics.prefill_errors.inc()
                reason = failure_reason("prefill", error=exc)
                if reason in (CONNECT_FAILURE, RESET):
                    self._set_aside(ep)
                raise _LegFailed(f"prefill {ep.name}: {_describe(exc)}",
                                 openai_error(502 if not isinstance(exc, asyncio.TimeoutError) else 504,
                                              f"prefill endpoint {ep.name}: {_describe(exc)}", code="upstream_error"),
                                 reason) from exc

    async def _pull(self, request: web.Request, body: dict, headers: dict, request_id: str,
                    push: bool = False, exclude: set[str] = frozenset()) -> web.StreamResponse:
        """Prefill, then decode with the ``kv_transfer_params`` prefill returned. In push mode
        (``push``) this is how a prefill endpoint of unknown engine id is used; its answer teaches
        the router the engine id (:func:`learn_engine_id`). ``exclude``: prefill URLs already tried."""
        alone = await self._skip_set_aside(request, body, headers, request_id)
        if alone is not None:
            return alone
        path = request.path
        prefill_data = self._prefill_body(body)
        tried: set[str] = set(exclude)
        failure: _LegFailed | None = None
        all_refused = all_transport = True
        answer: dict | None = None
        prefill: Endpoint | None = None
        for attempt in range(1 + max(0, self.config.prefill_retries)):
            try:
                prefill = self.registry.pick_prefill(exclude=tried, push=push)
            except NoEndpoint as exc:
                if failure is not None:
                    break
                return (await self._alone(request, body, headers, request_id, exc.missing, "no_ready")
                        or openai_error(503, str(exc), code="no_endpoint", headers={"X-Request-Id": request_id}))
            tried.add(prefill.url)
            if attempt:
                self.metrics.prefill_retries.inc()
                self._retried(request, "prefill", failure.reason)
            instance = prefill.instance
            try:
                answer = await self._prefill_leg(prefill, path, prefill_data, headers)
                if push:
                    learn_engine_id(prefill, instance, answer)
                break
            except _LegFailed as exc:
                log.warning("request %s: %s", request_id, exc)
                failure = exc
                all_refused = all_refused and exc.refused
                all_transport = all_transport and exc.reason in TRANSPORT_REASONS
                if not exc.retryable:
                    break
        if answer is None:
            return await self._prefill_failed(request, body, headers, request_id, failure, all_refused, all_transport)
        kv = answer.get("kv_transfer_params")
        decode_body = dict(body)
        if kv:
            decode_body["kv_transfer_params"] = kv
        else:
            # A prefill that ended before max_tokens (EOS) hands no blocks off (facts 4.12): decode
            # then computes the prompt itself.
            self.metrics.no_kv_params.inc()
            decode_body.pop("kv_transfer_params", None)
        data, tried, refused = dumps(decode_body), set(), None
        for attempt in range(1 + max(0, self.config.prefill_retries)):
            try:
                decode = self.registry.pick_decode(prefill.compat_hash, exclude=tried)
            except NoEndpoint as exc:
                # The decodes went away (or refused) after prefill ran: prefill's blocks for this
                # request stay held until their KV lease expires (kv_lease_duration, 30 s: nixl/base_scheduler.py,
                # vLLM 0.32). When another revision has a full pair (a coordinated rollout retiring this
                # one), the request runs again there as a new P/D request (pair_gone); else a prefill
                # serves the whole request.
                if refused is not None:
                    break
                if (self.registry.paired_elsewhere(prefill.compat_hash, push=push)
                        and self._retry(request, "decode", PAIR_GONE)):
                    raise _PairGone(f"prefill {prefill.name} ran its leg, then no decode of its compat hash "
                                    f"{prefill.compat_hash!r} was Ready; another compat hash has a pair") from exc
                return (await self._alone(request, body, headers, request_id, "decode", "no_ready")
                        or openai_error(503, str(exc), code="no_endpoint", headers={"X-Request-Id": request_id}))
            tried.add(decode.url)
            if attempt:
                self.metrics.decode_retries.inc()
                self._retried(request, "decode", CONNECT_FAILURE)
            try:
                result = await self._decode_leg(request, decode, data, headers, request_id,
                                                stream=bool(body.get("stream")), unreachable_raises=True,
                                                kv_from=prefill if kv else None)
            except _Unreachable as exc:
                log.warning("request %s: %s", request_id, exc)
                refused = exc.response
                continue
            self._paired()
            return result
        return await self._alone(request, body, headers, request_id, "decode", "refused") or refused

    async def _prefill_failed(self, request: web.Request, body: dict, headers: dict, request_id: str,
                              failure: _LegFailed, all_refused: bool, all_transport: bool) -> web.StreamResponse:
        """No prefill leg succeeded (``failure``: the last one). When every one tried refused the
        connection, a decode serves the request alone (fallback ``refused``); when every one failed
        before answering or answered 502-504 (:data:`TRANSPORT_REASONS`: the engines are gone or going
        away), so does a decode, as this request's one retry (:meth:`_retry`, fallback ``failed``);
        else the client gets the failure."""
        if all_refused:
            return await self._alone(request, body, headers, request_id, "prefill", "refused") or failure.response
        if all_transport and self.config.fallback and self._retry(request, "prefill", failure.reason):
            return await self._alone(request, body, headers, request_id, "prefill", "failed") or failure.response
        return failure.response

    async def _alone(self, request: web.Request, body: dict, headers: dict, request_id: str,
                     missing: str | None, reason: str) -> web.StreamResponse | None:
        """Fallback: serve the request with one engine of the other role than ``missing``, as a plain
        request (the client's body without ``kv_transfer_params``; module docstring).

        ``reason``: ``no_ready``, ``refused`` or ``failed`` (the metric's label). Returns ``None`` when fallback is
        off, ``missing`` is ``None`` (both roles have endpoints, just no pair) or no engine of the other
        role may serve (:meth:`~pdd_operator.router.endpoints.Registry.pick_alone`): the caller answers
        its own error. Engines that refuse the connection are replaced (``prefill_retries``); when all
        refuse, their 502."""
        if not self.config.fallback or missing is None:
            return None
        role = other_role(missing)
        data = dumps({k: v for k, v in body.items() if k != "kv_transfer_params"})
        tried: set[str] = set()
        refused: web.Response | None = None
        for attempt in range(1 + max(0, self.config.prefill_retries)):
            try:
                ep = self.registry.pick_alone(role, exclude=tried)
            except NoEndpoint:
                break
            tried.add(ep.url)
            if attempt:
                self._retried(request, role, CONNECT_FAILURE)
            else:
                self.metrics.fallback.labels(reason, role).inc()
                if self.serving_alone != role:
                    log.warning("no usable %s endpoint (%s): %s engines serve requests alone (plain requests, "
                                "no KV transfer) until P/D pairs can serve again", missing, reason, role)
                    self.serving_alone = role
            try:
                return await self._decode_leg(request, ep, data, headers, request_id, stream=bool(body.get("stream")),
                                              unreachable_raises=True, alone=True)
            except _Unreachable as exc:
                log.warning("request %s: %s", request_id, exc)
                refused = exc.response
        return refused

    async def _skip_set_aside(self, request: web.Request, body: dict, headers: dict,
                              request_id: str) -> web.StreamResponse | None:
        """With fallback, a role whose every endpoint is set aside (each refused a connection, or failed
        with a request in hand and was retried (:meth:`_completion`), within
        ``unreachable_seconds``) is not tried again for each request: the other role serves it alone
        right away (reason ``refused``), and the first request after the set-aside time tries the pair
        again. ``None``: route as usual."""
        if not self.config.fallback:
            return None
        for missing in ROLES:
            if self.registry.all_set_aside(missing):
                return await self._alone(request, body, headers, request_id, missing, "refused")
        return None

    def _paired(self) -> None:
        """A P/D pair served a request: end fallback (logged once)."""
        if self.serving_alone is not None:
            log.warning("P/D pairs serve again (fallback to %s alone ended)", self.serving_alone)
            self.serving_alone = None

    async def _decode_leg(self, request: web.Request, ep: Endpoint, data: bytes, headers: dict, request_id: str,
                          stream: bool, started: list | None = None, unreachable_raises: bool = False,
                          alone: bool = False, kv_from: Endpoint | None = None) -> web.StreamResponse:
        """Send the decode leg and relay its answer. ``started`` (a list) gets ``True`` appended once
        the client's response is committed (prepared: no other answer can be sent any more). With
        ``unreachable_raises``, a connection that cannot be opened (the request never reached decode)
        raises :class:`_Unreachable` instead of answering 502, so the caller may try another decode.

        Nothing reaches the client before decode's first chunk (a stream) or its whole answer. A
        failure before that which a retry may cure (the connection closed or reset, no answer in time,
        502-504: :func:`~pdd_operator.router.retry.failure_reason`) raises :class:`_DecodeFailed`
        carrying the answer the client gets if the request is not sent again
        (:meth:`_completion` decides). After it, a broken stream ends with an SSE error event.

        ``kv_from``: the prefill whose KV decode was sent to load (``None``: a plain request). Then decode's
        answer that its KV load failed before it generated anything (vLLM's ``finish_reason="error"``
        answer: :func:`~pdd_operator.router.retry.kv_load_failed_answer` for a whole answer; for a stream,
        its first events are held until :func:`~pdd_operator.router.retry.stream_start` tells, which costs
        nothing in time: vLLM sends chat's opening role-only chunk and the first token's together) raises
        :class:`_DecodeFailed` with reason ``kv_load_failed``, its ``response`` decode's own answer.

        ``alone``: ``ep`` (of either role) serves the whole request by itself (:meth:`_alone`): its
        role's in-flight gauge and error counter are used, and every answer, errors too, carries
        :data:`FALLBACK_HEADER` ``<role>-only``. Answers carry :data:`RETRY_HEADER` when the request
        was retried."""
        prefill = ep.role == "prefill"
        errors = self.metrics.prefill_errors if prefill else self.metrics.decode_errors
        extra = {"X-Request-Id": request_id}
        if alone:
            extra[FALLBACK_HEADER] = f"{ep.role}-only"
        if request.get(_RETRIED):
            extra[RETRY_HEADER] = ", ".join(request[_RETRIED])

        def kv_load_failed(response: web.Response) -> _DecodeFailed:
            errors.inc()
            return _DecodeFailed(f"decode {ep.name} could not load the KV of prefill {kv_from.name} (vLLM "
                                 "finish_reason error before any token)", response, KV_LOAD_FAILED, ep, kv_from)

        def failed(exc: BaseException | None = None, response: web.Response | None = None,
                   status: int | None = None) -> web.Response:
            """The answer for a failure before the client got a byte; raises :class:`_DecodeFailed`
            when it is one to retry."""
            if response is None:
                response = openai_error(502, f"{ep.role} endpoint {ep.name}: {_describe(exc)}",
                                        code="upstream_error", headers=extra)
            reason = failure_reason(ep.role, status=status, error=exc)
            if reason is not None:
                what = _describe(exc) if exc is not None else f"answered HTTP {status}"
                raise _DecodeFailed(f"{ep.role} {ep.name} failed before the client got a byte: {what}",
                                    response, reason, ep)
            return response

        with _in_flight(ep, self.metrics.prefill_in_flight if prefill else self.metrics.decode_in_flight):
            try:
                resp = await self.session.post(
                    ep.target(request.path), data=data, headers=headers, timeout=self._decode_timeout,
                )
            except (TimeoutError, aiohttp.ClientError) as exc:
                errors.inc()
                response = openai_error(502, f"{ep.role} endpoint {ep.name}: {_describe(exc)}", code="upstream_error",
                                        headers=extra)
                if isinstance(exc, NOT_CONNECTED):
                    self._set_aside(ep)
                    if unreachable_raises:
                        raise _Unreachable(f"{ep.role} {ep.name}: {_describe(exc)}", response) from exc
                return failed(exc, response)
            try:
                ctype = resp.headers.get("Content-Type", "")
                head = self._response_headers(resp, request_id)
                head.update(extra)
                if not stream or resp.status != 200 or not ctype.startswith("text/event-stream"):
                    try:
                        raw = await resp.read()
                    except (TimeoutError, aiohttp.ClientError) as exc:
                        errors.inc()
                        return failed(exc)
                    answer = web.Response(body=raw, status=resp.status, headers=head)
                    if kv_from is not None and kv_load_failed_answer(resp.status, raw):
                        raise kv_load_failed(answer)
                    if resp.status >= 500:
                        errors.inc()
                    return failed(response=answer, status=resp.status)
                content = resp.content
                try:
                    chunk = await content.readany()
                    verdict = ANSWER if kv_from is None else stream_start(chunk)
                    while verdict == HOLD:
                        more = await content.readany()
                        if not more:
                            break
                        chunk += more
                        verdict = stream_start(chunk)
                except (TimeoutError, aiohttp.ClientError) as exc:
                    errors.inc()
                    return failed(exc)
                if verdict == KV_LOAD_FAILED:
                    with contextlib.suppress(TimeoutError, aiohttp.ClientError):
                        while more := await content.readany():  # its data: [DONE]
                            chunk += more
                    raise kv_load_failed(web.Response(body=chunk, status=resp.status, headers=head))
                client_stream = request.get(_STREAM)
                if client_stream is not None:
                    return await self._relay_resumable(request, ep, client_stream, resp, chunk, head, started)
                out = _RelayResponse(status=resp.status, headers=head)
                await out.prepare(request)
                if started is not None:
                    started.append(True)
                while chunk:
                    if content.at_eof():
                        # decode's last chunk and its end came in together: one write for both.
                        await out.write_eof(chunk)
                        return out
                    # A client that went away makes this raise (ConnectionResetError): not a decode error.
                    await out.write(chunk)
                    try:
                        chunk = await content.readany()
                    except (TimeoutError, aiohttp.ClientError) as exc:
                        # The head is sent: the only way left to tell the client is an error event.
                        errors.inc()
                        err = {"error": {"message": f"{ep.role} endpoint {ep.name}: {_describe(exc)}",
                                         "type": "server_error", "param": None, "code": 502}}
                        await out.write(b"data: " + dumps(err) + b"\n\n")
                        break
                await out.write_eof()
                return out
            finally:
                resp.close()  # a no-op when fully read; otherwise drops the connection: decode aborts

    async def _relay_resumable(self, request: web.Request, ep: Endpoint, stream: _ClientStream,
                               resp: aiohttp.ClientResponse, chunk: bytes, head: dict,
                               started: list | None) -> web.StreamResponse:
        """Relay a stream that may be resumed (:mod:`pdd_operator.router.resume`): whole SSE events only,
        each seen by ``stream.tracker``; a continuation's events are spliced into the response already
        open. A stream that breaks (read error, or its end without ``[DONE]``) raises
        :class:`_StreamBroken` for :meth:`_completion` to resume or end; a read timeout (the engine may
        still be working) too, which is not retried (:data:`~pdd_operator.router.retry.RETRY_ON`)."""
        errors = self.metrics.prefill_errors if ep.role == "prefill" else self.metrics.decode_errors
        tracker, content = stream.tracker, resp.content
        splice = stream.out is not None
        if stream.out is None:
            stream.out = _RelayResponse(status=resp.status, headers=head)
            await stream.out.prepare(request)
        out = stream.out
        if started is not None:
            started.append(True)
        while chunk:
            data = tracker.feed(chunk, splice=splice)
            if tracker.done:
                # the client's end follows decode's, as on the byte-for-byte path: decode's answer read to
                # its end puts its connection back in the pool (closed unread, it would cost a new
                # connection per request and tell decode to abort)
                if not content.at_eof():
                    await out.write(data)
                    data = b""
                    with contextlib.suppress(TimeoutError, aiohttp.ClientError):
                        while await content.readany():
                            pass
                await out.write_eof(data)
                return out
            if data:
                await out.write(data)  # a client that went away raises ConnectionResetError here
            try:
                chunk = await content.readany()
            except (TimeoutError, aiohttp.ClientError) as exc:
                errors.inc()
                raise _StreamBroken(f"{ep.role} {ep.name} failed mid-stream: {_describe(exc)}",
                                    failure_reason(ep.role, error=exc), ep) from exc
        errors.inc()
        raise _StreamBroken(f"{ep.role} {ep.name} ended its stream without [DONE]", RESET, ep)

    async def _push(self, request: web.Request, body: dict, headers: dict, request_id: str) -> web.StreamResponse:
        """Push mode: prefill and decode legs at once; decode is told prefill's coordinates.

        A decode that cannot be connected to (it never got the request) is replaced by another decode of
        the same compat hash: the prefill leg sent for it is cancelled (its connection closed: vLLM
        aborts the request) and both legs are sent again."""
        alone = await self._skip_set_aside(request, body, headers, request_id)
        if alone is not None:
            return alone
        path = request.path
        prefill_data = self._prefill_body(body)
        tried: set[str] = set()
        tried_decodes: set[str] = set()
        failure: _LegFailed | None = None
        all_refused = all_transport = True
        refused: web.Response | None = None
        for attempt in range(1 + max(0, self.config.prefill_retries)):
            try:
                prefill = self.registry.pick_prefill(exclude=tried, push=True)
                decode = self.registry.pick_decode(prefill.compat_hash, exclude=tried_decodes)
            except NoEndpoint as exc:
                if refused is not None or failure is not None:
                    break
                return (await self._alone(request, body, headers, request_id, exc.missing, "no_ready")
                        or openai_error(503, str(exc), code="no_endpoint", headers={"X-Request-Id": request_id}))
            if prefill.engine_id is None:
                # Its engine id is not known (yet, or any more): prefill first, which teaches it.
                return await self._pull(request, body, headers, request_id, push=True, exclude=tried)
            tried.add(prefill.url)
            instance, named = prefill.instance, prefill.engine_id
            if attempt and refused is None and failure is not None:
                self.metrics.prefill_retries.inc()
                self._retried(request, "prefill", failure.reason)
            decode_body = dict(body)
            decode_body["kv_transfer_params"] = push_decode_params(prefill, request_id)
            started: list = []
            p_task = asyncio.ensure_future(self._prefill_leg(prefill, path, prefill_data, headers))
            d_task = asyncio.ensure_future(self._decode_leg(request, decode, dumps(decode_body), headers,
                                                            request_id, stream=bool(body.get("stream")),
                                                            started=started, unreachable_raises=True,
                                                            kv_from=prefill))
            try:
                done, _ = await asyncio.wait({p_task, d_task}, return_when=asyncio.FIRST_COMPLETED)
                if started and p_task in done and isinstance(p_task.exception(), _LegFailed):
                    # decode relays its first chunk only once it has a token, and in push mode its first
                    # token comes after prefill's KV arrived (vLLM's push decode waits for the blocks:
                    # nixl/push_scheduler.py get_num_new_matched_tokens): it needs nothing more from
                    # prefill, whose HTTP answer (sent when its request finished) was all that failed.
                    log.warning("request %s: %s, after decode had the KV and streamed: its stream goes on",
                                request_id, p_task.exception())
                elif p_task in done and p_task.exception() is not None and not (
                        d_task in done and isinstance(d_task.exception(), _Unreachable)):
                    d_task.cancel()
                    await asyncio.gather(d_task, return_exceptions=True)
                    exc = p_task.exception()
                    if not isinstance(exc, _LegFailed):
                        raise exc
                    log.warning("request %s: %s", request_id, exc)
                    if started:
                        # decode began streaming just as prefill failed (and was cancelled): the client
                        # has part of an answer; drop the connection rather than leave the stream hanging.
                        raise ConnectionAbortedError(f"request {request_id}: {exc} after the response started")
                    failure = exc
                    all_refused = all_refused and exc.refused
                    all_transport = all_transport and exc.reason in TRANSPORT_REASONS
                    if not exc.retryable:
                        break
                    continue
                try:
                    result = await d_task
                except _Unreachable as exc:
                    # decode never got the request: drop this prefill leg, try another decode.
                    p_task.cancel()
                    await asyncio.gather(p_task, return_exceptions=True)
                    log.warning("request %s: %s", request_id, exc)
                    refused = exc.response
                    tried_decodes.add(decode.url)
                    tried.discard(prefill.url)
                    self.metrics.decode_retries.inc()
                    self._retried(request, "decode", CONNECT_FAILURE)
                    continue
                except _DecodeFailed:
                    # decode had the request (its KV hand-off is spent): end this prefill leg; the
                    # whole request may be sent again (_completion).
                    p_task.cancel()
                    await asyncio.gather(p_task, return_exceptions=True)
                    raise
                if not p_task.done():
                    p_task.cancel()
                await asyncio.gather(p_task, return_exceptions=True)
                if p_task.done() and not p_task.cancelled() and p_task.exception() is None:
                    learned = learn_engine_id(prefill, instance, p_task.result())
                    if learned is not None and learned != named:
                        self.metrics.engine_id_changes.inc()
                        log.warning("request %s: prefill %s answered as engine %s, decode was told %s",
                                    request_id, prefill.name, learned, named)
                self._paired()
                return result
            except asyncio.CancelledError:
                for t in (p_task, d_task):
                    t.cancel()
                await asyncio.gather(p_task, d_task, return_exceptions=True)
                raise
        if refused is not None and failure is None:
            # Every decode tried refused the connection: a prefill serves the request alone.
            return await self._alone(request, body, headers, request_id, "decode", "refused") or refused
        return await self._prefill_failed(request, body, headers, request_id, failure, all_refused, all_transport)

    def _set_aside(self, ep: Endpoint) -> None:
        """An endpoint could not be connected to (or failed with a request in hand, which was then sent
        again): choose others for ``unreachable_seconds``."""
        ep.unreachable_until = time.monotonic() + self.config.unreachable_seconds
        ep.forget_engine_id()  # what answers there next may be a new process
        self.metrics.set_aside.inc()

    # -- headers --------------------------------------------------------------------------------

    @staticmethod
    def _forward_headers(request: web.Request, request_id: str | None) -> dict:
        headers = {"Content-Type": "application/json"}
        auth = request.headers.get("Authorization")
        if auth:
            headers["Authorization"] = auth
        if request_id:
            headers["X-Request-Id"] = request_id
        return headers

    @staticmethod
    def _response_headers(resp: aiohttp.ClientResponse, request_id: str | None) -> dict:
        out = {k: v for k, v in resp.headers.items() if k.lower() not in HOP_BY_HOP}
        if request_id:
            out["X-Request-Id"] = request_id
        return out


def learn_engine_id(prefill: Endpoint, instance: str, answer: dict) -> str | None:
    """Record the engine id a prefill answer names (``kv_transfer_params.remote_engine_id``) on
    ``prefill``, unless discovery has seen another process there since the leg was sent (``instance``
    then differs). Returns the id the answer names, ``None`` when it names none (no KV handed off)."""
    kv = answer.get("kv_transfer_params")
    engine_id = kv.get("remote_engine_id") if isinstance(kv, dict) else None
    if not isinstance(engine_id, str) or not engine_id:
        return None
    if prefill.instance == instance and prefill.engine_id != engine_id:
        log.info("prefill %s is NIXL engine %s (learned from its answer)", prefill.name, engine_id)
        prefill.engine_id = engine_id
    return engine_id


def push_decode_params(prefill: Endpoint, request_id: str) -> dict:
    """``kv_transfer_params`` of the decode leg in push mode (vllm-nixl-facts.md section 6.2);
    ``prefill.engine_id`` must be known (learned from that engine's answers)."""
    return {
        "do_remote_decode": False, "do_remote_prefill": True, "remote_engine_id": prefill.engine_id,
        "remote_host": prefill.kv_host, "remote_port": prefill.kv_port, "tp_size": prefill.tp_size,
        "pp_size": prefill.pp_size, "remote_request_id": request_id,
    }


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _snippet(raw: bytes, limit: int = 300) -> str:
    text = raw[:limit].decode("utf-8", "replace")
    return text + ("..." if len(raw) > limit else "")


async def start(router: Router, host: str | None, port: int) -> web.AppRunner:
    """Start serving ``router`` on ``host:port``; returns the runner (``await runner.cleanup()`` stops it).

    ``host`` ``None`` (or ``""``): every address, one socket per address family the kernel supports.

    ``handler_cancellation`` makes a client disconnect cancel the handler, and so both legs.
    """
    runner = web.AppRunner(router.app(), handler_cancellation=True, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host or None, port, backlog=1024)
    await site.start()
    return runner
