"""Variants of what the twenty-third public-report set (tests/unit/data/public_reports_23) taught, with negative
controls.

An engine that vLLM refuses on its own, in a pair whose KV connector these rules do not describe (vllm#19448:
``--kv-transfer-config '{"kv_connector":"DynamoNixlConnector"}'`` on vLLM 0.9.0.1, which exits while parsing the flag
because ``KVTransferConfig`` needs a ``kv_role`` whenever ``kv_connector`` is set). The checker said "not checked"
for every pair with a foreign connector before any rule ran; the rules that judge an engine by itself
(``Rule.without_connector``) now run first on a known release, their errors are the verdict and the KV path stays
"not checked" beside them (:func:`pdd_operator.compat.engine._foreign_connector`). Warnings, unknown releases and
releases before 0.9.0 keep the plain "not checked".

A scheduler budget vLLM refuses at startup, on the releases between 0.11.1 and 0.18.0: chunked prefill turned off with
``--max-num-batched-tokens`` below ``--max-model-len`` (``SchedulerConfig.verify_max_model_len``). The rule ran from
0.18.0 only (the first release read for it); reading 0.10.1.1, 0.11.0, 0.11.1, 0.12.0, 0.13.0 and 0.14.0 for set 23's
vllm#22093 variant showed that vLLM 1 forces chunked prefill on up to 0.11.0 (the flag is overridden, the engine starts)
and keeps an explicit ``--no-enable-chunked-prefill`` from 0.11.1, so the refusal holds from 0.11.1 on.
"""

from __future__ import annotations

import pytest

from tests.unit.test_turn2_variants import KV, check, container, pd, rules, workload


def _pair(p_kv, d_kv, image, kind="Deployment", model="Qwen/Qwen3-8B", p_args=(), d_args=()):
    return [workload("lm-prefill", "prefill", container([model, "--kv-transfer-config", p_kv, *p_args], image=image),
                     kind=kind),
            workload("lm-decode", "decode", container([model, "--kv-transfer-config", d_kv, *d_args], image=image),
                     kind=kind)]


LMCACHE_P = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_producer"}'
LMCACHE_D = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_consumer"}'
P2P_P = '{"kv_connector":"P2pNcclConnector","kv_role":"kv_producer","kv_port":"21001"}'
P2P_D = '{"kv_connector":"P2pNcclConnector","kv_role":"kv_consumer","kv_port":"22001"}'


def _refused(code, out, rule):
    """Exit 1 with ``rule`` as an error, and the KV path between the engines still listed as not checked."""
    assert code == 1, out
    assert rule in rules(out, "error"), out
    assert any("not vLLM's NixlConnector" in s["reason"] for s in out["notChecked"]), out


def _not_checked(code, out):
    assert code == 3 and not out["results"], out
    assert any("not vLLM's NixlConnector" in s["reason"] for s in out["notChecked"]), out


# --- an engine refused on its own: errors, whatever the connector ---------------------------------------------


def test_lmcache_decode_without_kv_role_is_refused_on_a_statefulset_pair(tmp_path, capsys):
    docs = _pair(LMCACHE_P, '{"kv_connector":"LMCacheConnectorV1"}', "vllm/vllm-openai:v0.20.0", kind="StatefulSet",
                 model="meta-llama/Llama-3.1-8B-Instruct")
    code, out = check(tmp_path, capsys, *docs)
    _refused(code, out, "engine-args-invalid")
    assert any("decode" in f["message"] and "kv_role" in f["message"]
               for r in out["results"] for f in r["findings"]), out


def test_mooncake_pair_with_a_role_vllm_does_not_know_is_refused(tmp_path, capsys):
    docs = _pair('{"kv_connector":"MooncakeConnector","kv_role":"kv_prefill"}',
                 '{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}', "vllm/vllm-openai:v0.32.0",
                 model="Qwen/Qwen3-0.6B")
    code, out = check(tmp_path, capsys, *docs)
    # an equal-shape Mooncake pair of 0.32.0 is judged (set 83: MOONCAKE_JUDGED_NO_PP), so nothing is left
    # "not checked" beside the refusal
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out


