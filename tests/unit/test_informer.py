"""The operator's list-then-watch informers: watch events parsed, lists page by page, relists after
410 Gone turning what went missing into deletions, errors retried with backoff and never the end.

The informer runs against :class:`FakeApiServer`, an in-memory collection with resourceVersions, a
watch window (older versions answer 410 as the apiserver's watch cache does) and paged lists."""

from __future__ import annotations

import json
import threading

import pytest
from kubernetes.client.exceptions import ApiException

from pdd_operator.controller import handlers
from pdd_operator.controller.cache import ClusterCache
from pdd_operator.controller.health import CappedBackoff, informer_problem
from pdd_operator.controller.informer import (
    Informer,
    Resource,
    parse_event,
    relist_deletions,
    tombstone,
)
from pdd_operator.controller.workqueue import WorkQueue

DEPLOYMENTS = Resource("apps/v1", "deployments", "Deployment")


def test_resource_paths():
    assert DEPLOYMENTS.path(None) == "/apis/apps/v1/deployments"
    assert DEPLOYMENTS.path("ns") == "/apis/apps/v1/namespaces/ns/deployments"
    assert Resource("v1", "pods", "Pod").path("ns") == "/api/v1/namespaces/ns/pods"


def test_parse_event_reads_objects_bookmarks_and_errors():
    added = parse_event(json.dumps({"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "7"}}}))
    assert (added.type, added.version, added.code) == ("ADDED", "7", None)
    bookmark = parse_event(b'{"type":"BOOKMARK","object":{"kind":"Deployment","metadata":{"resourceVersion":"12"}}}')
    assert (bookmark.type, bookmark.version) == ("BOOKMARK", "12")
    gone = parse_event(json.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}))
    assert (gone.type, gone.code, gone.version) == ("ERROR", 410, None)
    for bad in ("[]", '{"type": "ADDED"}', '{"object": {}}', "not json"):
        with pytest.raises(ValueError):
            parse_event(bad)


def test_relist_deletions_are_the_known_keys_the_list_lacks():
    known = {("ns", "a"), ("ns", "b"), ("other", "a")}
    assert relist_deletions(known, {("ns", "a")}) == [("ns", "b"), ("other", "a")]
    assert relist_deletions(known, known) == []
    assert relist_deletions(set(), {("ns", "a")}) == []


def test_tombstone_names_the_object_only():
    assert tombstone(DEPLOYMENTS, ("ns", "a")) == {"apiVersion": "apps/v1", "kind": "Deployment",
                                                   "metadata": {"name": "a", "namespace": "ns"}}


class FakeApiServer:
    """One collection: objects with resourceVersions from one counter, the watch events since
    ``window_start`` (a watch from an older version gets 410, as from the apiserver's watch cache),
    lists in pages of the ``limit`` asked for. Lists carry no kind/apiVersion on their items, as the
    apiserver's. ``fail`` holds exceptions the next requests raise, in order."""

    def __init__(self) -> None:
        self.rv = 100
        self.objects: dict[tuple, dict] = {}
        self.events: list[tuple[int, str, dict]] = []
        self.window_start = 0
        self.fail: list[Exception] = []
        self.requests: list[tuple[str, list]] = []
        self.bookmark_at_end = False

    def put(self, name: str, ns: str = "ns", **fields) -> dict:
        self.rv += 1
        obj = {"kind": "Deployment", "apiVersion": "apps/v1",
               "metadata": {"name": name, "namespace": ns, "resourceVersion": str(self.rv)}, **fields}
        kind = "MODIFIED" if (ns, name) in self.objects else "ADDED"
        self.objects[(ns, name)] = obj
        self.events.append((self.rv, kind, obj))
        return obj

    def delete(self, name: str, ns: str = "ns", record: bool = True) -> None:
        self.rv += 1
        obj = self.objects.pop((ns, name))
        if record:
            self.events.append((self.rv, "DELETED", {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}))

    def compact(self) -> None:
        """Events before now fall out of the watch window."""
        self.window_start = self.rv

    def _raise(self) -> None:
        if self.fail:
            raise self.fail.pop(0)

    def list_page(self, path: str, query: list) -> dict:
        self.requests.append(("list", query))
        self._raise()
        q = dict(query)
        items = sorted(self.objects.values(), key=lambda o: o["metadata"]["name"])
        start = int(q.get("continue", 0))
        limit = int(q["limit"])
        page = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in items[start:start + limit]]
        meta = {"resourceVersion": str(self.rv)}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        return {"kind": "DeploymentList", "apiVersion": "apps/v1", "metadata": meta, "items": json.loads(json.dumps(page))}

    def watch(self, path: str, query: list):
        self.requests.append(("watch", query))
        self._raise()
        since = int(dict(query)["resourceVersion"])
        if since < self.window_start:
            yield json.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}).encode()
            return
        for rv, kind, obj in list(self.events):
            if rv > since:
                yield json.dumps({"type": kind, "object": obj}).encode()
        if self.bookmark_at_end:
            yield json.dumps({"type": "BOOKMARK", "object": {"kind": "Deployment",
                                                             "metadata": {"resourceVersion": str(self.rv)}}}).encode()


