"""The no-op detection that keeps an idle operator from writing: desired fields contained in live."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import urllib3
import yaml
from kubernetes import client

from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.controller.cache import ClusterCache
from pdd_operator.controller.kube import (
    Kube,
    applied_hash,
    contains,
    foreign_drift,
    foreign_items,
    legacy_applied_hash,
    restamped,
    with_applied_hash,
)
from pdd_operator.render.workloads import Owner, render_children

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_added_by_the_apiserver_are_ignored():
    desired = {"spec": {"ports": [{"name": "http", "port": 8000}]}}
    live = {"spec": {"ports": [{"name": "http", "port": 8000, "protocol": "TCP", "targetPort": 8000}],
                     "sessionAffinity": "None"}}
    assert contains(live, desired)


def test_quantities_compare_by_string_form():
    assert contains({"limits": {"nvidia.com/gpu": "2"}}, {"limits": {"nvidia.com/gpu": 2}})
    assert not contains({"limits": {"nvidia.com/gpu": "4"}}, {"limits": {"nvidia.com/gpu": 2}})


def test_changed_missing_or_reordered_fields_are_differences():
    assert not contains({"a": {"b": 1}}, {"a": {"b": 2}})
    assert not contains({"a": {}}, {"a": {"b": 1}})
    assert not contains({"args": ["--x", "1"]}, {"args": ["1", "--x"]})
    assert not contains({"args": ["--x"]}, {"args": ["--x", "1"]})
    assert not contains({"flag": "False"}, {"flag": False})


def test_applied_hash_is_stable_and_sensitive():
    a = {"kind": "Service", "metadata": {"name": "x"}, "spec": {"ports": [1]}}
    assert applied_hash(a) == applied_hash({"spec": {"ports": [1]}, "metadata": {"name": "x"}, "kind": "Service"})
    assert applied_hash(a) != applied_hash({**a, "spec": {"ports": [2]}})


def test_items_other_managers_add_to_map_lists_are_tolerated():
    desired = {"spec": {"template": {"spec": {"containers": [
        {"name": "vllm", "env": [{"name": "A", "value": "1"}], "ports": [{"containerPort": 8000}]}]}}}}
    live = {"spec": {"template": {"spec": {"containers": [
        {"name": "istio-proxy", "image": "x"},
        {"name": "vllm", "env": [{"name": "INJECTED", "value": "x"}, {"name": "A", "value": "1"}],
         "ports": [{"containerPort": 8000, "protocol": "TCP"}, {"containerPort": 9090, "protocol": "TCP"}]}]}}}}
    assert contains(live, desired)


def test_a_changed_value_inside_a_map_list_item_is_a_difference():
    desired = {"env": [{"name": "A", "value": "1"}]}
    assert not contains({"env": [{"name": "A", "value": "2"}]}, desired)
    assert not contains({"env": [{"name": "B", "value": "1"}]}, desired)


def test_atomic_lists_still_compare_whole():
    assert not contains({"tolerations": [{"key": "a"}, {"key": "b"}]}, {"tolerations": [{"key": "a"}]})
    assert not contains({"args": ["--x", "1", "--y"]}, {"args": ["--x", "1"]})


def test_foreign_service_ports_are_found():
    desired = {"spec": {"ports": [{"name": "http", "port": 8000}, {"name": "nixl", "port": 5600}]}}
    edited = {"spec": {"ports": [{"name": "http", "port": 8001, "protocol": "TCP"},
                                 {"name": "nixl", "port": 5600, "protocol": "TCP"}]}}
    assert foreign_items(edited, desired, ("spec", "ports")) == [{"name": "http", "port": 8001, "protocol": "TCP"}]
    assert foreign_items(desired, desired, ("spec", "ports")) == []


def test_a_port_or_selector_key_added_by_hand_is_drift_to_take_back():
    """An added port and a key added to the (atomic) selector leave the operator's fields in place, so
    :func:`contains` alone would never write; the Service then has a port the operator does not render,
    or selects no engine pod at all. Another manager's annotation is no such drift."""
    desired = {"spec": {"selector": {"app.kubernetes.io/instance": "a", "app.kubernetes.io/component": "prefill"},
                        "ports": [{"name": "http", "port": 8000}]}}
    added_port = {"spec": {**desired["spec"], "ports": [{"name": "http", "port": 8000, "protocol": "TCP"},
                                                         {"name": "extra", "port": 9999, "protocol": "TCP"}]}}
    narrowed = {"spec": {**desired["spec"], "selector": {**desired["spec"]["selector"], "extra": "x"}}}
    annotated = {"metadata": {"annotations": {"x": "y"}}, **desired}
    for live in (added_port, narrowed):
        assert contains(live, desired) and foreign_drift("Service", live, desired)
    assert foreign_drift("Service", annotated, desired) == []
    assert foreign_drift("Deployment", narrowed, desired) == []


