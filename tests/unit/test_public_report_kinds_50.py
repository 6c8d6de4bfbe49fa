"""Variants of what the fiftieth public-report set (tests/unit/data/public_reports_50) taught, with negative controls:
the SSM conv-state layout a hybrid engine on vLLM's CPU image runs with is the CPU platform's, not only the manifest's.

The NIXL worker asserts DS for a model with Mamba or GDN layers (0.20.0+). vLLM's CPU platform writes
``VLLM_SSM_CONV_STATE_LAYOUT`` itself (:mod:`pdd_operator.vllm.cpu_conv_layout`, vllm-project/vllm#58034): from 0.31.0
an unset layout becomes DS for a NIXL connector (an explicit one is kept), 0.22-0.30 write SD over any value on AMX
(0.22-0.28) or AVX-512-BF16 (0.29-0.30) hosts, up to 0.21 the manifest's value holds. ``ssm-conv-layout-ds`` follows:
no finding where the platform picks DS, a warning where DS holds on some hosts only, an error where no host gets DS.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.cpu_conv_layout import cpu_conv_layout
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

CPU = "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo"
ARM = "public.ecr.aws/q9t5s3a7/vllm-arm64-cpu-release-repo"
NEMOTRON = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"   # Mamba2 hybrid
QWEN35 = "Qwen/Qwen3.5-27B"                               # GDN hybrid


def _cpu_pair(image, model=NEMOTRON, layout=None, d_layout="same", connector="NixlConnector", gpu=False):
    docs = []
    for role, value in (("prefill", layout), ("decode", layout if d_layout == "same" else d_layout)):
        env = [POD_IP] + ([{"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": value}] if value else [])
        kv = {"kv_connector": connector, "kv_role": "kv_both"}
        if not gpu:
            kv["kv_buffer_device"] = "cpu"
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": [model, "--trust-remote-code", "--block-size", "128", "--no-enable-prefix-caching",
                      "--kv-transfer-config", json.dumps(kv)],
             "env": env,
             "resources": {"limits": {"nvidia.com/gpu": "1", "rdma/ib": "1"} if gpu else {"cpu": "32", "memory": "64Gi"}}}
        docs.append(workload(f"h-{role}", role, c, app="h"))
    return docs


def _conv(out, severity=None):
    return [f for r in out["results"] for f in r["findings"]
            if f["rule"] == "ssm-conv-layout-ds" and severity in (None, f["severity"])]


# --- the platform's layout, as a pure function --------------------------------------------------------------------


@pytest.mark.parametrize(("version", "layout", "effective", "some_hosts"), [
    ((0, 21, 0), None, "SD", False),          # no override yet: vLLM's default SD
    ((0, 21, 0), "DS", "DS", False),          # the manifest's DS holds on every host
    ((0, 22, 0), "DS", "DS", True),           # AMX hosts get SD written over it
    ((0, 27, 0), "DS", "DS", True),
    ((0, 28, 0), "DS", "DS", True),           # the last AMX release (0.28.0 line 270)
    ((0, 30, 0), "DS", "DS", True),
    ((0, 30, 0), None, "SD", True),
    ((0, 31, 0), None, "DS", False),          # picked for a NIXL connector
    ((0, 31, 0), "SD", "SD", False),          # an explicit value is kept
    ((0, 34, 0), "DS", "DS", False),
    ((0, 36, 0), None, "DS", False),          # a later release keeps 0.31's behaviour
])
def test_the_cpu_platforms_layout_per_release(version, layout, effective, some_hosts):
    got, hosts = cpu_conv_layout(version, layout)
    assert got == effective and bool(hosts) == some_hosts


# --- ssm-conv-layout-ds on manifests --------------------------------------------------------------------------------


@pytest.mark.parametrize("image", [f"{CPU}:v0.31.0", f"{CPU}:v0.33.0", f"{ARM}:v0.34.0"])
def test_an_unset_layout_on_a_recent_cpu_image_is_ds(tmp_path, capsys, image):
    # vllm#58034's fix: platforms/cpu.py picks DS for a NIXL connector (the set's false refusal, Mamba2 here)
    code, out = check(tmp_path, capsys, *_cpu_pair(image))
    assert code == 0 and not _conv(out), out


def test_an_unset_layout_on_a_gpu_image_is_still_refused(tmp_path, capsys):
    # negative control: the CUDA platform writes nothing, vLLM's default SD fails the assert
    code, out = check(tmp_path, capsys, *_cpu_pair("vllm/vllm-openai:v0.31.0", gpu=True))
    assert code == 1 and "ssm-conv-layout-ds" in rules(out, "error"), out


@pytest.mark.parametrize("image", [f"{CPU}:v0.31.0", f"{ARM}:v0.34.0"])
def test_an_explicit_sd_on_a_recent_cpu_image_is_refused(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, *_cpu_pair(image, model=QWEN35, layout="SD"))
    assert code == 1 and "ssm-conv-layout-ds" in rules(out, "error"), out


def test_sd_on_one_role_only_is_refused_for_that_role(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_cpu_pair(f"{CPU}:v0.32.0", d_layout="SD"))
    found = _conv(out, "error")
    assert code == 1 and len(found) == 1 and found[0]["message"].startswith("decode:"), out


@pytest.mark.parametrize("version", ["v0.22.0", "v0.26.0", "v0.29.0", "v0.30.0"])
def test_ds_on_a_cpu_image_that_overrides_it_is_a_warning(tmp_path, capsys, version):
    # 0.22-0.30 write SD over DS on AMX / AVX-512-BF16 hosts: a failure on some hosts only
    code, out = check(tmp_path, capsys, *_cpu_pair(f"{CPU}:{version}", layout="DS"))
    found = _conv(out)
    assert code == 0 and found and {f["severity"] for f in found} == {"warning"}, out
    assert "vllm#58034" in found[0]["message"] and "0.31.0" in found[0]["fix"], found


def test_unset_on_a_cpu_image_that_overrides_is_an_error(tmp_path, capsys):
    # no host gets DS: SD by default, SD by the platform
    code, out = check(tmp_path, capsys, *_cpu_pair(f"{CPU}:v0.30.0"))
    assert code == 1 and "ssm-conv-layout-ds" in rules(out, "error"), out


def test_ds_on_a_cpu_image_before_the_override_passes(tmp_path, capsys):
    # 0.21.0 platforms/cpu.py does not touch the variable: the manifest's DS holds (Mamba2, supported from 0.20)
    code, out = check(tmp_path, capsys, *_cpu_pair(f"{CPU}:v0.21.0", layout="DS"))
    assert not _conv(out), out


def test_ds_on_a_gpu_image_of_an_overriding_release_passes(tmp_path, capsys):
    # negative control: the override is the CPU platform's only
    code, out = check(tmp_path, capsys, *_cpu_pair("vllm/vllm-openai:v0.30.0", layout="DS", gpu=True))
    assert not _conv(out), out


def test_a_nixl_child_of_a_multiconnector_gets_ds_too(tmp_path, capsys):
    # KVTransferConfig.has_connector looks inside a MultiConnector (0.31.0 config/kv_transfer.py)
    docs = _cpu_pair(f"{CPU}:v0.31.0")
    multi = {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [
        {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_buffer_device": "cpu"},
        {"kv_connector": "OffloadingConnector", "kv_role": "kv_both"}]}}
    for d in docs:
        args = d["spec"]["template"]["spec"]["containers"][0]["args"]
        args[args.index("--kv-transfer-config") + 1] = json.dumps(multi)
    code, out = check(tmp_path, capsys, *docs)
    assert not _conv(out), out
