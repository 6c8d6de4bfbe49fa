"""``PDD_REAL_LOAD_PHASES``: which phases of the opt-in real-engine load test run."""

import pytest

from tests.e2e.test_real_engines_load import PHASES, selected_phases


def test_unset_or_empty_runs_every_phase_in_order():
    assert selected_phases(None) == PHASES
    assert selected_phases("") == PHASES
    assert selected_phases(" , ") == PHASES


def test_named_phases_run_alone_in_the_module_order():
    assert selected_phases("must-match") == ("must-match",)
    assert selected_phases(" must-match,kill-prefill ") == ("kill-prefill", "must-match")


def test_an_unknown_phase_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown phase\(s\) \['mustmatch'\].*kill-prefill, kill-decode"):
        selected_phases("mustmatch,role-only")
