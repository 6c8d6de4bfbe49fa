"""``kv-cache-dtype-mismatch`` per vLLM release: hashed from 0.13.0; before it, the handshake's byte-length assert
(v1/nixl_connector.py, read in the 0.9.1-0.12.0 wheels and sdists) fails for an fp8 cache against a 16/32-bit one."""

from __future__ import annotations

import pytest

from pdd_operator.compat import evaluate
from pdd_operator.compat.manifests import find_engines, pair_engines

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _deployment(name: str, role: str, image: str, extra: list[str]) -> dict:
    args = ["--model", "Qwen/Qwen3-8B", "--kv-transfer-config", KV, *extra]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "serving"},
            "spec": {"selector": {"matchLabels": {"app": "qwen", "role": role}}, "template": {
                "metadata": {"labels": {"app": "qwen", "role": role}},
                "spec": {"containers": [{"name": "vllm", "image": image, "command": ["vllm", "serve"], "args": args,
                                         "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
                                                  "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}]}}}}


def _finding(version: str, prefill: list[str], decode: list[str]):
    image = f"vllm/vllm-openai:v{version}"
    engines = [e for d in (_deployment("qwen-prefill", "prefill", image, prefill),
                           _deployment("qwen-decode", "decode", image, decode)) for e in find_engines(d)]
    (pair, _, _), = pair_engines(engines)[0]
    return next((f for f in evaluate(pair).findings if f.rule == "kv-cache-dtype-mismatch"), None)


@pytest.mark.parametrize("version", ["0.10.2", "0.11.0", "0.11.1", "0.12.0"])
@pytest.mark.parametrize("prefill, decode", [
    (["--kv-cache-dtype", "fp8"], []),                                    # fp8 against auto (the model's bf16)
    ([], ["--kv-cache-dtype", "fp8_e4m3"]),
    (["--kv-cache-dtype", "bfloat16"], ["--kv-cache-dtype", "fp8_e5m2"]),
    (["--kv-cache-dtype", "fp8", "--dtype", "float32"], ["--dtype", "float32"]),
])
def test_an_fp8_cache_against_a_wide_one_fails_the_pre_hash_handshake(version, prefill, decode):
    finding = _finding(version, prefill, decode)
    assert finding is not None and finding.severity == "error", finding
    assert "block length in bytes" in finding.message


@pytest.mark.parametrize("version", ["0.11.0", "0.12.0"])
@pytest.mark.parametrize("prefill, decode", [
    (["--kv-cache-dtype", "auto"], ["--kv-cache-dtype", "bfloat16"]),     # same width: the handshake passes
    (["--kv-cache-dtype", "fp8"], ["--kv-cache-dtype", "fp8_e4m3"]),      # both 1 byte
    (["--kv-cache-dtype", "fp8", "--block-size", "32"], ["--block-size", "16"]),  # bytes may coincide: not judged
])
def test_other_pre_hash_differences_stay_warnings(version, prefill, decode):
    finding = _finding(version, prefill, decode)
    assert finding is not None and finding.severity == "warning", finding


def test_a_release_before_the_read_ones_corrupts_instead_of_asserting():
    # 0.9.0's add_remote_agent has no block-length assert, but reads the prefill's blocks with the decode's own
    # block_len (v1/nixl_connector.py 0.9.0 l.538-575): another KV width is read wrong, an error (set 82); 0.9.1 on
    # assert (set 26)
    finding = _finding("0.9.0", ["--kv-cache-dtype", "fp8"], [])
    assert finding is not None and finding.severity == "error"


@pytest.mark.parametrize("prefill, decode", [(["--kv-cache-dtype", "auto"], ["--kv-cache-dtype", "bfloat16"]),
                                             (["--kv-cache-dtype", "fp8"], [])])
def test_hashed_releases_refuse_any_difference(prefill, decode):
    finding = _finding("0.13.0", prefill, decode)
    assert finding is not None and finding.severity == "error"


def test_equal_settings_give_no_finding():
    assert _finding("0.11.0", ["--kv-cache-dtype", "fp8"], ["--kv-cache-dtype", "fp8"]) is None
