"""kopf builds no diff base: safe only while the operator registers no handler that reads one."""

from __future__ import annotations

import kopf
from kopf._cogs.structs import diffs

from pdd_operator.controller import handlers, webhook  # noqa: F401  (registers every handler)


def test_no_handler_reads_kopf_s_diff_base():
    registry = kopf.get_default_registry()
    assert list(registry._changing.get_all_handlers()) == []  # on.create / on.update / on.resume / on.delete
    assert list(registry._spawning.get_all_handlers()) == []  # daemons and timers
    watching = list(registry._watching.get_all_handlers())  # on.event: what the operator runs on
    # Only PDDeployments: the children, pods and ConfigMaps come from the operator's own informers.
    assert [h.id for h in watching] == ["pddeployment_event"]


def test_the_diff_base_storage_builds_and_keeps_nothing():
    storage = handlers.NoDiffBase()
    body = kopf.Body({"metadata": {"name": "a", "managedFields": [{"manager": "x"}]}, "spec": {"replicas": 1}})
    assert storage.build(body=body) is None and storage.fetch(body=body) is None
    assert not diffs.diff(storage.fetch(body=body), storage.build(body=body))  # what kopf computes from them
