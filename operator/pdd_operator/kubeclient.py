"""The one place Kubernetes API clients are made (the operator's and the router's discovery): every
request carries a (connect, read) timeout, so a silently dead connection fails instead of hanging.

Without a timeout the kubernetes client waits on a socket forever: an apiserver that is SIGSTOPped,
or any TCP peer that accepts and never answers (a half-open connection after a network partition),
would hold the calling thread until liveness restarts the process. With :data:`REQUEST_TIMEOUT` the
call raises urllib3's ``ReadTimeoutError`` (wrapped in ``MaxRetryError`` when retries are configured)
or ``ConnectTimeoutError``; both are ``urllib3.exceptions.HTTPError``, which the operator's
reconcile treats as transient (``controller.reconcile.is_transient``) and the work queue retries
with its per-object backoff (``pdd_workqueue_retries_total``).

The read timeout is longer than the apiserver's own limit for a non-long-running request
(``kube-apiserver --request-timeout``, 60 s by default; past it the apiserver answers 504), so a live
but slow apiserver always answers first and only a dead connection hits it. Watches are long-running
requests and take :func:`watch_timeout` instead: a server-side ``timeoutSeconds`` and a client read
timeout a little longer than it.

urllib3 does not resend a request after a read timeout (``read=0``): the request may have reached
the apiserver, and the caller's own backoff decides when to try again. Connection failures are
retried as urllib3 does by default (3 times, at once).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import orjson
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTResponse
from urllib3.util.retry import Retry

#: Seconds to wait for a TCP connection (and TLS handshake) to the apiserver.
CONNECT_SECONDS = 10.0
#: Seconds to wait for an answer to a request (between bytes read): the apiserver's 60 s
#: ``--request-timeout`` plus a margin.
READ_SECONDS = 65.0
#: ``(connect, read)`` timeout of every non-watch request, in seconds (the kubernetes client's
#: ``_request_timeout`` tuple form).
REQUEST_TIMEOUT = (CONNECT_SECONDS, READ_SECONDS)
#: Seconds a watch request asks the apiserver to stream (``timeoutSeconds``) before it ends it.
WATCH_SERVER_SECONDS = 300
#: Seconds of silence past ``WATCH_SERVER_SECONDS`` after which the client gives a watch up.
WATCH_MARGIN_SECONDS = 30.0


class TimeoutApiClient(client.ApiClient):
    """A ``kubernetes.client.ApiClient`` whose every request has ``request_timeout`` unless the
    caller passes its own ``_request_timeout`` (a watch, a probe with a shorter wait).

    ``request_timeout``: seconds, a number (total) or ``(connect, read)``. The generated API methods
    and ``watch.Watch`` all send through :meth:`call_api`, so this is the one place it is set.
    """

    def __init__(self, configuration: client.Configuration | None = None,
                 request_timeout: float | tuple[float, float] = REQUEST_TIMEOUT) -> None:
        configuration = configuration or client.Configuration.get_default_copy()
        if configuration.retries is None:
            configuration.retries = Retry(total=3, connect=3, read=0, redirect=3, status=0)
        super().__init__(configuration)
        self.request_timeout = request_timeout

    def call_api(self, method, url, header_params=None, body=None, post_params=None, _request_timeout=None):
        return super().call_api(method, url, header_params=header_params, body=body, post_params=post_params,
                                _request_timeout=self.request_timeout if _request_timeout is None else _request_timeout)


def load_config(request_timeout: float | tuple[float, float] = REQUEST_TIMEOUT,
                pool_size: int | None = None) -> TimeoutApiClient:
    """An API client from the in-cluster service account, else the current kubeconfig, with
    ``request_timeout`` (seconds) on every request and, with ``pool_size``, room for that many pooled
    connections (the kubernetes client's default is 5 per CPU; a thread that finds the pool full opens a
    connection, TLS handshake included, and drops it after its request). Raises
    ``kubernetes.config.ConfigException`` when neither is found."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    configuration = client.Configuration.get_default_copy()
    if pool_size is not None:
        configuration.connection_pool_maxsize = max(pool_size, configuration.connection_pool_maxsize or 0)
    return TimeoutApiClient(configuration, request_timeout=request_timeout)


def watch_timeout(server_seconds: int = WATCH_SERVER_SECONDS) -> dict:
    """Keyword arguments for a ``watch.Watch().stream`` call: the apiserver ends the watch after
    ``server_seconds`` (``timeout_seconds``), and the client gives up on a connection silent for
    :data:`WATCH_MARGIN_SECONDS` longer than that (``_request_timeout`` as ``(connect, read)``)."""
    return {"timeout_seconds": server_seconds,
            "_request_timeout": (CONNECT_SECONDS, server_seconds + WATCH_MARGIN_SECONDS)}


def request_url(host: str, path: str, path_params: Mapping[str, str] | None = None,
                query: Sequence[tuple[str, str]] = (), safe: str = "") -> str:
    """The URL of a request as the kubernetes client builds it (``ApiClient.param_serialize``): ``host`` +
    ``path`` with each ``{name}`` of ``path_params`` replaced by its value quoted with ``safe`` kept (the
    client's ``safe_chars_for_path_param``, empty by default: a ``/`` in a name is quoted too), then the
    query, each value quoted (``quote``'s default, ``/`` kept), booleans as ``true``/``false``. Pure."""
    for key, value in (path_params or {}).items():
        path = path.replace("{" + key + "}", quote(str(value), safe=safe))
    if not query:
        return host + path
    return host + path + "?" + "&".join(f"{k}={quote(str(v).lower() if isinstance(v, bool) else str(v))}"
                                        for k, v in query)