def informer(server: FakeApiServer, page: int = 2, **kwargs) -> tuple[Informer, list]:
    seen: list = []
    inf = Informer(DEPLOYMENTS, server, lambda t, o: seen.append((t, o["metadata"]["name"], o.get("kind"),
                                                                  o.get("apiVersion"))),
                   page=page, label_selector="app=x", backoff=CappedBackoff(first=0.001, cap=0.004), **kwargs)
    return inf, seen


def test_the_first_list_is_read_page_by_page_and_each_item_is_a_whole_object():
    server = FakeApiServer()
    for name in "abcde":
        server.put(name)
    relisted = []
    inf, seen = informer(server, on_relisted=lambda listed, version: relisted.append((listed, version)))
    inf.relist()
    assert seen == [("ADDED", n, "Deployment", "apps/v1") for n in "abcde"]
    lists = [q for verb, q in server.requests if verb == "list"]
    assert len(lists) == 3 and all(dict(q)["limit"] == "2" and dict(q)["labelSelector"] == "app=x" for q in lists)
    assert inf.version == "105" and inf.synced.is_set()
    assert relisted == [({("ns", n): str(101 + i) for i, n in enumerate("abcde")}, "105")]


def test_the_watch_starts_from_the_list_and_continues_from_the_last_event_or_bookmark():
    server = FakeApiServer()
    server.put("a")
    inf, seen = informer(server)
    inf.relist()
    server.put("b")
    server.put("a", spec={"replicas": 2})
    server.delete("b")
    server.bookmark_at_end = True
    server.rv += 5  # other kinds' writes move the version on; the bookmark says so
    inf.watch_once()
    assert seen[1:] == [("ADDED", "b", "Deployment", "apps/v1"), ("MODIFIED", "a", "Deployment", "apps/v1"),
                        ("DELETED", "b", "Deployment", "apps/v1")]
    watch = dict(server.requests[-1][1])
    assert watch["resourceVersion"] == "101" and watch["allowWatchBookmarks"] == "true"
    assert inf.version == "109" and inf.known == {("ns", "a")}
    inf.watch_once()
    assert dict(server.requests[-1][1])["resourceVersion"] == "109"
    assert len(seen) == 4  # nothing delivered twice


def test_410_gone_relists_and_what_went_missing_is_deleted():
    server = FakeApiServer()
    for name in "abc":
        server.put(name)
    inf, seen = informer(server)
    inf.relist()
    server.delete("b", record=False)  # while the watch was away: no event the informer could see
    server.put("d")
    server.compact()
    with pytest.raises(Exception) as gone:
        inf.watch_once()
    assert type(gone.value).__name__ == "Gone"
    seen.clear()
    inf.relist()
    assert ("DELETED", "b", "Deployment", "apps/v1") in seen
    assert [s for s in seen if s[0] == "ADDED"] == [("ADDED", n, "Deployment", "apps/v1") for n in "acd"]
    assert inf.known == {("ns", "a"), ("ns", "c"), ("ns", "d")} and inf.lists == 2