def test_only_children_of_the_same_owner_are_taken_back():
    from pdd_operator.controller.kube import _same_controller
    ours = {"metadata": {"ownerReferences": [{"uid": "u1", "controller": True}]}}
    assert _same_controller(ours, ours)
    assert not _same_controller({"metadata": {}}, ours)  # someone else's Service of that name
    assert not _same_controller({"metadata": {"ownerReferences": [{"uid": "u2", "controller": True}]}}, ours)


def _live(child: dict, version: int) -> dict:
    """``child`` as the apiserver holds it after the operator applied it (hash annotation, a version)."""
    applied = with_applied_hash(child)
    return {**applied, "metadata": {**applied["metadata"], "resourceVersion": str(version)}}


def test_a_one_field_change_applies_only_the_child_it_changes():
    """spec.decode.replicas 1 -> 2 bumps the generation stamped on every child; only the decode
    Deployment differs otherwise, so only it is applied (with the new stamp); the others keep theirs."""
    doc = yaml.safe_load((ROOT / "examples" / "cpu-tiny-pd.yaml").read_text())["spec"]
    before = PDDeploymentSpec.model_validate(doc)
    after = PDDeploymentSpec.model_validate({**doc, "decode": {**doc["decode"], "replicas": 2}})
    cache = ClusterCache()
    cache.expect({})
    for i, child in enumerate(render_children(Owner("p", "ns", "uid-p", 1), before)):
        cache.observe(child["kind"], _live(child, 10 + i))
    configuration = client.Configuration()
    configuration.host, configuration.retries = "http://127.0.0.1:9", 0  # nothing listens: a request fails
    kube = Kube(client.ApiClient(configuration), cache=cache)
    sent = []
    for child in render_children(Owner("p", "ns", "uid-p", 2), after):
        try:
            assert kube.apply(child) is False
        except urllib3.exceptions.HTTPError:
            sent.append((child["kind"], child["metadata"]["name"]))
    assert sent == [("Deployment", "p-decode")]
    kept = cache.child("Service", "ns", "p-decode")["metadata"]["annotations"]
    assert kept["pdd-operator.dev/generation"] == "1"


def test_restamped_takes_only_the_stamp_from_live():
    desired = {"metadata": {"name": "x", "annotations": {"pdd-operator.dev/generation": "2", "other": "a"}}}
    live = {"metadata": {"annotations": {"pdd-operator.dev/generation": "1", "other": "b"}}}
    assert restamped(desired, live)["metadata"]["annotations"] == {"pdd-operator.dev/generation": "1", "other": "a"}
    assert desired["metadata"]["annotations"]["pdd-operator.dev/generation"] == "2"  # not changed in place
    assert restamped(desired, {"metadata": {}}) is desired
    assert restamped(desired, None) is desired
    same = {"metadata": {"annotations": {"pdd-operator.dev/generation": "2", "other": "b"}}}
    assert restamped(desired, same) is desired  # the stamp is as live has it: the caller's hash of desired holds


