"""A child found in place stays in place across updates of nothing but its status (cache.content_fingerprint,
ClusterCache.child_content_version): a new object's Deployment status updates neither render nor compare its
children again, while every other change of a child still does."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.controller.cache import ClusterCache, content_fingerprint
from pdd_operator.controller.kube import Kube, with_applied_hash
from pdd_operator.controller.reconcile import apply_all
from pdd_operator.controller.render_memo import RenderMemo
from pdd_operator.render.workloads import Owner, render_children

ROOT = Path(__file__).resolve().parents[2]
SPEC = PDDeploymentSpec.model_validate(yaml.safe_load((ROOT / "examples" / "cpu-tiny-pd.yaml").read_text())["spec"])
OWNER = Owner("p", "ns", "uid-p", 1)

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "d", "namespace": "ns", "resourceVersion": "5", "labels": {"a": "1"},
                           "managedFields": [{"manager": "pdd-operator"}]},
              "spec": {"replicas": 1}, "status": {"replicas": 0}}


def _changed(change) -> dict:
    body = copy.deepcopy(DEPLOYMENT)
    change(body)
    return body


# Each: a change of the Deployment above; whether its fingerprint (and so its content version) stays.
CASES = [
    pytest.param(lambda b: b["status"].update(readyReplicas=1), True, id="status"),
    pytest.param(lambda b: b.pop("status"), True, id="status gone"),
    pytest.param(lambda b: b["metadata"].update(resourceVersion="9"), True, id="resourceVersion"),
    pytest.param(lambda b: b["metadata"].update(managedFields=[{"manager": "kcm", "subresource": "status"}]), True,
                 id="managedFields"),
    pytest.param(lambda b: b["spec"].update(replicas=2), False, id="spec"),
    pytest.param(lambda b: b["metadata"]["labels"].update(b="2"), False, id="a label"),
    pytest.param(lambda b: b["metadata"].update(annotations={"x": "y"}), False, id="an annotation"),
    pytest.param(lambda b: b["metadata"].update(generation=2), False, id="generation"),
    pytest.param(lambda b: b["metadata"].update(deletionTimestamp="2026-12-07T00:00:00Z"), False, id="deleting"),
]


@pytest.mark.parametrize(("change", "same"), CASES)
def test_fingerprint_ignores_only_status_version_and_managed_fields(change, same):
    assert (content_fingerprint(_changed(change)) == content_fingerprint(DEPLOYMENT)) is same


def test_fingerprint_of_what_orjson_refuses_is_none():
    assert content_fingerprint(_changed(lambda b: b["spec"].update(replicas=2**70))) is None


@pytest.mark.parametrize(("change", "same"), CASES)
def test_content_version_moves_only_with_the_content(change, same):
    cache = ClusterCache()
    cache.observe("Deployment", DEPLOYMENT)
    assert cache.child_content_version("Deployment", "ns", "d") == "5"
    cache.observe("Deployment", {**_changed(change), "metadata": {**_changed(change)["metadata"],
                                                                   "resourceVersion": "9"}})
    assert cache.child_version("Deployment", "ns", "d") == "9"
    assert cache.child_content_version("Deployment", "ns", "d") == ("5" if same else "9")
    assert cache.content_stamp("Deployment", "ns", "d", "9") == ("5" if same else "9")
    assert cache.content_stamp("Deployment", "ns", "d", "7") == "7"  # a version not recorded: itself


def test_content_version_of_an_own_write_and_of_a_deleted_child():
    cache = ClusterCache()
    cache.observe("Deployment", DEPLOYMENT)
    cache.observe("Deployment", _changed(lambda b: b["metadata"].update(resourceVersion="6")))
    assert cache.child_content_version("Deployment", "ns", "d") == "5"
    cache.remember("Deployment", _changed(lambda b: b["metadata"].update(resourceVersion="8")))
    assert cache.child_content_version("Deployment", "ns", "d") == "8"  # the own write, newer: its version
    cache.observe("Deployment", _changed(lambda b: b["metadata"].update(resourceVersion="8")))
    cache.settle("Deployment", "ns", "d", "8")
    assert cache.child_content_version("Deployment", "ns", "d") == "5"  # its echo: the content of 5
    cache.observe("Deployment", _changed(lambda b: b["metadata"].update(resourceVersion="10")), deleted=True)
    assert cache.child_content_version("Deployment", "ns", "d") is None
    cache.observe("Deployment", DEPLOYMENT | {"metadata": {**DEPLOYMENT["metadata"], "resourceVersion": "12"}})
    assert cache.child_content_version("Deployment", "ns", "d") == "12"  # created again: not the old stamp


def _live(child: dict, version: int) -> dict:
    applied = with_applied_hash(child)
    return {**applied, "metadata": {**applied["metadata"], "resourceVersion": str(version)}}


@pytest.mark.parametrize(("edit", "applied"), [
    pytest.param(lambda d: d.update(status={"readyReplicas": 1, "replicas": 1}), [], id="a status update"),
    pytest.param(lambda d: d["spec"].update(replicas=7), ["p-decode"], id="a hand edit of the spec"),
    pytest.param(lambda d: d["metadata"]["labels"].pop(next(iter(d["metadata"]["labels"]))), ["p-decode"],
                 id="a label removed"),
])
def test_children_in_place_stay_in_place_across_a_status_update_only(edit, applied):
    cache = ClusterCache()
    cache.expect({})
    for child in render_children(OWNER, SPEC):
        cache.observe(child["kind"], _live(child, 5))
    kube = Kube(client.ApiClient(client.Configuration()), cache=cache)
    memo = RenderMemo()
    children = memo.renderer(kube, None)(OWNER, SPEC, None, "a")
    assert apply_all(kube, children) == (0, [], None)  # compared once: all in place
    decode = next(c for c in render_children(OWNER, SPEC)
                  if c["kind"] == "Deployment" and c["metadata"]["name"] == "p-decode")
    live = _live(decode, 6)
    edit(live)
    cache.observe("Deployment", live)
    rendered = memo.renderer(kube, None)(OWNER, SPEC, None, "a")
    assert (rendered == []) is (applied == [])  # a status update: no render
    sent = []
    kube.send_apply = lambda desired, live, digest=None: sent.append(desired["metadata"]["name"])
    reads = []
    get = kube.get
    kube.get = lambda *key: reads.append(key[2]) or get(*key)
    apply_all(kube, rendered or render_children(OWNER, SPEC))
    assert sent == applied
    assert reads == applied  # nothing but the changed child decoded and compared again


def test_a_child_pruned_after_a_relist_leaves_no_content_stamp_behind():
    # deleted while the watch was down (no delete event), then created again with the same content: the new
    # copy's version, never the stamp of the pruned one (the in-place memo would skip comparing it)
    cache = ClusterCache()
    cache.observe("Deployment", DEPLOYMENT)
    cache.prune("Deployment", {}, 20)
    assert cache.child_content_version("Deployment", "ns", "d") is None
    cache.observe("Deployment", DEPLOYMENT | {"metadata": {**DEPLOYMENT["metadata"], "resourceVersion": "30"}})
    assert cache.child_content_version("Deployment", "ns", "d") == "30"
