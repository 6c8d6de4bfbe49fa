"""The held-out set: P/D deployments from public reports (tests/unit/data/public_reports), none of them in
../shared/cases, each in the user's own manifest format with the verdict its report established.

Every entry goes through ``pdd check -o json`` itself and must get its expected verdict and rule
(:func:`judge`); :func:`score` sums the set up as the issue counts it (right verdict, right rule, false
refusals, silent passes, crashes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from pdd_operator.cli import main

SETS = Path(__file__).parent / "data"
DATA = SETS / "public_reports"
INDEX = yaml.safe_load((DATA / "index.yaml").read_text())["cases"]
#: The verdicts an entry may expect: ``nothing-to-check`` is exit 4 (the files hold no P/D deployment, e.g. one engine
#: with no KV connector and no counterpart: aggregated serving, which runs).
VERDICTS = {"error", "warning", "ok", "not-checked", "nothing-to-check"}


@dataclass
class Outcome:
    """What ``pdd check`` said of one entry and how that compares with the expected verdict.

    verdict_right: the exit code and verdict class match. rule_right: also the expected rule (any of
    ``rules``) with the expected severity, or for not-checked a reason. false_refusal: exit 1 where no
    error was expected. silent_pass: exit 0 where an error or not-checked was expected. crash: exit 2 or
    an exception.
    """

    id: str
    verdict_right: bool
    rule_right: bool
    false_refusal: bool
    silent_pass: bool
    crash: bool
    said: str


def run_entry(entry: dict, capsys, data: Path = DATA) -> tuple[int, dict]:
    """Run ``pdd check`` on one entry's input (with its ``--model-config``, if any): (exit code, JSON).

    data: the set's directory (``inputs/`` and the index's relative ``model_config`` paths are under it).
    """
    argv = ["check", str(data / "inputs" / entry["file"]), "-o", "json"]
    if entry.get("model_config"):
        argv += ["--model-config", str(data / entry["model_config"])]
    code = main(argv)
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else {})


def judge(entry: dict, code: int, report: dict) -> Outcome:
    """Compare one ``pdd check`` answer with the entry's expected verdict and rules."""
    findings = [f for r in report.get("results", []) for f in r.get("findings", [])]
    errors = {f["rule"] for f in findings if f["severity"] == "error"}
    warnings = {f["rule"] for f in findings if f["severity"] == "warning"}
    expected, rules = entry["expected"], set(entry.get("rules") or ())
    said = f"exit {code}; errors {sorted(errors)}; warnings {sorted(warnings)}; not checked {len(report.get('notChecked', []))}"
    crash = code == 2 or bool(report.get("inputErrors"))
    if expected == "error":
        verdict = code == 1
        rule = verdict and bool(rules & errors)
    elif expected == "warning":
        verdict = code == 0 and not errors
        rule = verdict and bool(rules & warnings)
    elif expected == "ok":
        verdict = rule = code == 0 and not errors
    elif expected == "nothing-to-check":
        verdict = rule = code == 4 and not errors and not report.get("notChecked")
    else:
        verdict = rule = code == 3 and not errors and bool(report.get("notChecked"))
    return Outcome(entry["id"], verdict, rule, code == 1 and expected != "error",
                   code == 0 and expected in ("error", "not-checked"), crash, said)


def score(outcomes: list[Outcome]) -> dict:
    """The set's totals: counts and the share of right verdicts and right rules."""
    n = len(outcomes)
    return {"cases": n, "verdict_right": sum(o.verdict_right for o in outcomes),
            "rule_right": sum(o.rule_right for o in outcomes),
            "false_refusals": sum(o.false_refusal for o in outcomes),
            "silent_passes": sum(o.silent_pass for o in outcomes), "crashes": sum(o.crash for o in outcomes)}


def load_set(name: str) -> list[dict]:
    """The ``cases`` of the set ``tests/unit/data/<name>/index.yaml``."""
    return yaml.safe_load((SETS / name / "index.yaml").read_text())["cases"]


def earlier_sets(number: int) -> list[str]:
    """The names of the held-out sets before set ``number`` (``public_reports``, ``public_reports_2``, ...,
    ``public_reports_<number - 1>``), each a folder under tests/unit/data; raises ``AssertionError`` if one is
    missing."""
    names = ["public_reports", *(f"public_reports_{i}" for i in range(2, number))]
    missing = [n for n in names if not (SETS / n / "index.yaml").is_file()]
    assert not missing, f"held-out sets missing under {SETS}: {missing}"
    return names


def entry_params(index: list[dict], missed: dict[str, str]) -> list:
    """One pytest param per entry; the ``missed`` ones (id -> why) are strict xfails."""
    return [pytest.param(e, id=e["id"], marks=pytest.mark.xfail(strict=True, reason=missed[e["id"]]))
            if e["id"] in missed else pytest.param(e, id=e["id"]) for e in index]


#: Verdicts of a valid deployment (it runs; a warning is still a pass).
VALID_VERDICTS = ("ok", "warning", "nothing-to-check")


