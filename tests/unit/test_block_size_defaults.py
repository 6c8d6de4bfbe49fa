"""``--block-size`` on one role only, judged at the size vLLM gives the other role per version
(pdd_operator.vllm.block_size, read in the 0.11.1 ... 0.33.0 wheels): 16 for a plain-attention model on CUDA up to
0.28 (platforms/cuda.py sets it before 0.18; from 0.18 every CUDA backend's get_preferred_block_size(16) keeps 16),
on ROCm before 0.19 (64 with the AITER unified-attention env from 0.13), 128 on the CPU from 0.11.1; from 0.29 on
CUDA (FlashAttention 4 with head size 256 prefers 128) and from 0.19 on ROCm (AITER's backend prefers 64) only
likely, so a warning naming it. Through ``pdd check`` on Deployment pairs, a PDDeployment, a Dynamo graph and
LeaderWorkerSets, each with negative controls."""

from __future__ import annotations

import pytest

from pdd_operator.vllm.architectures import Architecture
from pdd_operator.vllm.block_size import default_block_size, likely_block_size
from tests.unit.test_turn2_variants import KV, check, container, pd, rules

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
#: A Llama 3.1 fine-tune whose config.json the checker does not know: its head size is unknown.
FINE_TUNE = "NousResearch/Hermes-3-Llama-3.1-8B"
GPU = {"nvidia.com/gpu": "1"}
AMD = {"amd.com/gpu": "1"}


def _finding(out: dict, rule: str) -> dict:
    (finding,) = [f for r in out["results"] for f in r["findings"] if f["rule"] == rule]
    return finding


# --- the size vLLM pins, per version and platform --------------------------------------------------------------


@pytest.mark.parametrize("version", [(0, 11, 1), (0, 14, 0), (0, 17, 1), (0, 18, 0), (0, 22, 0), (0, 28, 0)])
def test_cuda_pins_16_for_a_plain_attention_model_up_to_0_28(version):
    for family in (Architecture.DENSE, Architecture.MOE):
        assert default_block_size(version, "vllm/vllm-openai:v0", GPU, family) == 16
    # any CUDA backend of a plain-attention model keeps 16 before 0.29 (none overrides get_preferred_block_size)
    assert default_block_size(version, "vllm/vllm-openai:v0", GPU, Architecture.DENSE, {}, "FLASH_ATTN") == 16


@pytest.mark.parametrize("version", [(0, 29, 0), (0, 31, 0), (0, 33, 0)])
def test_cuda_from_0_29_pins_only_a_backend_that_keeps_16(version):
    likely = likely_block_size(version, "vllm/vllm-openai:v0", GPU, Architecture.DENSE)
    assert likely.size == 16 and "FlashAttention 4" in likely.depends_on
    assert default_block_size(version, "vllm/vllm-openai:v0", GPU, Architecture.DENSE) is None
    assert default_block_size(version, "vllm/vllm-openai:v0", GPU, Architecture.DENSE, {}, "FLASH_ATTN") is None
    for backend in ("FLASHINFER", "triton_attn", "FLEX_ATTENTION"):
        assert default_block_size(version, "vllm/vllm-openai:v0", GPU, Architecture.DENSE, {}, backend) == 16


def test_rocm_pins_16_or_the_aiter_64_before_0_19_and_nothing_after():
    aiter = {"VLLM_ROCM_USE_AITER": "1", "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": "True"}
    assert default_block_size((0, 15, 0), "rocm/vllm:v0.15.0", AMD, Architecture.DENSE) == 16
    assert default_block_size((0, 15, 0), "rocm/vllm:v0.15.0", AMD, Architecture.DENSE, aiter) == 64
    assert default_block_size((0, 18, 0), "rocm/vllm:v0.18.0", AMD, Architecture.DENSE, aiter) == 64
    # one of the two flags only, or a release before the branch (0.13): 16
    assert default_block_size((0, 15, 0), "rocm/vllm:v0.15.0", AMD, Architecture.DENSE,
                              {"VLLM_ROCM_USE_AITER": "1"}) == 16
    assert default_block_size((0, 12, 0), "rocm/vllm:v0.12.0", AMD, Architecture.DENSE, aiter) == 16
    likely = likely_block_size((0, 19, 1), "rocm/vllm:v0.19.1", AMD, Architecture.DENSE)
    assert likely.size == 16 and "ROCM_AITER_UNIFIED_ATTN" in likely.depends_on
    assert default_block_size((0, 19, 1), "rocm/vllm:v0.19.1", AMD, Architecture.DENSE) is None


