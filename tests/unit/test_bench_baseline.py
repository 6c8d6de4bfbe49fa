"""bench_scale's direct baseline applies the bodies the operator sends (issue 11, item 5: a fair baseline):
the same rendered children with the same annotations and a controller ownerReference, differing only
in what keeps the operator from seeing them (the namespace, the managed-by label, the owner)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from pdd_operator.api.constants import LABEL_MANAGED_BY
from pdd_operator.controller.kube import ANNOTATION_APPLIED_HASH, apply_body

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    module = importlib.import_module("bench_scale")
    monkeypatch.setitem(module.BASELINE_OWNER, "uid", "11111111-1111-1111-1111-111111111111")
    yield module
    sys.modules.pop("bench_scale", None)


def _comparable(child: dict) -> dict:
    """``child`` without what the baseline must change: managed-by label, owner, applied hash (and the namespace
    of its metadata; the one the router and RoleBinding name is compared by the caller)."""
    meta = {k: v for k, v in child["metadata"].items() if k not in ("namespace", "ownerReferences")}
    meta["labels"] = {k: v for k, v in meta["labels"].items() if k != LABEL_MANAGED_BY}
    meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k != ANNOTATION_APPLIED_HASH}
    out = {**child, "metadata": meta}
    template = (child.get("spec") or {}).get("template")
    if template:
        labels = {k: v for k, v in template["metadata"]["labels"].items() if k != LABEL_MANAGED_BY}
        out["spec"] = {**child["spec"], "template": {**template, "metadata": {**template["metadata"], "labels": labels}}}
    return out


def test_the_baseline_applies_the_operators_bodies_under_another_owner(bench):
    base, mine = bench.baseline_children(0), bench.operator_children("pdd-0")
    assert [(c["kind"], c["metadata"]["name"]) for c in base] == [(c["kind"], c["metadata"]["name"]) for c in mine]
    same = json.dumps([_comparable(c) for c in base]).replace(f'"{bench.BASELINE_NS}"', f'"{bench.NS}"')
    assert json.loads(same) == [_comparable(c) for c in mine]
    for child in base:
        meta = child["metadata"]
        assert meta["namespace"] == bench.BASELINE_NS and meta["labels"][LABEL_MANAGED_BY] != "pdd-operator"
        assert meta["annotations"][ANNOTATION_APPLIED_HASH]
        [ref] = meta["ownerReferences"]
        assert ref["controller"] and ref["blockOwnerDeletion"] and ref["uid"] == bench.BASELINE_OWNER["uid"]
    sizes = [sum(len(apply_body(c)) for c in children) for children in (base, mine)]
    assert abs(sizes[0] - sizes[1]) <= 0.01 * sizes[1], sizes


# --- the burst starts once the apiserver settled (bench_scale.wait_settled) -------------------------------

@pytest.mark.parametrize(("served", "counted"), [
    ({("DELETE", "endpoints"): 890.0}, 890.0),  # the endpoint controller's clean-up of the baseline
    ({("GET", "deployments"): 7.0, ("GET", "services"): 3.0}, 10.0),  # the garbage collector's look-ups
    ({("APPLY", "deployments"): 4.0, ("PATCH", "pods/status"): 2.0, ("POST", "events"): 1.0}, 7.0),
    ({("PUT", "leases"): 50.0, ("GET", "leases"): 50.0, ("PATCH", "nodes/status"): 9.0}, 0.0),  # heartbeats
    ({("GET", ""): 3.0, ("GET", "/openapi/v3"): 1.0, ("GET", "/apis"): 2.0}, 0.0),  # /metrics, discovery
    ({("LIST", "pods"): 5.0, ("WATCH", "pods"): 5.0}, 0.0),  # informers' lists and watches
    ({("APPLY", "<seconds>"): 12.5, ("APPLY", "<count>"): 40.0}, 0.0),  # apiserver_requests' apply timing
])
def test_settle_counts_the_requests_of_leftover_work_only(bench, served, counted):
    assert bench.settle_writes(served) == counted


@pytest.mark.parametrize(("totals", "waited_polls", "served"), [
    ([0, 0, 0, 0, 0, 0, 0], 5, 0),  # quiet from the start: 5 polls of 1 s
    ([0, 10, 20, 20, 20, 20, 20, 20, 20], 7, 20),  # busy for 2 s, then 5 quiet
    ([0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120], 10, 100),  # never quiet: gives up at the timeout
])
def test_wait_settled_waits_for_quiet_seconds_or_gives_up(bench, monkeypatch, totals, waited_polls, served):
    clock = {"now": 0.0}
    snapshots = iter(totals)
    monkeypatch.setattr(bench, "apiserver_requests", lambda _client: {("DELETE", "endpoints"): float(next(snapshots))})
    monkeypatch.setattr(bench.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(bench.time, "sleep", lambda s: clock.__setitem__("now", clock["now"] + s))
    assert bench.wait_settled(object(), quiet=5.0, timeout=10.0) == (float(waited_polls), float(served))
