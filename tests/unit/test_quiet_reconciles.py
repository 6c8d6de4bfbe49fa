"""A reconcile that begins at the change epoch of its object's cached inputs at which the last one had nothing to
do is skipped (reconcile.QuietMemo, ClusterCache.epoch): what moves an object's epoch, what does not, and the real
reconcile against a fake apiserver (its writes come back through the caches as the watches bring them)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from prometheus_client import REGISTRY

from pdd_operator.api.constants import KIND, LABEL_INSTANCE
from pdd_operator.controller import reconcile as reconciling
from pdd_operator.controller.cache import ClusterCache
from pdd_operator.controller.kube import Kube
from pdd_operator.controller.reconcile import QuietMemo, reconcile

ROOT = Path(__file__).resolve().parents[2]
SPEC = yaml.safe_load((ROOT / "examples" / "cpu-tiny-pd.yaml").read_text())["spec"]
NS = "ns"


def pdd(name: str, version: int = 1, generation: int = 1, spec: dict | None = None, status: dict | None = None,
        config_map: str | None = None) -> dict:
    body = copy.deepcopy(spec or SPEC)
    if config_map:
        body["model"]["configMapRef"] = {"name": config_map, "key": "config.json"}
    return {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": KIND,
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "generation": generation,
                         "resourceVersion": str(version)},
            "spec": body, **({"status": status} if status else {})}


def child(kind: str, name: str, owner: str | None, version: int, **extra) -> dict:
    meta = {"name": name, "namespace": NS, "resourceVersion": str(version), "labels": {LABEL_INSTANCE: owner or "x"}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "pdd-operator.dev/v1alpha1", "kind": KIND, "name": owner,
                                    "uid": f"uid-{owner}", "controller": True}]
    return {"apiVersion": "v1", "kind": kind, "metadata": meta, **extra}


def pod(name: str, owner: str, version: int, reason: str | None = None) -> dict:
    status = {"containerStatuses": [{"name": "vllm", "state": {"waiting": {"reason": reason}}}]} if reason else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS,
            "resourceVersion": str(version), "labels": {LABEL_INSTANCE: owner}}, "status": status}


def config_map(name: str, version: int, data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS,
            "resourceVersion": str(version)}, "data": {"config.json": data}}


def _filled() -> ClusterCache:
    cache = ClusterCache()
    cache.expect({})
    cache.observe(KIND, pdd("a", config_map="cm"))
    cache.observe(KIND, pdd("b"))
    cache.observe("Service", child("Service", "a-decode", "a", 10))
    cache.observe("Service", child("Service", "b-decode", "b", 11))
    cache.observe("Pod", pod("a-decode-1", "a", 12))
    cache.observe("ConfigMap", config_map("cm", 13, "{}"))
    return cache


# Each: what happens to the cache; which of "a", "b" see their epoch move (the namespace's epoch counts for both).
EPOCH_CASES = [
    pytest.param(lambda c: c.observe(KIND, pdd("a", 20, 2, spec={**SPEC, "router": {"replicas": 0}})), {"a"},
                 id="its spec"),
    pytest.param(lambda c: c.observe(KIND, pdd("a", 20, status={"observedGeneration": 1})), {"a"}, id="its status"),
    pytest.param(lambda c: c.observe(KIND, pdd("a", 20, config_map="cm")), set(),
                 id="a new resourceVersion of nothing else"),
    pytest.param(lambda c: c.observe("Service", child("Service", "a-decode", "a", 20, spec={"ports": []})), {"a"},
                 id="a child changed"),
    pytest.param(lambda c: c.observe("Service", child("Service", "a-decode", "a", 20)), set(),
                 id="a child listed again unchanged"),
    pytest.param(lambda c: c.observe("Service", child("Service", "a-decode", "a", 20), deleted=True), {"a"},
                 id="a child deleted"),
    pytest.param(lambda c: c.observe("Service", child("Service", "a-router", "a", 20)), {"a"}, id="a new child"),
    pytest.param(lambda c: c.observe("Service", child("Service", "stray", None, 20)), {"a", "b"},
                 id="an object with no owner: the namespace"),
    pytest.param(lambda c: c.observe("Pod", pod("a-decode-1", "a", 20, reason="CrashLoopBackOff")), {"a"},
                 id="a pod's view"),
    pytest.param(lambda c: c.observe("Pod", pod("a-decode-1", "a", 20)), set(), id="a pod update it does not keep"),
    pytest.param(lambda c: c.observe("Pod", pod("a-decode-1", "a", 20), deleted=True), {"a"}, id="a pod gone"),
    pytest.param(lambda c: c.observe("Pod", pod("z-1", "z", 20)), {"a", "b"},
                 id="a pod of a PDDeployment not cached: the namespace"),
    pytest.param(lambda c: c.observe("ConfigMap", config_map("cm", 20, '{"a": 1}')), {"a"},
                 id="its ConfigMap"),
    pytest.param(lambda c: c.observe("ConfigMap", config_map("other", 20, "{}")), set(), id="a ConfigMap no one reads"),
    pytest.param(lambda c: c.remember("Service", child("Service", "a-decode", "a", 20)), {"a"}, id="an own write"),
    pytest.param(lambda c: (c.remember("Service", child("Service", "a-decode", "a", 20)), c.epoch(NS, "a"),
                            c.observe("Service", child("Service", "a-decode", "a", 20)),
                            c.settle("Service", NS, "a-decode", "20")), {"a"},
                 id="an own write, then its echo: moved once, by the write"),
    pytest.param(lambda c: c.prune("Service", {(NS, "b-decode"): "11"}, 15), {"a"}, id="a child a relist lacks"),
    pytest.param(lambda c: c.prune(KIND, {(NS, "b"): "1"}, 15), {"a"}, id="a PDDeployment a list lacks"),
]


@pytest.mark.parametrize(("change", "moved"), EPOCH_CASES)
def test_what_moves_an_objects_epoch(change, moved):
    cache = _filled()
    before = {name: cache.epoch(NS, name) for name in ("a", "b")}
    change(cache)
    after = {name: cache.epoch(NS, name) for name in ("a", "b")}
    assert {name for name in after if after[name] != before[name]} == moved


def test_the_echo_of_an_own_write_does_not_move_the_epoch_again():
    cache = _filled()
    cache.remember("Service", child("Service", "a-decode", "a", 20, spec={"ports": []}))
    epoch = cache.epoch(NS, "a")
    cache.observe("Service", child("Service", "a-decode", "a", 20, spec={"ports": []}))
    assert cache.settle("Service", NS, "a-decode", "20")
    # the index changed, but reads return what they returned since the write: the same content
    assert cache.epoch(NS, "a") == epoch


@pytest.mark.parametrize(("steps", "expected"), [
    ([("record", "a", (0, 0, 1), True)], {"a": True}),
    ([("record", "a", (0, 0, 1), False)], {"a": False}),  # an incompatible spec is quiet too
    ([("record", "a", (0, 0, 1), True), ("at", "a", (0, 0, 2))], {"a": None}),  # the epoch moved
    ([("record", "a", (0, 0, 1), True), ("at", "a", (0, 1, 1))], {"a": None}),  # the namespace's moved
    ([("record", "a", (0, 0, 1), True), ("at", "a", (1, 0, 1))], {"a": None}),  # another cache
    ([("record", "a", (0, 0, 1), True), ("forget", "a")], {"a": None}),
    ([("record", "a", (0, 0, 1), True), ("record", "b", (0, 0, 1), True), ("record", "c", (0, 0, 1), True)],
     {"a": None, "b": True, "c": True}),  # size 2: the oldest recorded is dropped
    ([("record", "a", (0, 0, 1), True), ("record", "b", (0, 0, 1), True), ("record", "a", (0, 0, 1), True),
      ("record", "c", (0, 0, 1), True)], {"a": True, "b": None, "c": True}),
])
def test_quiet_memo(steps, expected):
    memo, at = QuietMemo(size=2), {}
    for step in steps:
        if step[0] == "record":
            memo.record((NS, step[1]), step[2], step[3])
            at[step[1]] = step[2]
        elif step[0] == "at":
            at[step[1]] = step[2]
        else:
            memo.forget((NS, step[1]))
    assert {key: memo.quiet((NS, key), at.get(key, (0, 0, 1))) for key in expected} == expected
    with pytest.raises(ValueError):
        QuietMemo(size=0)


# --- the real reconcile against a fake apiserver -------------------------------------------------------------

class FakeApiserver(Kube):
    """A Kube whose writes go to a dict of objects with resourceVersions (the answer remembered in the cache, as
    the real one does); :meth:`deliver` hands what changed to the cache as the watches and handlers do."""

    def __init__(self, cache: ClusterCache) -> None:
        super().__init__(api_client=object(), cache=cache)
        self.version, self.objects, self.sent, self.undelivered = 100, {}, [], []

    def _next(self, kind: str, obj: dict) -> dict:
        self.version += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.objects[(kind, obj["metadata"]["name"])] = obj
        self.undelivered.append((kind, obj))
        return obj

    def _server_side_apply(self, kind, namespace, name, body):
        self.sent.append(("apply", kind, name))
        answer = self._next(kind, json.loads(body))
        self.cache.remember(kind, answer)
        return answer["metadata"]["resourceVersion"]

    def patch_status(self, namespace, name, status, resource_version):
        self.sent.append(("status", KIND, name))
        obj = copy.deepcopy(self.objects[(KIND, name)])
        obj["status"] = {k: v for k, v in status.items() if v is not None}
        self.cache.remember(KIND, self._next(KIND, obj))

    def event(self, obj, type_, reason, message):
        return True

    def create(self, obj: dict) -> None:
        self._next(obj["kind"], obj)
        self.deliver()

    def edit(self, kind: str, name: str, change) -> None:
        obj = copy.deepcopy(self.objects[(kind, name)])
        change(obj)
        self._next(kind, obj)
        self.deliver()

    def deliver(self) -> None:
        for kind, obj in self.undelivered:
            self.cache.observe(kind, obj)
            self.cache.settle(kind, NS, obj["metadata"]["name"], obj["metadata"]["resourceVersion"])
        self.undelivered = []


def _run(kube: FakeApiserver, name: str = "p"):
    kube.sent = []
    outcome = reconcile(kube, NS, name)
    return outcome, kube.sent


def _skips() -> float:
    return REGISTRY.get_sample_value("pdd_reconcile_skips_total") or 0.0


@pytest.fixture
def apiserver(monkeypatch):
    monkeypatch.setattr(reconciling, "QUIET", QuietMemo())
    monkeypatch.setattr(reconciling, "PACER", reconciling.StatusPacer(window=0))
    cache = ClusterCache()
    cache.expect({})
    kube = FakeApiserver(cache)
    kube.create(pdd("p"))
    return kube


def test_a_new_object_is_reconciled_then_quiet_and_skipped_until_its_inputs_change(apiserver):
    kube = apiserver
    outcome, sent = _run(kube)
    assert outcome.applied == 9 and ("status", KIND, "p") in sent
    kube.deliver()  # the watches bring the children and the status back
    outcome, sent = _run(kube)  # reads everything, finds nothing to do: recorded
    assert sent == [] and not outcome.applied and not outcome.status_written
    skips = _skips()

    def no_reads(*args, **kwargs):
        raise AssertionError("a skipped reconcile reads nothing")
    for method in ("pdd", "child", "pods", "config_map"):
        setattr(kube.cache, method, no_reads)
    for _ in range(3):  # the resync's rounds
        outcome, sent = _run(kube)
        assert sent == [] and outcome.compatible and not outcome.applied
    assert _skips() == skips + 3
    for method in ("pdd", "child", "pods", "config_map"):
        delattr(kube.cache, method)

    # a Deployment's status the reconcile reads changes: a full reconcile, which writes the status
    deployment = next(n for k, n in kube.objects if k == "Deployment" and n.endswith("decode"))
    kube.edit("Deployment", deployment, lambda d: d.update(status={"observedGeneration": 1, "replicas": 1,
                                                                    "updatedReplicas": 1, "readyReplicas": 1}))
    outcome, sent = _run(kube)
    assert sent == [("status", KIND, "p")] and _skips() == skips + 3
    kube.deliver()
    _run(kube)  # quiet again
    assert _run(kube)[1] == [] and _skips() == skips + 4

    # someone edits a child: taken back at once, never skipped
    service = next(n for k, n in kube.objects if k == "Service" and n.endswith("decode"))
    kube.edit("Service", service, lambda s: s["spec"].update(selector={"app": "other"}))
    outcome, sent = _run(kube)
    assert sent == [("apply", "Service", service)] and _skips() == skips + 4


def test_a_held_status_update_is_never_recorded_as_quiet(apiserver, monkeypatch):
    kube = apiserver
    _run(kube)
    kube.deliver()
    monkeypatch.setattr(reconciling, "PACER", reconciling.StatusPacer(window=3600))
    reconciling.PACER.written((NS, "p"))
    deployment = next(n for k, n in kube.objects if k == "Deployment" and n.endswith("decode"))
    kube.edit("Deployment", deployment, lambda d: d.update(status={"observedGeneration": 1, "replicas": 1,
                                                                    "updatedReplicas": 1}))
    first = _run(kube)[0]
    if first.requeue_after is None:  # not a progress-only update for this spec: nothing held to test
        pytest.skip("the update is written at once")
    skips = _skips()
    again = _run(kube)[0]
    assert again.requeue_after is not None and _skips() == skips  # held again, not skipped


def test_without_a_ready_cache_nothing_is_skipped(apiserver):
    kube = apiserver
    _run(kube)
    kube.deliver()
    _run(kube)
    kube.cache.ready.clear()
    assert kube.epoch(NS, "p") is None
