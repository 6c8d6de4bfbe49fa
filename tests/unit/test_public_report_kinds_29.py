"""Variants of what the twenty-ninth public-report set (tests/unit/data/public_reports_29) taught, with negative
controls.

- Sleep mode on an engine whose NIXL connector cannot sleep (``sleep-mode-unsupported``,
  :mod:`pdd_operator.compat.rules.sleep_mode`): vLLM 0.33.0's config/vllm.py refuses ``--enable-sleep-mode`` with
  "{kv_connector} does not support sleep mode." for NixlPushConnector always and for the pull connector unless its
  backends are exactly ["UCX"] (../shared/docs/vllm-nixl-facts.md 4.11; no such check in the 0.32.0 wheel). The push
  demo of vllm-project/vllm#55088 with sleep mode added passed silently.
- ``UCX_TLS`` of host-memory transports only on an engine whose KV cache is in GPU memory
  (``ucx-tls-no-cuda-transport``, a warning, :mod:`pdd_operator.compat.rules.ucx_tls`): the variable was not read, so
  vllm-project/vllm#52607's same-node pair with UCX_TLS=tcp,self on the decode passed without a word.
"""

from __future__ import annotations

import pytest

from pdd_operator.compat.rules.ucx_tls import host_only_transports
from tests.unit.test_turn2_variants import check, container, pd, rules, workload

PUSH_P = '{"kv_connector":"NixlPushConnector","kv_role":"kv_producer","engine_id":"p-0"}'
PUSH_D = '{"kv_connector":"NixlPushConnector","kv_role":"kv_consumer"}'
PULL_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
PULL_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
SLEEP = "sleep-mode-unsupported"
UCX = "ucx-tls-no-cuda-transport"


def _message(out, rule):
    return next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule)


def _severities(out, rule):
    return {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == rule}


# --- sleep-mode-unsupported -----------------------------------------------------------------------------------


def test_sleep_mode_on_the_decode_of_push_statefulsets_on_v033_is_an_error(tmp_path, capsys):
    docs = pd("llama", ["--kv-transfer-config", PUSH_P], ["--kv-transfer-config", PUSH_D, "--enable-sleep-mode"],
              model="meta-llama/Llama-3.1-8B-Instruct", image="vllm/vllm-openai:v0.33.0")
    for doc in docs:
        doc["kind"] = "StatefulSet"
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and SLEEP in rules(out, "error")
    assert _message(out, SLEEP).startswith("decode: --enable-sleep-mode with NixlPushConnector")


def test_sleep_mode_with_a_pull_connector_off_the_ucx_backend_on_v033_is_an_error(tmp_path, capsys):
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_connector_extra_config":{"backends":["UCX","GDS"]}}'
    code, out = check(tmp_path, capsys, *pd("qwen", ["--kv-transfer-config", kv, "--enable-sleep-mode"],
                                            ["--kv-transfer-config", kv], image="vllm/vllm-openai:v0.33.0"))
    assert code == 1 and SLEEP in rules(out, "error")
    assert "['UCX', 'GDS']" in _message(out, SLEEP)


def test_sleep_mode_on_a_pddeployment_push_decode_is_an_error(tmp_path, capsys):
    spec = {"model": {"name": "Qwen/Qwen3-8B", "hfArchitecture": "Qwen3ForCausalLM"},
            "engine": {"image": "vllm/vllm-openai:v0.33.0"}, "kvTransfer": {"connector": "NixlPushConnector"},
            "prefill": {"replicas": 1}, "decode": {"replicas": 1, "extraArgs": ["--enable-sleep-mode"]}}
    doc = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "q"}, "spec": spec}
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and SLEEP in rules(out, "error")


def test_sleep_mode_with_the_default_pull_backend_or_before_v033_is_no_refusal(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *pd("qwen", ["--kv-transfer-config", PULL_P, "--enable-sleep-mode"],
                                            ["--kv-transfer-config", PULL_D, "--enable-sleep-mode"],
                                            image="vllm/vllm-openai:v0.33.0"))
    assert SLEEP not in rules(out)
    code, out = check(tmp_path, capsys, *pd("qwen", ["--kv-transfer-config", PUSH_P, "--enable-sleep-mode"],
                                            ["--kv-transfer-config", PUSH_D, "--enable-sleep-mode"],
                                            image="vllm/vllm-openai:v0.32.0"))
    assert SLEEP not in rules(out)