@pytest.mark.parametrize("version", [(0, 11, 1), (0, 20, 0), (0, 32, 0), (0, 33, 0)])
def test_the_cpu_platform_pins_128(version):
    # platforms/cpu.py: 128 when none is given; CPU_ATTN (multiples of 32) keeps it from 0.33
    cpu = "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0"
    assert default_block_size(version, cpu, {}, Architecture.DENSE) == 128
    assert default_block_size(version, cpu, GPU, Architecture.MOE) == 128  # a CPU build whatever the pod asks for
    assert default_block_size(version, cpu, {}, Architecture.MLA) is None
    # 0.10.2/0.11.0: 128 with IPEX installed, else 16
    assert default_block_size((0, 11, 0), cpu, {}, Architecture.DENSE) is None


def test_no_size_where_the_platform_or_model_is_not_described():
    assert default_block_size((0, 20, 0), "vllm/vllm-tpu:v0.20.0", {}, Architecture.DENSE) is None
    # an NVIDIA GPU asked for by a ROCm image: which platform runs is not known
    assert default_block_size((0, 15, 0), "rocm/vllm:v0.15.0", GPU, Architecture.DENSE) is None
    for family in (Architecture.MLA, Architecture.HYBRID_SSM, Architecture.MULTIMODAL, None):
        assert likely_block_size((0, 20, 0), "vllm/vllm-openai:v0.20.0", GPU, family).size is None


# --- through pdd check: Deployment pairs --------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["v0.14.0", "v0.20.0", "v0.28.0"])
def test_decode_left_at_the_default_below_a_prefill_size_is_refused(tmp_path, capsys, version):
    # pull mode: the decode's block size must be a multiple of the prefill's (TransferTopology.block_size_ratio)
    docs = pd("t", ["--block-size", "32", "--kv-transfer-config", KV], ["--kv-transfer-config", KV],
              model=LLAMA, image=f"vllm/vllm-openai:{version}")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "block-size-direction" in rules(out, "error")
    assert "prefill 32, decode 16 (vLLM's default: no --block-size)" in _finding(out, "block-size-direction")["message"]
    assert "block-size-partial" not in rules(out)


@pytest.mark.parametrize("version", ["v0.14.0", "v0.24.0"])
def test_prefill_left_at_the_default_under_a_decode_multiple_passes(tmp_path, capsys, version):
    docs = pd("t", ["--kv-transfer-config", KV], ["--block-size", "32", "--kv-transfer-config", KV], model=LLAMA,
              image=f"vllm/vllm-openai:{version}")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and not rules(out, "error") and "block-size-partial" not in rules(out)


def test_from_0_29_the_default_is_a_warning_that_names_the_likely_size(tmp_path, capsys):
    docs = pd("t", ["--block-size", "32", "--kv-transfer-config", KV], ["--kv-transfer-config", KV], model=FINE_TUNE,
              image="vllm/vllm-openai:v0.30.0")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and not rules(out, "error")
    message = _finding(out, "block-size-partial")["message"]
    assert "decode most likely runs with 16, which does not pair with prefill's 32" in message and "FlashAttention 4" in message


def test_from_0_29_a_likely_default_that_pairs_says_so(tmp_path, capsys):
    docs = pd("t", ["--kv-transfer-config", KV], ["--block-size", "64", "--kv-transfer-config", KV], model=FINE_TUNE,
              image="vllm/vllm-openai:v0.30.0")
    code, out = check(tmp_path, capsys, *docs)
    message = _finding(out, "block-size-partial")["message"]
    assert code == 0 and "prefill most likely runs with 16, which pairs with decode's 64" in message


def test_from_0_29_a_named_backend_that_keeps_16_pins_it(tmp_path, capsys):
    docs = pd("t", ["--block-size", "32", "--kv-transfer-config", KV],
              ["--attention-backend", "FLASHINFER", "--kv-transfer-config", KV], model=LLAMA,
              image="vllm/vllm-openai:v0.30.0")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "block-size-direction" in rules(out, "error")


def test_an_mla_model_stays_a_warning(tmp_path, capsys):
    docs = pd("t", ["--block-size", "32", "--kv-transfer-config", KV], ["--kv-transfer-config", KV],
              model="deepseek-ai/DeepSeek-V2-Lite-Chat", image="vllm/vllm-openai:v0.20.0")
    code, out = check(tmp_path, capsys, *docs)
    assert "block-size-direction" not in rules(out) and "block-size-partial" in rules(out, "warning")


