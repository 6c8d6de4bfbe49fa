"""Findings on hand-written manifests (Deployments, StatefulSets, LWS, Dynamo graphs, KServe) tell the user what
to change in that manifest: no fix speaks of PDDeployment fields (``spec.engine.*``, ``extraArgs``, ``blockSize``)
or of what "the operator" renders, which a user of another orchestrator cannot act on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

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


# --- refusals of PDDeployments: the CRD's CEL rules and the webhook ------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
CRD_FILES = [ROOT / "crds" / "pddeployment.yaml", ROOT / "charts" / "pdd-operator" / "templates" / "crd.yaml"]
SPEC_PATH = re.compile(r"\bspec(?:\.[A-Za-z][A-Za-z0-9]*)+")


def _crd(path: Path) -> dict:
    text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("{{"))
    return yaml.safe_load(text)


def _schema_has(schema: dict, path: str) -> bool:
    node = schema
    for part in path.split("."):
        node = (node.get("properties") or {}).get(part)
        if node is None:
            return False
    return True


@pytest.mark.parametrize("path", CRD_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_cel_refusals_name_their_fields_and_say_what_to_do(path: Path):
    from pdd_operator.compat.rules import RULES_BY_ID

    root = _crd(path)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    cel = root["properties"]["spec"]["x-kubernetes-validations"]
    assert len(cel) >= 6
    for rule in cel:
        message = rule["message"]
        head = re.match(r"\[([a-z0-9-]+)\] (.+) Fix: (.+)$", message)
        assert head, message
        rule_id, what, fix = head.groups()
        assert rule_id in RULES_BY_ID and RULES_BY_ID[rule_id].severity == "error", message
        named = SPEC_PATH.findall(what)
        assert named and all(_schema_has(root, p) for p in named + SPEC_PATH.findall(fix)), message
        assert f"spec{rule['fieldPath']}" in named, message  # the field the apiserver reports is named
        assert SPEC_PATH.search(fix) and "\n" not in message, message


REFUSED = {
    "tp-divisibility": lambda s: s["prefill"].update(tensorParallelSize=3),
    "pp-decode-unsupported": lambda s: s["decode"].update(pipelineParallelSize=2),
    "nixl-connector-unavailable": lambda s: s["engine"].update(vllmVersion="0.8.5"),
    "block-size-direction": lambda s: (s["prefill"].update(blockSize=32), s["decode"].update(blockSize=16)),
    "spec-invalid": lambda s: s["prefill"].update(tensorParallelSize="two"),
    "extra-args-managed-flag": lambda s: s["decode"].update(extraArgs=["--kv-transfer-config", "{}"]),
}


@pytest.mark.parametrize("rule", sorted(REFUSED))
def test_webhook_refusals_name_their_fields_and_say_what_to_do(rule):
    from pdd_operator.controller.webhook import review

    doc = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())
    REFUSED[rule](doc["spec"])
    verdict = review("CREATE", doc)
    assert not verdict.allowed
    lines = verdict.message.splitlines()[1:]
    assert any(line.startswith(f"[{rule}] ") for line in lines), verdict.message
    for line in lines:
        assert SPEC_PATH.search(line) and re.search(r" Fix: \S", line), line
