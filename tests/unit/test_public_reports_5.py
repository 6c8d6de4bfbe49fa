"""The fifth held-out set: P/D deployments from public guides, tutorials and reports (tests/unit/data/public_reports_5),
none of them in ../shared/cases or in the first four sets, each in the user's own manifest format with the verdict its
maintainers or vLLM's source established.

The same judge as the first set (:mod:`tests.unit.test_public_reports`: :func:`run_entry`, :func:`judge`,
:func:`score`, and the checks of :func:`assert_held_out` and :func:`assert_scores`).
``BASELINE`` is the score of main at cee0e1d, measured before any rule changed for this set; entries in ``MISSED`` are
the ones the code still gets wrong (strict xfail: fixing one fails the test until it is taken off the list).
"""

from __future__ import annotations

import pytest

from .test_public_reports import SETS, assert_entry, assert_held_out, assert_scores, entry_params, load_set

DATA = SETS / "public_reports_5"
INDEX = load_set("public_reports_5")

#: main at cee0e1d, before any change made for this set.
BASELINE = {"cases": 20, "verdict_right": 10, "rule_right": 10, "false_refusals": 1, "silent_passes": 9, "crashes": 0}

#: Entries the checker still gets wrong, with why.
MISSED: dict[str, str] = {
    "rocm-vllm-openai-rocm-nixl-no-rixl": "which ROCm images lack RIXL is not known per version (Dockerfile.rocm stages "
                                          "not read): a version-unknown warning",
}


def test_index_is_well_formed_and_held_out():
    assert_held_out(INDEX, DATA, ["public_reports", "public_reports_2", "public_reports_3", "public_reports_4"], 20,
                    MISSED)


@pytest.mark.parametrize("entry", entry_params(INDEX, MISSED))
def test_entry_gets_its_verdict_and_rule(entry, capsys):
    assert_entry(entry, capsys, DATA)


def test_the_set_scores_at_least_the_baseline_and_no_worse_on_refusals(capsys):
    assert_scores(INDEX, DATA, MISSED, BASELINE, capsys)
