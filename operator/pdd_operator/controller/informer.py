"""The operator's own list-then-watch informers of the kinds it caches (children, pods, ConfigMaps).

One :class:`Informer` per kind and namespace (all namespaces: one), each in a thread of its own,
with client-go's reflector semantics (``k8s.io/client-go/tools/cache/reflector.go``,
``ListAndWatch``):

- **list** the collection page by page (``limit`` / ``continue``, :data:`PAGE`), handing every item to
  the handler as it is parsed (a page at a time is alive, never the whole list of parsed dicts), and
  remember the list's ``resourceVersion``;
- **watch** from that resourceVersion with ``allowWatchBookmarks=true``: every ADDED, MODIFIED and
  DELETED event goes to the handler, and each event's and each BOOKMARK's resourceVersion becomes the
  one the next watch starts from; a watch the apiserver ends (``timeoutSeconds``) is started again from
  there, without a list;
- **410 Gone** (the resourceVersion is older than the apiserver's watch window: an ``ERROR`` event with
  code 410, or a 410 answer) means events were missed: list again, and every object known before but
  missing from the new list is handed to the handler as DELETED (:func:`relist_deletions`), which
  kopf's watcher does not do;
- **errors** (the apiserver away, 5xx, 403, a broken stream) are retried after a capped exponential
  backoff (:class:`~pdd_operator.controller.health.CappedBackoff`, reset by a list or a watch that
  succeeded); no error ends the thread, only :meth:`Informer.stop`.

List items carry no ``kind`` and ``apiVersion`` (the list does); the informer sets both, so a listed
object reads exactly as a watched one (the caches key children by kind, and the apply's comparison
with the live object includes both).

:attr:`Informer.synced` is set once the first list has been handed over completely: the caches are
not ready before every informer is synced (``handlers._fill_caches``). :attr:`Informer.progress_at`
and :attr:`Informer.failing_since` feed liveness
(:func:`~pdd_operator.controller.health.informer_problem`).

The pure pieces (:func:`parse_event`, :func:`relist_deletions`, :func:`item_key`) are unit-tested on
their own; the loop runs against a :class:`Transport` (the apiserver through
:func:`~pdd_operator.kubeclient.request`) or any object with its two methods.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import orjson
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pdd_operator import kubeclient
from pdd_operator.controller.health import CappedBackoff

log = logging.getLogger(__name__)

#: Objects per page of an informer's list (``limit``): what is parsed and alive at once.
PAGE = 200

#: ``(namespace, name)`` of an object.
Key = tuple[str | None, str | None]


class Resource(NamedTuple):
    """A kind the informers watch: ``api_version`` (``apps/v1``, ``v1``), ``plural`` and ``kind``."""

    api_version: str
    plural: str
    kind: str

    def path(self, namespace: str | None) -> str:
        """The collection's REST path, namespaced when ``namespace`` is given (all namespaces when None)."""
        base = f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"
        return base + (f"/namespaces/{namespace}" if namespace else "") + f"/{self.plural}"


class WatchEvent(NamedTuple):
    """One line of a watch stream: ``type`` (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR), ``obj`` (the
    object; for ERROR the ``Status``), ``version`` (the object's or the bookmark's resourceVersion,
    None for ERROR) and ``code`` (the Status's HTTP code for ERROR, else None)."""

    type: str
    obj: dict
    version: str | None
    code: int | None


class Gone(Exception):
    """The resourceVersion a watch started from is too old (410 Gone): list again."""


def parse_event(line: str | bytes) -> WatchEvent:
    """Parse one line of a watch stream (``{"type": ..., "object": ...}``, the apiserver's
    ``metav1.WatchEvent``; read by orjson, 2.6x faster than the standard library: the apiserver writes
    no integer wider than 64 bits). Raises ``ValueError`` for a line that is not such an object."""
    event = orjson.loads(line)
    if not isinstance(event, dict) or not isinstance(event.get("type"), str) or not isinstance(
            event.get("object"), dict):
        raise ValueError(f"not a watch event: {str(line)[:200]}")
    obj = event["object"]
    if event["type"] == "ERROR":
        code = obj.get("code")
        return WatchEvent("ERROR", obj, None, code if isinstance(code, int) else None)
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return WatchEvent(event["type"], obj, version if isinstance(version, str) else None, None)


def item_key(obj: Mapping[str, Any]) -> Key:
    """``(namespace, name)`` of ``obj``."""
    meta = obj.get("metadata") or {}
    return meta.get("namespace"), meta.get("name")


def relist_deletions(known: Iterable[Key], listed: set[Key]) -> list[Key]:
    """The keys an informer knew before a relist that the new list lacks: deleted while the watch
    could not say so (client-go's ``DeltaFIFO.Replace`` turns them into ``Deleted`` deltas). Sorted."""
    return sorted((k for k in known if k not in listed), key=lambda k: (k[0] or "", k[1] or ""))


