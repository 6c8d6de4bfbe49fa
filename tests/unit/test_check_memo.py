"""The reconcile's memo of spec checks: an unchanged generation is not evaluated again, and every input
of the check is in the key, so a change of any of them is evaluated afresh."""

from __future__ import annotations

import pytest

from pdd_operator.compat.engine import model_config_unavailable
from pdd_operator.controller import reconcile as rec
from pdd_operator.controller.reconcile import CheckMemo
from tests.helpers import make_spec

BASE = {"namespace": "ns", "name": "a", "uid": "u1", "generation": 3, "model_config": None, "problem": None}


@pytest.fixture
def counted(monkeypatch):
    calls = []
    real = rec.check_spec

    def check_spec(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(rec, "check_spec", check_spec)
    return calls


def run(memo: CheckMemo, spec, **changed):
    args = {**BASE, **changed}
    key = memo.key(args["namespace"], args["name"], args["uid"], args["generation"], args["model_config"],
                   args["problem"])
    return memo.check(key, spec, args["name"], args["namespace"], args["model_config"], args["problem"])


@pytest.mark.parametrize("changed", [
    {"generation": 4},  # the spec changed (the apiserver raises the generation)
    {"uid": "u2"},  # deleted and created again under the same name
    {"name": "b"},
    {"namespace": "other"},
    {"model_config": {"num_attention_heads": 32}},
    {"problem": model_config_unavailable("ConfigMap cfg: 403 Forbidden; it cannot be read")},
])
def test_a_change_of_any_input_is_checked_again_and_the_same_inputs_are_not(counted, changed):
    memo, spec = CheckMemo(), make_spec()
    first = run(memo, spec)
    again = run(memo, spec)
    assert len(counted) == 1 and again[0] == first[0]
    run(memo, spec, **changed)
    assert len(counted) == 2


def test_the_result_is_the_check_s_and_each_caller_gets_its_own_findings_list(counted):
    memo, spec = CheckMemo(), make_spec(prefill={"tensorParallelSize": 2}, decode={"tensorParallelSize": 3})
    report, config = run(memo, spec)
    assert (report, config) == rec.check_spec(spec, "a", "ns", None, None) and not report.compatible
    report.findings.clear()
    assert run(memo, spec)[0].findings and len(counted) == 2  # the direct call above and the first miss


def test_the_memo_keeps_at_most_its_size_dropping_the_least_recently_used(counted):
    memo, spec = CheckMemo(size=2), make_spec()
    run(memo, spec, generation=1)
    run(memo, spec, generation=2)
    run(memo, spec, generation=1)  # used again: generation 2 is now the oldest
    run(memo, spec, generation=3)
    assert len(memo) == 2 and len(counted) == 3
    run(memo, spec, generation=1)
    assert len(counted) == 3
    run(memo, spec, generation=2)
    assert len(counted) == 4
    with pytest.raises(ValueError):
        CheckMemo(size=0)
