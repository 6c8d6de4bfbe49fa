"""The planner: what a reconcile applies and records, table-driven (no cluster)."""

from __future__ import annotations

import json

import pytest

from pdd_operator.api.status import decode_spec, encode_spec
from pdd_operator.compat import evaluate
from pdd_operator.controller.plan import last_good_spec, plan_children
from tests.helpers import make_spec

GOOD = make_spec(decode={"replicas": 2})
OLD_GOOD = make_spec(decode={"replicas": 1})
BAD = make_spec(prefill={"tensorParallelSize": 2}, decode={"tensorParallelSize": 3})
KEPT = encode_spec(OLD_GOOD.wire(), 3)


def _decode_replicas(children):
    return [c["spec"]["replicas"] for c in children if c["kind"] == "Deployment" and c["metadata"]["name"].endswith("decode")]


# (case, current spec, status read, applied ok?) -> (children's generation annotation, decode replicas rendered,
#  appliedGeneration and appliedSpec generation recorded)
CASES = [
    ("compatible, first apply", GOOD, {}, True, ("5", [2], 5, 5)),
    ("compatible, apply refused", GOOD, {}, False, ("5", [2], None, None)),
    ("compatible over a kept spec", GOOD, {"appliedGeneration": 3, "appliedSpec": KEPT}, True, ("5", [2], 5, 5)),
    ("compatible over a kept spec, refused", GOOD, {"appliedGeneration": 3, "appliedSpec": KEPT}, False,
     ("5", [2], 3, 3)),
    ("incompatible: restore the kept spec", BAD, {"appliedGeneration": 3, "appliedSpec": KEPT}, True,
     ("3", [1], 3, 3)),
    ("incompatible, never applied: nothing", BAD, {}, True, (None, [], None, None)),
    ("invalid spec: restore the kept spec", None, {"appliedGeneration": 3, "appliedSpec": KEPT}, True,
     ("3", [1], 3, 3)),
]


@pytest.mark.parametrize("case, spec, status, ok, want", CASES, ids=[c[0] for c in CASES])
def test_plan(case, spec, status, ok, want):
    generation_note, decode_replicas, applied_generation, kept_generation = want
    report = evaluate(spec) if spec is not None else evaluate(BAD)
    plan = plan_children(name="demo", namespace="ns", uid="u", generation=5, spec=spec, report=report,
                         previous_status=status, last_good=last_good_spec(status))
    notes = {c["metadata"]["annotations"]["pdd-operator.dev/generation"] for c in plan.children}
    assert notes == ({generation_note} if generation_note else set())
    assert _decode_replicas(plan.children) == decode_replicas
    recorded_generation, kept = plan.recorded(applied_ok=ok)
    assert recorded_generation == applied_generation
    assert (kept or {}).get("generation") == kept_generation
    if kept_generation == 5:
        assert decode_spec(kept) == GOOD.wire()


def test_last_good_spec_sources():
    assert last_good_spec({"appliedSpec": KEPT}) == OLD_GOOD
    assert last_good_spec({}, ["not json", json.dumps(OLD_GOOD.wire())]) == OLD_GOOD  # legacy annotation
    tampered = {**KEPT, "sha256": "0" * 64}
    assert last_good_spec({"appliedSpec": tampered}) is None
    assert last_good_spec({}) is None
