"""The tenth held-out set (tests/unit/data/public_reports_10): P/D deployments from sources the first nine sets did
not use, none in ../shared/cases or in the earlier sets, written blind (inputs and expected verdicts from the public
sources and vLLM's code, before ``pdd check`` was run on any of them). Mostly bash launch scripts as their authors run
them: vLLM's own NIXL CI (HND prefill to NHD decode with and without ``enable_permute_local_kv``, a MultiConnector
NIXL + OffloadingConnector stack on the LBHNC layout on 0.29 and 0.27, host-buffer transfer, a Granite-4 hybrid with
prefix caching on 0.33 and 0.24, an MLA pair with a DP + EP decode, Gemma-3 sliding window with HMA, Phi-4-mini at
prefill TP 2 / decode TP 1 on 0.13, push mode with a PP 2 prefill), a router test bed with DP 2 on both roles and the
side channel on 0.0.0.0, NIXL's own vLLM sanity job and LMCache's 1p1d example.

The same judge as the first set (:mod:`tests.unit.test_public_reports`). ``BASELINE`` is the score of main at f9265ed,
measured before any rule changed for this set: 4 of 14 with the right verdict and rule, 2 false refusals, 0 silent
passes, 0 crashes. Three kinds:

- two ``kv_both`` engines of one script with nothing naming which prefills (vLLM's own NIXL tests; a proxy picks the
  roles): both left "not checked" (8 entries, the valid and the broken alike);
- ``VLLM_NIXL_SIDE_CHANNEL_HOST=0.0.0.0`` on two containers of one pod refused as not routable, although the decode
  dials the advertised 0.0.0.0 in the same network namespace, where the prefill listens (a false refusal);
- side-channel ports from a command substitution (``$(get_next_tcp_port)``) read as vLLM's default 5600 on both and
  refused as a port conflict (a false refusal).

The three kinds, fixed: two such ``kv_both`` engines are paired and judged both ways round (``PDPair.either_way``:
an error only where both orientations fail, a warning naming the engine where one does); a wildcard side-channel
host in one network namespace passes as loopback does; a side-channel port not in the files is a warning that the
overlap was not checked. Variants in tests/unit/test_public_report_kinds_10.py; after the fixes the set scores 14/14
with the right rule, no false refusal, no silent pass.

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

DATA = SETS / "public_reports_10"
INDEX = load_set("public_reports_10")

#: main at f9265ed, before any change made for this set.
BASELINE = {"cases": 14, "verdict_right": 4, "rule_right": 4, "false_refusals": 2, "silent_passes": 0, "crashes": 0}

#: Entries the checker still gets wrong, with why.
MISSED: dict[str, str] = {}

EARLIER = earlier_sets(10)


def test_index_is_well_formed_and_held_out():
    assert_held_out(INDEX, DATA, EARLIER, 14, MISSED)


def test_at_least_half_of_the_set_is_valid_setups():
    assert valid_share(INDEX) >= 0.5


@pytest.mark.parametrize("entry", entry_params(INDEX, MISSED))
def test_entry_gets_its_verdict_and_rule(entry, capsys):
    assert_entry(entry, capsys, DATA)


def test_the_set_scores_at_least_the_baseline_and_no_worse_on_refusals(capsys):
    assert_scores(INDEX, DATA, MISSED, BASELINE, capsys)
