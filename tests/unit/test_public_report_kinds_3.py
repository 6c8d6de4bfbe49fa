"""Variants of the kinds of fault the third public-report set (tests/unit/data/public_reports_3) found
missed, each with negative controls: the KV buffer device (NIXL memory type) differing between the roles."""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.rules.memory import nixl_memory_type
from tests.unit.test_turn2_variants import check, pd, rules

Q8B = "Qwen/Qwen3-8B"


def _kv(role, device=None):
    cfg = {"kv_connector": "NixlConnector", "kv_role": role}
    if device:
        cfg["kv_buffer_device"] = device
    return json.dumps(cfg)


def _pair(p_device, d_device, image="vllm/vllm-openai:v0.32.0"):
    return pd("qwen", ["--kv-transfer-config", _kv("kv_producer", p_device)],
              ["--kv-transfer-config", _kv("kv_consumer", d_device)], model=Q8B, image=image)


# --- kv_buffer_device: both roles must register the same NIXL memory type ---------------------------------


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.32.0", "vllm/vllm-openai:v0.26.0", "vllm/vllm-openai:v0.29.0"])
@pytest.mark.parametrize("devices", [("cuda", "cpu"), ("cpu", "cuda"), (None, "cpu")])
def test_device_memory_on_one_role_and_a_host_buffer_on_the_other_is_refused(tmp_path, capsys, image, devices):
    code, out = check(tmp_path, capsys, *_pair(*devices, image=image))
    assert code == 1 and "kv-buffer-device-mismatch" in rules(out, "error"), out


def test_a_version_whose_source_was_not_read_gets_a_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("cuda", "cpu", image="vllm/vllm-openai:v0.20.2"))
    assert code == 0 and "kv-buffer-device-mismatch" in rules(out, "warning"), out


@pytest.mark.parametrize("devices", [("cpu", "cpu"), ("cuda", "cuda"), (None, "cuda"), (None, None)])
def test_the_same_memory_type_on_both_roles_is_accepted(tmp_path, capsys, devices):
    code, out = check(tmp_path, capsys, *_pair(*devices))
    assert "kv-buffer-device-mismatch" not in rules(out), out
    assert code == 0, out


def test_other_accelerators_memory_type_is_not_guessed():
    """Out-of-tree platforms (Gaudi, TPU) report their own NIXL memory type through their platform: no finding
    either way. An Intel XPU's device buffer is VRAM: vLLM's in-tree XPU platform registers it so (set 44,
    vllm/nixl_devices.py)."""
    class Role:
        buffer_device, image, resources, env = "xpu", "intel/vllm:xpu-0.14.0", {"gpu.intel.com/i915": "1"}, {}
    assert nixl_memory_type(Role) == "VRAM"
    Role.buffer_device, Role.resources = None, {"habana.ai/gaudi": "1"}
    Role.image = "vault.habana.ai/gaudi-docker/1.22.0/ubuntu24.04/habanalabs/vllm-installer-2.7.1:latest"
    assert nixl_memory_type(Role) is None
    Role.image, Role.resources = "vllm/vllm-tpu:v0.11.1", {"google.com/tpu": "4"}
    assert nixl_memory_type(Role) is None
    Role.buffer_device = "cpu"
    assert nixl_memory_type(Role) == "DRAM"
    Role.buffer_device, Role.image, Role.resources = None, "vllm/vllm-openai:v0.32.0", {"nvidia.com/gpu": "1"}
    assert nixl_memory_type(Role) == "VRAM"


def test_a_cpu_engine_registers_host_memory_with_or_without_the_flag():
    class Role:
        buffer_device, image, resources, env = None, "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.12.0", {"cpu": "16"}, {}
    assert nixl_memory_type(Role) == "DRAM"


# --- a vLLM release with a known P/D fault for one connector stack (known-bad vLLM rows) -------------------


def _stack(*children):
    return json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
        "connectors": [{"kv_connector": c, "kv_role": "kv_both"} for c in children]}})


def _stacked_pair(image, *children):
    kv = _stack(*children)
    return pd("qwen", ["--kv-transfer-config", kv], ["--kv-transfer-config", kv], model=Q8B, image=image)


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.19.0", "vllm/vllm-openai:v0.19.1"])
def test_nixl_stacked_with_offloading_on_0_19_is_reported(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, *_stacked_pair(image, "NixlConnector", "OffloadingConnector"))
    assert "vllm-version-known-bad" in rules(out, "warning"), out
    assert "vllm-version-known-bad" not in rules(out, "error")


@pytest.mark.parametrize("image, children", [
    ("vllm/vllm-openai:v0.20.0", ("NixlConnector", "OffloadingConnector")),   # the first fixed release
    ("vllm/vllm-openai:v0.18.0", ("NixlConnector", "OffloadingConnector")),   # before the range read
    ("vllm/vllm-openai:v0.19.0", ("NixlConnector", "LMCacheConnectorV1")),    # another stack
])
def test_other_releases_and_stacks_are_not_reported(tmp_path, capsys, image, children):
    code, out = check(tmp_path, capsys, *_stacked_pair(image, *children))
    assert "vllm-version-known-bad" not in rules(out), out


def test_plain_nixl_on_0_19_is_not_reported(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(None, None, image="vllm/vllm-openai:v0.19.0"))
    assert "vllm-version-known-bad" not in rules(out), out


def test_the_vllm_row_names_its_first_fixed_release_and_needs_its_stack():
    from pdd_operator.vllm.known_bad import known_bad
    [row] = [k for k in known_bad("vllm", (0, 19, 1)) if k.with_connector]  # (the hybrid async row covers it too)
    assert row.fixed_in == "0.20.0" and row.until == (0, 20, 0)
    assert row.stacked_with("MultiConnector[NixlConnector, OffloadingConnector]")
    assert not row.stacked_with("MultiConnector[NixlConnector, LMCacheConnectorV1]") and not row.stacked_with(None)
    assert [k for k in known_bad("vllm", (0, 20, 0)) if k.with_connector] == []