def test_a_push_child_of_a_multiconnector_with_sleep_mode_is_an_error(tmp_path, capsys):
    # MultiConnector.supports_sleep_mode is True only where every child's is (multi_connector.py 0.33.0 lines
    # 223-232; set 84 read it): the push child's False refuses the engine.
    multi = ('{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":['
             '{"kv_connector":"NixlPushConnector","kv_role":"kv_both","engine_id":"p-0"},'
             '{"kv_connector":"OffloadingConnector","kv_role":"kv_both"}]}}')
    code, out = check(tmp_path, capsys, *pd("qwen", ["--kv-transfer-config", multi, "--enable-sleep-mode"],
                                            ["--kv-transfer-config", PUSH_D], image="vllm/vllm-openai:v0.33.0"))
    assert code == 1 and _severities(out, SLEEP) == {"error"}
    assert "MultiConnector sleeps only where every child does" in _message(out, SLEEP)


# --- ucx-tls-no-cuda-transport ------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [
    ("tcp,self", ["tcp", "self"]),
    ("TCP, sm ,self", None),     # fixT: UCX matches names exactly (strcmp), so these name nothing: ucx-name-unrecognised
    ("tcp:aux,shm,cma", ["tcp", "shm", "cma"]),
    ("tcp,cuda_copy", None),
    ("tcp,cuda_ipc,cuda_copy,shm,cma,self", None),
    ("rc,sm,self", None),
    ("cuda", None),
    ("ib,rc,ze_copy", None),
    ("all", None),
    ("^cuda_ipc", None),
    ("", None),
    (None, None),
])
def test_host_only_transports(value, expected):
    assert host_only_transports(value) == expected


def test_host_only_ucx_tls_on_a_v020_decode_is_a_warning(tmp_path, capsys):
    docs = [workload("llama-prefill", "prefill",
                     container(["meta-llama/Llama-3.1-8B-Instruct", "--kv-transfer-config", PULL_P],
                               image="vllm/vllm-openai:v0.20.2")),
            workload("llama-decode", "decode",
                     container(["meta-llama/Llama-3.1-8B-Instruct", "--kv-transfer-config", PULL_D],
                               image="vllm/vllm-openai:v0.20.2", env=[{"name": "UCX_TLS", "value": "tcp"}]))]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and UCX in rules(out, "warning")
    assert _message(out, UCX).startswith("decode: UCX_TLS=tcp allows only host-memory transports")


def test_host_only_transports_in_a_pddeployment_warn_on_both_roles(tmp_path, capsys):
    spec = {"model": {"name": "Qwen/Qwen3-8B", "hfArchitecture": "Qwen3ForCausalLM"},
            "engine": {"image": "vllm/vllm-openai:v0.33.0"}, "network": {"ucx": {"transports": "tcp,sm,self"}},
            "prefill": {"replicas": 1}, "decode": {"replicas": 1}}
    doc = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "q"}, "spec": spec}
    code, out = check(tmp_path, capsys, doc)
    findings = [f for r in out["results"] for f in r["findings"] if f["rule"] == UCX]
    assert code == 0 and {f["message"].split(":", 1)[0] for f in findings} == {"prefill", "decode"}


@pytest.mark.parametrize("env, kv", [
    ([{"name": "UCX_TLS", "value": "tcp,cuda_copy,cuda_ipc"}], PULL_D),
    ([{"name": "UCX_TLS", "value": "rc,sm,self"}], PULL_D),
    ([{"name": "UCX_TLS", "value": "^cuda_ipc"}], PULL_D),
    ([{"name": "UCX_TLS", "value": "tcp"}],
     '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_buffer_device":"cpu"}'),
    ([{"name": "UCX_TLS", "value": "tcp"}],
     '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"backends":["LIBFABRIC"]}}'),
])
def test_ucx_tls_with_a_gpu_transport_a_host_buffer_or_no_ucx_backend_is_not_flagged(tmp_path, capsys, env, kv):
    docs = [workload("qwen-prefill", "prefill", container(["Qwen/Qwen3-8B", "--kv-transfer-config", PULL_P],
                                                          image="vllm/vllm-openai:v0.32.0")),
            workload("qwen-decode", "decode", container(["Qwen/Qwen3-8B", "--kv-transfer-config", kv],
                                                        image="vllm/vllm-openai:v0.32.0", env=env))]
    _, out = check(tmp_path, capsys, *docs)
    assert UCX not in rules(out)


def test_a_ucx_tls_not_all_in_the_manifest_is_not_read_as_host_only():
    assert host_only_transports("tcp,<unknown:EXTRA_TLS>") is None
    assert host_only_transports("<unknown:UCX_TLS>") is None


def test_ucx_tls_from_a_configmap_not_in_the_files_is_not_flagged(tmp_path, capsys):
    docs = pd("qwen", ["--kv-transfer-config", PULL_P], ["--kv-transfer-config", PULL_D], image="vllm/vllm-openai:v0.32.0")
    docs[1]["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "ucx-settings"}}]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and UCX not in rules(out)
