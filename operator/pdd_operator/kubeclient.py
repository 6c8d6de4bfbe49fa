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

from collections.abc import Sequence
from typing import Any

import orjson
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
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
    """
    headers = {"Accept": accept, **({"Content-Type": content_type} if content_type else {})}
    method, url, headers, data, post = api_client.param_serialize(
        method=method, resource_path=path, path_params=path_params, query_params=list(query), header_params=headers, body=body,
        auth_settings=["BearerToken"])
    response = api_client.call_api(method, url, header_params=headers, body=data, post_params=post)
    response.read()
    if not 200 <= response.status <= 299:
        raise ApiException.from_response(http_resp=response, body=response.data.decode("utf-8", "replace"),
                                         data=None)
    return orjson.loads(response.data) if response.data else None
