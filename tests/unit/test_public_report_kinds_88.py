"""Variants of the kind of fault the eighty-eighth public-report set (tests/unit/data/public_reports_88) found, with
negative controls: an engine whose weights per GPU exceed what it may use of its GPU's memory never starts (vLLM loads
the weights before the KV cache: torch.OutOfMemoryError while loading, or "No available memory for the cache blocks"),
and nothing said so (vllm-project/router's DeepSeek-V3-0324 on one 8 x H100-80GB pod, TP 1 x DP 8 with expert
parallelism, whose own recipe records the OOM). ``weights-exceed-gpu-memory`` counts a lower bound of the weights per
GPU from a well-known checkpoint's config.json (:mod:`pdd_operator.vllm.model_weights`) against an upper bound of the
GPU memory a node label pins (:mod:`pdd_operator.compat.gpu_memory`); anything unknown is not judged."""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.gpu_memory import max_memory_gib, product_memory_gib
from pdd_operator.vllm.known_models import known_config
from pdd_operator.vllm.model_weights import weight_shape
from tests.unit.test_turn2_variants import check, rules

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
H100 = ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3")
H200 = ("nvidia.com/gpu.product", "NVIDIA-H200")
GIB = 2**30


def _deployment(role: str, args: list[str], gpus: int = 8, image: str = "vllm/vllm-openai:v0.28.0",
                node: tuple[str, str] | None = H100) -> dict:
    """One engine of a prefill/decode pair as a Deployment pinned to a GPU product by ``nodeSelector``."""
    labels = {"app": "t", "role": role}
    container = {"name": "vllm", "image": image, "command": ["vllm", "serve"], "args": [*args, "--kv-transfer-config",
                                                                                         NIXL],
                 "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
    spec: dict = {"containers": [container]}
    if node:
        spec["nodeSelector"] = {node[0]: node[1]}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"t-{role}", "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": spec}}}


def _pair(tmp_path, capsys, prefill: list[str], decode: list[str] | None = None, **kw) -> tuple[int, dict]:
    return check(tmp_path, capsys, _deployment("prefill", prefill, **kw), _deployment("decode", decode or prefill, **kw))


DSV3_DP8_EP = ["deepseek-ai/DeepSeek-V3-0324", "--tensor-parallel-size", "1", "--data-parallel-size", "8",
               "--enable-expert-parallel", "--trust-remote-code"]
LLAMA_405B_TP8 = ["meta-llama/Meta-Llama-3.1-405B", "--tensor-parallel-size", "8"]


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.28.0", "vllm/vllm-openai:v0.34.0"])
def test_deepseek_v3_dp8_ep_on_one_h100_node_is_refused_in_every_release(tmp_path, capsys, image):
    code, out = _pair(tmp_path, capsys, DSV3_DP8_EP, image=image)
    assert code == 1 and "weights-exceed-gpu-memory" in rules(out, "error"), out


def test_deepseek_v3_tp8_with_a_memory_fraction_is_refused(tmp_path, capsys):
    """The router recipe's own question: TP 8 instead of DP 8 leaves about 79 GiB per GPU, above 0.9 x 80 GiB."""
    args = ["deepseek-ai/DeepSeek-V3-0324", "--tensor-parallel-size", "8", "--enable-expert-parallel",
            "--gpu-memory-utilization", "0.9"]
    code, out = _pair(tmp_path, capsys, args)
    assert code == 1 and "weights-exceed-gpu-memory" in rules(out, "error"), out


def test_a_dense_bf16_model_over_one_node_is_refused_on_the_decode_only(tmp_path, capsys):
    """Another model and family: Llama-3.1-405B in bfloat16, about 94.5 GiB per GPU at TP 8, on the decode's H100s;
    the prefill spans two nodes' worth with PP 2 and fits."""
    prefill = [*LLAMA_405B_TP8, "--pipeline-parallel-size", "2"]
    code, out = check(tmp_path, capsys, _deployment("prefill", prefill, gpus=16),
                      _deployment("decode", LLAMA_405B_TP8, node=("cloud.google.com/gke-accelerator", "nvidia-h100-80gb")))
    found = [f for r in out["results"] for f in r["findings"] if f["rule"] == "weights-exceed-gpu-memory"]
    assert code == 1 and found and all(f["message"].startswith("decode:") for f in found), out


