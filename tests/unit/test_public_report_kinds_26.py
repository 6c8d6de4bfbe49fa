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


def test_0_9_0_has_no_block_length_assert_but_reads_with_its_own_block_length():
    # no assert, but add_remote_agent registers the prefill's blocks with the decode's block_len (0.9.0 l.538-575):
    # an fp8 cache against a 16-bit one is read at the wrong offsets (set 82)
    assert _findings("0.9.0", ["--kv-cache-dtype", "fp8"], []).get("kv-cache-dtype-mismatch") == "error"


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


# --- nixl-needs-v1-engine: the V0 fallback of 0.9.0-0.10.x cannot run a NIXL connector ------------------------------

def _v0(version: str, node_selector: dict | None = None, env: dict | None = None, affinity: list | None = None,
        model: str = "Qwen/Qwen2.5-7B-Instruct") -> str | None:
    image = f"vllm/vllm-openai:v{version}"
    docs = [_deployment(f"q-{role}", role, image, [model, "--kv-transfer-config", _kv("kv_both")], env=env,
                        node_selector=node_selector) for role in ("prefill", "decode")]
    if affinity:
        for d in docs:
            d["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "nvidia.com/gpu.product", "operator": "In", "values": affinity}]}]}}}
    engines = [e for d in docs for e in find_engines(d)]
    (pair, _, _), = pair_engines(engines)[0]
    return {f.rule: f.severity for f in evaluate(pair).findings}.get("nixl-needs-v1-engine")


@pytest.mark.parametrize("version, kw", [
    ("0.10.0", {"node_selector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}}),
    ("0.10.1", {"node_selector": {"nvidia.com/gpu.product": "Tesla-V100-PCIE-16GB"}}),
    ("0.9.2", {"env": {"VLLM_USE_V1": "0"}, "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}),
    ("0.9.0", {"affinity": ["Tesla-V100-SXM2-16GB", "Tesla-T4"]}),
    ("0.9.1", {"node_selector": {"nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"}, "env": {"VLLM_USE_V1": "1"}}),
])
def test_a_nixl_engine_on_the_v0_engine_never_starts(version, kw):
    assert _v0(version, **kw) == "error"


def test_0_10_2_was_not_read_and_warns():
    assert _v0("0.10.2", node_selector={"nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"}) == "warning"


@pytest.mark.parametrize("version, kw", [
    ("0.11.0", {"node_selector": {"nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"}}),   # V1 runs on Volta there
    ("0.9.1", {"node_selector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}}),
    ("0.9.1", {"node_selector": {"cloud.google.com/gke-accelerator": "nvidia-l4"}}),
    ("0.9.1", {"affinity": ["Tesla-V100-SXM2-16GB", "NVIDIA-A100-SXM4-40GB"]}),           # may land on an A100
    ("0.9.1", {}),                                                                          # GPU model not known
])
def test_v1_capable_or_unknown_gpus_give_no_finding(version, kw):
    assert _v0(version, **kw) is None


# --- decode-kv-blocks-below-prefill: 0.9.1 asserts decode's block count >= prefill's --------------------------------

def _blocks(version: str, p_util: str | None, d_util: str | None, one_pod: bool = False, product: str | None = None,
            d_extra: tuple = ()) -> str | None:
    image = f"vllm/vllm-openai:v{version}"
    model = "meta-llama/Llama-3.1-70B-Instruct"

    def args(role, util, extra=()):
        return [model, "--tensor-parallel-size", "4", "--kv-transfer-config", _kv(role),
                *(["--gpu-memory-utilization", util] if util else []), *extra]
    selector = {"nvidia.com/gpu.product": product} if product else None
    if one_pod:
        pod = _deployment("llama-pd", "pd", image, args("kv_producer", p_util), gpus=4, node_selector=selector)
        c = pod["spec"]["template"]["spec"]["containers"]
        c[0]["name"] = "prefill"
        c.append({**c[0], "name": "decode", "args": args("kv_consumer", d_util, d_extra),
                  "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": "5600"}]})
        c[0]["env"] = [{"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": "5500"}]
        docs = [pod]
    else:
        docs = [_deployment("llama-prefill", "prefill", image, args("kv_producer", p_util), gpus=4, node_selector=selector),
                _deployment("llama-decode", "decode", image, args("kv_consumer", d_util, d_extra), gpus=4,
                            node_selector=selector)]
    engines = [e for d in docs for e in find_engines(d)]
    (pair, _, _), = pair_engines(engines)[0]
    return {f.rule: f.severity for f in evaluate(pair).findings}.get("decode-kv-blocks-below-prefill")


@pytest.mark.parametrize("kw", [
    {"p_util": "0.95", "d_util": "0.85", "one_pod": True},
    {"p_util": None, "d_util": "0.7", "product": "NVIDIA-A100-SXM4-80GB"},   # prefill at vLLM's default 0.9
])
def test_a_decode_with_less_gpu_memory_than_its_twin_prefill_fails_on_0_9_1(kw):
    assert _blocks("0.9.1", **kw) == "error"


@pytest.mark.parametrize("kw", [
    {"p_util": "0.9", "d_util": "0.8"},                                         # GPU models not known to be one
    {"p_util": "0.9", "d_util": "0.8", "one_pod": True, "d_extra": ("--max-model-len", "8192")},
])
def test_a_lower_decode_budget_that_may_still_hold_enough_blocks_warns(kw):
    assert _blocks("0.9.1", **kw) == "warning"


@pytest.mark.parametrize("version, p_util, d_util", [
    ("0.9.2", "0.9", "0.8"), ("0.9.0", "0.9", "0.8"),       # no such assert there
    ("0.9.1", "0.8", "0.9"), ("0.9.1", "0.9", None),         # decode at or above prefill (None: the default 0.9)
])
def test_other_budgets_and_releases_give_no_finding(version, p_util, d_util):
    assert _blocks(version, p_util, d_util, one_pod=True) is None


# --- hetero-tp-kv-replicated on 0.9.x: 0.9.1 has no replicated case, 0.9.2-0.19.1 exempt only prefill TP >= heads ----

CONFIG_2_KV_HEADS = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 2048,
                     "num_attention_heads": 16, "num_key_value_heads": 2, "num_hidden_layers": 36}


def _replicated(tmp_path, capsys, p: int, d: int, version: str, config: dict | None = CONFIG_2_KV_HEADS,
                model: str = "Qwen/Qwen2.5-3B-Instruct"):
    from tests.unit.test_turn2_variants import check, pd, rules
    docs = pd("qwen", ["--tensor-parallel-size", str(p), "--kv-transfer-config", _kv()],
              ["--tensor-parallel-size", str(d), "--kv-transfer-config", _kv()], model=model,
              image=f"vllm/vllm-openai:v{version}")
    for doc, gpus in zip(docs, (p, d), strict=True):
        doc["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = str(gpus)
    extra = ()
    if config is not None:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config))
        extra = ("--model-config", str(path))
    _, out = check(tmp_path, capsys, *docs, extra=extra)
    return {sev: rules(out, sev) for sev in ("error", "warning")}


@pytest.mark.parametrize("p, d, version", [
    (1, 4, "0.9.1"),    # the PR's failure: decode past the 2 KV heads
    (2, 4, "0.9.1"),    # 0.9.1 has no replicated case: a prefill at the KV heads asserts too
    (1, 4, "0.9.2"),    # vllm#19691 exempts only a prefill at or above the KV heads
    (1, 8, "0.11.1"),
    (1, 4, "0.13.0"),
])
def test_a_decode_past_the_kv_heads_fails_on_the_first_releases(tmp_path, capsys, p, d, version):
    assert "hetero-tp-kv-replicated" in _replicated(tmp_path, capsys, p, d, version)["error"]


@pytest.mark.parametrize("p, d, version", [(2, 4, "0.9.2"), (2, 8, "0.12.0"), (1, 2, "0.9.1")])
def test_a_replicated_prefill_or_no_capping_gives_no_finding(tmp_path, capsys, p, d, version):
    found = _replicated(tmp_path, capsys, p, d, version)
    assert "hetero-tp-kv-replicated" not in found["error"] | found["warning"]


def test_0_9_0_has_no_block_length_assert_and_warns(tmp_path, capsys):
    assert "hetero-tp-kv-replicated" in _replicated(tmp_path, capsys, 1, 4, "0.9.0")["warning"]


@pytest.mark.parametrize("version, warned", [("0.9.1", True), ("0.21.0", True), ("0.24.0", False)])
def test_decode_tp_above_prefill_without_the_kv_heads_is_not_silent_before_0_24(tmp_path, capsys, version, warned):
    # a local path: no config.json and no known checkpoint id (Qwen/Qwen2.5-3B-Instruct's 2 KV heads are known since
    # session 27, tests/unit/test_leftover_kinds_27.py)
    found = _replicated(tmp_path, capsys, 1, 4, version, config=None, model="/models/qwen2.5-3b-instruct")
    assert ("tp-kv-heads-unknown" in found["warning"]) is warned and not found["error"]
