"""Variants of the kinds of fault the fourth public-report set (tests/unit/data/public_reports_4) found
missed, each with negative controls."""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import POD_IP, check, container, rules, workload

DS = {"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}
HYBRID_FLAGS = ["--no-disable-hybrid-kv-cache-manager", "--no-async-scheduling"]


def _kv(role="kv_both"):
    return json.dumps({"kv_connector": "NixlConnector", "kv_role": role})


def _config(tmp_path, heads, layer_types=("linear_attention", "full_attention"), arch="Qwen3_5ForConditionalGeneration"):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": [arch], "text_config": {
        "num_key_value_heads": heads, "layer_types": list(layer_types)}}))
    return ("--model-config", str(path))


def _hybrid_pair(p_tp, d_tp, model="Qwen/Qwen3.5-0.8B", image="vllm/vllm-openai:v0.22.0", d_extra=()):
    def role(name, tp, extra=()):
        args = [model, "--tensor-parallel-size", str(tp), *HYBRID_FLAGS, "--kv-transfer-config", _kv(), *extra]
        return workload(f"hyb-{name}", name, container(args, image=image, env=[DS], gpus=tp))
    return [role("prefill", p_tp), role("decode", d_tp, d_extra)]


# --- hybrid-prefix-caching: only past the KV heads do the roles' block ratios differ ----------------------


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.22.0", "vllm/vllm-openai:v0.26.0", "vllm/vllm-openai:v0.33.0"])
@pytest.mark.parametrize("tps", [(1, 2), (2, 1), (2, 4), (4, 8)])
def test_hetero_tp_within_the_kv_heads_keeps_prefix_caching(tmp_path, capsys, image, tps):
    code, out = check(tmp_path, capsys, *_hybrid_pair(*tps, image=image), extra=_config(tmp_path, 8))
    assert "hybrid-prefix-caching" not in rules(out), out
    # 0.26.0 keeps prefix caching opt-in for hybrid models (engine/arg_utils.py: "is_prefix_caching_supported and not
    # model_config.is_hybrid", through 0.27.1), so with no flag its decode has no prefix cache to hit and
    # hybrid-ssm-prefix-caching (0.20-0.26 assert on an SSM group's local hit) stays silent too.
    assert code == 0, out


@pytest.mark.parametrize("tps", [(1, 4), (2, 8), (4, 8)])
def test_hetero_tp_past_the_kv_heads_with_prefix_caching_is_refused(tmp_path, capsys, tps):
    # 0.33.0: prefix caching on by default for hybrid models (0.28+), and past hybrid-ssm-prefix-caching's window.
    # The decode has the larger TP: its block is the smaller, and the handshake fails on every kernel.
    code, out = check(tmp_path, capsys, *_hybrid_pair(*tps, image="vllm/vllm-openai:v0.33.0"), extra=_config(tmp_path, 2))
    assert code == 1 and "hybrid-prefix-caching" in rules(out, "error"), out


@pytest.mark.parametrize("tps", [(4, 1), (8, 2), (8, 4)])
def test_prefill_larger_past_the_kv_heads_is_the_kernels_to_decide(tmp_path, capsys, tps):
    # The decode's block is the larger: FlashAttention 2/3 run it unsplit and never raise the prefix-caching error.
    code, out = check(tmp_path, capsys, *_hybrid_pair(*tps, image="vllm/vllm-openai:v0.33.0"), extra=_config(tmp_path, 2))
    assert code == 0 and "hybrid-prefix-caching" in rules(out, "warning"), out


def test_prefix_caching_off_on_decode_is_accepted_past_the_kv_heads(tmp_path, capsys):
    pair = _hybrid_pair(1, 4, d_extra=["--no-enable-prefix-caching"])
    code, out = check(tmp_path, capsys, *pair, extra=_config(tmp_path, 2))
    assert "hybrid-prefix-caching" not in rules(out), out


def test_unknown_kv_heads_are_a_warning_not_a_refusal(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_hybrid_pair(1, 2, model="ai21labs/AI21-Jamba2-Mini", image="vllm/vllm-openai:v0.28.0"))
    assert "hybrid-prefix-caching" in rules(out, "warning") and "hybrid-prefix-caching" not in rules(out, "error"), out


def test_equal_tp_and_versions_before_0_22_get_no_finding(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_hybrid_pair(4, 4), extra=_config(tmp_path, 2))
    assert "hybrid-prefix-caching" not in rules(out), out
    _, out = check(tmp_path, capsys, *_hybrid_pair(1, 4, image="vllm/vllm-openai:v0.21.0"), extra=_config(tmp_path, 2))
    assert "hybrid-prefix-caching" not in rules(out), out


