"""Every later held-out set (tests/unit/data/public_reports_2, _3, ...): P/D deployments from public sources that
no earlier set and nothing in ../shared/cases holds, each written blind (inputs and expected verdicts from the public
sources and vLLM's code, before ``pdd check`` ran on any of them) and then used to fix the checker's faults as kinds.

One judge for all of them (:mod:`tests.unit.test_public_reports`, which also holds the first set). What each set's
``index.yaml`` carries besides its ``cases``:

- ``min_cases``: the fewest entries the set may have;
- ``valid_share_min`` (optional): the least share of valid setups, so a false refusal is as likely to be caught as
  a silent pass;
- ``baseline``: the score of main measured before any rule changed for the set; the set must never score worse,
  and never with a false refusal or a crash;
- ``missed``: entries the checker still gets wrong, id -> why (strict xfails: fixing one fails its test until it is
  taken off the list);
- ``history``: where the set came from, what it found and what was fixed.

A new set is a new folder ``public_reports_<n>`` with those keys: it is picked up here, held out against every set
before it.
"""

from __future__ import annotations

import re

import pytest
import yaml

from .test_public_reports import (
    SETS,
    assert_entry,
    assert_held_out,
    assert_scores,
    earlier_sets,
    entry_params,
    valid_share,
)


def _number(name: str) -> int:
    return int(name.rsplit("_", 1)[1])


#: The later sets, in order: (number, folder name, the whole index).
HELD_OUT = sorted(((_number(p.name), p.name, yaml.safe_load((p / "index.yaml").read_text()))
                   for p in SETS.iterdir() if re.fullmatch(r"public_reports_\d+", p.name)), key=lambda s: s[0])
SET_IDS = [name for _, name, _ in HELD_OUT]


def test_the_sets_are_numbered_without_gaps():
    assert [n for n, _, _ in HELD_OUT] == list(range(2, len(HELD_OUT) + 2))


@pytest.mark.parametrize(("number", "name", "index"), HELD_OUT, ids=SET_IDS)
def test_index_is_well_formed_and_held_out(number, name, index):
    assert {"min_cases", "baseline", "missed", "history"} <= set(index), f"{name}/index.yaml lacks a key"
    assert_held_out(index["cases"], SETS / name, earlier_sets(number), index["min_cases"], index["missed"])


@pytest.mark.parametrize(("name", "index"), [(name, index) for _, name, index in HELD_OUT if "valid_share_min" in index],
                         ids=[name for _, name, index in HELD_OUT if "valid_share_min" in index])
def test_enough_of_the_set_is_valid_setups(name, index):
    assert valid_share(index["cases"]) >= index["valid_share_min"], name


@pytest.mark.parametrize("entry", [pytest.param((name, p.values[0]), id=f"{name}/{p.id}", marks=p.marks)
                                   for _, name, index in HELD_OUT for p in entry_params(index["cases"], index["missed"])])
def test_entry_gets_its_verdict_and_rule(entry, capsys):
    name, case = entry
    assert_entry(case, capsys, SETS / name)


@pytest.mark.parametrize(("name", "index"), [(name, index) for _, name, index in HELD_OUT], ids=SET_IDS)
def test_the_set_scores_at_least_its_baseline_and_no_worse_on_refusals(name, index, capsys):
    assert_scores(index["cases"], SETS / name, index["missed"], index["baseline"], capsys)
