"""Leftovers of the newest held-out sets (84-88), each fixed as a kind with variants (other models, releases,
manifest formats) and negative controls.

1. A lone engine with no KV connector and no engine of the other role for its model in the files is aggregated
   serving, not half of a P/D pair: "nothing to check" (exit 4), the same as a plain vLLM Deployment; an engine whose
   counterpart IS in the files still gets ``kv-connector-missing`` (issue 9 item 2), and one with a connector but no
   counterpart stays "not checked" (set 88 entry router-llama31-native-decode-only-values-v0110).
2. ``tp-exceeds-kv-heads`` as wide as vLLM's handshake assert ``not (tp_ratio < 0 and is_kv_replicated(remote))``: the
   engine that validates is decode in pull mode and prefill in push mode, and "replicated" is TP >= KV heads on
   0.14.0-0.19.1, TP > KV heads from 0.20.0; no release dedupes a replicated prefill in pull mode (0.34.0 still
   asserts), and a push prefill above the heads passes from 0.26.0 (the decode's handshake is notif-only).
3. ``kv-cache-dtype-mismatch`` where a GPU-dependent config hook decides (GLM-5's ``auto`` -> ``fp8_e4m3`` on SM10x
   from 0.32.0, GLM-5.3-Flash's ``auto`` -> ``fp8`` from 0.33.0): judged by a pinned GPU product, else a warning.
"""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.cli import main
from pdd_operator.vllm.dtype import gpu_hooked_kv_cache_dtype
from tests.unit.test_turn2_variants import check, rules

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def _deployment(role: str, args: list[str], image: str = "vllm/vllm-openai:v0.28.0", model: str = "Qwen/Qwen3-8B",
                namespace: str = "default", command: list[str] | None = None) -> dict:
    labels = {"app": "t", "llm-d.ai/role": role}
    container = {"name": "vllm", "image": image, "command": command or ["vllm", "serve"], "args": [model, *args],
                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"t-{role}", "namespace": namespace, "labels": labels},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}


# --- 1. a lone engine with no KV connector --------------------------------------------------------------------


@pytest.mark.parametrize("role", ["decode", "prefill"])
@pytest.mark.parametrize(("image", "model"), [("vllm/vllm-openai:v0.11.0", "meta-llama/Llama-3.1-8B-Instruct"),
                                              ("vllm/vllm-openai:v0.28.0", "Qwen/Qwen3-8B"),
                                              ("vllm/vllm-openai:v0.34.0", "deepseek-ai/DeepSeek-V2-Lite")])
def test_a_lone_engine_without_a_connector_is_nothing_to_check(tmp_path, capsys, role, image, model):
    code, out = check(tmp_path, capsys, _deployment(role, [], image=image, model=model))
    assert code == 4 and not out["notChecked"] and not out["results"], out
    assert len(out["aggregated"]) == 1 and out["aggregated"][0]["object"].startswith(f"Deployment/t-{role}"), out
    assert "aggregated serving" in out["aggregated"][0]["reason"]


def test_a_lone_engine_without_a_connector_is_still_refused_for_what_stops_it_alone(tmp_path, capsys):
    """The one-engine rules still run: a flag 0.20.0 no longer has stops the engine, P/D or not."""
    code, out = check(tmp_path, capsys, _deployment("decode", ["--disable-log-requests"], image="vllm/vllm-openai:v0.20.0",
                                                    model="meta-llama/Llama-3.1-8B-Instruct"))
    assert code == 1 and "cli-flag-removed" in rules(out, "error"), out


def test_llmd_decode_only_values_without_a_connector_are_nothing_to_check(tmp_path, capsys):
    values = {"modelArtifacts": {"uri": "hf://Qwen/Qwen3-8B", "name": "Qwen/Qwen3-8B"},
              "routing": {"servicePort": 8000, "proxy": {"image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0",
                                                         "connector": "nixlv2"}},
              "decode": {"create": True, "replicas": 2, "parallelism": {"tensor": 2},
                         "containers": [{"name": "vllm", "image": "ghcr.io/llm-d/llm-d-cuda:v0.3.0",
                                         "modelCommand": "vllmServe", "args": ["--max-model-len", "8192"]}]},
              "prefill": {"create": False, "containers": [{
                  "name": "vllm", "image": "ghcr.io/llm-d/llm-d-cuda:v0.3.0", "modelCommand": "vllmServe",
                  "args": ["--kv-transfer-config", NIXL]}]}}
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 4 and not out["notChecked"] and len(out["aggregated"]) == 1, out


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.34.0"])
def test_an_engine_without_a_connector_beside_its_counterpart_is_still_kv_connector_missing(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, _deployment("prefill", ["--kv-transfer-config", NIXL], image=image),
                      _deployment("decode", [], image=image))
    assert code == 1 and "kv-connector-missing" in rules(out, "error"), out
    assert "aggregated" not in out