# --- Qwen3.6 is a Gated DeltaNet hybrid like Qwen3.5 --------------------------------------------------------


@pytest.mark.parametrize("name, family, kind", [
    ("Qwen/Qwen3.6-35B-A3B-FP8", "hybrid-ssm", "GDN"),
    ("Qwen/Qwen3.6-27B", "hybrid-ssm", "GDN"),
    ("Qwen/Qwen3.5-397B-A17B-W8A8", "hybrid-ssm", "GDN"),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", "hybrid-ssm", "GDN"),
    ("Qwen/Qwen3-30B-A3B", "moe", None),      # Qwen3 without a point release: no linear attention
    ("Qwen/Qwen3-8B", "dense", None),
])
def test_qwen_families_by_name(name, family, kind):
    from pdd_operator.vllm.architectures import traits
    t = traits(None, None, None, name)
    assert (t.architecture.value, t.ssm_kind.value if t.ssm_kind else None) == (family, kind)


def _qwen36_pair(env=()):
    def role(name, port):
        args = ["Qwen/Qwen3.6-35B-A3B-FP8", "--kv-transfer-config", _kv()]
        port_env = {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": port}
        return workload(f"q36-{name}", name, container(args, image="vllm/vllm-openai:v0.28.0", env=[port_env, *env]))
    return [role("prefill", "5600"), role("decode", "5601")]


def test_qwen36_without_the_ds_conv_layout_is_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_qwen36_pair())
    assert code == 1 and "ssm-conv-layout-ds" in rules(out, "error"), out


def test_qwen36_with_the_ds_conv_layout_is_accepted(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_qwen36_pair(env=[DS]))
    assert "ssm-conv-layout-ds" not in rules(out) and code == 0, out


# --- images that reuse vLLM's image name but tag their own releases -------------------------------------


def _nixl_pair(image, command=None):
    def role(name):
        return workload(f"lm-{name}", name, container(["Qwen/Qwen3-8B", "--kv-transfer-config", _kv()],
                                                      image=image, command=command))
    return [role("prefill"), role("decode")]


@pytest.mark.parametrize("image", ["lmcache/vllm-openai:v0.4.4", "docker.io/lmcache/vllm-openai:v0.3.3",
                                   "registry.local:5000/lmcache/vllm-openai:v0.3.10"])
def test_an_lmcache_image_tag_is_not_read_as_the_vllm_version(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, *_nixl_pair(image))
    assert "nixl-connector-unavailable" not in rules(out), out
    assert "vllm-version-unknown" in rules(out, "warning") and code == 0, out
    assert out["results"][0]["vllmVersion"] == "unknown"


def test_an_lmcache_image_still_runs_the_vllm_entrypoint():
    from pdd_operator.vllm.versions import is_vllm_image, version_from_image
    assert is_vllm_image("lmcache/vllm-openai:v0.4.4") and version_from_image("lmcache/vllm-openai:v0.4.4") is None


@pytest.mark.parametrize("image, version", [("vllm/vllm-openai:v0.8.5", "0.8.5"),
                                            ("docker.io/vllm/vllm-openai:v0.8.5", "0.8.5"),
                                            ("localhost:5000/vllm/vllm-openai:v0.20.2", "0.20.2")])
def test_vllms_own_images_keep_their_tag_as_the_version(tmp_path, capsys, image, version):
    code, out = check(tmp_path, capsys, *_nixl_pair(image))
    assert out["results"][0]["vllmVersion"] == version, out
    assert ("nixl-connector-unavailable" in rules(out, "error")) is (version == "0.8.5")


# --- a KServe LLMInferenceServiceConfig is read like the LLMInferenceService it configures -----------------


def _llmisvc(kind, decode_main, prefill_main):
    return {"apiVersion": "serving.kserve.io/v1alpha2", "kind": kind, "metadata": {"name": "gpt-oss-pd"},
            "spec": {"model": {"name": "openai/gpt-oss-20b"}, "template": {"containers": [decode_main]},
                     "prefill": {"replicas": 2, "template": {"containers": [prefill_main]}}}}


