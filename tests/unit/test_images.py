"""The images: hadolint clean, everything they copy exists, pins agree with the rules and the API."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pdd_operator.api.spec import EngineSpec
from pdd_operator.compat import evaluate
from pdd_operator.pins import engine_image, pins
from pdd_operator.vllm.versions import NEWEST_KNOWN, SEED_VERSION, nixl_range, parse_version
from tests.helpers import ROOT, make_spec

DOCKERFILES = sorted((ROOT / "images").glob("*/Dockerfile"))


def test_there_are_engine_and_operator_images():
    assert {p.parent.name for p in DOCKERFILES} == {"engine", "operator"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_hadolint_is_clean(dockerfile):
    hadolint = shutil.which("hadolint") or str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "hadolint")
    proc = subprocess.run([hadolint, str(dockerfile)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_every_copied_file_exists_in_the_build_context(dockerfile):
    copies = [line.split()[1:-1] for line in dockerfile.read_text().splitlines() if line.startswith("COPY ")]
    assert copies
    for sources in copies:
        for src in sources:
            assert (ROOT / src).exists(), f"{dockerfile}: COPY {src} does not exist"


def test_pins_agree_with_the_rules_and_the_api():
    p = pins()
    vllm = parse_version(p["vllm"])
    assert SEED_VERSION <= vllm <= NEWEST_KNOWN
    low, high = nixl_range(vllm)
    assert low <= parse_version(p["nixl"]) <= high
    assert p["nixlPackage"] in ("nixl-cu12", "nixl-cu13")  # exactly one CUDA flavour, never the meta package
    assert EngineSpec().image == engine_image() == f"{p['engineImage']}:v{p['vllm']}"
    default = make_spec(engine={"image": engine_image()})
    assert evaluate(default).version == p["vllm"]


def test_dockerfile_defaults_match_the_pins():
    engine = (ROOT / "images" / "engine" / "Dockerfile").read_text()
    p = pins()
    assert re.search(rf"^ARG VLLM_VERSION={re.escape(p['vllm'])}$", engine, re.M)
    assert re.search(rf"^ARG NIXL_VERSION={re.escape(p['nixl'])}$", engine, re.M)
    assert re.search(rf"^ARG NIXL_PACKAGE={re.escape(p['nixlPackage'])}$", engine, re.M)
    operator = (ROOT / "images" / "operator" / "Dockerfile").read_text()
    assert re.search(rf"^ARG PYTHON_VERSION={re.escape(p['operatorPython'])}$", operator, re.M)
    assert "USER 10001" in operator and "preflight" in engine


def test_operator_entrypoint_runs():
    proc = subprocess.run([str(ROOT / ".venv" / "bin" / "pdd"), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "render" in proc.stdout


def test_engine_image_pins_are_not_known_bad():
    from pdd_operator.vllm.known_bad import KNOWN_BAD, known_bad

    p = pins()
    # rows that need a setup (a stacked connector, a hybrid model with async scheduling) are judged by the rule on
    # the rendered engines, below and in test_leftovers_31
    assert [k for k in known_bad("vllm", parse_version(p["vllm"])) if not (k.with_connector or k.hybrid_ssm_only)] == []
    assert known_bad("nixl", parse_version(p["nixl"])) == [], "pins.json pins a NIXL with a known P/D fault"
    # the table is read by the rule: a row covering the pinned version would refuse the default image
    assert all(k.since < k.until and k.source and k.where and k.what for k in KNOWN_BAD)
    default = make_spec(engine={"image": engine_image()})
    assert "nixl-version-known-bad" not in {f.rule for f in evaluate(default).findings}
    assert "vllm-version-known-bad" not in {f.rule for f in evaluate(default).findings}
