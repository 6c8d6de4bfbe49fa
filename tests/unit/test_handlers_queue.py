"""kopf's and the informers' events -> the caches and the reconcile queue: owners found from the caches, the operator's own writes
coming back through the watch queue nothing, a referenced ConfigMap's change queues its readers."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from pdd_operator.api.constants import LABEL_INSTANCE
from pdd_operator.api.names import label_value
from pdd_operator.controller import cache as caching
from pdd_operator.controller import handlers
from pdd_operator.controller.cache import ClusterCache
from pdd_operator.controller.workqueue import Priority, WorkQueue
from tests.unit.test_cache import Indexes, obj

OWNER = {"ownerReferences": [{"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "name": "a",
                              "controller": True}]}


@pytest.fixture
def wired(monkeypatch):
    cache = ClusterCache()
    ix = Indexes(cache)
    queue = WorkQueue(lambda key, queued_at: None)  # never started: keys stay queued for the test to read
    monkeypatch.setattr(handlers, "CACHE", cache)
    monkeypatch.setitem(handlers._state, "queue", queue)
    return cache, ix, queue


def queued(queue: WorkQueue) -> list:
    return [key for key, _ in queue.waiting()]


def child(ix, body, type_="MODIFIED"):
    handlers.informer_event(type_, body)


def test_own_apply_coming_back_queues_nothing_and_later_changes_queue_the_owner(wired):
    cache, ix, queue = wired
    cache.expect({})
    mine = obj("Deployment", "a-decode", 9, meta=OWNER)
    cache.remember("Deployment", mine)
    child(ix, mine)
    assert queued(queue) == []
    engine = {**OWNER, "labels": {"pdd-operator.dev/role": "decode"}}
    child(ix, obj("Deployment", "a-decode", 10, meta=engine, status={"replicas": 1}))  # the controller-manager's
    child(ix, obj("Deployment", "a-decode", 11, meta=engine, status={"replicas": 2}))  # coalesced with the one waiting
    assert queued(queue) == [("ns", "a")]


POD_LABELS = {"labels": {LABEL_INSTANCE: "a"}}


def pod(rv, phase="Pending", conditions=(), **status):
    return obj("Pod", "a-decode-x", rv, meta=POD_LABELS,
               status={"phase": phase, "conditions": list(conditions), "podIP": f"10.0.0.{rv}", **status})


UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes",
                 "lastTransitionTime": "2026-12-02T00:00:00Z"}
SCHEDULED = {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-12-02T00:00:01Z"}
READY = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-02T00:00:02Z"}


@pytest.mark.parametrize("before, after, queues", [
    # what status reads of a pod changed: its owner is reconciled
    (pod(3), pod(4, conditions=[UNSCHEDULABLE]), True),
    (pod(3, conditions=[UNSCHEDULABLE]), pod(4, conditions=[SCHEDULED]), True),
    (pod(3), pod(4, initContainerStatuses=[{"name": "preflight",
                                            "state": {"terminated": {"message": '{"reason": "TCPFallback"}'}}}]),
     True),
    (pod(3), pod(4, containerStatuses=[{"name": "vllm", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]),
     True),
    (pod(3, conditions=[UNSCHEDULABLE]),
     obj("Pod", "a-decode-x", 4, meta={**POD_LABELS, "deletionTimestamp": "2026-12-02T00:00:03Z"}), True),
    # a pod that starts to terminate changes its slot's pod count (rollout retire order, Ready): reconciled
    (pod(3), obj("Pod", "a-decode-x", 4, meta={**POD_LABELS, "deletionTimestamp": "2026-12-02T00:00:03Z"}), True),
    # a pod that stays free of trouble adds nothing to what status reads of pods (triage.pod_inert)
    (None, pod(4), False),  # created
    (pod(3), pod(4, initContainerStatuses=[{"name": "preflight", "state": {"terminated": {"message": "{}"}}}]),
     False),  # a message that is no verdict
    (pod(3), pod(4, containerStatuses=[{"name": "vllm", "state": {"waiting": {"reason": "ContainerCreating"}}}]),
     False),
    # nothing status reads changed: the pod started, became ready, got an IP, a time moved
    (pod(3, conditions=[SCHEDULED]), pod(4, "Running", [SCHEDULED, READY]), False),
    (pod(3, conditions=[SCHEDULED]), pod(4, conditions=[{**SCHEDULED, "lastTransitionTime": "later"}]), False),
    (pod(3, conditions=[SCHEDULED]), pod(4, "Running", [SCHEDULED],
                                         containerStatuses=[{"name": "vllm", "state": {"running": {}}}]), False),
])
def test_a_pod_update_queues_its_owner_only_when_what_status_reads_of_it_changed(wired, before, after, queues):
    cache, ix, queue = wired
    ix.put(obj("PDDeployment", "a", 1, spec={}))
    if before is not None:
        child(ix, before)
    queue.clear()
    child(ix, after)
    assert queued(queue) == ([("ns", "a")] if queues else [])


def test_a_child_update_of_nothing_but_its_resource_version_queues_nothing(wired):
    cache, ix, queue = wired
    child(ix, obj("Deployment", "a-decode", 10, meta=OWNER, status={"replicas": 1}))
    assert queued(queue) == [("ns", "a")]
    queue.clear()
    # another manager's no-op apply: only managedFields and the resourceVersion move
    child(ix, obj("Deployment", "a-decode", 11, meta={**OWNER, "managedFields": [{"manager": "y"}]},
                  status={"replicas": 1}))
    assert queued(queue) == []
    assert cache.child("Deployment", "ns", "a-decode")["metadata"]["resourceVersion"] == "11"
    child(ix, obj("Deployment", "a-decode", 12, meta=OWNER, status={"replicas": 1}), type_="DELETED")
    assert queued(queue) == [("ns", "a")]


def test_a_pod_is_routed_by_its_instance_label_also_for_a_hashed_name(wired):
    cache, ix, queue = wired
    name = "llama-3.1-8b." + "x" * 60
    ix.put(obj("PDDeployment", name, 1, spec={}))
    child(ix, obj("Pod", "p", 3, meta={"labels": {LABEL_INSTANCE: label_value(name)}},
                  status={"conditions": [UNSCHEDULABLE]}))
    assert queued(queue) == [("ns", name)]
    child(ix, obj("Pod", "q", 4, meta={"labels": {LABEL_INSTANCE: "nobody"}}, status={"conditions": [UNSCHEDULABLE]}))
    assert queued(queue) == [("ns", name)]


def test_a_deleted_child_queues_its_owner(wired):
    cache, ix, queue = wired
    child(ix, obj("Service", "a-prefill", 5, meta=OWNER), type_="DELETED")
    assert queued(queue) == [("ns", "a")]


def test_the_operator_s_own_status_write_queues_nothing(wired):
    cache, ix, queue = wired
    body = obj("PDDeployment", "a", 7, spec={})
    cache.remember("PDDeployment", body)

    def event(b):
        asyncio.run(handlers.pddeployment_event(type="MODIFIED", body=b, name="a", namespace="ns", meta=b["metadata"],
                                                **ix.kwargs()))
    event(body)
    assert queued(queue) == []
    event(obj("PDDeployment", "a", 8, spec={"x": 1}))  # the user's edit
    assert queued(queue) == [("ns", "a")]


def test_a_status_write_whose_echo_comes_before_its_answer_queues_nothing(wired):
    cache, ix, queue = wired
    ix.put(obj("PDDeployment", "a", 7, spec={"x": 1}))

    def event(b):
        asyncio.run(handlers.pddeployment_event(type="MODIFIED", body=b, name="a", namespace="ns", meta=b["metadata"],
                                                **ix.kwargs()))
    # the watch delivers the operator's status patch before the patch's answer is remembered
    event(obj("PDDeployment", "a", 8, spec={"x": 1}, status={"observedGeneration": 1}))
    assert queued(queue) == []
    assert cache.pdd("ns", "a")["status"] == {"observedGeneration": 1}
    event(obj("PDDeployment", "a", 9, spec={"x": 2}, status={"observedGeneration": 1}))
    assert queued(queue) == [("ns", "a")]


def test_a_config_map_change_queues_the_pddeployments_that_read_it(wired):
    cache, ix, queue = wired
    ix.put(obj("PDDeployment", "a", 1, spec={"model": {"configMapRef": {"name": "cfg"}}}))
    ix.put(obj("PDDeployment", "b", 1, spec={}))
    for name in ("cfg", "other"):
        body = obj("ConfigMap", name, 5, data={})
        handlers.informer_event("MODIFIED", body)
    assert queued(queue) == [("ns", "a")]


@pytest.mark.parametrize("exc, retried", [
    (ApiException(status=503, reason="Service Unavailable"), True),
    (urllib3.exceptions.ProtocolError("Connection aborted."), True),
    (ApiException(status=403, reason="Forbidden"), False),
])
@pytest.mark.parametrize("deferred", [False, True])
def test_a_reconcile_failing_transiently_is_requeued_with_backoff_and_a_refusal_is_not(monkeypatch, exc, retried,
                                                                                      deferred):
    """Whether the reconcile fails on its worker or after it went on in a waiting thread (deferred)."""
    def raise_it():
        raise exc

    def failing(_kube, _namespace, _name, waiters=None):
        if waiters is None:
            raise_it()
        return waiters.submit(raise_it)

    waiters = ThreadPoolExecutor(max_workers=1) if deferred else None
    monkeypatch.setattr(handlers, "reconcile", failing)
    monkeypatch.setattr(handlers, "_kube", lambda: None)
    monkeypatch.setitem(handlers._state, "elector", None)
    queue = WorkQueue(lambda key, queued_at: handlers._reconcile_logged(*key, queued_at=queued_at, waiters=waiters),
                      workers=1, retry_base=3600.0, retry_cap=3600.0, max_deferred=1 if deferred else 0)
    queue.start()
    try:
        queue.add(("ns", "a"))
        deadline = time.monotonic() + 10
        while queue.failures(("ns", "a")) == 0 and not (queue.idle() and not retried):
            assert time.monotonic() < deadline, "the reconcile did not end"
            time.sleep(0.005)
        assert (queue.retry_due(("ns", "a")) is not None) is retried
        assert queue.failures(("ns", "a")) == int(retried)
        assert queue.deferred() == 0 and handlers._IN_FLIGHT.wait_idle(0)  # the run ended, deferred or not
    finally:
        queue.stop()
        if waiters is not None:
            waiters.shutdown()


def test_freed_memory_is_released_once_after_each_burst(monkeypatch):
    """Busy, then idle for RELEASE_AFTER_SECONDS: one release; idle on: none more; a new burst: one more."""
    from pdd_operator.controller import memory

    released = []
    monkeypatch.setattr(memory, "release", lambda: released.append(time.monotonic()) or 0)
    monkeypatch.setattr(handlers, "RELEASE_AFTER_SECONDS", 0.5)
    cache = ClusterCache()
    cache.expect({})
    monkeypatch.setattr(handlers, "CACHE", cache)
    queue = WorkQueue(lambda key, queued_at: None, workers=1)

    async def scenario():
        task = asyncio.create_task(handlers._release_memory_after_bursts(queue))
        try:
            async def until(predicate, what):
                deadline = time.monotonic() + 30
                while not predicate():
                    assert time.monotonic() < deadline, what
                    await asyncio.sleep(0.05)
            await until(lambda: len(released) == 1, "no release after the start")
            await asyncio.sleep(2.5)  # idle on: nothing new to give back
            assert len(released) == 1
            queue.add(("ns", "a"))  # a burst (never processed: the queue is not started) ...
            await asyncio.sleep(1.5)
            assert len(released) == 1  # ... while it is busy, nothing
            queue.clear()  # ... then idle again
            await until(lambda: len(released) == 2, "no release after the burst")
        finally:
            task.cancel()

    asyncio.run(scenario())


def test_memory_settings_page_kopf_s_initial_lists_and_end_idle_workers_early():
    """The two kopf settings that bound a restart's memory peak are kopf's own fields (a renamed one
    would be set silently on the dataclass and do nothing) and carry the operator's values."""
    import dataclasses

    import kopf

    settings = kopf.OperatorSettings()
    assert settings.watching.chunk_size is None and settings.queueing.idle_timeout == 5.0  # kopf's defaults
    handlers.memory_settings(settings)
    assert "chunk_size" in {f.name for f in dataclasses.fields(settings.watching)}
    assert "idle_timeout" in {f.name for f in dataclasses.fields(settings.queueing)}
    assert settings.watching.chunk_size == handlers.LIST_CHUNK == 200
    assert settings.queueing.idle_timeout == handlers.WORKER_IDLE_SECONDS == 0.5


