"""Variants of what the fifty-sixth public-report set (tests/unit/data/public_reports_56) taught, with negative
controls: P/D on accelerators other than a GPU, as their forks publish it.

1. A shell or Slurm script whose host is an Intel Gaudi (vllm-gaudi), Huawei Ascend (vllm-ascend), AWS Neuron or
   Google TPU machine is no CUDA host: its GPU request stands for that accelerator's device-plugin resource
   (:func:`~pdd_operator.vllm.block_size.script_accelerator_resource`), so the NIXL device table of upstream's CUDA
   platform (``kv-buffer-device-unsupported``) does not refuse vllm-gaudi's ``kv_buffer_device`` "hpu", which its
   own platform accepts. A script that also shows a live NVIDIA or ROCm host, or two accelerators, stays as before;
   a comment shows nothing.
2. vllm-gaudi's heterogeneous NIXL connector (``VLLM_HPU_HETERO_KV_LAYOUT=true``, ``enable_permute_local_kv``, prefix
   caching off) saves the prefill's KV in ``agreed_block_size`` blocks (:mod:`pdd_operator.vllm.gaudi`): a decode
   block size that is a multiple of the agreed one but not of the prefill's is the plugin's path, a
   ``block-size-direction`` warning, not upstream's refusal; the refusal stands on a GPU, with prefix caching on,
   without the variable, or for a decode block the agreed size does not divide.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.block_size import script_accelerator_resource, script_gpu_resource
from pdd_operator.vllm.gaudi import hetero_saved_block_size
from tests.unit.cli_check import check_text
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload


def _script(tmp_path, capsys, text: str, *extra: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, "pd.sh", *extra)


def _kv(buffer: str, **more) -> str:
    return json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_buffer_device": buffer, **more})


def _pair_script(model: str, buffer: str, host: str = "", p_flags: str = "", d_flags: str = "",
                 kv_more: dict | None = None, env: str = "") -> str:
    """Two engines on one host, as vllm-gaudi's examples/nixl scripts start them (devices 2 and 6)."""
    kv = _kv(buffer, **(kv_more or {})).replace('"', '\\"')
    lines = ["#!/bin/bash", host]
    for dev, port, side, flags in (("2", 8300, 6559, p_flags), ("6", 8400, 5659, d_flags)):
        lines.append(f'{env} CUDA_VISIBLE_DEVICES={dev} VLLM_NIXL_SIDE_CHANNEL_PORT={side} vllm serve {model} '
                     f'--port {port} --enforce-eager {flags} --kv-transfer-config "{kv}" &')
    lines.append("wait")
    return "\n".join(lines) + "\n"


# --- 1. the host a script shows -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "resource"), [
    ("export LD_LIBRARY_PATH=/tmp/ucx/lib:/usr/lib/habanalabs:$LD_LIBRARY_PATH", "habana.ai/gaudi"),
    ("export UCX_TLS=ib,rc,gaudi_gdr", "habana.ai/gaudi"),
    ("HABANA_VISIBLE_MODULES=0,1 vllm serve m", "habana.ai/gaudi"),
    ("PT_HPU_LAZY_MODE=1 vllm serve m", "habana.ai/gaudi"),
    ("VLLM_HPU_HETERO_KV_LAYOUT=true vllm serve m", "habana.ai/gaudi"),
    ("hl-smi -Q index --format=csv", "habana.ai/gaudi"),
    ('vllm serve m --kv-transfer-config \'{\\"kv_connector\\":\\"NixlConnector\\",\\"kv_buffer_device\\":\\"hpu\\"}\'',
     "habana.ai/gaudi"),
    ("export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3", "huawei.com/Ascend910"),
    ("ls /dev/davinci* | wc -l", "huawei.com/Ascend910"),
    ('vllm serve m --kv-transfer-config \'{"kv_connector": "MooncakeConnectorV1", "kv_buffer_device": "npu"}\'',
     "huawei.com/Ascend910"),
    ("NEURON_RT_VISIBLE_CORES=0-7 vllm serve m", "aws.amazon.com/neuron"),
    ("TPU_VISIBLE_CHIPS=0 TPU_PROCESS_BOUNDS=1,1,1 vllm serve m", "google.com/tpu"),
    ("TPU_CHIPS_PER_PROCESS_BOUNDS=1,1,1 vllm serve m", "google.com/tpu"),
])
def test_an_accelerator_host_names_its_resource(text, resource):
    assert script_accelerator_resource(text) == resource
    assert script_gpu_resource(text) == resource