def test_apply_all_hashes_each_child_once_per_reconcile(monkeypatch):
    """The memo key, the in-place comparison and the apply body share one hash of each rendered child
    (hashing sorted JSON was a fifth of the operator's CPU in the N=1,000 burst, bench/README.md)."""
    import pdd_operator.controller.kube as kube_module
    import pdd_operator.controller.reconcile as reconcile_module
    doc = yaml.safe_load((ROOT / "examples" / "cpu-tiny-pd.yaml").read_text())["spec"]
    spec = PDDeploymentSpec.model_validate(doc)
    children = render_children(Owner("p", "ns", "uid-p", 1), spec)
    cache = ClusterCache()
    cache.expect({})
    for child in children:  # in place as applied at generation 1
        cache.observe(child["kind"], _live(child, 7))
    hashed = []
    real = kube_module.applied_hash
    counting = lambda obj: hashed.append(obj["metadata"]["name"]) or real(obj)  # noqa: E731
    monkeypatch.setattr(kube_module, "applied_hash", counting)
    monkeypatch.setattr(reconcile_module, "applied_hash", counting)
    kube = Kube(client.ApiClient(client.Configuration()), cache=cache)
    assert reconcile_module.apply_all(kube, children) == (0, [], None)
    assert sorted(hashed) == sorted(c["metadata"]["name"] for c in children)  # once each, compared in full
    hashed.clear()
    assert reconcile_module.apply_all(kube, children) == (0, [], None)
    assert sorted(hashed) == sorted(c["metadata"]["name"] for c in children)  # once each, answered by the memo
    hashed.clear()
    # A new generation with nothing else changed: each child is hashed as rendered and once more with
    # the stamp it carries in place (the comparison), and nothing is written.
    kube = Kube(client.ApiClient(client.Configuration()), cache=cache)
    assert reconcile_module.apply_all(kube, render_children(Owner("p", "ns", "uid-p", 2), spec)) == (0, [], None)
    assert len(hashed) == 2 * len(children)


def test_a_child_found_in_place_is_not_compared_again_until_it_or_the_desired_object_changes(monkeypatch):
    """The second no-op reconcile of an unchanged child neither decodes nor compares it; a new
    resourceVersion (someone edited it) or a new desired object is compared again, and an edit that
    removed the operator's value is applied."""
    doc = yaml.safe_load((ROOT / "examples" / "cpu-tiny-pd.yaml").read_text())["spec"]
    spec = PDDeploymentSpec.model_validate(doc)
    children = {c["metadata"]["name"]: c for c in render_children(Owner("p", "ns", "uid-p", 1), spec)
                if c["kind"] == "Deployment"}
    desired = children["p-decode"]
    cache = ClusterCache()
    cache.expect({})
    cache.observe("Deployment", _live(desired, 10))
    kube = Kube(client.ApiClient(client.Configuration()), cache=cache)
    decoded = []
    real_child = cache.child
    monkeypatch.setattr(cache, "child", lambda *key: decoded.append(key) or real_child(*key))
    assert kube.apply_needed(desired) == (False, real_child("Deployment", "ns", "p-decode"))
    assert kube.apply_needed(desired) == (False, None)
    assert decoded == [("Deployment", "ns", "p-decode")]  # the second answer came from the memo
    edited = _live(desired, 11)
    edited["spec"] = {**edited["spec"], "replicas": 5}  # a hand edit: a new version
    cache.observe("Deployment", edited)
    needed, live = kube.apply_needed(desired)
    assert needed and live["spec"]["replicas"] == 5
    cache.observe("Deployment", _live(desired, 12))  # the operator's apply restored it
    assert kube.apply_needed(desired)[0] is False
    changed = {**desired, "spec": {**desired["spec"], "replicas": 3}}
    assert kube.apply_needed(changed)[0] is True  # same live version, another desired object
    assert len(decoded) == 4