def request_body(body: Any) -> bytes | None:
    """A request's body as sent: bytes as they are, ``None`` for none, anything else as compact JSON by
    orjson (the standard library's for what orjson refuses: a lone surrogate in a string, an integer wider
    than 64 bits, a key that is not a string), as the kubernetes client would send it. Pure."""
    if body is None or isinstance(body, bytes):
        return body
    try:
        return orjson.dumps(body)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(body).encode()


def _auth_headers(api_client: client.ApiClient) -> dict[str, str] | None:
    """The headers the client's ``BearerToken`` auth setting adds (its refresh hook runs, as for every
    request of the generated client), ``{}`` without one, ``None`` for an auth setting this module does
    not send itself (one in a query or a cookie: :func:`request` then goes the client's own way)."""
    setting = api_client.configuration.auth_settings().get("BearerToken")
    if not setting or setting.get("value") is None:
        return {}
    if setting.get("in") != "header":
        return None
    return {setting["key"]: setting["value"]}


def _timeout(value: Any) -> urllib3.Timeout | None:
    """urllib3's timeout of a ``_request_timeout`` (a number: total; ``(connect, read)``), as the client
    makes it."""
    if isinstance(value, int | float) and value:
        return urllib3.Timeout(total=value)
    if isinstance(value, tuple) and len(value) == 2:
        return urllib3.Timeout(connect=value[0], read=value[1])
    return None


def request(api_client: client.ApiClient, method: str, path: str, *, path_params: dict[str, str] | None = None,
            query: Sequence[tuple[str, str]] = (), body: Any = None, content_type: str | None = None,
            accept: str = "application/json") -> Any:
    """Send one request for ``path`` (``/api/v1/...``, ``/apis/<group>/<version>/...``; ``{namespace}``
    and the like filled in from ``path_params``, quoted) through
    ``api_client`` (its server, credentials, TLS and timeouts) and return the answer's JSON as dicts
    and lists, or None for an empty answer.

    ``body``: a dict (sent as JSON) or bytes (sent as they are); ``content_type``: e.g.
    ``application/merge-patch+json`` (default JSON). The answer is read by orjson (the apiserver writes no
    integer wider than 64 bits). Raises ``ApiException`` for a non-2xx answer, as
    the generated methods do, and urllib3's errors (timeouts, refused connections) as they come.

    The operator's own calls use this instead of the generated typed classes (``CoreV1Api``,
    ``AppsV1Api``, ...): importing one builds the pydantic model of every kind it can return, 28 MB of
    RSS for ``AppsV1Api``, ``CoreV1Api`` and ``RbacAuthorizationV1Api`` together (kubernetes 37;
    bench/README.md), for answers the operator reads as dicts anyway.

    **The request path** (2026-12-07): the request goes straight to the client's urllib3 pool manager
    (``api_client.rest_client.pool_manager``: the same connections, TLS settings, proxy and retries), with
    the URL (:func:`request_url`), the body (:func:`request_body`: orjson) and the bearer token
    (:func:`_auth_headers`, the refresh hook run) made here. The generated client's own path
    (``ApiClient.param_serialize``, ``RESTClientObject.request``) walked every body dict to "sanitize" it,
    serialized it with the standard library, matched the content type with regular expressions and copied
    the headers: about a third of the operator's CPU in its requests (bench/README.md, 2026-12-07,
    "Where the operator's CPU goes"). A client configured in a way this path does not reproduce (client-go
    style read retries, an auth setting outside the headers, a cookie) goes the client's own way.
    """
    headers = {"Accept": accept, **({"Content-Type": content_type} if content_type else {})}
    rest_client = getattr(api_client, "rest_client", None)
    configuration = api_client.configuration
    auth = None if getattr(configuration, "client_go_retries", False) or getattr(api_client, "cookie", None) \
        else _auth_headers(api_client)
    if auth is None or rest_client is None or not hasattr(rest_client, "pool_manager"):
        return _request_generated(api_client, method, path, path_params, query, body, headers)
    url = request_url(configuration.host, path, path_params, query, configuration.safe_chars_for_path_param)
    sent = {**headers, **api_client.default_headers, **auth}  # the client's order: its defaults win
    if body is not None and "Content-Type" not in sent:
        sent["Content-Type"] = "application/json"
    try:
        raw = rest_client.pool_manager.request(
            method, url, body=request_body(body), headers=sent,
            timeout=_timeout(getattr(api_client, "request_timeout", None)))
    except urllib3.exceptions.SSLError as exc:  # as the client reports it
        raise ApiException(status=0, reason=f"{type(exc).__name__}\n{exc}") from exc
    return _answer(RESTResponse(raw))


def _request_generated(api_client: client.ApiClient, method: str, path: str, path_params: dict[str, str] | None,
                       query: Sequence[tuple[str, str]], body: Any, headers: dict[str, str]) -> Any:
    """:func:`request` through the generated client's own request path."""
    method, url, headers, data, post = api_client.param_serialize(
        method=method, resource_path=path, path_params=path_params, query_params=list(query), header_params=headers,
        body=body, auth_settings=["BearerToken"])
    return _answer(api_client.call_api(method, url, header_params=headers, body=data, post_params=post))


def _answer(response: RESTResponse) -> Any:
    """The parsed JSON of an answer (``None`` for an empty one); ``ApiException`` for a non-2xx answer."""
    response.read()
    if not 200 <= response.status <= 299:
        raise ApiException.from_response(http_resp=response, body=response.data.decode("utf-8", "replace"),
                                         data=None)
    return orjson.loads(response.data) if response.data else None
