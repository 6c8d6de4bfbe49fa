"""Unknown and unreleased vLLM versions (``latest``, ``nightly-<sha>``, no tag, source and development builds):
the version-bounded rules are judged on every release (compat/unknown_version.py), so a deployment is an error
when every release refuses it, "not checked" (``pdd check`` exit 3) when some do, and passes when none does."""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.cli import main
from pdd_operator.compat import evaluate
from pdd_operator.compat.rules import CHECKS
from pdd_operator.compat.unknown_version import probe_versions, spans
from pdd_operator.controller.reconcile import check_spec
from pdd_operator.controller.webhook import review
from pdd_operator.vllm.versions import NEWEST_KNOWN, OLDEST_KNOWN, dev_build_floor
from tests.helpers import make_spec

from .test_turn2_variants import KV, check, pd, rules
from .test_webhook import LLAMA, obj


def _two_kv_heads(tmp_path) -> tuple[str, str]:
    """``--model-config`` for a GDN hybrid with 2 KV heads (Qwen3.5-397B-A17B's config.json): TP 4 replicates
    the attention KV, so hybrid-prefix-caching can judge the roles' block ratios."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": ["Qwen3_5MoeForConditionalGeneration"], "text_config": {
        "num_key_value_heads": 2, "layer_types": ["linear_attention", "full_attention"]}}))
    return ("--model-config", str(path))


GDN = "Qwen/Qwen3.5-397B-A17B-FP8"
DS = [{"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}]
#: A PDDeployment spec on ``latest`` with prefill TP 2 > decode TP 1 (refused by vLLM releases before 0.14).
LATEST_P_GT_D = {**LLAMA, "engine": {"image": "vllm/vllm-openai:latest"},
                 "prefill": {"tensorParallelSize": 2, "blockSize": 16}, "decode": {"tensorParallelSize": 1, "blockSize": 16}}


@pytest.mark.parametrize("text, floor", [
    ("0.20.2rc1.dev265+gdd6b3a5ef", (0, 20, 0)), ("0.27.1.dev4+gabcdef0", (0, 27, 0)),
    ("0.1.dev1+g51f799c1a", None), ("0.20.2", None), ("nightly-dd6b3a5ef", None), (None, None),
])
def test_a_development_build_comes_after_its_release_line(text, floor):
    assert dev_build_floor(text) == floor


def test_probes_cover_every_release_line_and_both_sides_of_each_bound():
    grid = probe_versions(CHECKS)
    assert grid[0] == OLDEST_KNOWN and grid[-1] == NEWEST_KNOWN and grid == sorted(set(grid))
    for r in CHECKS:  # a window wholly before 0.9 (nixl-connector-unavailable: no NixlConnector) is not probed
        if r.until is not None and r.until > OLDEST_KNOWN:
            assert r.until in grid and any(v < r.until and (r.since is None or v >= r.since) for v in grid), r.id
    assert probe_versions(CHECKS, (0, 27, 0))[0] == (0, 27, 0)
    assert probe_versions(CHECKS, (0, 35, 0)) == [NEWEST_KNOWN]  # a build after the newest known line: judged as it


def test_spans_name_runs_of_releases():
    grid = [(0, 18, 0), (0, 19, 0), (0, 20, 0), (0, 21, 0), (0, 22, 0)]
    assert spans([(0, 18, 0), (0, 19, 0), (0, 21, 0), (0, 22, 0)], grid) == "0.18.0 <= v < 0.20.0, >= 0.21.0"


def test_hybrid_hetero_tp_on_a_nightly_is_not_checked(tmp_path, capsys):
    # vllm#42895: Qwen3.5 (GDN) prefill TP 4, decode TP 1 x DP 8, image nightly-<sha>. 0.22-0.27 accept it
    # (decode's prefix caching is off by default for hybrid models there: engine/arg_utils.py keeps them opt-in
    # through 0.27.1), every other release refuses it.
    docs = pd("q", ["--tensor-parallel-size", "4", "--kv-transfer-config", KV],
              ["--tensor-parallel-size", "1", "--data-parallel-size", "8", "--kv-transfer-config", KV],
              model=GDN, image="vllm/vllm-openai:nightly-dd6b3a5ef", env=DS, gpus=8)
    code, out = check(tmp_path, capsys, *docs, extra=_two_kv_heads(tmp_path))
    assert code == 3 and not rules(out, "error")
    (entry,) = out["notChecked"]
    for said in ("hybrid-ssm-hetero-tp (vLLM 0.18.0 <= v < 0.20.0)", "ssm-kind-unsupported (vLLM 0.20.0 <= v < 0.22.0)"):
        assert said in entry["reason"], entry["reason"]
    # The decode's block is the larger (prefill TP 4 past the 2 KV heads): FlashAttention 2/3 run it unsplit, so the
    # prefix-caching refusal at the handshake is the GPU kernel's to decide, on no release a certain failure.
    assert "hybrid-prefix-caching (" not in entry["reason"], entry["reason"]


def test_hybrid_hetero_tp_with_decode_prefix_caching_fails_whatever_the_release(tmp_path, capsys):
    # The decode has the larger TP past the KV heads: its block is the smaller, and the handshake fails on every kernel.
    docs = pd("q", ["--tensor-parallel-size", "1", "--kv-transfer-config", KV],
              ["--tensor-parallel-size", "4", "--enable-prefix-caching", "--kv-transfer-config", KV],
              model=GDN, image="vllm/vllm-openai:nightly-dd6b3a5ef", env=DS, gpus=4)
    code, out = check(tmp_path, capsys, *docs, extra=_two_kv_heads(tmp_path))
    assert code == 1 and not out["notChecked"]
    errors = [f for r in out["results"] for f in r["findings"] if f["severity"] == "error"]
    assert {"hybrid-ssm-hetero-tp", "ssm-kind-unsupported", "hybrid-prefix-caching"} <= {f["rule"] for f in errors}
    bounded = {r.id for r in CHECKS if r.version_bounded}
    assert all("the vLLM version is unknown" in f["message"] for f in errors if f["rule"] in bounded)
    hetero = next(f for f in errors if f["rule"] == "hybrid-ssm-hetero-tp")
    assert hetero["message"].startswith("On vLLM 0.18.0 <= v < 0.20.0")


def test_equal_tp_dense_pair_on_latest_passes_every_release(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *pd("q", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV],
                                            image="vllm/vllm-openai:latest"))
    assert code == 0 and not out["notChecked"] and not rules(out, "error")
    warning = next(f for r in out["results"] for f in r["findings"] if f["rule"] == "vllm-version-unknown")
    assert "No version-dependent rule applies" in warning["message"]


def test_a_rule_that_refuses_on_some_releases_makes_the_pair_not_checked(tmp_path, capsys):
    docs = pd("q", ["--tensor-parallel-size", "4", "--kv-transfer-config", KV],
              ["--kv-transfer-config", KV], image="vllm/vllm-openai:latest", gpus=4)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and not rules(out, "error") and len(out["results"]) == 1
    (entry,) = out["notChecked"]
    assert "hetero-tp-p-gt-d-unsupported (vLLM 0.9.0 <= v < 0.14.0)" in entry["reason"]
    assert "image tag that names the vLLM release" in entry["reason"]
    code, _ = check(tmp_path, capsys, *docs, extra=("--allow-unchecked",))
    assert code == 0
    # The same pair on a pinned release is checked, and passes there.
    code, out = check(tmp_path, capsys, *pd("q", ["--tensor-parallel-size", "4", "--kv-transfer-config", KV],
                                            ["--kv-transfer-config", KV], image="vllm/vllm-openai:v0.24.0", gpus=4))
    assert code == 0 and not out["notChecked"]


def test_a_dev_build_is_judged_from_its_release_line_on_and_says_so(tmp_path, capsys):
    # No DS conv-state layout for a hybrid model: vLLM asserts it from 0.20 on, so a build after 0.27 fails.
    docs = pd("q", ["--kv-transfer-config", KV, "--no-disable-hybrid-kv-cache-manager"],
              ["--kv-transfer-config", KV, "--no-disable-hybrid-kv-cache-manager"],
              model=GDN, image="vllm/vllm-openai:0.27.1rc1.dev12+g0123abcd")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and rules(out, "error") == {"ssm-conv-layout-ds"}
    finding = next(f for r in out["results"] for f in r["findings"] if f["rule"] == "ssm-conv-layout-ds")
    assert finding["message"].startswith("On every release from 0.27.0 on (taken as the line this development build")
    # With DS set, nothing refuses it from 0.27 on: checked and compatible (0.20-0.21's GDN refusal is before it).
    docs = pd("q", ["--kv-transfer-config", KV, "--no-disable-hybrid-kv-cache-manager"],
              ["--kv-transfer-config", KV, "--no-disable-hybrid-kv-cache-manager"],
              model=GDN, image="vllm/vllm-openai:0.27.1rc1.dev12+g0123abcd", env=DS)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and not out["notChecked"], out


def test_pddeployment_on_latest_is_admitted_and_its_status_says_not_checked():
    spec = LATEST_P_GT_D
    verdict = review("CREATE", obj(spec))
    assert verdict.allowed
    assert any("[vllm-version-unknown]" in w and "Not checked" in w and "hetero-tp-p-gt-d-unsupported" in w
               for w in verdict.warnings), verdict.warnings
    report, _ = check_spec(make_spec(**spec), "x", "ns", None, None)
    assert report.compatible and "hetero-tp-p-gt-d-unsupported" in report.unchecked
    warning = next(f for f in report.findings if f.rule == "vllm-version-unknown")
    assert "Not checked" in warning.message


def test_pddeployment_unchecked_exits_3_in_pdd_check(tmp_path, capsys):
    spec = LATEST_P_GT_D
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(obj(spec)))
    assert main(["check", str(path)]) == 3
    assert "not checked: PDDeployment/x: because the vLLM version is unknown" in capsys.readouterr().out
    assert evaluate(make_spec(**{**spec, "engine": {"image": "vllm/vllm-openai:v0.20.2"}})).unchecked == ""


@pytest.mark.parametrize("image, code, rule", [
    ("vllm/vllm-openai:v0.24.0", 0, None),                   # hybrid prefix caching is off by default up to 0.25
    ("vllm/vllm-openai:v0.26.0", 0, None),                   # supported from 0.26, but opt-in through 0.27.1
    ("vllm/vllm-openai:v0.28.0", 1, "hybrid-prefix-caching"),  # on by default from 0.28: refused at the handshake
])
def test_hybrid_hetero_tp_without_a_prefix_caching_flag(tmp_path, capsys, image, code, rule):
    docs = pd("q", ["--tensor-parallel-size", "1", "--kv-transfer-config", KV],
              ["--tensor-parallel-size", "4", "--kv-transfer-config", KV], model=GDN, image=image, env=DS, gpus=4)
    got, out = check(tmp_path, capsys, *docs, extra=_two_kv_heads(tmp_path))
    assert got == code, rules(out)
    assert rule is None or rule in rules(out, "error")


def test_vllm_version_option_judges_engines_whose_image_names_no_release(tmp_path, capsys):
    # The turn2 Dynamo graph (a Mamba2 hybrid with --enable-prefix-caching on decode) on a vllm-runtime tag that no
    # Dynamo page maps (1.3.2; the graph's own 1.3.0 is documented as vLLM 0.23.0). Told the image holds vLLM 0.26.0,
    # it is judged as that release; told 0.27.0 (SSM state paired by position), it is not refused for prefix
    # caching, and the fix texts offer the option.
    from .test_turn2 import _inputs

    (source,) = _inputs("hybrid-ssm-prefix-caching.foreign.yaml")
    path = tmp_path / source.name
    path.write_text(source.read_text().replace("vllm-runtime:1.3.0", "vllm-runtime:1.3.2"))
    code = main(["check", str(path), "-o", "json"])
    fix = next(f["fix"] for r in json.loads(capsys.readouterr().out)["results"] for f in r["findings"]
               if f["rule"] == "vllm-version-unknown")
    assert "--vllm-version" in fix
    for version, refused in (("0.26.0", True), ("0.27.0", False)):
        code = main(["check", str(path), "-o", "json", "--vllm-version", version])
        out = json.loads(capsys.readouterr().out)
        assert {r["vllmVersion"] for r in out["results"]} == {version}
        assert "vllm-version-unknown" not in rules(out)
        assert ("hybrid-ssm-prefix-caching" in rules(out, "error")) is refused and code == 1  # DS is unset either way
    assert main(["check", str(path), "--vllm-version", "nightly"]) == 2