def test_an_object_orjson_refuses_is_hashed_by_the_standard_library():
    wide = {"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"n": 2**70}}
    assert applied_hash(wide) == legacy_applied_hash(wide) == applied_hash({**wide})
    assert applied_hash({"a": 1}) != legacy_applied_hash({"a": 1})  # the two serializations differ


def test_a_child_an_earlier_operator_applied_is_in_place_with_its_legacy_hash():
    """Children written before the hash moved to orjson carry the standard library's hash: in place
    when the rest is (no rewrite of every child after an upgrade), at this and a newer generation;
    a real difference is still applied."""
    doc = yaml.safe_load((ROOT / "examples" / "cpu-tiny-pd.yaml").read_text())["spec"]
    spec = PDDeploymentSpec.model_validate(doc)
    desired = next(c for c in render_children(Owner("p", "ns", "uid-p", 1), spec) if c["kind"] == "Deployment")
    meta = desired["metadata"]
    old = {**desired, "metadata": {**meta, "resourceVersion": "3", "annotations": {
        **meta["annotations"], "pdd-operator.dev/applied-hash": legacy_applied_hash(desired)}}}
    cache = ClusterCache()
    cache.expect({})
    cache.observe("Deployment", old)
    kube = Kube(client.ApiClient(client.Configuration()), cache=cache)
    assert kube.apply_needed(desired)[0] is False
    newer = next(c for c in render_children(Owner("p", "ns", "uid-p", 2), spec) if c["kind"] == "Deployment")
    assert Kube(client.ApiClient(client.Configuration()), cache=cache).apply_needed(newer)[0] is False
    changed = {**desired, "spec": {**desired["spec"], "replicas": 4}}
    assert kube.apply_needed(changed)[0] is True
    forged = {**old, "metadata": {**old["metadata"], "annotations": {
        **old["metadata"]["annotations"], "pdd-operator.dev/applied-hash": "0123456789abcdef"}}}
    cache.observe("Deployment", {**forged, "metadata": {**forged["metadata"], "resourceVersion": "4"}})
    assert kube.apply_needed(desired)[0] is True  # neither hash: applied again


@pytest.mark.parametrize(("answer_version", "edited_after", "compared"), [
    ("20", False, False),  # in place at the answer's version: the next reconcile neither decodes nor compares it
    ("20", True, True),  # someone changed it after the apply (a new version): compared again
    (None, False, True),  # no version came back with the answer (not JSON): compared as before
])
def test_a_child_just_applied_is_in_place_at_its_answers_version(monkeypatch, answer_version, edited_after, compared):
    doc = yaml.safe_load((ROOT / "examples" / "cpu-tiny-pd.yaml").read_text())["spec"]
    desired = next(c for c in render_children(Owner("p", "ns", "uid-p", 1), PDDeploymentSpec.model_validate(doc))
                   if c["metadata"]["name"] == "p-decode")
    cache = ClusterCache()
    cache.expect({})
    kube = Kube(client.ApiClient(client.Configuration()), cache=cache)

    def answer(kind, namespace, name, body):  # the apiserver's answer: what was applied, at a new version
        obj = json.loads(body)
        obj["metadata"]["resourceVersion"] = "20"
        cache.remember(kind, obj)  # (the watch would bring it in all cases)
        return answer_version
    monkeypatch.setattr(kube, "_server_side_apply", answer)
    assert kube.apply(desired) is True
    if edited_after:
        cache.observe("Deployment", _live({**desired, "spec": {**desired["spec"], "replicas": 4}}, 21))
    decoded = []
    real_child = cache.child
    monkeypatch.setattr(cache, "child", lambda *key: decoded.append(key) or real_child(*key))
    needed, _ = kube.apply_needed(desired)
    assert needed is edited_after
    assert bool(decoded) is compared
