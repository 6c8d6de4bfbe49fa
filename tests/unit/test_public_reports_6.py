"""The sixth held-out set: the most common P/D deployments (tests/unit/data/public_reports_6), from Dynamo's and llm-d's
own recipes and guides (Llama 3.3 70B, Qwen3-32B, DeepSeek-R1, gpt-oss-120b on H100/H200/B200/GB200, TP 1-8, 1P1D to
xPyD) and a Dynamo mistake its users report (ai-dynamo/dynamo#2295), none of them in ../shared/cases or in the first
five sets, each in the user's own manifest format with the verdict its maintainers or vLLM's source established.

The same judge as the first set (:mod:`tests.unit.test_public_reports`: :func:`run_entry`, :func:`judge`,
:func:`score`, and the checks of :func:`assert_held_out` and :func:`assert_scores`).
``BASELINE`` is the score of main at 7ce613d, measured before any rule changed for this set; entries in ``MISSED`` are
the ones the code still gets wrong (strict xfail: fixing one fails the test until it is taken off the list).
"""

from __future__ import annotations

import pytest

from .test_public_reports import (
    SETS,
    assert_entry,
    assert_held_out,
    assert_scores,
    earlier_sets,
    entry_params,
    load_set,
    valid_share,
)

DATA = SETS / "public_reports_6"
INDEX = load_set("public_reports_6")

#: main at 7ce613d, before any change made for this set.
BASELINE = {"cases": 12, "verdict_right": 10, "rule_right": 10, "false_refusals": 0, "silent_passes": 0, "crashes": 0}

#: Entries the checker still gets wrong, with why. (The two Dynamo gpt-oss one-pod recipes, whose one container starts
#: every prefill and decode worker from a shell loop, were missed until the script reader,
#: pdd_operator.vllm.script, made each launch its own engine.)
MISSED: dict[str, str] = {}

EARLIER = earlier_sets(6)


def test_index_is_well_formed_and_held_out():
    assert_held_out(INDEX, DATA, EARLIER, 12, MISSED)


def test_at_least_half_of_the_set_is_valid_setups():
    assert valid_share(INDEX) >= 0.5


@pytest.mark.parametrize("entry", entry_params(INDEX, MISSED))
def test_entry_gets_its_verdict_and_rule(entry, capsys):
    assert_entry(entry, capsys, DATA)


def test_the_set_scores_at_least_the_baseline_and_no_worse_on_refusals(capsys):
    assert_scores(INDEX, DATA, MISSED, BASELINE, capsys)