ROUTER = {**OWNER, "labels": {"pdd-operator.dev/role": "router"}}
ENGINE = {**OWNER, "labels": {"pdd-operator.dev/role": "decode"}}


@pytest.mark.parametrize("kind, meta, name, update, queues", [
    ("Deployment", ENGINE, "a-decode", {"status": {"replicas": 1, "readyReplicas": 1}}, Priority.STATUS),  # counts
    ("Deployment", ROUTER, "a-router", {"status": {"replicas": 1, "readyReplicas": 1}}, Priority.STATUS),  # Ready
    ("Service", ROUTER, "a-router", {"status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.9"}]}}}, None),  # unread
    ("Deployment", ROUTER, "a-router", {"spec": {"replicas": 3}, "status": {}}, Priority.WRITE),  # a hand edit
    ("Deployment", ROUTER, "a-router",
     {"status": {}, "meta": {"labels": {"pdd-operator.dev/role": "router", "x": "y"}}}, Priority.WRITE),
    ("Deployment", ENGINE, "a-decode",  # the Deployment controller's revision: not ours, not read
     {"status": {}, "meta": {"annotations": {"deployment.kubernetes.io/revision": "1"}}}, None),
])
def test_a_child_s_status_change_queues_its_owner_only_where_status_is_read(wired, kind, meta, name, update, queues):
    cache, ix, queue = wired
    child(ix, obj(kind, name, 10, meta=meta, spec={"replicas": 1}, status={}))
    queue.clear()
    extra = dict(update)
    meta2 = {**meta, **extra.pop("meta", {})}
    child(ix, obj(kind, name, 11, meta=meta2, **{"spec": {"replicas": 1}, **extra}))
    assert queue.waiting() == ([(("ns", "a"), queues)] if queues is not None else [])