def test_an_incomplete_list_deletes_nothing():
    server = FakeApiServer()
    for name in "abcd":
        server.put(name)
    inf, seen = informer(server)
    inf.relist()
    seen.clear()
    original = server.list_page
    calls = []

    def second_page_fails(path, query):
        calls.append(query)
        if len(calls) == 2:
            raise ApiException(status=503, reason="Service Unavailable")
        return original(path, query)

    server.list_page = second_page_fails
    with pytest.raises(ApiException):
        inf.relist()
    assert [s for s in seen if s[0] == "DELETED"] == []
    assert inf.known == {("ns", n) for n in "abcd"}


def test_errors_are_retried_with_backoff_and_never_end_the_loop():
    server = FakeApiServer()
    server.put("a")
    server.fail = [ApiException(status=503, reason="Service Unavailable"), OSError("connection refused"),
                   ApiException(status=403, reason="Forbidden")]
    inf, seen = informer(server)
    thread = threading.Thread(target=inf.run, daemon=True)
    thread.start()
    assert inf.synced.wait(10), "the informer never listed after the errors"
    inf.stop()
    thread.join(10)
    assert not thread.is_alive()
    assert [verb for verb, _ in server.requests[:4]] == ["list"] * 4  # three failures, then the list
    assert seen[0] == ("ADDED", "a", "Deployment", "apps/v1")
    assert inf.failing_since is None and inf.progress_at is not None


def test_a_handler_that_raises_does_not_stop_the_informer():
    server = FakeApiServer()
    for name in "ab":
        server.put(name)
    delivered = []

    def handler(type_, obj):
        if obj["metadata"]["name"] == "a":
            raise RecursionError("a poisoned object")
        delivered.append(obj["metadata"]["name"])

    inf = Informer(DEPLOYMENTS, server, handler)
    inf.relist()
    assert delivered == ["b"] and inf.synced.is_set()


def test_a_stuck_informer_fails_liveness_and_a_quiet_one_does_not():
    stuck, silent = 100.0, 400.0
    assert informer_problem("pods", 10.0, None, None, 0.0, 300.0, stuck, silent) is None  # quiet: bookmarks soon
    failing = informer_problem("pods", 10.0, 50.0, "503 Service Unavailable", 0.0, 200.0, stuck, silent)
    assert failing is not None and "pods" in failing and "503" in failing
    assert informer_problem("pods", 10.0, 150.0, "503", 0.0, 200.0, stuck, silent) is None  # failing only 50 s
    assert "read nothing" in informer_problem("pods", 10.0, None, None, 0.0, 411.0, stuck, silent)
    assert "read nothing" in informer_problem("pods", None, None, None, 0.0, 401.0, stuck, silent)  # never listed


def test_the_informer_kinds_cover_every_kind_the_cache_keeps():
    kinds = {resource.kind for resource, _ in handlers.INFORMED}
    assert kinds == {"Deployment", "Service", "ServiceAccount", "Role", "RoleBinding", "Pod", "ConfigMap"}
    assert all(selector == handlers.MANAGED_SELECTOR for r, selector in handlers.INFORMED if r.kind != "ConfigMap")


OWNER = {"ownerReferences": [{"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "name": "a",
                              "controller": True}]}


def test_a_child_deleted_unseen_queues_its_owner_through_the_relist(monkeypatch):
    """The informer's relist hands over a tombstone; the owner comes from what the cache held."""
    cache = ClusterCache()
    cache.expect({})
    queue = WorkQueue(lambda key, queued_at: None)
    monkeypatch.setattr(handlers, "CACHE", cache)
    monkeypatch.setitem(handlers._state, "queue", queue)
    server = FakeApiServer()
    server.put("a-decode")
    server.objects[("ns", "a-decode")]["metadata"].update(OWNER)
    server.put("a-prefill")
    server.objects[("ns", "a-prefill")]["metadata"].update(OWNER)
    inf = Informer(DEPLOYMENTS, server, handlers.informer_event)
    inf.relist()
    assert cache.child("Deployment", "ns", "a-decode") is not None
    assert [k for k, _ in queue.waiting()] == [("ns", "a")]  # the first list: new to the cache
    queue.clear()
    queue._dirty.clear()
    inf.relist()
    assert [k for k, _ in queue.waiting()] == []  # listed again unchanged: nothing to do
    server.delete("a-decode", record=False)
    inf.relist()
    assert cache.child("Deployment", "ns", "a-decode") is None
    assert [k for k, _ in queue.waiting()] == [("ns", "a")]
