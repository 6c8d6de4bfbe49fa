"""Every text that names the push connector's release floor says the floor of one definition.

Push (``NixlPushConnector``) exists from 0.24.0, push with a pipeline-parallel prefill from 0.26.0
(:mod:`pdd_operator.vllm.transfer_mode`). A text that wrote ``NixlPushConnector (vLLM >= 0.26`` for the
pipeline-parallel case read as a second, contradicting floor for push itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import pdd_operator.compat.rules  # noqa: F401  (registers every rule)
from pdd_operator.api.spec import CEL_RULES, KVTransferSpec
from pdd_operator.compat.rules.base import REGISTRY
from pdd_operator.vllm.transfer_mode import PUSH_CONNECTOR_SINCE, PUSH_PIPELINE_PARALLEL_SINCE
from pdd_operator.vllm.versions import fmt_line

ROOT = Path(__file__).resolve().parents[2]
# "NixlPushConnector" then, in the same clause, "vLLM >= X.Y".
_FLOOR = re.compile(r"NixlPushConnector([^.;]{0,70}?)vLLM >= (\d+\.\d+)")


def _texts() -> list[tuple[str, str]]:
    texts = [("KVTransferSpec.connector", KVTransferSpec.model_fields["connector"].description or "")]
    texts += [(f"CEL {r['message'][:30]}", r["message"]) for r in CEL_RULES]
    texts += [(p.name, p.read_text()) for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]]
    return texts


def _floors(text: str) -> list[tuple[str, str, str]]:
    """(clause, stated floor, expected floor) for each push floor the text states."""
    out = []
    for m in _FLOOR.finditer(" ".join(text.replace("`", "").split())):
        expected = PUSH_PIPELINE_PARALLEL_SINCE if "pipeline" in m.group(1) else PUSH_CONNECTOR_SINCE
        out.append((m.group(0), m.group(2), fmt_line(expected)))
    return out


def test_every_text_states_the_one_push_floor():
    stated = [(where, *f) for where, text in _texts() for f in _floors(text)]
    assert any(where == "KVTransferSpec.connector" for where, *_ in stated)
    assert any(where.startswith("CEL") for where, *_ in stated)
    wrong = [(where, clause) for where, clause, got, want in stated if got != want]
    assert not wrong


@pytest.mark.parametrize(("text", "ok"), [
    ("or NixlPushConnector (vLLM >= 0.24)", True),
    ("or NixlPushConnector (vLLM >= 0.26; non-hybrid models)", False),
    ("or NixlPushConnector (push with pipeline parallel needs vLLM >= 0.26)", True),
    ("or NixlPushConnector (push with pipeline parallel needs vLLM >= 0.24)", False),
])
def test_the_check_tells_the_two_floors_apart(text, ok):
    assert all(got == want for _, got, want in _floors(text)) is ok


@pytest.mark.parametrize(("rule_id", "bound", "floor"), [
    ("push-connector-unavailable", "until", PUSH_CONNECTOR_SINCE),
    ("pp-unsupported-version", "until", PUSH_PIPELINE_PARALLEL_SINCE),
    ("pp-push-hma-version", "since", PUSH_PIPELINE_PARALLEL_SINCE),
])
def test_rules_bound_by_the_definitions(rule_id, bound, floor):
    rule = next(r for r in REGISTRY if r.id == rule_id)
    assert getattr(rule, bound) == floor