def test_a_lone_engine_is_judged_too(tmp_path, capsys):
    """The recipe's prefill alone: its transfer is not checked, but an engine that cannot start is an error."""
    code, out = check(tmp_path, capsys, _deployment("prefill", DSV3_DP8_EP, image="vllm/vllm-openai:v0.11.0"))
    assert code == 1 and "weights-exceed-gpu-memory" in rules(out, "error"), out


@pytest.mark.parametrize(("args", "kw"), [
    (DSV3_DP8_EP, {"node": H200}),  # 141 GB GPUs hold about 94 GiB per rank
    (DSV3_DP8_EP, {"node": None}),  # no GPU product pinned: its memory is not known
    (["deepseek-ai/DeepSeek-V3-0324", "--tensor-parallel-size", "16", "--enable-expert-parallel"], {"gpus": 16}),
    ([*LLAMA_405B_TP8, "--cpu-offload-gb", "40"], {}),  # weights partly in host memory
    ([*LLAMA_405B_TP8, "--quantization", "fp8"], {}),  # quantized while loading: not counted here
    (["meta-llama/Meta-Llama-3.1-405B-Instruct-FP8", "--tensor-parallel-size", "8"], {}),  # not a known checkpoint
    (["meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "1"], {"gpus": 1}),
])
def test_what_fits_or_is_not_known_is_not_refused(tmp_path, capsys, args, kw):
    code, out = _pair(tmp_path, capsys, args, **kw)
    assert "weights-exceed-gpu-memory" not in rules(out), out


def test_weight_counts_match_the_published_sizes():
    """Lower bounds near the checkpoints' published sizes: DeepSeek-V3 671B FP8 (bfloat16 embeddings), Llama-3.1-405B
    and -8B in bfloat16, DeepSeek-V2-Lite 15.7B in bfloat16."""
    def total(model):
        shape = weight_shape(known_config(model)[0])
        return (shape.split + shape.replicated + shape.experts) / 1e9
    assert 660 < total("deepseek-ai/DeepSeek-V3-0324") < 675
    assert 800 < total("meta-llama/Meta-Llama-3.1-405B") < 812
    assert 15.5 < total("meta-llama/Meta-Llama-3.1-8B-Instruct") < 16.1
    assert 30 < total("deepseek-ai/DeepSeek-V2-Lite") < 31.5
    shape = weight_shape(known_config("deepseek-ai/DeepSeek-V3")[0])
    assert 90 < shape.per_gpu(1, 1, 8) / GIB < 95  # EP splits only the routed experts
    assert shape.per_gpu(8, 1, None) == pytest.approx(shape.per_gpu(8, 1, 8))
    assert weight_shape({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
                         "vocab_size": 128256, "num_attention_heads": 32, "intermediate_size": 14336,
                         "torch_dtype": "bfloat16", "quantization_config": {"quant_method": "awq"}}) is None


def test_gpu_memory_upper_bounds():
    assert product_memory_gib("NVIDIA-H100-80GB-HBM3") == 80
    assert product_memory_gib("nvidia-a100-80gb") == 80
    assert product_memory_gib("NVIDIA-A100-SXM4-40GB") == 40
    assert product_memory_gib("NVIDIA-H200") == 141
    assert product_memory_gib("NVIDIA-B200") == 192
    assert product_memory_gib("nvidia-l4") == 24
    assert product_memory_gib("Tesla-V100-SXM2-32GB") == 32
    assert product_memory_gib("NVIDIA-RTX-PRO-6000") is None
    assert max_memory_gib(["NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"]) == 141
    assert max_memory_gib(["NVIDIA-H100-80GB-HBM3", "NVIDIA-RTX-PRO-6000"]) is None
    assert max_memory_gib(None) is None
