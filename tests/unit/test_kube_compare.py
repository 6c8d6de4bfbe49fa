"""The no-op detection that keeps an idle operator from writing: desired fields contained in live."""

from __future__ import annotations

from pdd_operator.controller.kube import applied_hash, contains


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
