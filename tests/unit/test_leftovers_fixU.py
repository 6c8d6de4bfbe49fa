"""Leftovers of the held-out sets about what the checker knows (model configs, images), branch i9-fixU.

1. Block-quantized FP8 MoE checkpoints keep their ``weight_block_size`` in the known-config table. The snapshots of
   Qwen/Qwen3-235B-A22B-FP8, Qwen/Qwen3-30B-A3B-FP8 and zai-org/GLM-5{,.1,.2}-FP8 had their ``quantization_config``
   reduced to its scalar fields, which dropped the ``[128, 128]`` list, so ``fp8-moe-block-tp-indivisible`` could not
   judge them. Re-snapshotted from ai-dynamo/aiconfigurator ``aic-core/src/aiconfigurator_core/model_configs/
   <org>--<name>_config.json`` at 095f58a51c4c (the Hugging Face config.json copies: ``"weight_block_size": [128,
   128]`` in each), with ``modules_to_not_convert`` still dropped.
"""

from __future__ import annotations

import json

import pytest

from dev.gen_known_model_configs import HERE
from pdd_operator.vllm.known_models import known_config
from pdd_operator.vllm.model_config import facts_from_config
from pdd_operator.vllm.model_weights import weight_shape
from pdd_operator.vllm.versions import wrapped_nixl_version, wrapped_vllm_version
from tests.unit.test_leftover_kinds_27 import pair
from tests.unit.test_public_report_kinds_91 import NIXL, _llmisvc, _main
from tests.unit.test_turn2_variants import check, rules

# --- 1. FP8 weight blocks of the well-known MoE checkpoints -----------------------------------------------------


def _experts(config: dict) -> bool:
    text = config.get("text_config") or config
    return any(text.get(k) or config.get(k) for k in ("num_experts", "num_local_experts", "n_routed_experts"))


def test_every_fp8_moe_snapshot_keeps_its_weight_blocks():
    # an fp8 checkpoint whose experts are FP8 too (no moe_quant_algo naming another format for them) must keep the
    # block size the experts are split along; trimming the list away silences the rule
    for path in sorted((HERE / "snapshots").glob("*.json")):
        config = json.loads(path.read_text())
        quant = config.get("quantization_config") or (config.get("text_config") or {}).get("quantization_config")
        if not (isinstance(quant, dict) and quant.get("quant_method") == "fp8" and _experts(config)):
            continue
        if quant.get("moe_quant_algo"):
            continue
        assert quant.get("weight_block_size") == [128, 128], path.name


@pytest.mark.parametrize(("model_id", "expert_size", "hidden"), [
    ("Qwen/Qwen3-235B-A22B-FP8", 1536, 4096),
    ("Qwen/Qwen3-30B-A3B-FP8", 768, 2048),
    ("zai-org/GLM-5-FP8", 2048, 6144),
    ("zai-org/GLM-5.1-FP8", 2048, 6144),
    ("zai-org/GLM-5.2-FP8", 2048, 6144),
    ("deepseek-ai/DeepSeek-V3", 2048, 7168),
    ("moonshotai/Kimi-K2-Instruct", 2048, 7168),
    ("MiniMaxAI/MiniMax-M2", 1536, 3072),
])
def test_known_fp8_moe_checkpoints_give_their_expert_block_shape(model_id, expert_size, hidden):
    config, _ = known_config(model_id)
    assert config["quantization_config"]["weight_block_size"] == [128, 128]
    assert facts_from_config(config).fp8_moe_shape == (expert_size, hidden, 128, 128)


@pytest.mark.parametrize(("model_id", "tp", "version", "severity"), [
    # 1536 / 8 = 192 rows a rank: not a multiple of 128 up to 0.28; from 0.29 refined to gcd(128, 192, 4096) = 64
    ("Qwen/Qwen3-235B-A22B-FP8", 8, "0.28.0", "error"),
    ("Qwen/Qwen3-235B-A22B-FP8", 4, "0.28.0", None),
    ("Qwen/Qwen3-235B-A22B-FP8", 8, "0.29.0", None),
    # 768 / 4 = 192
    ("Qwen/Qwen3-30B-A3B-FP8", 4, "0.24.0", "error"),
    ("Qwen/Qwen3-30B-A3B-FP8", 2, "0.24.0", None),
    # 2048 / 8 = 256: whole blocks
    ("zai-org/GLM-5-FP8", 8, "0.28.0", None),
])
def test_fp8_moe_block_rule_judges_the_known_checkpoints(tmp_path, capsys, model_id, tp, version, severity):
    _, out = check(tmp_path, capsys, *pair(model_id, version, p_tp=tp, d_tp=tp))
    assert ("fp8-moe-block-tp-indivisible" in rules(out, severity or "error")) == (severity is not None)