@pytest.mark.parametrize(("text", "resource"), [
    # a commented-out probe runs nothing: the Gaudi signs decide
    ("#SMI_BIN=$(which nvidia-smi || which rocm-smi)\nexport UCX_TLS=ib,rc,gaudi_gdr", "habana.ai/gaudi"),
    # a live NVIDIA or ROCm probe beside a Gaudi sign: not an accelerator host alone
    ("nvidia-smi\nexport UCX_TLS=ib,rc,gaudi_gdr", "nvidia.com/gpu"),
    ("export HIP_VISIBLE_DEVICES=0\nexport PT_HPU_LAZY_MODE=1", "amd.com/gpu"),
    # two accelerators: neither
    ("export ASCEND_RT_VISIBLE_DEVICES=0\nexport HABANA_VISIBLE_MODULES=0", "nvidia.com/gpu"),
    # HCCL is Habana's and Huawei's: no sign
    ("export HCCL_SOCKET_IFNAME=eth0", "nvidia.com/gpu"),
    ("vllm serve m", "nvidia.com/gpu"),
])
def test_mixed_or_commented_signs_keep_the_gpu_reading(text, resource):
    assert script_gpu_resource(text) == resource


@pytest.mark.parametrize("model", ["Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"])
@pytest.mark.parametrize("host", [
    "export LD_LIBRARY_PATH=/tmp/ucx_install/lib:/usr/lib/habanalabs:$LD_LIBRARY_PATH\nexport UCX_TLS=ib,rc,gaudi_gdr",
    "export HABANA_VISIBLE_MODULES=2,6",
    "",  # kv_buffer_device "hpu" alone shows the Gaudi host
])
def test_a_gaudi_script_with_an_hpu_buffer_is_not_refused_by_the_cuda_table(tmp_path, capsys, model, host):
    code, out = _script(tmp_path, capsys, _pair_script(model, "hpu", host), "--vllm-version", "0.26.0")
    assert "kv-buffer-device-unsupported" not in rules(out)
    assert code == 0, out


def test_a_cuda_script_with_an_hpu_buffer_is_still_refused(tmp_path, capsys):
    """Negative control: nvidia-smi shows a CUDA host, where vLLM's table has no "hpu" buffer."""
    text = _pair_script("Qwen/Qwen2.5-7B-Instruct", "hpu", "nvidia-smi -L\nexport UCX_TLS=ib,rc,gaudi_gdr")
    code, out = _script(tmp_path, capsys, text, "--vllm-version", "0.26.0")
    assert code == 1 and "kv-buffer-device-unsupported" in rules(out, "error")


def test_a_gaudi_script_still_gets_the_hash_rules(tmp_path, capsys):
    """vllm-gaudi keeps upstream's NIXL handshake: a KV dtype on one role is still refused."""
    text = _pair_script("Qwen/Qwen2.5-7B-Instruct", "hpu", "export UCX_TLS=ib,rc,gaudi_gdr",
                        d_flags="--kv-cache-dtype fp8_inc")
    code, out = _script(tmp_path, capsys, text, "--vllm-version", "0.26.0")
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error")
    assert "kv-buffer-device-unsupported" not in rules(out)


# --- 2. vllm-gaudi's agreed block size ----------------------------------------------------------------------------


