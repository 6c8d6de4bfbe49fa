"""One test per cell of the seed's architecture x capability matrix (seed 000, section 1) and per
footnote, on the seed's vLLM version (0.20.2). Expectations are written out here from the seed and
from vLLM's code (compat-rules.md section 9), not computed from the table under test."""

from __future__ import annotations

import pytest

from pdd_operator.compat import evaluate
from tests.helpers import make_spec

CAPABILITY_PATCHES = {
    "basic": {},
    "spec-decode": {"speculative": {"method": "eagle3", "draftModel": "org/draft"},
                    "prefill": {"numSpeculativeTokens": 3}, "decode": {"numSpeculativeTokens": 3}},
    "hetero-tp": {"prefill": {"tensorParallelSize": 1}, "decode": {"tensorParallelSize": 2}},
    "cross-layer": {"kvCache": {"layout": "BLHNC"}},
    "host-buffer": {"kvTransfer": {"bufferDevice": "cpu"}},
    "hetero-block": {"prefill": {"blockSize": 16}, "decode": {"blockSize": 32}},
}
ARCHS = {
    "dense": {"architecture": "dense"},
    "mla": {"architecture": "mla"},
    "sparse-mla": {"architecture": "sparse-mla"},
    "hybrid-ssm": {"architecture": "hybrid-ssm", "ssmKind": "Mamba2"},
    "moe": {"architecture": "moe"},
    "multimodal": {"architecture": "multimodal"},
    "encoder-decoder": {"architecture": "encoder-decoder"},
}
OK = set()
UNVERIFIED = {"architecture-unverified"}
NO = {"architecture-unsupported"}
# (architecture, capability) -> rule ids expected among the findings (beyond version notes).
EXPECTED = {
    **{(a, c): OK for a in ("dense", "mla", "sparse-mla", "moe") for c in CAPABILITY_PATCHES},
    ("hybrid-ssm", "basic"): OK,
    ("hybrid-ssm", "spec-decode"): UNVERIFIED,                       # matrix: unknown
    ("hybrid-ssm", "hetero-tp"): {"matrix-overridden-by-code"},      # footnote (e): code supports Mamba2 from 0.20
    ("hybrid-ssm", "cross-layer"): NO,                                # matrix: no
    ("hybrid-ssm", "host-buffer"): OK,
    ("hybrid-ssm", "hetero-block"): {"block-size-hma"},              # footnote (f): refused before 0.27
    **{("multimodal", c): UNVERIFIED for c in CAPABILITY_PATCHES},
    **{("encoder-decoder", c): NO for c in CAPABILITY_PATCHES},
}


def _spec(arch: str, cap: str, version: str = "0.20.2"):
    patch = dict(CAPABILITY_PATCHES[cap])
    patch["model"] = {"name": "org/model", "hfArchitecture": None, "numKvHeads": 8, **ARCHS[arch]}
    patch["engine"] = {"image": f"vllm/vllm-openai:v{version}"}
    return make_spec(**patch)


@pytest.mark.parametrize("arch, cap", sorted(EXPECTED), ids=[f"{a}-{c}" for a, c in sorted(EXPECTED)])
def test_matrix_cell(arch, cap):
    report = evaluate(_spec(arch, cap))
    fired = {f.rule for f in report.findings}
    expected = EXPECTED[(arch, cap)]
    assert expected <= fired, fired
    matrix_rules = {"architecture-unverified", "architecture-unsupported", "matrix-overridden-by-code"}
    assert fired & matrix_rules == expected & matrix_rules
    assert report.compatible is not (expected & {"architecture-unsupported", "block-size-hma"})


def test_footnote_a_speculative_settings_must_match_on_both_roles():
    report = evaluate(_spec("dense", "spec-decode"))
    assert report.compatible
    missing = make_spec(speculative={"method": "eagle3", "draftModel": "org/draft"}, decode={"numSpeculativeTokens": 3})
    # The prefill's count comes from the draft's config.json (n_predict) where it has one: not a refusal (set 104).
    report = evaluate(missing)
    assert "speculative-incomplete" in {f.rule for f in report.warnings}
    assert "speculative-incomplete" not in {f.rule for f in report.errors}


def test_footnote_b_cross_layer_layout_is_rendered():
    from pdd_operator.render.engine import engine_env
    env = {e["name"]: e.get("value") for e in engine_env(_spec("dense", "cross-layer"), "prefill")}
    assert env["VLLM_KV_CACHE_LAYOUT"] == "BLHNC"


@pytest.mark.parametrize("p, d, ok", [(16, 32, True), (16, 64, True), (32, 16, False), (32, 48, False)])
def test_footnote_c_hetero_block_only_prefill_smaller_and_dividing(p, d, ok):
    spec = make_spec(prefill={"blockSize": p}, decode={"blockSize": d})
    assert evaluate(spec).compatible is ok


@pytest.mark.parametrize("arch", ["mla", "sparse-mla"])
@pytest.mark.parametrize("p, d", [(8, 2), (2, 8)])
def test_footnote_d_mla_hetero_tp_both_directions(arch, p, d):
    spec = make_spec(model={"name": "org/m", "architecture": arch, "numKvHeads": 1},
                     prefill={"tensorParallelSize": p}, decode={"tensorParallelSize": d})
    assert evaluate(spec).compatible


@pytest.mark.parametrize("version, ok", [("0.19.1", False), ("0.20.0", True), ("0.33.0", True)])
def test_footnote_e_hybrid_hetero_tp_follows_the_code(version, ok):
    report = evaluate(_spec("hybrid-ssm", "hetero-tp", version))
    assert report.compatible is ok
    assert ("matrix-overridden-by-code" in {f.rule for f in report.findings}) is (version == "0.20.0")


@pytest.mark.parametrize("version, ok", [("0.26.1", False), ("0.27.0", True)])
def test_footnote_f_hma_hetero_block_size_by_version(version, ok):
    assert evaluate(_spec("hybrid-ssm", "hetero-block", version)).compatible is ok