# --- 2. weights of the MoE families the held-out sets use -------------------------------------------------------
#
# Published totals: Qwen3 model cards ("235B in total", "30.5B in total", Qwen3-Coder "480B in total"); Mistral's
# announcements (Mixtral 8x7B "46.7B total parameters", 8x22B "141B"); OpenAI's gpt-oss model card (Table 1:
# 116.83B and 20.91B); MiniMax-M2's model card ("230 billion total"); Kimi K2's ("1 trillion total", 1.04T in its
# report); GLM-4.5's ("355 billion total", GLM-4.5-Air "106 billion"); DeepSeek-V3 671B (without its 14B MTP module).
# GLM-4.5 is not in the table: its shape as the Hub config.json gives it, repeated as Megatron flags in
# zyzshishui/slime scripts/models/glm4.5-355B-A32B.sh and glm4.5-106B-A12B.sh (hidden 5120 / 4096, 92 / 46 layers,
# 96 heads, 8 KV heads of 128, dense FFN 12288 / 10944 for the first 3 / 1 layers, 160 / 128 experts and one shared
# of 1536 / 1408, vocab 151552, untied).

GLM45 = {"architectures": ["Glm4MoeForCausalLM"], "hidden_size": 5120, "num_hidden_layers": 92,
         "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288,
         "moe_intermediate_size": 1536, "n_routed_experts": 160, "n_shared_experts": 1, "first_k_dense_replace": 3,
         "vocab_size": 151552, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
GLM45_AIR = {**GLM45, "hidden_size": 4096, "num_hidden_layers": 46, "intermediate_size": 10944,
             "moe_intermediate_size": 1408, "n_routed_experts": 128, "first_k_dense_replace": 1}


def _params(config: dict) -> float:
    """Billions of counted parameters (the config read as unquantized bfloat16, 2 bytes each)."""
    plain = {k: v for k, v in config.items() if k != "quantization_config"} | {"torch_dtype": "bfloat16"}
    shape = weight_shape(plain)
    return (shape.split + shape.replicated + shape.experts) / 2e9


@pytest.mark.parametrize(("model", "published"), [
    ("Qwen/Qwen3-235B-A22B", 235), ("Qwen/Qwen3-30B-A3B", 30.5), ("Qwen/Qwen3-235B-A22B-FP8", 235),
    ("Qwen/Qwen3-Coder-480B-A35B-Instruct", 480),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", 46.7), ("mistralai/Mixtral-8x22B-v0.1", 141),
    ("openai/gpt-oss-120b", 116.83), ("openai/gpt-oss-20b", 20.91),
    ("MiniMaxAI/MiniMax-M2", 230), ("moonshotai/Kimi-K2-Instruct", 1040), ("deepseek-ai/DeepSeek-V3", 671),
    (GLM45, 355), (GLM45_AIR, 106),
])
def test_moe_counts_are_within_a_few_percent_below_the_published_totals(model, published):
    config = model if isinstance(model, dict) else known_config(model)[0]
    assert 0.97 * published < _params(config) < 1.01 * published


def test_storage_of_the_quantized_moe_checkpoints():
    # fp8: every linear and expert weight 1 byte, the embeddings in the checkpoint's dtype
    fp8 = weight_shape(known_config("Qwen/Qwen3-235B-A22B-FP8")[0])
    bf16 = weight_shape(known_config("Qwen/Qwen3-235B-A22B")[0])
    assert fp8.experts == pytest.approx(bf16.experts / 2) and 0.5 < fp8.split / bf16.split < 0.6
    # mxfp4 (gpt-oss): experts half a byte, attention unquantized; the copy names no torch_dtype: vLLM's auto
    # downcasts the float32 default to 16 bits
    oss = weight_shape(known_config("openai/gpt-oss-120b")[0])
    assert 56 < oss.experts / 1e9 < 58 and 4 < oss.split / 1e9 < 5
    assert weight_shape(known_config("openai/gpt-oss-120b")[0], "float32") is None


def test_qwen3_moe_dense_layers_follow_its_sparse_step():
    config = dict(known_config("Qwen/Qwen3-30B-A3B")[0])
    every = weight_shape(config)
    half = weight_shape({**config, "decoder_sparse_step": 2})
    listed = weight_shape({**config, "mlp_only_layers": [0, 1]})
    assert half.experts == pytest.approx(every.experts / 2) and half.split > every.split
    assert listed.experts == pytest.approx(every.experts * 46 / 48)
    assert weight_shape({**config, "decoder_sparse_step": "2"}) is None


@pytest.mark.parametrize("config", [
    {"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 48, "vocab_size": 151936,
     "num_attention_heads": 32, "moe_intermediate_size": 768, "torch_dtype": "bfloat16"},   # no expert count
    {**GLM45, "quantization_config": {"quant_method": "awq"}},
    {**GLM45, "architectures": ["Glm4MoeLiteForCausalLM"]},   # a family not counted
])
def test_unknown_moe_shapes_stay_uncounted(config):
    assert weight_shape(config) is None


@pytest.mark.parametrize(("args", "gpus", "refused"), [
    # Qwen3-235B-A22B in bfloat16: about 470 GB; TP 4 on H100-80GB holds about 110 GiB a GPU
    (["Qwen/Qwen3-235B-A22B", "--tensor-parallel-size", "4"], 4, True),
    (["Qwen/Qwen3-235B-A22B", "--tensor-parallel-size", "8"], 8, False),
    # the FP8 copy at TP 2: about 110 GiB a GPU
    (["Qwen/Qwen3-235B-A22B-FP8", "--tensor-parallel-size", "2"], 2, True),
    # Mixtral-8x22B in bfloat16 at TP 2: about 131 GiB a GPU
    (["mistralai/Mixtral-8x22B-Instruct-v0.1", "--tensor-parallel-size", "2"], 2, True),
    # gpt-oss-120b fits one H100 (about 57 GiB)
    (["openai/gpt-oss-120b", "--tensor-parallel-size", "1"], 1, False),
    # DP 4 without expert parallelism: vLLM still splits each expert over TP x DP (flatten_tp_across_dp), so the
    # experts of Qwen3-235B-A22B-FP8 take about 55 GiB a GPU, not 220
    (["Qwen/Qwen3-235B-A22B-FP8", "--tensor-parallel-size", "1", "--data-parallel-size", "4"], 4, False),
    # the same for DeepSeek-V3 (counted before): TP 2 x DP 8 puts about 46 GiB a GPU, TP 2 alone about 312
    (["deepseek-ai/DeepSeek-V3", "--tensor-parallel-size", "2", "--data-parallel-size", "8"], 16, False),
    (["deepseek-ai/DeepSeek-V3", "--tensor-parallel-size", "2"], 2, True),
])
def test_weights_rule_judges_the_moe_families(tmp_path, capsys, args, gpus, refused):
    from tests.unit.test_public_report_kinds_88 import _pair
    _, out = _pair(tmp_path, capsys, args, gpus=gpus)
    assert ("weights-exceed-gpu-memory" in rules(out, "error")) == refused, out


# --- 3. Dynamo vllm-runtime 1.5.x ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("image", "vllm", "nixl"), [
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0", (0, 28, 0), (1, 3, 2)),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0-efa", (0, 28, 0), (1, 3, 2)),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1", (0, 28, 0), None),
    # releases whose vLLM no source read here states stay unknown, never inferred from a neighbour
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.2", None, None),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.0", None, None),
])
def test_dynamo_runtime_releases_name_their_vllm(image, vllm, nixl):
    found = wrapped_vllm_version(image)
    assert (found[0] if found else None) == vllm
    assert ((wrapped_nixl_version(image) or (None,))[0]) == nixl
    if found:
        assert "releases-data" in found[1] or "release-artifacts" in found[1]


