"""Variants of what the twenty-third public-report set (tests/unit/data/public_reports_23) taught, with negative
controls.

An engine that vLLM refuses on its own, in a pair whose KV connector these rules do not describe (vllm#19448:
``--kv-transfer-config '{"kv_connector":"DynamoNixlConnector"}'`` on vLLM 0.9.0.1, which exits while parsing the flag
because ``KVTransferConfig`` needs a ``kv_role`` whenever ``kv_connector`` is set). The checker said "not checked"
for every pair with a foreign connector before any rule ran; the rules that judge an engine by itself
(``Rule.without_connector``) now run first on a known release, their errors are the verdict and the KV path stays
"not checked" beside them (:func:`pdd_operator.compat.engine._foreign_connector`). Warnings, unknown releases and
releases before 0.9.0 keep the plain "not checked".
"""

from __future__ import annotations

from tests.unit.test_turn2_variants import check, container, rules, workload


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
    _refused(code, out, "engine-args-invalid")


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
    code, out = check(tmp_path, capsys, *_pair(P2P_P, P2P_D, "vllm/vllm-openai:v0.24.0", p_args=budget))
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