def test_a_lone_engine_with_a_connector_stays_not_checked(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _deployment("decode", ["--kv-transfer-config", NIXL]))
    assert code == 3 and out["notChecked"] and "aggregated" not in out, out


def test_a_lone_engine_without_a_connector_in_another_namespace_than_its_counterpart_is_its_own(tmp_path, capsys):
    """The prefill of another namespace is not its counterpart: that prefill is unpaired (not checked), the
    connector-less decode is aggregated serving."""
    code, out = check(tmp_path, capsys, _deployment("prefill", ["--kv-transfer-config", NIXL], namespace="a"),
                      _deployment("decode", [], namespace="b"))
    assert code == 3 and len(out["notChecked"]) == 1 and len(out["aggregated"]) == 1, out


def test_a_lone_dynamo_worker_without_a_connector_stays_not_checked(tmp_path, capsys):
    """Dynamo's runtime may add NixlConnector itself (before 1.0): its prefill workers are elsewhere."""
    doc = _deployment("decode", [], image="nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0",
                      command=["python3", "-m", "dynamo.vllm", "--model"])
    code, out = check(tmp_path, capsys, doc)
    assert code != 4 and "aggregated" not in out, out


# --- 2. tp-exceeds-kv-heads: as wide as the handshake assert, per release and transfer mode ------------------------

PUSH = json.dumps({"kv_connector": "NixlPushConnector", "kv_role": "kv_both"})
PUSH_034 = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both",
                       "kv_connector_extra_config": {"transfer_mode": "push"}})


def _tp_pair(tmp_path, capsys, p: int, d: int, image: str, kv: str = NIXL,
             model: str = "meta-llama/Llama-3.1-8B-Instruct") -> tuple[int, dict]:
    docs = [_deployment(role, ["--tensor-parallel-size", str(tp), "--kv-transfer-config", kv], image=image, model=model)
            for role, tp in (("prefill", p), ("decode", d))]
    for doc in docs:
        doc["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "8"
    return check(tmp_path, capsys, *docs)


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.14.0", "vllm/vllm-openai:v0.21.0", "vllm/vllm-openai:v0.28.0",
                                   "vllm/vllm-openai:v0.34.0"])
@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B"])
def test_pull_prefill_tp_above_the_kv_heads_is_refused_on_every_release(tmp_path, capsys, image, model):
    """8 KV heads, prefill TP 16 > decode TP 8: decode's handshake asserts on the replicated prefill (no dedupe)."""
    code, out = _tp_pair(tmp_path, capsys, 16, 8, image, model=model)
    assert code == 1 and "tp-exceeds-kv-heads" in rules(out, "error"), out


@pytest.mark.parametrize(("image", "refused"), [("vllm/vllm-openai:v0.14.0", True), ("vllm/vllm-openai:v0.19.1", True),
                                                ("vllm/vllm-openai:v0.20.0", False), ("vllm/vllm-openai:v0.28.0", False)])
def test_pull_prefill_tp_at_the_kv_heads_is_refused_before_0_20_only(tmp_path, capsys, image, refused):
    """Prefill TP 8 == 8 KV heads > decode TP 4: 0.14.0-0.19.1 count it as replicated (tp // heads >= 1)."""
    _, out = _tp_pair(tmp_path, capsys, 8, 4, image)
    assert ("tp-exceeds-kv-heads" in rules(out, "error")) == refused, out


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.26.0", "vllm/vllm-openai:v0.28.0", "vllm/vllm-openai:v0.33.0"])
def test_push_prefill_tp_above_the_kv_heads_is_not_refused_from_0_26(tmp_path, capsys, image):
    """In push mode the prefill validates the decode, and the decode's handshake is notif-only from 0.26.0."""
    _, out = _tp_pair(tmp_path, capsys, 16, 8, image, kv=PUSH)
    assert "tp-exceeds-kv-heads" not in rules(out), out


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.24.0", "vllm/vllm-openai:v0.25.0"])
def test_push_prefill_tp_above_the_kv_heads_is_refused_on_0_24_and_0_25(tmp_path, capsys, image):
    _, out = _tp_pair(tmp_path, capsys, 16, 8, image, kv=PUSH)
    assert "tp-exceeds-kv-heads" in rules(out, "error"), out