def test_a_dynamo_1_5_pair_is_judged_on_vllm_0_28(tmp_path, capsys):
    # the held-out set 90's overlays on vllm-runtime:1.5.0 read as vLLM 0.28.0, not "version unknown"
    docs = pair("Qwen/Qwen3-8B", "0.28.0")
    for doc in docs:
        doc["spec"]["template"]["spec"]["containers"][0]["image"] = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0"
    _, out = check(tmp_path, capsys, *docs)
    assert "vllm-version-unknown" not in rules(out)


# --- 5. a KServe P/D service whose engines name no KV connector -----------------------------------------------------
#
# kserve v0.15.0-v0.20.0 (the newest tag) config/llmisvcconfig/config-llm-{prefill,decode}-template.yaml add no P/D
# connector (v0.20.0's ${KV_TRANSFER_ARGS} is only an OffloadingConnector from kvCacheOffloading); kserve#6027, after
# v0.20.0, injects NixlConnector. The cluster's KServe is not in the files: a warning beside "not checked".


@pytest.mark.parametrize("api", ["v1alpha1", "v1alpha2"])
@pytest.mark.parametrize("kind", ["LLMInferenceService", "LLMInferenceServiceConfig"])
@pytest.mark.parametrize(("prefill_args", "decode_args", "image"), [
    (None, None, None),
    ("--max-model-len 8192", None, "ghcr.io/llm-d/llm-d-cuda:v0.8.0"),
    (None, "--gpu-memory-utilization 0.9", "vllm/vllm-openai:v0.20.0"),
])
def test_templated_pair_naming_no_connector_warns(tmp_path, capsys, api, kind, prefill_args, decode_args, image):
    svc = _llmisvc(_main(prefill_args, image), _main(decode_args, image), api=api, kind=kind)
    code, out = check(tmp_path, capsys, svc)
    assert code == 3 and out["notChecked"] and not rules(out, "error")
    found = [f for r in out["results"] for f in r["findings"] if f["rule"] == "kv-connector-missing"]
    assert [f["severity"] for f in found] == ["warning"] and "kserve#6027" in found[0]["message"]


