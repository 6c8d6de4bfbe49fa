"""Variants of what the ninety-third public-report set (tests/unit/data/public_reports_93) taught, with negative
controls: prefill and decode placed on different GPUs.

1. ``attention-backend-gpu-default``: with no backend named, vLLM picks one per GPU (FLASHINFER first on compute
   capability 10.x, FLASH_ATTN elsewhere; with an fp8 KV cache FLASH_ATTN only on 9.x), and the name is a factor of
   the NIXL compatibility hash, so two pinned GPUs whose choices differ are refused; one pinned role and one left to
   the scheduler is a warning. The GPU is read from any placement label (GPU feature discovery's product, GKE's
   accelerator, cloud instance types).
2. ``attention-backend-mismatch``: a ROCm backend named on one role while the other runs vLLM's CUDA platform, which
   never picks a ROCm backend itself.
3. Documentation placeholders (``<prefill_kv_layout>``) are values the guide's reader fills in: not checked, never a
   refusal of two "layouts".
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.attention_backends import default_backend_at
from pdd_operator.vllm.expansion import PLACEHOLDER_WHY, opaque_value, placeholder
from tests.unit.test_turn2_variants import KV, POD_IP, check, container, rules, workload

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"  # dense, head size 128
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
H200 = {"nvidia.com/gpu.product": "NVIDIA-H200"}
A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
L40S = {"nvidia.com/gpu.product": "NVIDIA-L40S"}
B200 = {"nvidia.com/gpu.product": "NVIDIA-B200"}
GB200 = {"nvidia.com/gpu.product": "NVIDIA-GB200"}


def _pair(p_sel, d_sel, image="vllm/vllm-openai:v0.20.0", model=LLAMA, p_extra=(), d_extra=(), p_pod=None, d_pod=None):
    docs = []
    for role, sel, extra, pod in (("prefill", p_sel, p_extra, p_pod), ("decode", d_sel, d_extra, d_pod)):
        c = container([model, "--kv-transfer-config", KV, *extra], image=image)
        spec = dict(pod or {})
        if sel:
            spec["nodeSelector"] = sel
        docs.append(workload(f"m-{role}", role, c, app="m", pod=spec))
    return docs


def _messages(out: dict, rule: str) -> list[str]:
    return [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule]


# --- the default backend per GPU and KV dtype, as a pure function ------------------------------------------------


@pytest.mark.parametrize(("capability", "head", "kv", "expected"), [
    ((9, 0), 128, None, "FLASH_ATTN"),
    ((10, 0), 128, None, "FLASHINFER"),
    ((8, 0), 128, "auto", "FLASH_ATTN"),
    ((9, 0), 128, "fp8", "FLASH_ATTN"),        # FA3 on Hopper takes fp8
    ((8, 0), 128, "fp8", "FLASHINFER"),        # FLASH_ATTN refuses fp8 without FA3 on 9.x
    ((8, 9), 64, "fp8_e4m3", "FLASHINFER"),
    ((12, 0), 256, "fp8", "FLASHINFER"),
    ((10, 0), 128, "fp8", "FLASHINFER"),
    ((8, 0), 96, "fp8", None),                 # FlashInfer does not serve head size 96: not decided here
    ((7, 0), 128, "fp8", None),
    ((9, 0), 128, "fp8_e5m2", None),           # other dtypes not decided
    ((8, 0), 128, "nvfp4", None),
])
def test_default_backend_per_gpu_and_kv_dtype(capability, head, kv, expected):
    assert default_backend_at(capability, head, (0, 20, 0), kv) == expected


# --- 1. both roles pinned to GPUs of different capability ---------------------------------------------------------


@pytest.mark.parametrize(("p_sel", "d_sel"), [
    (B200, H100),
    (H200, B200),
    (GB200, A100),
    ({"cloud.google.com/gke-accelerator": "nvidia-b200"}, {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}),
    ({"cloud.google.com/gke-accelerator": "nvidia-b200"}, H200),       # two label sources, one per role
    ({"node.kubernetes.io/instance-type": "p6-b200.48xlarge"}, {"node.kubernetes.io/instance-type": "p5.48xlarge"}),
    ({"node.kubernetes.io/instance-type": "Standard_ND128isr_NDR_GB200_v6"},
     {"node.kubernetes.io/instance-type": "Standard_ND96isr_H100_v5"}),
])
def test_pinned_gpus_whose_default_backends_differ_are_refused(tmp_path, capsys, p_sel, d_sel):
    code, out = check(tmp_path, capsys, *_pair(p_sel, d_sel))
    assert code == 1 and "attention-backend-gpu-default" in rules(out, "error"), out
    assert "FLASHINFER" in _messages(out, "attention-backend-gpu-default")[0]


def test_the_gpu_read_from_required_node_affinity(tmp_path, capsys):
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-B200"]}]}]}}}
    code, out = check(tmp_path, capsys, *_pair(None, H100, p_pod={"affinity": affinity}))
    assert code == 1 and "attention-backend-gpu-default" in rules(out, "error"), out


@pytest.mark.parametrize(("p_sel", "d_sel"), [
    (H100, A100),          # FLASH_ATTN on both (FA3 and FA2 are one backend name)
    (H100, L40S),
    (B200, GB200),         # FLASHINFER on both
    (H100, H200),
])
def test_pinned_gpus_whose_default_backends_agree_pass(tmp_path, capsys, p_sel, d_sel):
    _, out = check(tmp_path, capsys, *_pair(p_sel, d_sel))
    assert "attention-backend-gpu-default" not in rules(out), out


def test_an_fp8_kv_cache_makes_hopper_and_ampere_pick_different_backends(tmp_path, capsys):
    fp8 = ("--kv-cache-dtype", "fp8")
    code, out = check(tmp_path, capsys, *_pair(H100, A100, p_extra=fp8, d_extra=fp8))
    assert code == 1 and "attention-backend-gpu-default" in rules(out, "error"), out
    _, out = check(tmp_path, capsys, *_pair(H100, H200, p_extra=fp8, d_extra=fp8))  # both 9.x: FA3 on both
    assert "attention-backend-gpu-default" not in rules(out), out


def test_one_backend_named_on_both_roles_makes_mixed_gpus_agree(tmp_path, capsys):
    fi = ("--attention-backend", "FLASHINFER")
    _, out = check(tmp_path, capsys, *_pair(B200, H100, p_extra=fi, d_extra=fi))
    assert not rules(out, "error") & {"attention-backend-gpu-default", "attention-backend-mismatch"}, out


def test_not_judged_before_the_releases_read_or_for_mla(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_pair(B200, H100, image="vllm/vllm-openai:v0.17.1"))
    assert "attention-backend-gpu-default" not in rules(out), out
    _, out = check(tmp_path, capsys, *_pair(B200, H100, model="deepseek-ai/DeepSeek-V2-Lite-Chat"))
    assert "attention-backend-gpu-default" not in rules(out), out


def test_a_disabled_handshake_check_is_a_warning(tmp_path, capsys):
    kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both",
                     "kv_connector_extra_config": {"enforce_handshake_compat": False}})
    docs = _pair(B200, H100)
    for d in docs:
        args = d["spec"]["template"]["spec"]["containers"][0]["args"]
        args[args.index("--kv-transfer-config") + 1] = kv
    _, out = check(tmp_path, capsys, *docs)
    assert "attention-backend-gpu-default" in rules(out, "warning") - rules(out, "error"), out


# --- 1b. one role pinned, the other left to the scheduler --------------------------------------------------------


def test_one_role_pinned_the_other_left_to_the_scheduler_is_a_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(B200, None))
    assert code == 0 and "attention-backend-gpu-default" in rules(out, "warning"), out
    _, out = check(tmp_path, capsys, *_pair(None, None))      # neither pinned: one GPU type assumed
    assert "attention-backend-gpu-default" not in rules(out), out


def test_pod_affinity_to_the_pinned_role_holds_no_warning(tmp_path, capsys):
    follow = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "m", "llm-d.ai/role": "prefill"}},
         "topologyKey": "kubernetes.io/hostname"}]}}}
    _, out = check(tmp_path, capsys, *_pair(B200, None, d_pod=follow))
    assert "attention-backend-gpu-default" not in rules(out), out


# --- 2. a ROCm backend named on one role, the other on CUDA -------------------------------------------------------


def _rocm_cuda(d_image="vllm/vllm-openai:v0.20.0", d_gpu="nvidia.com/gpu", version="v0.20.0"):
    p = container([LLAMA, "--kv-transfer-config", KV, "--attention-backend", "ROCM_ATTN"],
                  image=f"rocm/vllm:{version}")
    p["resources"] = {"limits": {"amd.com/gpu": "1", "rdma/ib": "1"}}
    d = container([LLAMA, "--kv-transfer-config", KV], image=d_image)
    d["resources"] = {"limits": {d_gpu: "1", "rdma/ib": "1"}}
    return [workload("m-prefill", "prefill", p, app="m"), workload("m-decode", "decode", d, app="m")]


def test_rocm_backend_against_a_cuda_engine_is_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_rocm_cuda())
    assert code == 1 and "attention-backend-mismatch" in rules(out, "error"), out
    assert "never a ROCm backend" in " ".join(_messages(out, "attention-backend-mismatch"))


def test_rocm_backend_on_one_role_of_a_rocm_pair_is_not_this_refusal(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_rocm_cuda(d_image="rocm/vllm:v0.20.0", d_gpu="amd.com/gpu"))
    assert "never a ROCm backend" not in " ".join(_messages(out, "attention-backend-mismatch")), out


# --- 3. documentation placeholders --------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "is_placeholder"), [
    ("<prefill_kv_layout>", True), ("<cuda_ip>", True), ("<image name to be updated>", True),
    ("<your-gaudi-node-hostname>", True),
    ("<s>", False), ("</s>", False), ("<|im_end|>", False), ("<unknown:BLOCK>", False), ("HND", False),
    ("a <b> c", False), ("<1>", False),
])
def test_placeholder(value, is_placeholder):
    assert placeholder(value) is is_placeholder
    assert (opaque_value(value, ["vllm", "serve"]) == PLACEHOLDER_WHY) is is_placeholder


def test_placeholder_layouts_and_block_sizes_are_not_checked_not_refused(tmp_path, capsys):
    docs = []
    for role in ("prefill", "decode"):
        c = container([LLAMA, "--kv-transfer-config", KV, "--block-size", f"<{role}_block_size>"],
                      env=[{"name": "VLLM_KV_CACHE_LAYOUT", "value": f"<{role}_kv_layout>"}])
        docs.append(workload(f"m-{role}", role, c, app="m"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and not rules(out, "error"), out
    assert "placeholder" in json.dumps(out["notChecked"])
    # written values are still judged
    docs[1]["spec"]["template"]["spec"]["containers"][0]["env"][-1]["value"] = "NHD"
    docs[0]["spec"]["template"]["spec"]["containers"][0]["env"][-1]["value"] = "HND"
    for d in docs:
        args = d["spec"]["template"]["spec"]["containers"][0]["args"]
        args[args.index("--block-size") + 1] = "16"
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "kv-layout-mismatch" in rules(out, "error"), out


def test_unused_pod_ip():  # the helpers' side-channel host stays the pod IP (no placeholder involved)
    assert not placeholder(POD_IP["valueFrom"]["fieldRef"]["fieldPath"])