@pytest.mark.parametrize(("image", "kv"), [("vllm/vllm-openai:v0.24.0", PUSH), ("vllm/vllm-openai:v0.30.0", PUSH),
                                           ("vllm/vllm-openai:v0.34.0", PUSH_034)])
def test_push_decode_tp_above_the_kv_heads_is_refused(tmp_path, capsys, image, kv):
    """Decode TP 16 > prefill TP 8 with 8 KV heads in push mode: the prefill's handshake asserts on its decode."""
    code, out = _tp_pair(tmp_path, capsys, 8, 16, image, kv=kv)
    assert code == 1 and "tp-exceeds-kv-heads" in rules(out, "error"), out


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.28.0", "vllm/vllm-openai:v0.34.0"])
def test_pull_decode_tp_above_the_kv_heads_is_not_this_rule(tmp_path, capsys, image):
    """Pull mode, decode TP 16 > prefill TP 8: decode validates a prefill that holds no replicated heads."""
    _, out = _tp_pair(tmp_path, capsys, 8, 16, image)
    assert "tp-exceeds-kv-heads" not in rules(out), out


def test_mla_prefill_tp_above_its_kv_heads_is_not_refused(tmp_path, capsys):
    """MLA's latent KV is whole on every rank (0.21.0+ exempt it: `if not self.use_mla and not self._has_mamba`)."""
    _, out = _tp_pair(tmp_path, capsys, 16, 8, "vllm/vllm-openai:v0.28.0", model="deepseek-ai/DeepSeek-V3")
    assert "tp-exceeds-kv-heads" not in rules(out), out


# --- 3. kv-cache-dtype-mismatch where a GPU-dependent config hook decides -----------------------------------------

B200 = "NVIDIA-B200"
H200 = "NVIDIA-H200"


def _glm_pair(tmp_path, capsys, p_kv: str | None, d_kv: str | None, p_gpu: str | None, d_gpu: str | None,
              image: str = "vllm/vllm-openai:v0.34.0", model: str = "zai-org/GLM-5-FP8") -> tuple[int, dict]:
    docs = []
    for role, kv, gpu in (("prefill", p_kv, p_gpu), ("decode", d_kv, d_gpu)):
        args = ["--tensor-parallel-size", "8", "--kv-transfer-config", NIXL, *(["--kv-cache-dtype", kv] if kv else [])]
        doc = _deployment(role, args, image=image, model=model)
        container = doc["spec"]["template"]["spec"]["containers"][0]
        container["resources"]["limits"]["nvidia.com/gpu"] = "8"
        container["env"] = [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
        if gpu:
            doc["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": gpu}
        docs.append(doc)
    return check(tmp_path, capsys, *docs)


@pytest.mark.parametrize("model", ["zai-org/GLM-5-FP8", "zai-org/GLM-5.2"])
def test_auto_against_fp8_e4m3_on_blackwell_is_one_hash(tmp_path, capsys, model):
    """GLM-5's hook turns auto into fp8_e4m3 on SM10x (0.34.0 config.py l.163-175): both roles hash 'fp8_e4m3'."""
    _, out = _glm_pair(tmp_path, capsys, None, "fp8_e4m3", B200, B200, model=model)
    assert "kv-cache-dtype-mismatch" not in rules(out), out


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.32.0", "vllm/vllm-openai:v0.34.0"])
def test_auto_against_fp8_e4m3_on_unpinned_gpus_is_a_warning_that_the_gpu_decides(tmp_path, capsys, image):
    code, out = _glm_pair(tmp_path, capsys, None, "fp8_e4m3", None, None, image=image)
    assert code == 0 and "kv-cache-dtype-mismatch" in rules(out, "warning"), out


def test_auto_against_fp8_e4m3_on_hopper_is_refused(tmp_path, capsys):
    code, out = _glm_pair(tmp_path, capsys, None, "fp8_e4m3", H200, H200)
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out


def test_auto_on_both_roles_on_different_gpu_families_is_refused(tmp_path, capsys):
    """Prefill on B200 hashes 'fp8_e4m3', decode on H200 'auto'."""
    code, out = _glm_pair(tmp_path, capsys, None, None, B200, H200)
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out


def test_before_the_hook_auto_against_fp8_e4m3_is_refused_whatever_the_gpu(tmp_path, capsys):
    """0.31.0's GlmMoeDsa hook has no KV cache rewrite (config.py 0.31.0 l.43-...): 'auto' stays 'auto'."""
    code, out = _glm_pair(tmp_path, capsys, None, "fp8_e4m3", B200, B200, image="vllm/vllm-openai:v0.31.0")
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out


def test_a_model_without_the_hook_is_compared_as_written(tmp_path, capsys):
    code, out = _glm_pair(tmp_path, capsys, None, "fp8_e4m3", None, None, model="deepseek-ai/DeepSeek-V3")
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out


def test_glm5_bfloat16_against_auto_stays_refused_on_unpinned_gpus(tmp_path, capsys):
    """No GPU makes 'bfloat16' and 'auto' (or 'fp8_e4m3') one string (set 87's decode-kv-bf16 entry, unpinned)."""
    code, out = _glm_pair(tmp_path, capsys, None, "bfloat16", None, None)
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out



@pytest.mark.parametrize(("arch", "version", "sparse", "expected"), [
    ("Glm5NextForCausalLM", (0, 33, 0), True, "fp8"), ("Glm5NextForConditionalGeneration", (0, 34, 0), None, "fp8"),
    ("Glm5NextForCausalLM", (0, 32, 0), True, None), ("Glm5NextForCausalLM", (0, 34, 0), False, None),
    ("GlmMoeDsaForCausalLM", (0, 32, 0), None, "fp8_e4m3"), ("GlmMoeDsaForCausalLM", (0, 31, 0), None, None),
    ("DeepseekV32ForCausalLM", (0, 34, 0), True, None)])
def test_gpu_hooks_per_architecture_and_release(arch, version, sparse, expected):
    """Glm5NextModelConfig (0.33.0 config.py l.119-136) needs index_topk (sparse MLA); GlmMoeDsa rewrites from 0.32.0."""
    assert gpu_hooked_kv_cache_dtype("auto", arch, version, sparse) == expected
    assert gpu_hooked_kv_cache_dtype("fp8", arch, version, sparse) is None  # only auto is rewritten


# --- 4. MooncakeConnector pairs of unequal TP: 0.25.0-0.28.x judged as 0.24.0, a decode past the KV heads refused -----


def _mooncake_pair(tmp_path, capsys, p: int, d: int, image: str,
                   model: str = "meta-llama/Llama-3.1-8B-Instruct") -> tuple[int, dict]:
    docs = []
    for role, tp, kv_role in (("prefill", p, "kv_producer"), ("decode", d, "kv_consumer")):
        kv = json.dumps({"kv_connector": "MooncakeConnector", "kv_role": kv_role})
        doc = _deployment(role, ["--tensor-parallel-size", str(tp), "--kv-transfer-config", kv], image=image, model=model)
        doc["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = str(tp)
        docs.append(doc)
    return check(tmp_path, capsys, *docs)


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.20.0", "vllm/vllm-openai:v0.24.0", "vllm/vllm-openai:v0.25.0",
                                   "vllm/vllm-openai:v0.28.0"])