def tombstone(resource: Resource, key: Key) -> dict:
    """The body handed over for an object deleted while unseen: its kind, apiVersion, namespace and
    name only (the handler looks up what it knew of it)."""
    meta = {"name": key[1], **({"namespace": key[0]} if key[0] is not None else {})}
    return {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": meta}


class Transport:
    """The apiserver as an informer sees it: a page of a list, and a watch stream's lines.

    ``api_client``: the operator's (:func:`~pdd_operator.kubeclient.load_config`: TLS, credentials,
    timeouts). Each list page is one request with :data:`~pdd_operator.kubeclient.REQUEST_TIMEOUT`;
    a watch asks the apiserver to end it after ``WATCH_SERVER_SECONDS`` and gives up on a connection
    silent for ``WATCH_MARGIN_SECONDS`` longer (:func:`~pdd_operator.kubeclient.watch_timeout`).
    """

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self._responses: set = set()
        self._lock = threading.Lock()

    def list_page(self, path: str, query: list[tuple[str, str]]) -> dict:
        """One page of a list (parsed JSON). Raises ``ApiException`` for a non-2xx answer."""
        return kubeclient.request(self.api_client, "GET", path, query=query)

    def watch(self, path: str, query: list[tuple[str, str]]) -> Iterator[bytes]:
        """The lines of a watch stream, until the apiserver ends it. Raises ``ApiException`` for a
        non-2xx answer, urllib3's errors for a broken or silent connection."""
        timeout = kubeclient.watch_timeout()
        query = [*query, ("watch", "true"), ("timeoutSeconds", str(timeout["timeout_seconds"]))]
        method, url, headers, data, post = self.api_client.param_serialize(
            method="GET", resource_path=path, query_params=query, header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"])
        response = self.api_client.call_api(method, url, header_params=headers, body=data, post_params=post,
                                            _request_timeout=timeout["_request_timeout"])
        raw = response.response
        if not 200 <= response.status <= 299:
            response.read()
            raise ApiException.from_response(http_resp=response, body=response.data.decode("utf-8", "replace"),
                                             data=None)
        with self._lock:
            self._responses.add(raw)
        try:
            buffer = b""
            for chunk in raw.stream(amt=None, decode_content=False):
                buffer += chunk
                while (end := buffer.find(b"\n")) != -1:
                    line, buffer = buffer[:end], buffer[end + 1:]
                    if line.strip():
                        yield line
            if buffer.strip():
                yield buffer
        finally:
            with self._lock:
                self._responses.discard(raw)
            raw.release_conn()

    def close(self) -> None:
        """Break every open watch stream (at shutdown): their reads end with an error."""
        with self._lock:
            responses = list(self._responses)
        for raw in responses:
            try:
                raw.shutdown() if hasattr(raw, "shutdown") else raw.close()
            except Exception:  # noqa: BLE001  (best effort at shutdown)
                pass


#: What an informer hands over: ``(event type, object)``, type ADDED, MODIFIED or DELETED (listed
#: objects come as ADDED). Called from the informer's thread; it must not raise (an exception is
#: logged and the event skipped).
Handler = Callable[[str, dict], None]


class Informer:
    """List-then-watch of one kind (:class:`Resource`) in one namespace (None: all), handing each
    object to ``handler`` (see the module docstring for the semantics).

    ``label_selector``: the server-side filter of the list and the watch. ``on_relisted(listed,
    list_version)``: called after each complete list with ``{(namespace, name): resourceVersion}`` of
    what it returned and the list's resourceVersion (the caches drop their own writes of objects gone
    meanwhile). ``backoff``: delays between failed attempts; ``clock``: monotonic seconds.
    """

    def __init__(self, resource: Resource, transport: Any, handler: Handler, *, namespace: str | None = None,
                 label_selector: str | None = None, page: int = PAGE,
                 on_relisted: Callable[[dict[Key, str | None], str | None], None] | None = None,
                 backoff: CappedBackoff | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.resource, self.transport, self.handler = resource, transport, handler
        self.namespace, self.label_selector, self.page = namespace, label_selector, page
        self.on_relisted = on_relisted
        self.backoff = backoff or CappedBackoff(first=1.0, cap=30.0)
        self.clock = clock
        self.synced = threading.Event()
        self.version: str | None = None
        self.known: set[Key] = set()
        self.progress_at: float | None = None
        self.failing_since: float | None = None
        self.last_error: str | None = None
        self.lists = 0
        self.started_at = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def name(self) -> str:
        """``<plural>`` or ``<plural> in <namespace>`` (logs, liveness messages)."""
        return self.resource.plural + (f" in {self.namespace}" if self.namespace else "")

    # --- the loop ----------------------------------------------------------------------------

    def start(self) -> None:
        """Run :meth:`run` in a daemon thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self.run, name=f"informer-{self.resource.plural}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """End the loop (an open watch ends when the transport is closed or its timeout passes)."""
        self._stop.set()

    def run(self) -> None:
        """List and watch until :meth:`stop`; errors are logged and retried after the backoff."""
        delays = iter(self.backoff)
        self.started_at = self.clock()
        while not self._stop.is_set():
            try:
                if self.version is None:
                    self.relist()
                self.watch_once()
                delays = iter(self.backoff)
            except Gone:
                log.info("informer %s: resourceVersion %s is too old (410 Gone); listing again", self.name,
                         self.version)
                self.version = None  # at once, as client-go: the watch window moved on
            except Exception as exc:  # noqa: BLE001  (the apiserver away, a broken stream, a bug: retry)
                if self._stop.is_set():
                    return
                now = self.clock()
                self.failing_since = self.failing_since if self.failing_since is not None else now
                self.last_error = _describe(exc)
                delay = next(delays)
                log.warning("informer %s failed, retrying in %.0fs: %s", self.name, delay, self.last_error,
                            exc_info=not isinstance(exc, ApiException | urllib3.exceptions.HTTPError | OSError))
                self._stop.wait(delay)

    def _query(self) -> list[tuple[str, str]]:
        return [("labelSelector", self.label_selector)] if self.label_selector else []

    def relist(self) -> None:
        """List every object page by page, hand each over (as ADDED), then hand over as DELETED what
        was known but is no longer listed. Sets :attr:`version` to the list's resourceVersion.
        Raises what the transport raises (nothing is deleted from an incomplete list)."""
        path = self.resource.path(self.namespace)
        listed: dict[Key, str | None] = {}
        token, version = None, None
        while True:
            query = [*self._query(), ("limit", str(self.page))] + ([("continue", token)] if token else [])
            try:
                listing = self.transport.list_page(path, query)
            except ApiException as exc:
                if exc.status == 410 and token:  # the continue token expired: the whole list again
                    token, version, listed = None, None, {}
                    continue
                raise
            meta = listing.get("metadata") or {}
            version = version or meta.get("resourceVersion")  # a paged list is one snapshot: the first page's
            for item in listing.get("items") or []:
                item.setdefault("kind", self.resource.kind)
                item.setdefault("apiVersion", self.resource.api_version)
                key = item_key(item)
                listed[key] = (item.get("metadata") or {}).get("resourceVersion")
                self._deliver("ADDED", item)
            del listing
            self._progress()
            token = meta.get("continue")
            if not token:
                break
        for key in relist_deletions(self.known, set(listed)):
            self._deliver("DELETED", tombstone(self.resource, key))
        self.known = set(listed)
        self.version = version
        self.lists += 1
        if self.on_relisted is not None:
            try:
                self.on_relisted(listed, version)
            except Exception:  # noqa: BLE001  (a handler's bug must not stop the informer)
                log.exception("informer %s: the relist hook failed", self.name)
        self.synced.set()

    def watch_once(self) -> None:
        """One watch from :attr:`version` until the apiserver ends it. Raises :class:`Gone` on 410,
        ``ApiException`` for another ERROR event or refusal, and what the transport raises."""
        query = [*self._query(), ("resourceVersion", self.version or ""), ("allowWatchBookmarks", "true")]
        try:
            lines = self.transport.watch(self.resource.path(self.namespace), query)
            for line in lines:
                if self._stop.is_set():
                    return
                event = parse_event(line)
                if event.type == "ERROR":
                    if event.code == 410:
                        raise Gone(event.obj.get("message"))
                    raise ApiException(status=event.code, reason=str(event.obj.get("message") or event.obj))
                self._progress()
                if event.type != "BOOKMARK":
                    key = item_key(event.obj)
                    if event.type == "DELETED":
                        self.known.discard(key)
                    else:
                        self.known.add(key)
                    self._deliver(event.type, event.obj)
                if event.version is not None:
                    self.version = event.version
            self._progress()  # ended by the apiserver's timeoutSeconds: watch again from self.version
        except ApiException as exc:
            if exc.status == 410:
                raise Gone(str(exc.reason)) from exc
            raise

    def _progress(self) -> None:
        self.progress_at = self.clock()
        self.failing_since, self.last_error = None, None

    def _deliver(self, type_: str, obj: dict) -> None:
        try:
            self.handler(type_, obj)
        except Exception:  # noqa: BLE001  (one object's bug must not stop the informer)
            log.exception("informer %s: handling %s %s/%s failed", self.name, type_, *item_key(obj))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"
