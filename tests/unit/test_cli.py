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
    # A spec the API refuses is a refusal with its fields named, as the webhook answers (set 58), not unreadable input.
    assert [r["object"] for r in out["results"]] == ["PDDeployment/bad", "PDDeployment/other"]
    assert [f["rule"] for f in out["results"][0]["findings"]] == ["spec-invalid"]
    assert "spec.prefill.tensorParalelSize" in out["results"][0]["findings"][0]["fields"]
    assert out["results"][1]["findings"][0]["rule"] == "pp-decode-unsupported"
    assert [e for e in out["inputErrors"] if "missing.yaml" in e] == out["inputErrors"]
    assert main(["check", typo]) == 1


_AGGREGATED = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "plain"},
               "spec": {"template": {"spec": {"containers": [
                   {"name": "vllm", "image": "vllm/vllm-openai:v0.28.0", "args": ["Qwen/Qwen3-8B"]}]}}}}


def test_check_of_files_with_nothing_to_check_is_a_distinct_failure(tmp_path, capsys):
    """A CI gate on the wrong files (a ConfigMap, an aggregated vLLM server, an empty file) must not pass in
    silence: exit 4, unless --allow-empty; a typo'd path is unreadable input (2)."""
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump_all([_AGGREGATED, {"apiVersion": "v1", "kind": "ConfigMap",
                                                       "metadata": {"name": "c"}, "data": {"a": "b"}}]))
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    for path in (plain, empty):
        capsys.readouterr()
        assert main(["check", str(path)]) == 4
        err = capsys.readouterr().err
        assert err.startswith("nothing to check:") and "--allow-empty" in err
        assert main(["check", str(path), "--allow-empty"]) == 0
        assert capsys.readouterr().out.startswith("nothing to check:")
        assert main(["check", str(path), "-o", "json"]) == 4
        assert json.loads(capsys.readouterr().out) == {"results": [], "notChecked": [], "inputErrors": []}
    assert main(["check", str(tmp_path / "typo.yaml"), "--allow-empty"]) == 2
    # Something checked beside the empty file: the check is not empty.
    assert main(["check", str(empty), NEMOTRON]) == 0


def test_check_help_lists_every_exit_code(capsys, monkeypatch):
    from pdd_operator.cli import CHECK_EXIT_CODES
    # argparse wraps at the terminal width and breaks at hyphens ("non-" / "zero"); a wide terminal keeps each
    # entry on one line, so the test reads the text, not the wrapping.
    monkeypatch.setenv("COLUMNS", "1000")
    try:
        main(["check", "--help"])
    except SystemExit as exc:
        assert exc.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for code, what in CHECK_EXIT_CODES.items():
        assert f"{code}: {' '.join(what.split())}" in text
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "4 nothing to check" in readme and "--allow-empty" in readme