def valid_share(index: list[dict]) -> float:
    """The fraction of a set's entries (0.0-1.0) that are valid deployments (:data:`VALID_VERDICTS`): the
    sets weigh valid setups so that a false refusal is as likely to be caught as a silent pass."""
    return sum(e["expected"] in VALID_VERDICTS for e in index) / len(index)


def assert_held_out(index: list[dict], data: Path, earlier: list[str], min_cases: int, missed: dict[str, str]) -> None:
    """A later set's index is well formed and held out: at least ``min_cases`` unique entries, one per
    file of ``data/inputs``, no source that an ``earlier`` set (names under tests/unit/data) or
    ../shared/cases already holds, and every ``missed`` id in the index."""
    ids = [e["id"] for e in index]
    assert len(ids) == len(set(ids)) >= min_cases
    assert {e["file"] for e in index} == {p.name for p in (data / "inputs").iterdir()}
    earlier_sources = {e["source"] for name in earlier for e in load_set(name)}
    shared = Path(__file__).parents[2].parent / "shared" / "cases"
    shared_text = "".join(p.read_text(errors="replace") for p in shared.rglob("*") if p.is_file()) if shared.is_dir() else ""
    for e in index:
        assert e["expected"] in VERDICTS, e["id"]
        assert e["source"].startswith("https://github.com/"), e["id"]
        assert e["source"] not in earlier_sources, e["id"]
        owner_repo, _, number = e["source"].removeprefix("https://github.com/").rpartition("/")
        repo = owner_repo.split("/")[1]
        assert f"{repo}#{number}" not in shared_text and f"{owner_repo}/{number}" not in shared_text, e["id"]
        assert e["vllm_version"] and e["filled"], e["id"]
        assert (e["expected"] in ("error", "warning")) == bool(e["rules"]), e["id"]
    assert set(missed) <= set(ids)


def assert_entry(entry: dict, capsys, data: Path) -> None:
    """One entry gets its expected verdict and rule, without a crash."""
    outcome = judge(entry, *run_entry(entry, capsys, data))
    assert not outcome.crash, outcome.said
    assert outcome.verdict_right and outcome.rule_right, f"expected {entry['expected']} {entry['rules']}: {outcome.said}"


def assert_scores(index: list[dict], data: Path, missed: dict[str, str], baseline: dict, capsys) -> None:
    """The set scores every entry but the ``missed`` ones, no worse than its ``baseline`` (the score of
    the code before the set was used to change it), with no false refusal and no crash."""
    totals = score([judge(e, *run_entry(e, capsys, data)) for e in index])
    assert totals["cases"] == len(index) == baseline["cases"]
    assert totals["rule_right"] == len(index) - len(missed), totals
    assert totals["verdict_right"] >= baseline["verdict_right"] and totals["rule_right"] >= baseline["rule_right"], totals
    assert totals["false_refusals"] == 0 and totals["crashes"] == 0, totals


def test_index_is_well_formed():
    ids = [e["id"] for e in INDEX]
    assert len(ids) == len(set(ids)) >= 30
    files = {p.name for p in (DATA / "inputs").iterdir()}
    assert {e["file"] for e in INDEX} == files
    for e in INDEX:
        assert e["expected"] in VERDICTS, e["id"]
        assert e["source"].startswith("https://github.com/"), e["id"]
        assert e["vllm_version"] and e["filled"], e["id"]
        assert (e["expected"] in ("error", "warning")) == bool(e["rules"]), e["id"]


@pytest.mark.parametrize("entry", INDEX, ids=[e["id"] for e in INDEX])
def test_entry_gets_its_verdict_and_rule(entry, capsys):
    code, report = run_entry(entry, capsys)
    outcome = judge(entry, code, report)
    assert not outcome.crash, outcome.said
    assert outcome.verdict_right and outcome.rule_right, f"expected {entry['expected']} {entry['rules']}: {outcome.said}"


def test_the_set_scores_full_marks(capsys):
    outcomes = [judge(e, *run_entry(e, capsys)) for e in INDEX]
    totals = score(outcomes)
    assert totals == {"cases": len(INDEX), "verdict_right": len(INDEX), "rule_right": len(INDEX),
                      "false_refusals": 0, "silent_passes": 0, "crashes": 0}, [o for o in outcomes if not o.rule_right]


@pytest.mark.parametrize("entry", [e for e in INDEX if e["expected"] in ("error", "warning", "ok")],
                         ids=lambda e: e["id"])
def test_findings_on_foreign_manifests_name_the_users_own_fields(entry, capsys):
    _, report = run_entry(entry, capsys)
    fields = [f for r in report["results"] for finding in r["findings"] for f in finding["fields"]]
    objects = {part.split(" ", 1)[0] for r in report["results"] for part in r["object"].split(" + ")}
    for field in fields:
        assert field.split(" ", 1)[0] in objects or field == "config.json (pdd check --model-config)", field
        assert not field.startswith("spec."), field