def _main(command=None, image="vllm/vllm-openai:v0.24.0"):
    additional = [] if command else [{"name": "VLLM_ADDITIONAL_ARGS", "value": f"--kv_transfer_config '{_kv()}'"}]
    env = [POD_IP, *additional]
    c = {"name": "main", "image": image, "env": env, "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {**c, "command": command} if command else c


@pytest.mark.parametrize("kind", ["LLMInferenceService", "LLMInferenceServiceConfig"])
def test_templated_kserve_engines_are_not_checked_rather_than_passed(tmp_path, capsys, kind):
    llm_d = "ghcr.io/llm-d/llm-d-cuda:v0.7.0"   # the sample's image: KServe's template supplies the command
    code, out = check(tmp_path, capsys, _llmisvc(kind, _main(image=llm_d), _main(image=llm_d)))
    assert code == 3 and len(out["notChecked"]) == 2 and not out["results"], out


@pytest.mark.parametrize("kind", ["LLMInferenceService", "LLMInferenceServiceConfig"])
def test_kserve_engines_with_explicit_commands_are_paired_by_the_spec_structure(tmp_path, capsys, kind):
    def cmd(*extra):
        return ["vllm", "serve", "openai/gpt-oss-20b", *extra]
    code, out = check(tmp_path, capsys, _llmisvc(kind, _main(cmd()), _main(cmd("--kv-transfer-config", _kv()))))
    assert code == 1 and "kv-connector-missing" in rules(out, "error"), out
    code, out = check(tmp_path, capsys, _llmisvc(kind, _main(cmd("--kv-transfer-config", _kv())),
                                                 _main(cmd("--kv-transfer-config", _kv()))))
    assert "kv-connector-missing" not in rules(out) and len(out["results"]) == 1 and code == 0, out


# --- Helm values that configure P/D are "not checked", not "nothing found" -------------------------------


def _modelservice_values(kv=True):
    def role(tp):
        args = ["--block-size", "128", *(["--kv-transfer-config", _kv()] if kv else [])]
        return {"parallelism": {"tensor": tp}, "replicas": 1,
                "containers": [{"name": "vllm", "image": "ghcr.io/llm-d/llm-d-cuda:v0.4.0", "modelCommand": "vllmServe",
                                "args": args}]}
    return {"modelArtifacts": {"name": "openai/gpt-oss-120b"}, "routing": {"proxy": {"connector": "nixlv2"}},
            "decode": role(4), "prefill": role(1)}


def _production_stack_values(kv_role=True):
    def spec(name, role):
        lmcache = {"enabled": True, **({"kvRole": role} if kv_role else {})}
        return {"name": name, "repository": "lmcache/vllm-openai", "tag": "2025-03-28",
                "modelURL": "mistralai/Mistral-7B-Instruct-v0.2", "lmcacheConfig": lmcache}
    return {"servingEngineSpec": {"modelSpec": [spec("m-prefill", "kv_producer"), spec("m-decode", "kv_consumer")]}}


# llm-d-modelservice values are read as the engines the chart renders since round 39 (tests/unit/test_llmd_values.py)
@pytest.mark.parametrize("values", [_production_stack_values()], ids=["production-stack"])
def test_pd_helm_values_are_not_checked(tmp_path, capsys, values):
    code, out = check(tmp_path, capsys, values)
    assert code == 3 and not out["results"] and len(out["notChecked"]) == 1, out
    assert "helm template" in out["notChecked"][0]["reason"]


# llm-d values creating both roles without a connector are kv-connector-missing's since set 124
# (test_public_report_kinds_124.py): the aggregated case is the one with prefill.create false
@pytest.mark.parametrize("values", [{**_modelservice_values(kv=False), "prefill": {"create": False}},
                                    _production_stack_values(kv_role=False),
                                    {"replicaCount": 2, "image": {"repository": "vllm/vllm-openai", "tag": "v0.20.2"}}],
                         ids=["llm-d-no-connector", "production-stack-no-role", "plain"])
def test_values_without_kv_transfer_are_nothing_to_check(tmp_path, capsys, values):
    code, out = check(tmp_path, capsys, values)
    assert code == 4 and not out["results"] and not out["notChecked"], out  # nothing to check (exit 4)


def test_a_kubernetes_object_mentioning_kv_role_is_not_taken_for_values(tmp_path, capsys):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "notes"},
          "data": {"readme": "set kv_role to kv_producer on prefill"}}
    code, out = check(tmp_path, capsys, cm)
    assert code == 4 and not out["notChecked"], out  # nothing to check (exit 4)


def test_values_beside_readable_engines_do_not_hide_them(tmp_path, capsys):
    pair = _hybrid_pair(1, 1, model="Qwen/Qwen3-8B")
    code, out = check(tmp_path, capsys, *pair, _production_stack_values())
    assert len(out["results"]) == 1 and len(out["notChecked"]) == 1 and code == 3, out