def test_p2pnccl_pair_with_a_flag_vllm_removed_is_refused(tmp_path, capsys):
    docs = _pair(P2P_P, P2P_D, "vllm/vllm-openai:v0.24.0", model="Qwen/Qwen2.5-0.5B-Instruct",
                 p_args=("--disable-log-requests",), d_args=("--disable-log-requests",))
    code, out = check(tmp_path, capsys, *docs)
    _refused(code, out, "cli-flag-removed")


# --- negative controls: still "not checked" --------------------------------------------------------------------


def test_a_valid_lmcache_pair_stays_not_checked(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(LMCACHE_P, LMCACHE_D, "vllm/vllm-openai:v0.20.0", kind="StatefulSet"))
    _not_checked(code, out)


def test_a_warning_alone_does_not_turn_a_foreign_pair_into_a_verdict(tmp_path, capsys):
    # Chunked prefill off with a budget and no --max-model-len: max-num-batched-tokens-unverified, a warning.
    budget = ("--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192")
    # LMCacheConnectorV1 on 0.23.0: a connector these rules do not describe (a P2pNccl pair of a known 0.9.2-0.23.x
    # release is judged by its own rules since i9-p2pnccl32: tests/unit/test_p2p_nccl_pairs.py)
    code, out = check(tmp_path, capsys, *_pair(LMCACHE_P, LMCACHE_D, "vllm/vllm-openai:v0.23.0", p_args=budget))
    _not_checked(code, out)


def test_a_connector_without_kv_role_on_a_build_before_0_9_stays_not_checked(tmp_path, capsys):
    # vllm#16677's V0 DynamoNixlConnector branch (on 0.8) passes no kv_role; its parser is not a release's.
    kv = '{"kv_connector":"DynamoNixlConnector"}'
    code, out = check(tmp_path, capsys, *_pair(kv, kv, "vllm/vllm-openai:v0.8.4", model="Qwen/QwQ-32B"))
    _not_checked(code, out)


def test_a_connector_without_kv_role_on_an_unknown_release_stays_not_checked(tmp_path, capsys):
    kv = '{"kv_connector":"DynamoNixlConnector"}'
    code, out = check(tmp_path, capsys, *_pair(kv, kv, "registry.example.com/team/vllm-dynamo:patched"))
    _not_checked(code, out)


# --- a scheduler budget vLLM refuses, from 0.11.1 (not only from 0.18.0) -------------------------------------------

NO_CHUNKED = ("--no-enable-chunked-prefill", "--max-num-batched-tokens", "4096", "--max-model-len", "8192")


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.11.1", "vllm/vllm-openai:v0.14.0", "vllm/vllm-openai:v0.17.1"])
def test_chunked_prefill_off_below_max_model_len_is_refused_from_0_11_1(tmp_path, capsys, image):
    docs = pd("llama", ["--kv-transfer-config", KV, *NO_CHUNKED], ["--kv-transfer-config", KV],
              model="meta-llama/Llama-3.1-8B-Instruct", image=image)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "max-num-batched-tokens-below-max-model-len" in rules(out, "error"), out


def test_chunked_prefill_off_on_a_statefulset_decode_of_0_13_is_refused(tmp_path, capsys):
    docs = [workload("qwen-prefill", "prefill", container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV],
                                                          image="vllm/vllm-openai:v0.13.0"), kind="StatefulSet"),
            workload("qwen-decode", "decode", container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV, *NO_CHUNKED],
                                                        image="vllm/vllm-openai:v0.13.0"), kind="StatefulSet")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "max-num-batched-tokens-below-max-model-len" in rules(out, "error"), out


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.10.1.1", "vllm/vllm-openai:v0.11.0"])
def test_up_to_0_11_0_vllm_1_forces_chunked_prefill_and_starts(tmp_path, capsys, image):
    docs = pd("llama", ["--kv-transfer-config", KV, *NO_CHUNKED], ["--kv-transfer-config", KV],
              model="meta-llama/Llama-3.1-8B-Instruct", image=image)
    code, out = check(tmp_path, capsys, *docs)
    assert not rules(out) & {"max-num-batched-tokens-below-max-model-len", "max-num-batched-tokens-unverified"}, out
