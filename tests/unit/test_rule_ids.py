"""Every rule id a user can see is listed by ``pdd rules`` (docs/rules.md), and the reference names the
file that defines it, so a reader goes from a finding to its code in one step."""

from __future__ import annotations

import re

from pdd_operator.compat.docs import defined_in
from pdd_operator.compat.rules import RULES, records
from pdd_operator.render import admission
from tests.helpers import ROOT

IDS = {r.id for r in RULES}


def test_every_admission_id_is_registered():
    source = (ROOT / "operator/pdd_operator/render/admission.py").read_text()
    used = set(re.findall(r'_error\(\s*"([a-z0-9-]+)"', source))
    assert used, "no _error(...) call found: the pattern of this test is stale"
    assert used <= set(admission.ADMISSION_RULES), used - set(admission.ADMISSION_RULES)
    assert set(admission.ADMISSION_RULES) <= IDS


def test_an_unlisted_admission_id_cannot_be_reported():
    try:
        admission._error("made-up-invalid", "spec", "m", "f")
    except KeyError:
        return
    raise AssertionError("an id outside ADMISSION_RULES was reported")


def test_each_rule_names_an_existing_defining_file():
    constants = {value: name for name, value in vars(records).items() if isinstance(value, str)}
    for rule in RULES:
        path = ROOT / defined_in(rule)
        assert path.is_file(), (rule.id, path)
        if rule.check is None:  # the reporting module names the id, its constant, or the admission table
            text = path.read_text()
            assert rule.id in text or constants.get(rule.id, "\0") in text or "ADMISSION_RULES" in text, rule.id
