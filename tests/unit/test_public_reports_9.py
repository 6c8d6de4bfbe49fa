"""The ninth held-out set (tests/unit/data/public_reports_9): P/D deployments from sources the first eight sets did
not use, none in ../shared/cases or in the earlier sets, written blind (inputs and expected verdicts from the public
sources and vLLM's code, before ``pdd check`` was run on any of them): llm-d overlays (AWS EFA with LIBFABRIC, AMD ROCm
at P TP1 / D TP4, a MultiConnector + OffloadingConnector stack on vLLM 0.27.1), Dynamo graphs (v1beta1 with EAGLE3 and a
kv-transfer-config from an env variable, XPU prefill with CUDA decode over RDMA, XPU GAIE with frontend sidecars, a
FlexKV PdConnector pair on hostNetwork, a pair naming the model by id and by its HF-cache snapshot path, a GAIE Llama
pair, a hybrid Qwen3.5 pair from ai-dynamo/dynamo#10741), an AIBrix StormService replica, KServe LLMInferenceServices
(v1alpha2, DRA GPUs) and LWS DisaggregatedSet examples without a side-channel host.

The same judge as the first set (:mod:`tests.unit.test_public_reports`).
``BASELINE`` is the score of main at 7fbc742, measured before any rule changed for this set. The blind run
scored 12 of 15 with the right rule, 3 "false refusals", 0 silent passes, 0 crashes; one of the three was a wrong
label (``dynamo-qwen35-35b-a3b-hybrid-1p1d-nixl-no-hma-flag``, written "not checked" before vLLM 0.20+'s DS conv-layout
assert was read: every release refuses that pair, so ``pdd check``'s error was right and the entry now expects it).
Against the corrected index main scores 13 of 15, 2 false refusals:

- ``dynamo-qwen3-8b-flexkv-pdconnector-hostnetwork-tp4``: two hostNetwork Dynamo workers with vLLM's default
  side-channel port refused for a port conflict although nothing puts them on one node (the scheduler may or may
  not; the 4-GPU requests of the example's GB200 nodes keep them apart);
- ``dynamo-qwen3-32b-aks-ib-1p1d-tp4-hf-id-vs-snapshot-path``: a model named by its Hub id on prefill and by its
  HF-cache snapshot path on decode refused as a model mismatch, although Dynamo's worker replaces an id by that
  snapshot path before vLLM hashes it.

The two kinds, fixed: a side-channel port overlap of hostNetwork pods is an error only where they must share a node
(one ``spec.nodeName`` or ``kubernetes.io/hostname`` selector), a warning where the scheduler decides, and nothing
where both ask for the port as a host port (a hostNetwork ``containerPort`` is one; the scheduler's NodePorts filter
never puts them on one node); a Hub id on a Dynamo worker against its HF-cache snapshot path on the other role is a
warning (equal at one revision), an id against a path under plain ``vllm serve`` still an error. Variants in
tests/unit/test_public_report_kinds_9.py; after the fixes the set scores 15/15 with the right rule, no false refusal,
no silent pass.

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

DATA = SETS / "public_reports_9"
INDEX = load_set("public_reports_9")

#: main at 7fbc742, before any change made for this set (against the corrected label).
BASELINE = {"cases": 15, "verdict_right": 13, "rule_right": 13, "false_refusals": 2, "silent_passes": 0, "crashes": 0}

#: Entries the checker still gets wrong, with why.
MISSED: dict[str, str] = {}

EARLIER = earlier_sets(9)


def test_index_is_well_formed_and_held_out():
    assert_held_out(INDEX, DATA, EARLIER, 15, MISSED)


def test_at_least_sixty_percent_of_the_set_is_valid_setups():
    assert valid_share(INDEX) >= 0.6


@pytest.mark.parametrize("entry", entry_params(INDEX, MISSED))
def test_entry_gets_its_verdict_and_rule(entry, capsys):
    assert_entry(entry, capsys, DATA)


def test_the_set_scores_at_least_the_baseline_and_no_worse_on_refusals(capsys):
    assert_scores(INDEX, DATA, MISSED, BASELINE, capsys)