@pytest.mark.parametrize(("prefill_args", "decode_args", "prefill_extra"), [
    (NIXL["kv_producer"], NIXL["kv_consumer"], None),                  # both name NixlConnector
    (None, None, {"kvCacheOffloading": {"cpu": "20Gi"}}),              # the template adds an offloading line there
    ("--kv_transfer_config '{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"}'", None, None),
])
def test_templated_pairs_with_a_connector_do_not_get_the_warning(tmp_path, capsys, prefill_args, decode_args,
                                                                 prefill_extra):
    svc = _llmisvc(_main(prefill_args), _main(decode_args), api="v1alpha2", prefill_extra=prefill_extra)
    code, out = check(tmp_path, capsys, svc)
    assert code == 3 and "kv-connector-missing" not in rules(out)


# --- 6. memlock-insufficient where IPC_LOCK is effective ----------------------------------------------------------
#
# Linux drivers/infiniband/core/umem.c ib_umem_get refuses a pin past RLIMIT_MEMLOCK only "&& !capable(CAP_IPC_LOCK)":
# a root process holding IPC_LOCK (added, or privileged) in the host's user namespace pins past any runtime ceiling.


def _memlock_pair(tmp_path, capsys, image, security, host_users=None):
    from tests.unit.test_public_report_kinds_14 import EFA, _kv, _model
    from tests.unit.test_public_report_kinds_14 import _pair as pair14
    kv = _kv(["LIBFABRIC"])
    docs = pair14(_model(kv), _model(kv), resources=EFA, security=security, image=image)
    if host_users is not None:
        for doc in docs:
            doc["spec"]["template"]["spec"]["hostUsers"] = host_users
    _, out = check(tmp_path, capsys, *docs)
    return [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "memlock-insufficient"]


@pytest.mark.parametrize(("image", "security", "host_users", "warned"), [
    ("vllm/vllm-openai:v0.28.0", {"capabilities": {"add": ["IPC_LOCK"]}}, None, None),   # root by default
    ("vllm/vllm-openai:v0.28.0", {"privileged": True}, None, None),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0", {"privileged": True, "runAsUser": 0}, None, None),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0", {"capabilities": {"add": ["IPC_LOCK"]}, "runAsUser": 0}, None,
     None),
    # Dynamo's runtime images run as USER dynamo: an added capability is not effective unless root is set
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0", {"capabilities": {"add": ["IPC_LOCK"]}}, None,
     "memlock ceiling is not checked"),
    # a pod user namespace: the capability is not held in the initial namespace capable() checks
    ("vllm/vllm-openai:v0.28.0", {"capabilities": {"add": ["IPC_LOCK"]}, "runAsUser": 0}, False,
     "memlock ceiling is not checked"),
    ("vllm/vllm-openai:v0.28.0", {"capabilities": {"add": ["IPC_LOCK"]}, "runAsUser": 1000}, None, "non-root"),
    ("vllm/vllm-openai:v0.28.0", {"runAsUser": 0}, None, "lacks the IPC_LOCK"),
])
def test_memlock_warning_only_where_ipc_lock_may_not_be_effective(tmp_path, capsys, image, security, host_users,
                                                                   warned):
    messages = _memlock_pair(tmp_path, capsys, image, security, host_users)
    if warned is None:
        assert not messages
    else:
        assert messages and all(warned in m for m in messages)
