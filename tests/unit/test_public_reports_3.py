"""The third held-out set: P/D deployments from public reports (tests/unit/data/public_reports_3), none of
them in ../shared/cases or in the first two sets, each in the user's own manifest format with the verdict
its report or maintainers established.

The same judge as the first set (:mod:`tests.unit.test_public_reports`: :func:`run_entry`, :func:`judge`,
:func:`score`). ``BASELINE`` is the score of main at 2d84dd7, measured before any rule changed for this
set; entries in ``MISSED`` are the ones the code still gets wrong (strict xfail: fixing one fails the test
until it is taken off the list).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from .test_public_reports import VERDICTS, judge, run_entry, score

DATA = Path(__file__).parent / "data"
INDEX = yaml.safe_load((DATA / "public_reports_3" / "index.yaml").read_text())["cases"]
EARLIER_SETS = [yaml.safe_load((DATA / name / "index.yaml").read_text())["cases"]
                for name in ("public_reports", "public_reports_2")]

#: main at 2d84dd7, before any change made for this set.
BASELINE = {"cases": 20, "verdict_right": 18, "rule_right": 17, "false_refusals": 0, "silent_passes": 2, "crashes": 0}

#: Entries the checker still gets wrong, with why.
MISSED: dict[str, str] = {
    "nixl-0.10.0-b200-cross-numa": "no known-bad row for NIXL 0.10.0 (vllm#35799, pinned out by vllm#35495)",
    "hybrid-qwen35-p-tp4-d-dp8": "a hybrid GDN model with heterogeneous TP on a source build after 0.20.2 gets no "
                                 "hybrid finding (silent pass)",
}


def test_index_is_well_formed_and_held_out():
    ids = [e["id"] for e in INDEX]
    assert len(ids) == len(set(ids)) >= 20
    assert {e["file"] for e in INDEX} == {p.name for p in (DATA / "public_reports_3" / "inputs").iterdir()}
    earlier_sources = {e["source"] for cases in EARLIER_SETS for e in cases}
    shared = Path(__file__).parents[2].parent / "shared" / "cases"
    shared_text = "".join(p.read_text(errors="replace") for p in shared.rglob("*") if p.is_file()) if shared.is_dir() else ""
    for e in INDEX:
        assert e["expected"] in VERDICTS, e["id"]
        assert e["source"].startswith("https://github.com/"), e["id"]
        assert e["source"] not in earlier_sources, e["id"]
        owner_repo, _, number = e["source"].removeprefix("https://github.com/").rpartition("/")
        repo = owner_repo.split("/")[1]
        assert f"{repo}#{number}" not in shared_text and f"{owner_repo}/{number}" not in shared_text, e["id"]
        assert e["vllm_version"] and e["filled"], e["id"]
        assert (e["expected"] in ("error", "warning")) == bool(e["rules"]), e["id"]
    assert set(MISSED) <= set(ids)


@pytest.mark.parametrize("entry", [pytest.param(e, id=e["id"], marks=pytest.mark.xfail(strict=True, reason=MISSED[e["id"]]))
                                   if e["id"] in MISSED else pytest.param(e, id=e["id"]) for e in INDEX])
def test_entry_gets_its_verdict_and_rule(entry, capsys):
    code, report = run_entry(entry, capsys, DATA / "public_reports_3")
    outcome = judge(entry, code, report)
    assert not outcome.crash, outcome.said
    assert outcome.verdict_right and outcome.rule_right, f"expected {entry['expected']} {entry['rules']}: {outcome.said}"


def test_the_set_scores_at_least_the_baseline_and_no_worse_on_refusals(capsys):
    totals = score([judge(e, *run_entry(e, capsys, DATA / "public_reports_3")) for e in INDEX])
    assert totals["cases"] == len(INDEX) == BASELINE["cases"]
    assert totals["rule_right"] == len(INDEX) - len(MISSED), totals
    assert totals["verdict_right"] >= BASELINE["verdict_right"] and totals["rule_right"] >= BASELINE["rule_right"], totals
    assert totals["false_refusals"] == 0 and totals["crashes"] == 0, totals
