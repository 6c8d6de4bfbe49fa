"""Every rule id a user can see is registered once, where its check is defined, and listed by
``pdd rules`` and docs/rules.md."""

from __future__ import annotations

import re

from pdd_operator.cli import main
from pdd_operator.compat.rules import CHECKS, RULES, RULES_BY_ID
from pdd_operator.controller import webhook
from tests.helpers import ROOT

OPERATOR = ROOT / "operator" / "pdd_operator"


def test_ids_reported_outside_the_checks_are_registered():
    for rule_id in (webhook.INVALID_RULE, webhook.ROLLOUT_RULE, "model-config-unavailable",
                    "vllm-version-unknown", "vllm-version-unverified"):
        assert rule_id in RULES_BY_ID and RULES_BY_ID[rule_id].check is None


def test_every_literal_rule_id_in_the_code_is_registered():
    # Findings built by hand (Finding(rule="...")) anywhere in the operator must use a registered id.
    literal = set()
    for path in OPERATOR.rglob("*.py"):
        literal |= set(re.findall(r'\brule="([a-z0-9-]+)"', path.read_text()))
    assert literal, "the search pattern no longer finds hand-built findings"
    assert literal <= set(RULES_BY_ID), sorted(literal - set(RULES_BY_ID))


def test_each_check_is_defined_with_its_record():
    for r in CHECKS:
        assert r.check.__doc__ and r.check.__doc__.strip().splitlines()[0] == r.summary
        assert r.check.__module__.startswith("pdd_operator.compat.rules."), r.id


def test_pdd_rules_lists_every_id(capsys):
    assert main(["rules"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert listed == {r.id for r in RULES}
    docs = (ROOT / "docs" / "rules.md").read_text()
    for r in RULES:
        assert f"## {r.id}\n" in docs


def test_every_rules_module_is_imported_by_the_package():
    import pkgutil

    import pdd_operator.compat.rules as package

    names = {m.name for m in pkgutil.iter_modules(package.__path__)}
    registered = {r.check.__module__.rsplit(".", 1)[1] for r in CHECKS} | {"base", "records"}
    assert names == registered, f"modules whose rules are not registered: {sorted(names - registered)}"
