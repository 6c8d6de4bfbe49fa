"""The ``pdd`` command on files: render and check."""

from __future__ import annotations

import json

import yaml

from pdd_operator.cli import main
from tests.helpers import ROOT

NEMOTRON = str(ROOT / "examples" / "nemotron-nano-pd.yaml")


def test_render_prints_the_children(capsys):
    assert main(["render", NEMOTRON, "-n", "serving"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [(d["kind"], d["metadata"]["name"], d["metadata"]["namespace"]) for d in docs] == [
        ("Service", "nemotron-nano-prefill", "serving"), ("Deployment", "nemotron-nano-prefill", "serving"),
        ("Service", "nemotron-nano-decode", "serving"), ("Deployment", "nemotron-nano-decode", "serving"),
        ("ServiceAccount", "nemotron-nano-router", "serving"), ("Role", "nemotron-nano-router", "serving"),
        ("RoleBinding", "nemotron-nano-router", "serving"),
        ("Service", "nemotron-nano-router", "serving"), ("Deployment", "nemotron-nano-router", "serving"),
    ]


def _bad(tmp_path, spec_patch: str):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: pdd-operator.dev/v1alpha1\nkind: PDDeployment\nmetadata: {name: bad}\n"
        f"spec:\n  model: {{name: meta-llama/Llama-3.1-8B}}\n{spec_patch}"
    )
    return str(path)


def test_render_refuses_an_incompatible_spec(tmp_path, capsys):
    path = _bad(tmp_path, "  prefill: {tensorParallelSize: 2}\n  decode: {tensorParallelSize: 3}\n")
    assert main(["render", path]) == 1
    assert "[tp-divisibility]" in capsys.readouterr().err


def test_invalid_field_is_named(tmp_path, capsys):
    path = _bad(tmp_path, "  prefill: {tensorParalelSize: 2}\n")
    assert main(["render", path]) == 2
    assert "spec.prefill.tensorParalelSize" in capsys.readouterr().err


def test_check_json_and_exit_code(tmp_path, capsys):
    bad = _bad(tmp_path, "  decode: {pipelineParallelSize: 2}\n")
    assert main(["check", NEMOTRON, bad, "-o", "json"]) == 1
    results = json.loads(capsys.readouterr().out)["results"]
    assert [r["compatible"] for r in results] == [True, False]
    assert results[1]["findings"][0]["rule"] == "pp-decode-unsupported"
    assert main(["check", NEMOTRON]) == 0


def test_check_reports_every_file_even_after_a_bad_one(tmp_path, capsys):
    typo = _bad(tmp_path, "  prefill: {tensorParalelSize: 2}\n")
    other = tmp_path / "other.yaml"
    other.write_text(
        "apiVersion: pdd-operator.dev/v1alpha1\nkind: PDDeployment\nmetadata: {name: other}\n"
        "spec:\n  model: {name: meta-llama/Llama-3.1-8B}\n  decode: {pipelineParallelSize: 2}\n"
    )
    assert main(["check", typo, str(other), str(tmp_path / "missing.yaml"), "-o", "json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert [r["object"] for r in out["results"]] == ["PDDeployment/other"]
    assert out["results"][0]["findings"][0]["rule"] == "pp-decode-unsupported"
    assert any("tensorParalelSize" in e for e in out["inputErrors"])
    assert any("missing.yaml" in e for e in out["inputErrors"])