@pytest.mark.parametrize(("p", "d"), [(8, 16), (4, 16)])
def test_mooncake_decode_past_the_kv_heads_is_refused_before_0_30(tmp_path, capsys, image, p, d):
    code, out = _mooncake_pair(tmp_path, capsys, p, d, image)
    assert code == 1 and "mooncake-decode-kv-replicated" in rules(out, "error"), out


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.25.0", "vllm/vllm-openai:v0.28.0"])
@pytest.mark.parametrize(("p", "d"), [(2, 4), (4, 2), (2, 1), (16, 8)])
def test_mooncake_unequal_tp_on_0_25_to_0_28_is_judged_ok(tmp_path, capsys, image, p, d):
    """0.25.0-0.28.x run 0.24.0's TP mapping and length check: ratios within the heads (or a replicated prefill)
    pass, so the pair is judged ok instead of "not checked"."""
    code, out = _mooncake_pair(tmp_path, capsys, p, d, image)
    assert code == 0 and not out["notChecked"], out


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.30.0", "vllm/vllm-openai:v0.34.0"])
def test_mooncake_decode_past_the_kv_heads_from_0_30_is_not_this_rule(tmp_path, capsys, image):
    """0.30.0 caps the TP sizes by the KV heads in the length check (and its unequal-TP mapping is not read here)."""
    _, out = _mooncake_pair(tmp_path, capsys, 8, 16, image)
    assert "mooncake-decode-kv-replicated" not in rules(out), out


def test_mooncake_mla_decode_past_its_heads_is_not_this_rule(tmp_path, capsys):
    _, out = _mooncake_pair(tmp_path, capsys, 8, 16, "vllm/vllm-openai:v0.24.0", model="deepseek-ai/DeepSeek-V2-Lite")
    assert "mooncake-decode-kv-replicated" not in rules(out), out
