"""Variants of what the forty-fourth public-report set (tests/unit/data/public_reports_44) taught, with negative
controls: P/D off NVIDIA CUDA.

- vLLM's NIXL worker accepts a ``kv_buffer_device`` per platform and release (``_NIXL_SUPPORTED_DEVICE``: cpu only on
  CPU and TPU engines, xpu on XPU only from 0.17.0, cpu on CUDA only from 0.11.1) and defaults it to "cuda" until
  0.18.0 (``kv-buffer-device-unsupported``, :mod:`pdd_operator.vllm.nixl_devices`);
- an XPU's or AMD GPU's device buffer registers as VRAM like a CUDA one (``kv-buffer-device-mismatch``);
- ROCM_ATTN refuses a KV connector from 0.23.0, ROCM_AITER_UNIFIED_ATTN until 0.30.0 (``attention-backend-kv-connector``).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.rules.backend_connector import refuses_kv_connector
from pdd_operator.vllm.nixl_devices import buffer_refusal, nixl_device_type, nixl_memory_type
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload


def _kv(buffer=None, connector="NixlConnector"):
    cfg = {"kv_connector": connector, "kv_role": "kv_both"}
    if buffer:
        cfg["kv_buffer_device"] = buffer
    return json.dumps(cfg)


def _pair(model, image, kv_p, kv_d, resources, args=(), env=(), kind="Deployment", command=("vllm", "serve")):
    docs = []
    for role, kv in (("prefill", kv_p), ("decode", kv_d)):
        c = {"name": "vllm", "image": image, "command": list(command),
             "args": [model, *args, "--kv-transfer-config", kv], "env": [POD_IP, *env],
             "resources": {"limits": dict(resources)}}
        docs.append(workload(f"m-{role}", role, c, kind=kind, app="m"))
    return docs


# --- the device table and the default, as pure functions -------------------------------------------------------


@pytest.mark.parametrize(("version", "device", "written", "refused"), [
    ((0, 12, 0), "cpu", None, "cpu with cuda kv_buffer is not supported."),   # the default is cuda to 0.17.x
    ((0, 18, 0), "cpu", None, None),                                          # then the platform's device_type
    ((0, 16, 0), "xpu", "xpu", "xpu with xpu kv_buffer is not supported."),
    ((0, 17, 0), "xpu", "xpu", None),
    ((0, 11, 0), "cuda", "cpu", "cuda with cpu kv_buffer is not supported."),  # CUDA host buffer from 0.11.1
    ((0, 11, 1), "cuda", "cpu", None),
    ((0, 10, 1), "xpu", "cpu", "xpu is not supported."),
    ((0, 33, 0), "tpu", None, "tpu with tpu kv_buffer is not supported."),
    ((0, 33, 0), "tpu", "cpu", None),
    ((0, 10, 0), "cpu", None, None),                                          # no table before 0.10.1
])
def test_the_device_table_per_release(version, device, written, refused):
    assert buffer_refusal(version, device, written) == refused


def test_the_platform_comes_from_resources_and_vllm_images_not_from_a_cuda_image_alone():
    assert nixl_device_type("vllm/vllm-openai:v0.20.0", {"nvidia.com/gpu": "1"}) == "cuda"
    assert nixl_device_type("rocm/vllm:latest", {"amd.com/gpu": "8"}) == "cuda"
    assert nixl_device_type("intel/vllm:0.17.0-xpu", {}) == "xpu"
    assert nixl_device_type("vllm/vllm-tpu:v0.11.1", {}) == "tpu"
    assert nixl_device_type("public.ecr.aws/q9t5s3a7/vllm-arm64-cpu-release-repo:v0.15.0", {}) == "cpu"
    assert nixl_device_type("vllm/vllm-openai:v0.20.0", {}) is None
    # Dynamo's CUDA runtime image on an Intel GPU claimed through DRA, told so by VLLM_TARGET_DEVICE
    assert nixl_device_type("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.1", {}, {"VLLM_TARGET_DEVICE": "xpu"}) == "xpu"
    assert nixl_device_type("vllm/vllm-openai:v0.20.0", {"nvidia.com/gpu": "1"}, {"VLLM_TARGET_DEVICE": "xpu"}) is None
    assert nixl_device_type("vllm-gaudi:1.22", {"habana.ai/gaudi": "1"}) is None  # its plugin adds its own rows
    assert nixl_memory_type("xpu", "xpu") == nixl_memory_type("cuda", None) == "VRAM"
    assert nixl_memory_type("xpu", "cpu") == nixl_memory_type("cpu", None) == "DRAM"


# --- kv-buffer-device-unsupported on manifests ----------------------------------------------------------------


def test_a_tpu_engine_without_a_host_buffer_is_refused(tmp_path, capsys):
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-tpu:v0.11.1", _kv(), _kv(), {"google.com/tpu": "8"},
                 args=("--tensor-parallel-size", "8"), kind="StatefulSet")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "kv-buffer-device-unsupported" in rules(out, "error")
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-tpu:v0.11.1", _kv("cpu"), _kv("cpu"),
                 {"google.com/tpu": "8"}, args=("--tensor-parallel-size", "8"), kind="StatefulSet")
    code, out = check(tmp_path, capsys, *docs)
    assert "kv-buffer-device-unsupported" not in rules(out)


def test_an_arm_cpu_engine_without_kv_buffer_device_is_refused_only_before_the_platform_default(tmp_path, capsys):
    image = "public.ecr.aws/q9t5s3a7/vllm-arm64-cpu-release-repo:v{}"
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-0.6B", image.format("0.15.0"), _kv(), _kv(),
                                               {"cpu": "16", "memory": "32Gi"}, kind="StatefulSet"))
    assert code == 1 and "kv-buffer-device-unsupported" in rules(out, "error")
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-0.6B", image.format("0.19.1"), _kv(), _kv(),
                                               {"cpu": "16", "memory": "32Gi"}, kind="StatefulSet"))
    assert "kv-buffer-device-unsupported" not in rules(out)


def test_an_unknown_release_is_a_warning_where_only_some_releases_refuse(tmp_path, capsys):
    image = "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:latest"
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-0.6B", image, _kv(), _kv(), {"cpu": "16"}))
    assert "kv-buffer-device-unsupported" in rules(out, "warning")
    assert "kv-buffer-device-unsupported" not in rules(out, "error")
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-0.6B", image, _kv("cuda"), _kv("cuda"), {"cpu": "16"}))
    assert code == 1 and "kv-buffer-device-unsupported" in rules(out, "error")


def test_xpu_device_memory_before_0_17_is_refused_and_the_xpu_default_after_0_18_is_not(tmp_path, capsys):
    env = ({"name": "VLLM_TARGET_DEVICE", "value": "xpu"},)
    res = {"gpu.intel.com/i915": "1"}
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen2.5-7B-Instruct", "intel/vllm:0.14.0-xpu", _kv("xpu"),
                                               _kv("xpu"), res, args=("--block-size", "64"), env=env))
    assert code == 1 and "kv-buffer-device-unsupported" in rules(out, "error")
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen2.5-7B-Instruct", "intel/vllm:0.18.0-xpu", _kv(), _kv(),
                                               res, args=("--block-size", "64"), env=env))
    assert "kv-buffer-device-unsupported" not in rules(out)


def test_a_cuda_host_buffer_is_refused_on_0_11_0_only(tmp_path, capsys):
    res = {"nvidia.com/gpu": "1"}
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.11.0", _kv("cpu"), _kv("cpu"),
                                               res, kind="StatefulSet"))
    assert code == 1 and "kv-buffer-device-unsupported" in rules(out, "error")
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.12.0", _kv("cpu"), _kv("cpu"),
                                               res, kind="StatefulSet"))
    assert "kv-buffer-device-unsupported" not in rules(out)


def test_an_xpu_claimed_through_dra_under_a_cuda_image_is_judged_as_xpu(tmp_path, capsys):
    env = ({"name": "VLLM_TARGET_DEVICE", "value": "xpu"},)
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-0.6B", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.1",
                                               _kv("xpu"), _kv("xpu"), {}, args=("--block-size", "64"), env=env))
    assert "kv-buffer-device-unsupported" not in rules(out)


# --- kv-buffer-device-mismatch: XPU and AMD device buffers are VRAM ------------------------------------------------


def test_an_amd_gpu_decode_in_vram_against_a_host_buffer_prefill_is_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai-rocm:v0.30.0",
                                               _kv("cpu"), _kv(), {"amd.com/gpu": "1"}, kind="StatefulSet"))
    assert code == 1 and "kv-buffer-device-mismatch" in rules(out, "error")


def test_xpu_device_buffers_on_both_roles_match(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-0.6B", "intel/vllm:0.28.0-xpu", _kv("xpu"), _kv("xpu"),
                                               {"gpu.intel.com/xe": "1"}, args=("--block-size", "64")))
    assert "kv-buffer-device-mismatch" not in rules(out)
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-0.6B", "intel/vllm:0.28.0-xpu", _kv("xpu"), _kv("cpu"),
                                               {"gpu.intel.com/xe": "1"}, args=("--block-size", "64")))
    assert code == 1 and "kv-buffer-device-mismatch" in rules(out, "error")


# --- attention-backend-kv-connector ---------------------------------------------------------------------------


def test_the_backends_that_refuse_a_kv_connector_per_release():
    assert refuses_kv_connector("ROCM_ATTN", (0, 23, 0)) and refuses_kv_connector("rocm_attn", (0, 34, 0))
    assert not refuses_kv_connector("ROCM_ATTN", (0, 22, 0))
    assert refuses_kv_connector("ROCM_AITER_UNIFIED_ATTN", (0, 29, 0))
    assert not refuses_kv_connector("ROCM_AITER_UNIFIED_ATTN", (0, 30, 0))
    assert not refuses_kv_connector("ROCM_AITER_FA", (0, 29, 0))


def test_rocm_attn_with_nixl_is_refused_on_an_mi355x_statefulset(tmp_path, capsys):
    docs = _pair("Qwen/Qwen3-32B", "vllm/vllm-openai-rocm:v0.25.0", _kv(), _kv(), {"amd.com/gpu": "4"},
                 args=("--tensor-parallel-size", "4", "--attention-backend", "ROCM_ATTN"), kind="StatefulSet")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "attention-backend-kv-connector" in rules(out, "error")


def test_aiter_unified_with_nixl_is_refused_before_0_30_and_accepted_from_it(tmp_path, capsys):
    args = ("--attention-backend", "ROCM_AITER_UNIFIED_ATTN", "--block-size", "64")
    code, out = check(tmp_path, capsys, *_pair("meta-llama/Llama-3.3-70B-Instruct", "vllm/vllm-openai-rocm:v0.27.0",
                                               _kv(), _kv(), {"amd.com/gpu": "1"}, args=args))
    assert code == 1 and "attention-backend-kv-connector" in rules(out, "error")
    code, out = check(tmp_path, capsys, *_pair("meta-llama/Llama-3.3-70B-Instruct", "vllm/vllm-openai-rocm:v0.31.0",
                                               _kv(), _kv(), {"amd.com/gpu": "1"}, args=args))
    assert "attention-backend-kv-connector" not in rules(out)


def test_an_unknown_release_with_rocm_attn_is_a_warning(tmp_path, capsys):
    args = ("--attention-backend", "ROCM_ATTN")
    code, out = check(tmp_path, capsys, *_pair("meta-llama/Llama-3.1-8B-Instruct", "rocm/vllm:latest", _kv(), _kv(),
                                               {"amd.com/gpu": "1"}, args=args))
    assert "attention-backend-kv-connector" in rules(out, "warning")
    assert "attention-backend-kv-connector" not in rules(out, "error")
