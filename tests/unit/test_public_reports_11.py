"""The eleventh held-out set (tests/unit/data/public_reports_11): P/D deployments from sources the first ten sets did
not use, none in ../shared/cases or in the earlier sets, written blind (inputs and expected verdicts from the public
sources and vLLM's code, before ``pdd check`` was run on any of them). Kinds the earlier sets barely covered: a Ray
Serve ``build_pd_openai_app`` config with a hybrid model, production-stack Helm values with LMCache over NIXL, a
Dynamo 0.2/0.3 ``dynamo serve`` config, Dynamo graphs of 0.3.2 (engine lines as one shell string in ``args``) and
0.6.1 (implicit connector, a KVBM + NIXL stack, a decode-only block size), an LWS DisaggregatedSet with External role
scaling and an HPA, and vLLM's own NIXL CI configs as Deployment pairs (TP 1 -> 2 with and without a decode-only fp8
KV cache, MLA with a DP 2 + EP decode, Nemotron-3-Nano hybrid with and without HMA, Qwen3.5 hybrid at TP 2).

The same judge as the first set (:mod:`tests.unit.test_public_reports`). ``BASELINE`` is the score of main at
dbb9c3b, measured before any rule changed for this set: 12 of 14 with the right verdict and rule, 0 false refusals,
1 silent pass, 0 crashes. Two kinds:

- ``--block-size`` on one role only, on a vLLM that asserts equal block sizes (before 0.11.1): a warning that vLLM
  "picks" the other role's size, although its CUDA/ROCm platform pins it (16 for a plain-attention model), so the
  pair fails the handshake assert: a silent pass;
- a Dynamo graph whose workers' engine lines are one shell string in ``args`` with no ``command`` (Dynamo 0.3.2; its
  operator runs the main container under ``sh -c``): no engine found, "nothing to check" (exit 4) on a valid pair.

The two kinds, fixed: the block size of a role without ``--block-size`` is vLLM's platform default where vLLM's code
pins it (:mod:`pdd_operator.vllm.block_size`), and the block-size rules judge it; such a Dynamo main container is read
as the ``sh -c`` line its operator runs. Variants in tests/unit/test_public_report_kinds_11.py; after the fixes the set
scores 14/14 with the right rule, no false refusal, no silent pass.

Entries in ``MISSED`` are the ones the code still gets wrong (strict xfail: fixing one fails the test until it is
taken off the list).
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

DATA = SETS / "public_reports_11"
INDEX = load_set("public_reports_11")

#: main at dbb9c3b, before any change made for this set.
BASELINE = {"cases": 14, "verdict_right": 12, "rule_right": 12, "false_refusals": 0, "silent_passes": 1, "crashes": 0}

#: Entries the checker still gets wrong, with why.
MISSED: dict[str, str] = {}

EARLIER = earlier_sets(11)


def test_index_is_well_formed_and_held_out():
    assert_held_out(INDEX, DATA, EARLIER, 14, MISSED)


def test_at_least_half_of_the_set_is_valid_setups():
    assert valid_share(INDEX) >= 0.5


@pytest.mark.parametrize("entry", entry_params(INDEX, MISSED))
def test_entry_gets_its_verdict_and_rule(entry, capsys):
    assert_entry(entry, capsys, DATA)


def test_the_set_scores_at_least_the_baseline_and_no_worse_on_refusals(capsys):
    assert_scores(INDEX, DATA, MISSED, BASELINE, capsys)