@pytest.mark.parametrize(("env", "kv", "block", "prefix", "saved"), [
    ({"VLLM_HPU_HETERO_KV_LAYOUT": "true"}, {"enable_permute_local_kv": True,
                                             "kv_connector_extra_config": {"agreed_block_size": 64}}, 128, False, 64),
    ({"VLLM_HPU_HETERO_KV_LAYOUT": "TRUE"}, {"enable_permute_local_kv": True,
                                             "kv_connector_extra_config": {"agreed_block_size": "32"}}, 128, False, 32),
    # not smaller than its own: saved at its own size (no change)
    ({"VLLM_HPU_HETERO_KV_LAYOUT": "true"}, {"enable_permute_local_kv": True,
                                             "kv_connector_extra_config": {"agreed_block_size": 256}}, 128, False, None),
    # "1" is not "true" for vllm_gaudi/__init__.py
    ({"VLLM_HPU_HETERO_KV_LAYOUT": "1"}, {"enable_permute_local_kv": True,
                                          "kv_connector_extra_config": {"agreed_block_size": 64}}, 128, False, None),
    ({}, {"enable_permute_local_kv": True, "kv_connector_extra_config": {"agreed_block_size": 64}}, 128, False, None),
    ({"VLLM_HPU_HETERO_KV_LAYOUT": "true"}, {"kv_connector_extra_config": {"agreed_block_size": 64}}, 128, False, None),
    # prefix caching on (or left at its default) turns the post-processing off
    ({"VLLM_HPU_HETERO_KV_LAYOUT": "true"}, {"enable_permute_local_kv": True,
                                             "kv_connector_extra_config": {"agreed_block_size": 64}}, 128, None, None),
    ({"VLLM_HPU_HETERO_KV_LAYOUT": "true"}, {"enable_permute_local_kv": True,
                                             "kv_connector_extra_config": {"agreed_block_size": "x"}}, 128, False, None),
    ({"VLLM_HPU_HETERO_KV_LAYOUT": "true"}, {"enable_permute_local_kv": True,
                                             "kv_connector_extra_config": {"agreed_block_size": 64}}, None, False, None),
])
def test_the_saved_block_size(env, kv, block, prefix, saved):
    assert hetero_saved_block_size(env, kv, block, prefix) == saved


#: vllm-gaudi's image tags name its own release, which builds on the vLLM release of the same number.
VERSION = ("--vllm-version", "0.26.0")


def _gaudi_pair(p_block: int, d_block: int, agreed: int | None, *, env_value: str = "true", prefix_off: bool = True,
                resource: str = "habana.ai/gaudi", model: str = "meta-llama/Llama-3.1-8B",
                image: str = "registry.local/vllm-gaudi:v0.26.0") -> list[dict]:
    extra = {"agreed_block_size": agreed} if agreed is not None else {}
    kv = _kv("hpu", enable_permute_local_kv=True, kv_connector_extra_config=extra)
    docs = []
    for role, block, side in (("prefill", p_block, "6559"), ("decode", d_block, "5659")):
        args = [model, "--tensor-parallel-size", "1", "--block-size", str(block), "--kv-transfer-config", kv]
        if prefix_off:
            args.append("--no-enable-prefix-caching")
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"], "args": args,
             "env": [POD_IP, {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": side},
                     {"name": "VLLM_HPU_HETERO_KV_LAYOUT", "value": env_value},
                     {"name": "VLLM_KV_CACHE_LAYOUT", "value": "NHD"}, {"name": "UCX_TLS", "value": "ib,rc,gaudi_gdr"}],
             "resources": {"limits": {resource: "1"}}}
        docs.append(workload(f"m-{role}", role, c, app="m"))
    return docs


@pytest.mark.parametrize(("p_block", "d_block", "agreed", "model"), [
    (128, 64, 64, "meta-llama/Llama-3.1-8B"),
    (256, 128, 128, "Qwen/Qwen3-8B"),
    (128, 64, 32, "Qwen/Qwen2.5-7B-Instruct"),   # the decode reads two saved blocks per block
])
def test_the_agreed_block_path_is_a_warning(tmp_path, capsys, p_block, d_block, agreed, model):
    code, out = check(tmp_path, capsys, *_gaudi_pair(p_block, d_block, agreed, model=model), extra=VERSION)
    assert "block-size-direction" in rules(out, "warning"), out
    assert "block-size-direction" not in rules(out, "error")
    assert code == 0, out


@pytest.mark.parametrize("change", [
    {"agreed": None},                     # no agreed size: saved at its own 128
    {"agreed": 48},                       # 64 is no multiple of 48
    {"env_value": "false"},               # the heterogeneous connector is not loaded
    {"prefix_off": False},                # prefix caching at its default (on): no post-processing on save
    {"resource": "nvidia.com/gpu", "image": "vllm/vllm-openai:v0.26.0"},  # a GPU: upstream's path
])
def test_upstream_refusal_stands_without_the_plugin_path(tmp_path, capsys, change):
    kw = {"agreed": 64, **change}
    agreed = kw.pop("agreed")
    code, out = check(tmp_path, capsys, *_gaudi_pair(128, 64, agreed, **kw), extra=VERSION)
    assert code == 1 and "block-size-direction" in rules(out, "error"), out