def _rocm(version: str, p_args: list[str], d_args: list[str], env: tuple = ()) -> list[dict]:
    docs = pd("t", [*p_args, "--kv-transfer-config", KV], [*d_args, "--kv-transfer-config", KV], model=LLAMA,
              image=f"rocm/vllm:{version}", env=env)
    for doc in docs:
        limits = doc["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
        limits["amd.com/gpu"] = limits.pop("nvidia.com/gpu")
    return docs


def test_rocm_with_aiter_unified_attention_defaults_to_64(tmp_path, capsys):
    aiter = ({"name": "VLLM_ROCM_USE_AITER", "value": "1"},
             {"name": "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION", "value": "1"})
    code, out = check(tmp_path, capsys, *_rocm("v0.15.0", ["--block-size", "64"], [], aiter))
    assert code == 0 and not rules(out, "error") and "block-size-partial" not in rules(out)
    code, out = check(tmp_path, capsys, *_rocm("v0.15.0", ["--block-size", "64"], []))
    assert code == 1 and "decode 16 (vLLM's default" in _finding(out, "block-size-direction")["message"]
    code, out = check(tmp_path, capsys, *_rocm("v0.20.0", ["--block-size", "64"], []))
    assert code == 0 and "ROCM_AITER_UNIFIED_ATTN" in _finding(out, "block-size-partial")["message"]


# --- a PDDeployment, a Dynamo graph, LeaderWorkerSets ---------------------------------------------------------


def test_a_pddeployment_with_blocksize_on_prefill_only(tmp_path, capsys):
    def doc(prefill: dict, decode: dict) -> dict:
        return {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "l"},
                "spec": {"model": {"name": LLAMA, "hfArchitecture": "LlamaForCausalLM"},
                         "engine": {"image": "vllm/vllm-openai:v0.24.0"},
                         "prefill": {"replicas": 1, **prefill}, "decode": {"replicas": 1, **decode}}}
    code, out = check(tmp_path, capsys, doc({"blockSize": 32}, {}))
    assert code == 1 and "spec.decode.blockSize" in _finding(out, "block-size-direction")["fields"]
    code, out = check(tmp_path, capsys, doc({}, {"blockSize": 32}))
    assert code == 0 and not rules(out, "error")


def _dynamo(prefill_extra: list[str], decode_extra: list[str], runtime: str = "1.2.1") -> dict:
    def worker(sub: str, extra: list[str]) -> dict:
        args = ["--model", LLAMA, "--disaggregation-mode", sub, "--kv-transfer-config", KV, *extra]
        return {"componentType": "worker", "subComponentType": sub, "replicas": 1,
                "resources": {"limits": {"gpu": "1"}},
                "extraPodSpec": {"mainContainer": {"image": f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{runtime}",
                                                   "command": ["python3", "-m", "dynamo.vllm"], "args": args}}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"services": {"VllmPrefillWorker": worker("prefill", prefill_extra),
                                  "VllmDecodeWorker": worker("decode", decode_extra)}}}


def test_a_dynamo_graph_on_vllm_0_20(tmp_path, capsys):
    # vllm-runtime 1.2.1 ships vLLM 0.20.1 (Dynamo's release table)
    code, out = check(tmp_path, capsys, _dynamo(["--block-size", "64"], []))
    assert code == 1 and "block-size-direction" in rules(out, "error")
    code, out = check(tmp_path, capsys, _dynamo([], ["--block-size", "64"]))
    assert code == 0 and not rules(out, "error")


def _lws(role: str, args: list[str]) -> dict:
    c = container([LLAMA, "--kv-transfer-config", KV, *args], image="vllm/vllm-openai:v0.26.0")
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": f"l-{role}", "labels": {"app": "l"}},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1, "leaderTemplate": {
                "metadata": {"labels": {"app": "l", "llm-d.ai/role": role}}, "spec": {"containers": [c]}}}}}


def test_leaderworkersets_on_vllm_0_26(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _lws("prefill", ["--block-size", "128"]), _lws("decode", []))
    assert code == 1 and "block-size-direction" in rules(out, "error")
    code, out = check(tmp_path, capsys, _lws("prefill", ["--block-size", "16"]), _lws("decode", []))
    assert code == 0 and not rules(out, "error") and "block-size-partial" not in rules(out)


@pytest.mark.parametrize(("prefill", "want"), [("256", 1), ("64", 0), ("128", 0)])
def test_cpu_images_judge_the_unset_role_at_128(tmp_path, capsys, prefill, want):
    docs = pd("t", ["--block-size", prefill, "--kv-transfer-config", KV], ["--kv-transfer-config", KV], model=LLAMA,
              image="public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.32.0")
    code, out = check(tmp_path, capsys, *docs)
    assert code == want and ("block-size-direction" in rules(out, "error")) == bool(want)
    assert "block-size-partial" not in rules(out)