def test_a_new_pddeployment_is_served_before_status_work_and_status_work_before_the_resync_s_round(wired, monkeypatch):
    cache, ix, queue = wired

    class Kube:
        def list_metadata(self, kind, namespaces=(), label_selector=None):
            return {("ns", "old-1"): "5", ("ns", "old-2"): "6"}, 7

    monkeypatch.setitem(handlers._state, "kube", Kube())
    asyncio.run(handlers.resync_once())
    child(ix, obj("Deployment", "a-decode", 10, meta=ENGINE, spec={"replicas": 1}, status={}))
    queue.clear()
    asyncio.run(handlers.resync_once())
    child(ix, obj("Deployment", "a-decode", 11, meta=ENGINE, spec={"replicas": 1}, status={"readyReplicas": 1}))
    new = obj("PDDeployment", "new", 12, spec={})
    asyncio.run(handlers.pddeployment_event(type="ADDED", body=new, name="new", namespace="ns", meta=new["metadata"],
                                            **ix.kwargs()))
    assert queue.waiting() == [(("ns", "new"), Priority.WRITE), (("ns", "a"), Priority.STATUS),
                               (("ns", "old-1"), Priority.RESYNC), (("ns", "old-2"), Priority.RESYNC)]


def test_events_that_change_nothing_kept_or_echo_an_own_write_decode_no_cached_copy(wired, monkeypatch):
    """Two watch events in three of a new object change nothing the cache keeps (a pod starts, a status no
    reconcile reads) or are the echo of the operator's own apply or status patch: they are indexed, queue
    nothing and decode no cached copy (zlib and JSON: more than the rest of their handling). An event that
    changed something is still compared with the copy it replaced (decoded once)."""
    cache, ix, queue = wired
    cache.expect({})
    ix.put(obj("PDDeployment", "a", 1, spec={"x": 1}))
    child(ix, pod(3, conditions=[SCHEDULED]))
    engine = {**OWNER, "labels": {"pdd-operator.dev/role": "decode"}}
    child(ix, obj("Deployment", "a-decode", 10, meta=engine, spec={"replicas": 1}, status={"replicas": 1}))
    queue.clear()
    decoded: list[str] = []
    text = caching.Packed.text
    monkeypatch.setattr(caching.Packed, "text", lambda self: decoded.append(self.owner) or text(self))

    child(ix, pod(4, "Running", [SCHEDULED, READY]))  # started and ready: its view is the same
    child(ix, obj("Deployment", "a-decode", 11, meta={**engine, "managedFields": [{"manager": "y"}]},
                  spec={"replicas": 1}, status={"replicas": 1}))  # another manager's no-op apply
    mine = obj("Deployment", "a-decode", 12, meta=engine, spec={"replicas": 2}, status={"replicas": 1})
    cache.remember("Deployment", mine)
    child(ix, mine)  # the echo of the operator's own apply
    status = obj("PDDeployment", "a", 2, spec={"x": 1}, status={"observedGeneration": 1})
    cache.remember("PDDeployment", status)
    asyncio.run(handlers.pddeployment_event(type="MODIFIED", body=status, name="a", namespace="ns",
                                            meta=status["metadata"]))  # the echo of its status patch
    assert decoded == []
    assert queued(queue) == []

    child(ix, obj("Deployment", "a-decode", 13, meta=engine, spec={"replicas": 2}, status={"replicas": 2}))
    assert len(decoded) == 1  # a status the reconcile reads changed: compared with the copy it replaced
    assert queued(queue) == [("ns", "a")]
