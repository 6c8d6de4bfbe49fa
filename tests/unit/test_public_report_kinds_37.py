"""Variants of what the thirty-seventh public-report set (tests/unit/data/public_reports_37, models) taught, with
negative controls.

- HMA asked for where vLLM must turn it off (vllm#39269, vllm#46553): from 0.13.0 ``--no-disable-hybrid-kv-cache-manager``
  with KV events (0.13-0.19), with chunked local attention (Llama 4) under EAGLE or
  ``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0`` (the default in 0.13) raises at startup. Such pairs passed
  as compatible (:mod:`pdd_operator.compat.rules.hma_forced`); ``hma-implicitly-disabled`` advised that very flag.
- A TP the model's heads do not divide (vllm#16021, Phi-4's 10 KV heads at TP 4): the engine never starts; the pair
  was judged for GQA replication instead (:mod:`pdd_operator.compat.rules.heads`).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.engine import evaluate
from pdd_operator.compat.rules.heads import indivisible
from tests.helpers import make_spec
from tests.unit.test_turn2_variants import check, pd, rules

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
HMA = "--no-disable-hybrid-kv-cache-manager"
EVENTS = '{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557"}'
FORCED = "hma-explicit-forced-off"
HEADS = "tp-heads-indivisible"
SCOUT = "meta-llama/Llama-4-Scout-17B-16E-Instruct"


def _pair(model, version, extra=(), p_extra=None, env=(), kind="Deployment", p_tp=1, d_tp=1):
    p_args = ["--tensor-parallel-size", str(p_tp), "--kv-transfer-config", KV, *(extra if p_extra is None else p_extra)]
    d_args = ["--tensor-parallel-size", str(d_tp), "--kv-transfer-config", KV, *extra]
    docs = pd("m", p_args, d_args, model=model, image=f"vllm/vllm-openai:v{version}", env=list(env), gpus=max(p_tp, d_tp))
    for doc in docs:
        doc["kind"] = kind
    return docs


# --- hma-explicit-forced-off --------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "version", "extra", "env", "kind"), [
    # KV events force HMA off in 0.13.0-0.19.1
    ("openai/gpt-oss-20b", "0.19.1", [HMA, "--kv-events-config", EVENTS], (), "StatefulSet"),
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "0.18.0", [HMA, "--kv-events-config", EVENTS], (), "Deployment"),
    # Llama 4's chunked local attention: the env at 0, or EAGLE
    (SCOUT, "0.21.0", [HMA], ({"name": "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", "value": "0"},),
     "Deployment"),
    (SCOUT, "0.24.0", [HMA, "--speculative-config",
                       json.dumps({"method": "eagle3", "model": "nvidia/Llama-4-Maverick-17B-128E-Eagle3",
                                   "num_speculative_tokens": 3})], (), "StatefulSet"),
])
def test_explicit_hma_that_vllm_must_turn_off_is_an_error(tmp_path, capsys, model, version, extra, env, kind):
    code, out = check(tmp_path, capsys, *_pair(model, version, extra, env=env, kind=kind))
    assert code == 1 and FORCED in rules(out, "error"), out


@pytest.mark.parametrize(("model", "version", "extra", "env"), [
    # 0.20.0 no longer turns HMA off for KV events
    ("openai/gpt-oss-20b", "0.20.0", [HMA, "--kv-events-config", EVENTS], ()),
    # from 0.14.0 chunked local attention keeps HMA by default
    (SCOUT, "0.21.0", [HMA], ()),
    # the env at 1 lets HMA stay
    (SCOUT, "0.18.0", [HMA], ({"name": "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", "value": "1"},)),
    # 0.12.0 overrides the explicit flag silently (no raise)
    ("openai/gpt-oss-20b", "0.12.0", [HMA, "--kv-events-config", EVENTS], ()),
    # KV events without the explicit flag: HMA is simply off
    ("openai/gpt-oss-20b", "0.18.0", ["--kv-events-config", EVENTS], ()),
    # the env at 0 without the explicit flag: HMA off with a warning, the engine runs
    (SCOUT, "0.18.0", [], ({"name": "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", "value": "0"},)),
])
def test_hma_vllm_can_honour_or_was_not_asked_for_is_no_finding(tmp_path, capsys, model, version, extra, env):
    _, out = check(tmp_path, capsys, *_pair(model, version, extra, env=env))
    assert FORCED not in rules(out), out


def test_one_role_with_the_flag_and_kv_events_names_that_role(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("openai/gpt-oss-20b", "0.18.0", ["--kv-events-config", EVENTS],
                                               p_extra=["--kv-events-config", EVENTS, HMA]))
    found = [f for r in out["results"] for f in r["findings"] if f["rule"] == FORCED]
    assert code == 1 and len(found) == 1 and found[0]["message"].startswith("prefill:"), out


def test_the_sliding_window_warning_does_not_advise_the_flag_that_would_stop_the_engine(tmp_path, capsys):
    """Llama 4 with the env at 0 on 0.18: vLLM turns HMA off whatever the user passes, so hma-implicitly-disabled
    (which names --no-disable-hybrid-kv-cache-manager as its fix) stays quiet; a sliding-window model still gets it."""
    env = ({"name": "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", "value": "0"},)
    _, out = check(tmp_path, capsys, *_pair(SCOUT, "0.18.0", env=env))
    assert "hma-implicitly-disabled" not in rules(out), out
    _, out = check(tmp_path, capsys, *_pair("openai/gpt-oss-20b", "0.18.0"))
    assert "hma-implicitly-disabled" in rules(out, "warning"), out


# --- tp-heads-indivisible -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("tp", "heads", "kv", "mla", "bad"), [
    (4, 40, 10, False, True), (2, 40, 10, False, False), (16, 40, 8, False, True), (8, 28, 4, False, True),
    (16, 32, 8, False, False), (3, 32, 2, False, True), (8, 32, 2, False, False), (8, 20, 20, True, True),
    (16, 128, 128, True, False), (1, 40, 10, False, False), (4, None, None, False, False), (4, None, 6, False, True)])
def test_indivisible_heads_arithmetic(tp, heads, kv, mla, bad):
    assert bool(indivisible(tp, heads, kv, mla)) == bad


@pytest.mark.parametrize(("model", "version", "p_tp", "d_tp", "kind"), [
    (SCOUT, "0.24.0", 8, 16, "Deployment"),                   # 40 attention heads at TP 16
    ("Qwen/Qwen2.5-7B-Instruct", "0.11.0", 4, 8, "StatefulSet"),  # 28 heads at TP 8
    ("zai-org/GLM-4.7-Flash", "0.21.0", 8, 8, "Deployment"),     # MLA: 20 heads at TP 8
])
def test_a_tp_the_heads_do_not_divide_is_an_error(tmp_path, capsys, model, version, p_tp, d_tp, kind):
    code, out = check(tmp_path, capsys, *_pair(model, version, kind=kind, p_tp=p_tp, d_tp=d_tp))
    assert code == 1 and HEADS in rules(out, "error"), out


@pytest.mark.parametrize(("model", "p_tp", "d_tp"), [
    ("Qwen/Qwen3-8B", 8, 16),            # 32 heads, 8 KV heads replicated twice at TP 16
    ("deepseek-ai/DeepSeek-V3", 8, 16),  # MLA: 128 heads
    ("/models/private-finetune", 3, 3),  # heads unknown: nothing to say
])
def test_a_tp_the_heads_divide_or_unknown_heads_is_no_finding(tmp_path, capsys, model, p_tp, d_tp):
    _, out = check(tmp_path, capsys, *_pair(model, "0.24.0", p_tp=p_tp, d_tp=d_tp))
    assert HEADS not in rules(out), out


def test_indivisible_kv_heads_are_not_judged_as_gqa_replication(tmp_path, capsys):
    """Phi-4-like 10 KV heads, decode TP 4 > prefill TP 2 on 0.21: the decode never starts (tp-heads-indivisible);
    hetero-tp-kv-replicated's block-length arithmetic does not apply to an engine that cannot exist."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "num_attention_heads": 40,
                                  "num_key_value_heads": 10, "hidden_size": 5120, "torch_dtype": "bfloat16"}))
    code, out = check(tmp_path, capsys, *_pair("microsoft/phi-4", "0.21.0", p_tp=2, d_tp=4),
                      extra=("--model-config", str(config)))
    assert code == 1 and rules(out, "error") == {HEADS}, out


def test_a_pddeployment_with_the_flag_and_kv_events_in_extra_args_is_refused_in_its_own_terms():
    extra = [HMA, "--kv-events-config", EVENTS]
    report = evaluate(make_spec(engine={"vllmVersion": "0.18.0"}, prefill={"extraArgs": extra},
                                decode={"extraArgs": extra}))
    found = [f for f in report.findings if f.rule == FORCED]
    assert [f.severity for f in found] == ["error", "error"]
    assert all("extraArgs" in f.fix for f in found), found
    clean = evaluate(make_spec(engine={"vllmVersion": "0.20.0"}, prefill={"extraArgs": extra},
                               decode={"extraArgs": extra}))
    assert FORCED not in {f.rule for f in clean.findings}
