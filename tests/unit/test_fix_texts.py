"""Findings on hand-written manifests (Deployments, StatefulSets, LWS, Dynamo graphs, KServe) tell the user what
to change in that manifest: no fix speaks of PDDeployment fields (``spec.engine.*``, ``extraArgs``, ``blockSize``)
or of what "the operator" renders, which a user of another orchestrator cannot act on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pdd_operator.cli import main

from .test_public_reports import SETS
from .test_turn2 import TURN2

PDD_TERMS = re.compile(r"\bspec\.(engine|model|prefill|decode|kvTransfer|kvCache|network|speculative|placement)\b"
                       r"|\bextraArgs\b|\bblockSize\b|\btensorParallelSize\b|\bthe operator\b")
INPUTS = sorted(p for p in SETS.glob("*/inputs/*.yaml")) + sorted((TURN2 / "inputs").glob("*.foreign.yaml"))


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_fixes_on_foreign_manifests_speak_of_that_manifest(path: Path, capsys):
    main(["check", str(path), "-o", "json", "--allow-unchecked"])
    report = json.loads(capsys.readouterr().out or "{}")
    for result in report.get("results", []):
        if result["object"].startswith("PDDeployment/"):
            continue
        for finding in result["findings"]:
            assert not PDD_TERMS.search(finding["fix"]), (finding["rule"], finding["fix"])


def test_the_scan_covers_hand_written_manifests():
    assert len(INPUTS) > 60 and all(p.is_file() for p in INPUTS)
