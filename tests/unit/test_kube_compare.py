"""The no-op detection that keeps an idle operator from writing: desired fields contained in live."""

from __future__ import annotations

from pdd_operator.controller.kube import applied_hash, contains, foreign_items


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


def test_only_children_of_the_same_owner_are_taken_back():
    from pdd_operator.controller.kube import _same_controller
    ours = {"metadata": {"ownerReferences": [{"uid": "u1", "controller": True}]}}
    assert _same_controller(ours, ours)
    assert not _same_controller({"metadata": {}}, ours)  # someone else's Service of that name
    assert not _same_controller({"metadata": {"ownerReferences": [{"uid": "u2", "controller": True}]}}, ours)
