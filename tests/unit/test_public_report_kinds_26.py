"""The fault kinds held-out set 26 (tests/unit/data/public_reports_26, vllm-project/vllm bug reports on the first
NixlConnector releases) found, each as a kind: variants of other models, versions and orchestrators than the set's
own entries. Each positive variant fails without its fix; the negative controls pass either way."""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat import evaluate
from pdd_operator.compat.manifests import find_engines, pair_engines


def _kv(role: str = "kv_both", connector: str = "NixlConnector") -> str:
    return json.dumps({"kv_connector": connector, "kv_role": role})


def _deployment(name: str, role: str, image: str, args: list[str], env: dict | None = None,
                node_selector: dict | None = None, gpus: int = 1) -> dict:
    spec = {"containers": [{"name": "vllm", "image": image, "command": ["vllm", "serve"], "args": args,
                            "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
                                     "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                                    *({"name": k, "value": v} for k, v in (env or {}).items())],
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "serving"},
            "spec": {"selector": {"matchLabels": {"app": "m", "role": role}}, "template": {
                "metadata": {"labels": {"app": "m", "role": role}}, "spec": spec}}}


def _findings(version: str, prefill: list[str], decode: list[str], model: str = "meta-llama/Llama-3.1-8B-Instruct",
              **kw) -> dict[str, str]:
    """rule id -> severity of every finding ``pdd check`` gives the pair (prefill and decode Deployments)."""
    image = f"vllm/vllm-openai:v{version}"
    docs = [_deployment("m-prefill", "prefill", image, [model, "--kv-transfer-config", _kv("kv_producer"), *prefill],
                        **kw.get("prefill_kw", {})),
            _deployment("m-decode", "decode", image, [model, "--kv-transfer-config", _kv("kv_consumer"), *decode],
                        **kw.get("decode_kw", {}))]
    engines = [e for d in docs for e in find_engines(d)]
    (pair, _, _), = pair_engines(engines)[0]
    return {f.rule: f.severity for f in evaluate(pair).findings}


# --- kv-cache-dtype-mismatch before the hash: 0.9.1's add_remote_agent already asserts equal block bytes ---------

@pytest.mark.parametrize("version", ["0.9.1", "0.9.2", "0.10.0", "0.10.1"])
def test_an_fp8_cache_against_bf16_fails_the_first_releases_handshake(version):
    assert _findings(version, [], ["--kv-cache-dtype", "fp8"]).get("kv-cache-dtype-mismatch") == "error"


def test_0_9_0_has_no_block_length_assert_and_stays_a_warning():
    assert _findings("0.9.0", ["--kv-cache-dtype", "fp8"], []).get("kv-cache-dtype-mismatch") == "warning"


# --- kv-layout-mismatch: 0.9.1-0.10.0 give HND only to a top-level NixlConnector -----------------------------------

def _multi(role: str, other: str) -> str:
    return json.dumps({"kv_connector": "MultiConnector", "kv_role": role, "kv_connector_extra_config": {"connectors": [
        {"kv_connector": other, "kv_role": "kv_both"}, {"kv_connector": "NixlConnector", "kv_role": role}]}})


def _layout(version: str, prefill_multi: bool, decode_multi: bool, other: str = "SharedStorageConnector",
            env: dict | None = None) -> str | None:
    image = f"vllm/vllm-openai:v{version}"
    model = "mistralai/Mistral-7B-Instruct-v0.3"
    docs = []
    for name, role, multi in (("mistral-prefill", "kv_producer", prefill_multi), ("mistral-decode", "kv_consumer", decode_multi)):
        kv = _multi(role, other) if multi else _kv(role)
        docs.append(_deployment(name, name.split("-")[1], image, [model, "--kv-transfer-config", kv], env=env))
    engines = [e for d in docs for e in find_engines(d)]
    (pair, _, _), = pair_engines(engines)[0]
    return {f.rule: f.severity for f in evaluate(pair).findings}.get("kv-layout-mismatch")


@pytest.mark.parametrize("version, prefill_multi, decode_multi, other", [
    ("0.9.2", False, True, "SharedStorageConnector"),   # a MultiConnector decode (NHD) reading a NixlConnector prefill
    ("0.10.0", True, False, "LMCacheConnectorV1"),
    ("0.9.1", False, True, "LMCacheConnectorV1"),
])
def test_a_multiconnector_beside_a_plain_nixlconnector_has_another_layout_before_0_10_1(
        version, prefill_multi, decode_multi, other):
    assert _layout(version, prefill_multi, decode_multi, other) == "error"


@pytest.mark.parametrize("version, prefill_multi, decode_multi, env", [
    ("0.10.1", True, False, None),    # the connector class decides: MultiConnector takes its NIXL child's HND
    ("0.11.0", False, True, None),
    ("0.9.1", True, True, None),      # both NHD
    ("0.9.0", True, False, None),     # 0.9.0: NHD for every cache
    ("0.9.2", True, False, {"VLLM_KV_CACHE_LAYOUT": "HND"}),  # the env variable overrides the connector's choice
])
def test_layouts_that_agree_give_no_finding(version, prefill_multi, decode_multi, env):
    assert _layout(version, prefill_multi, decode_multi, env=env) is None
