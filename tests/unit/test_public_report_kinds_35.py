"""Variants of what the thirty-fifth public-report set (tests/unit/data/public_reports_35) taught, with negative
controls.

- Attention-HMA pipeline-parallel push (vllm#50494, first in 0.31.0; #50499's review thread): a PP > 1
  NixlPushConnector prefill of a hybrid-attention model (sliding-window layers, HMA on) routes KV by layer name and
  refuses, at the handshake, a decode whose TP is above its own ("Attention-HMA push does not support decode TP
  greater than prefill TP yet"; still in 0.34.0). Such a pair passed as compatible from 0.31.0 on, where
  ``pp-push-hma-version`` stops refusing it at startup (:mod:`pdd_operator.compat.rules.pp_push_hma`).
- An NVFP4 KV cache under heterogeneous TP (vllm#44455's review thread): from 0.33.0 the NIXL handshake refuses
  KV-head re-sharding of NVFP4 pages (all heads' data before all heads' scales). Such a pair passed as compatible
  (:mod:`pdd_operator.compat.rules.nvfp4_kv`).
"""

from __future__ import annotations

import pytest

from tests.unit.test_turn2_variants import check, container, rules, workload

PUSH_P = '{"kv_connector":"NixlPushConnector","kv_role":"kv_producer"}'
PUSH_D = '{"kv_connector":"NixlPushConnector","kv_role":"kv_consumer"}'
PULL_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
PULL_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
TP_RULE = "push-hma-tp-expansion"
NVFP4_RULE = "nvfp4-kv-hetero-tp"


def _pair(model, version, p_args, d_args, p_gpus, d_gpus, kind="Deployment"):
    image = f"vllm/vllm-openai:v{version}"
    return [workload("pd-prefill", "prefill", container([model, *p_args], image=image, gpus=p_gpus), kind=kind, app="pd"),
            workload("pd-decode", "decode", container([model, *d_args], image=image, gpus=d_gpus), kind=kind, app="pd")]


def _push(model, version, pp, ptp, dtp, kind="Deployment", extra=(), p_kv=PUSH_P, d_kv=PUSH_D):
    p = ["--pipeline-parallel-size", str(pp), "--tensor-parallel-size", str(ptp), *extra, "--kv-transfer-config", p_kv]
    d = ["--tensor-parallel-size", str(dtp), *extra, "--kv-transfer-config", d_kv]
    return _pair(model, version, p, d, pp * ptp, dtp, kind)


# --- attention-HMA PP push: the decode's TP -----------------------------------------------------------------------


@pytest.mark.parametrize(("model", "version", "pp", "ptp", "dtp", "kind"), [
    ("openai/gpt-oss-20b", "0.32.0", 2, 1, 2, "Deployment"),
    ("google/gemma-4-26b-a4b", "0.33.0", 2, 2, 4, "StatefulSet"),
    ("openai/gpt-oss-120b", "0.31.0", 4, 1, 8, "Deployment"),
])
def test_a_hybrid_attention_pp_push_prefill_refuses_a_wider_decode(tmp_path, capsys, model, version, pp, ptp, dtp, kind):
    code, out = check(tmp_path, capsys, *_push(model, version, pp, ptp, dtp, kind))
    assert code == 1 and TP_RULE in rules(out, "error"), out


@pytest.mark.parametrize(("model", "version", "pp", "ptp", "dtp", "extra"), [
    ("openai/gpt-oss-20b", "0.32.0", 2, 2, 2, ()),                    # equal TP
    ("openai/gpt-oss-20b", "0.32.0", 2, 2, 1, ()),                    # a narrower decode
    ("meta-llama/Llama-3.1-70B-Instruct", "0.32.0", 2, 1, 2, ()),     # full attention only: no HMA
    ("openai/gpt-oss-20b", "0.32.0", 1, 1, 2, ()),                    # no PP: region-index routing
    ("openai/gpt-oss-20b", "0.32.0", 2, 1, 2, ("--disable-hybrid-kv-cache-manager",)),  # HMA off on both
])
def test_other_push_shapes_are_not_this_fault(tmp_path, capsys, model, version, pp, ptp, dtp, extra):
    code, out = check(tmp_path, capsys, *_push(model, version, pp, ptp, dtp, extra=extra))
    assert TP_RULE not in rules(out), out


def test_before_0310_the_startup_refusal_is_the_finding(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_push("openai/gpt-oss-20b", "0.30.0", 2, 1, 2))
    assert "pp-push-hma-version" in rules(out, "error") and TP_RULE not in rules(out), out


def test_the_pull_connector_is_refused_by_its_own_rule(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_push("openai/gpt-oss-20b", "0.32.0", 2, 1, 2, p_kv=PULL_P, d_kv=PULL_D))
    assert "pp-pull-unsupported" in rules(out, "error") and TP_RULE not in rules(out), out


# --- NVFP4 KV cache under heterogeneous TP ------------------------------------------------------------------------


def _kv(model, version, ptp, dtp, dtype, kind="Deployment"):
    p = ["--tensor-parallel-size", str(ptp), "--kv-cache-dtype", dtype, "--kv-transfer-config", PULL_P]
    d = ["--tensor-parallel-size", str(dtp), "--kv-cache-dtype", dtype, "--kv-transfer-config", PULL_D]
    return _pair(model, version, p, d, ptp, dtp, kind)


@pytest.mark.parametrize(("model", "version", "ptp", "dtp", "dtype", "kind"), [
    ("Qwen/Qwen3-32B", "0.33.0", 1, 2, "nvfp4", "Deployment"),
    ("meta-llama/Llama-3.1-8B-Instruct", "0.34.0", 4, 2, "nvfp4_4over6", "StatefulSet"),
    ("meta-llama/Llama-3.1-70B-Instruct", "0.34.0", 2, 8, "nvfp4", "Deployment"),
])
def test_an_nvfp4_kv_cache_across_different_heads_per_rank_is_an_error(tmp_path, capsys, model, version, ptp, dtp,
                                                                         dtype, kind):
    code, out = check(tmp_path, capsys, *_kv(model, version, ptp, dtp, dtype, kind))
    assert code == 1 and NVFP4_RULE in rules(out, "error"), out


def test_before_0330_it_is_a_warning(tmp_path, capsys):
    """0.32.0's NIXL worker does not check it: not a promise of a failure, but not silence either."""
    code, out = check(tmp_path, capsys, *_kv("Qwen/Qwen3-32B", "0.32.0", 1, 2, "nvfp4"))
    assert NVFP4_RULE in rules(out, "warning") and NVFP4_RULE not in rules(out, "error"), out


@pytest.mark.parametrize(("model", "version", "ptp", "dtp", "dtype"), [
    ("Qwen/Qwen3-32B", "0.33.0", 2, 2, "nvfp4"),                         # equal TP
    ("Qwen/Qwen3-32B", "0.33.0", 1, 2, "fp8"),                           # fp8 re-shards by heads
    ("meta-llama/Llama-3.1-8B-Instruct", "0.33.0", 8, 16, "nvfp4"),      # one head per rank on both sides
])
def test_other_kv_pairs_are_not_this_fault(tmp_path, capsys, model, version, ptp, dtp, dtype):
    code, out = check(tmp_path, capsys, *_kv(model, version, ptp, dtp, dtype))
    assert NVFP4_RULE not in rules(out), out
