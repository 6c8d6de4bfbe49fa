"""The seventh held-out set (tests/unit/data/public_reports_7): P/D deployments in formats and shapes the first six
sets lack, none in ../shared/cases or in the earlier sets, written blind (before the rules were read or ``pdd check``
run) from maintainers' examples and recipes: Dynamo v1beta1 graphs (``type`` prefill/decode and ``type: worker`` with
``--disaggregation-mode``, Kubernetes ``$(VAR)`` args, bash-script engines), Dynamo example graphs with the default
connector, DeepSeek-R1 DP/EP recipes, LeaderWorkerSet's upstream DisaggregatedSets, SGLang StatefulSets, a Dynamo
TensorRT-LLM graph, KServe DP/EP and hybrid-model services, and two faults (no side-channel host across LWS pods on
vLLM 0.28; prefill context parallelism with kv_both on vLLM 0.33).

The same judge as the first set (:mod:`tests.unit.test_public_reports`: :func:`run_entry`, :func:`judge`,
:func:`score`, and the checks of :func:`assert_held_out` and :func:`assert_scores`).
``BASELINE`` is the score of main at eec9c03, measured before any rule changed for this set: 17 of 20 right with the
right rule, 1 false refusal, 1 silent pass, 0 crashes. The three it got wrong:

- ``dynamo-dsv41-flash-b200-2p1d-tp4-worker-type``: not checked ("role cannot be told") for two ``type: worker``
  components whose role is in ``--disaggregation-mode``, the first argument after ``dynamo.vllm``: the flag parser
  skipped the first token after any entry point ending in ``vllm``, as if it were ``vllm serve``;
- ``awslabs-gb200-vllm-deployments-kv-config-from-file`` (false refusal): ``--kv-transfer-config "$(python3 -c ...)"``,
  computed by the shell when the container starts, was read as invalid JSON and then as no KV connector at all
  (engine-args-invalid, kv-connector-missing and two rules judging a connector config nobody can read);
- ``vllm-033-prefill-pcp2-kv-both-deployments`` (silent pass): prefill context parallelism with kv_both, which vLLM
  0.33.0's NixlConnector refuses at start-up (no rule knew prefill context parallelism).

Fixing the first exposed a fourth kind behind it: ``speculative-incomplete`` refused DSpark without a draft model,
which vLLM 0.25-0.33 fills with the target model (vllm/config/speculative.py). After the four fixes (and their variants
in tests/unit/test_public_report_kinds_7.py) the set scores 20/20 with the right rule, no false refusal, no silent pass.

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

DATA = SETS / "public_reports_7"
INDEX = load_set("public_reports_7")

#: main at eec9c03, before any change made for this set.
BASELINE = {"cases": 20, "verdict_right": 17, "rule_right": 17, "false_refusals": 1, "silent_passes": 1, "crashes": 0}

#: Entries the checker still gets wrong, with why.
MISSED: dict[str, str] = {}

EARLIER = earlier_sets(7)


def test_index_is_well_formed_and_held_out():
    assert_held_out(INDEX, DATA, EARLIER, 20, MISSED)


def test_at_least_half_of_the_set_is_valid_setups():
    assert valid_share(INDEX) >= 0.5


@pytest.mark.parametrize("entry", entry_params(INDEX, MISSED))
def test_entry_gets_its_verdict_and_rule(entry, capsys):
    assert_entry(entry, capsys, DATA)


def test_the_set_scores_at_least_the_baseline_and_no_worse_on_refusals(capsys):
    assert_scores(INDEX, DATA, MISSED, BASELINE, capsys)
