"""Kinds found by held-out set 78 (RDMA and network wiring of P/D pods), each with variants beyond the set's entry.

llm-d-modelservice values whose ``accelerator.type`` names a device-plugin resource only some chart releases define
(:data:`pdd_operator.compat.llmd_values.RENAMED_ACCELERATOR_TYPES`): ``intel`` is ``gpu.intel.com/i915`` in
llm-d-modelservice v0.2.8-v0.2.11 and no key in any other release, where the chart's ``acceleratorResource``
(templates/_helpers.tpl, v0.2.11 and v0.2.12 lines 145-155) falls back to ``nvidia.com/gpu``. The values do not say the
chart release, so such a role is "not checked", not judged as an NVIDIA engine (set 78's llm-d XPU GPUDirect values,
``ghcr.io/llm-d/llm-d-xpu:v0.3.1``, were read with both resources, so the XPU KV buffer went unjudged and the pair
passed).
"""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.compat.llmd_values import render
from tests.unit.cli_check import check_text

HOST = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def _values(accelerator: dict | None, model: str = "Qwen/Qwen3-0.6B", image: str = "ghcr.io/llm-d/llm-d-xpu:v0.3.1",
            tp: int = 1, buffer: str = "xpu", own: str | None = "gpu.intel.com/i915",
            prefill_accelerator: dict | None = None) -> dict:
    """llm-d's XPU P/D values (guides/pd-disaggregation/ms-pd/values_xpu_gdr.yaml shape): one vllm container per role,
    modelCommand vllmServe, NixlConnector kv_both with ``buffer`` as kv_buffer_device, the container naming ``own``
    (its Intel resource) itself when given."""
    kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_buffer_device": buffer})

    def role(port: int, side: int) -> dict:
        resources = {"limits": {"memory": "64Gi"}, "requests": {"memory": "64Gi"}}
        if own:
            for part in resources.values():
                part[own] = str(tp)
        return {"create": True, "replicas": 1, "parallelism": {"tensor": tp},
                "containers": [{"name": "vllm", "image": image, "modelCommand": "vllmServe",
                                "args": ["--block-size", "128", "--kv-transfer-config", kv],
                                "env": [HOST, {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(side)},
                                        {"name": "UCX_TLS", "value": "ib,rc,ze_copy"}],
                                "ports": [{"containerPort": port, "name": "metrics"}],
                                "resources": resources, "mountModelVolume": True}]}

    values = {"multinode": False,
              "modelArtifacts": {"uri": f"hf://{model}", "name": model, "size": "10Gi"},
              "routing": {"servicePort": 8000, "proxy": {"image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0",
                                                         "connector": "nixlv2", "secure": False}},
              "decode": role(8200, 5587), "prefill": role(8000, 5557)}
    if accelerator is not None:
        values["accelerator"] = accelerator
    if prefill_accelerator is not None:
        values["prefill"]["accelerator"] = prefill_accelerator
    return values


def _check(tmp_path, capsys, values: dict) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, yaml.safe_dump(values), "values.yaml")


def _resources(values: dict) -> dict[str, set[str]]:
    docs, cannot = render(values)
    assert not cannot
    return {role: set(doc["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"])
            for role, doc, _ in docs}


@pytest.mark.parametrize(("model", "tp", "buffer", "own"), [
    ("Qwen/Qwen3-0.6B", 1, "xpu", "gpu.intel.com/i915"),                     # set 78's shape
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", 2, "cpu", "gpu.intel.com/i915"),
    ("meta-llama/Llama-3.1-8B-Instruct", 1, "xpu", None),                   # the container names no resource itself
])
def test_accelerator_type_intel_is_not_checked_without_the_chart_release(tmp_path, capsys, model, tp, buffer, own):
    values = _values({"type": "intel"}, model=model, tp=tp, buffer=buffer, own=own)
    docs, cannot = render(values)
    assert not docs and [key for key, _ in cannot] == ["accelerator.type", "accelerator.type"]
    assert all("v0.2.12" in why and "nvidia.com/gpu" in why for _, why in cannot)
    code, out = _check(tmp_path, capsys, values)
    assert code == 3, out
    assert not [f for r in out["results"] for f in r["findings"] if f["severity"] == "error"]
    assert any("accelerator.type" in str(n) for n in out["notChecked"])


def test_a_role_s_own_accelerator_type_intel_names_that_role(tmp_path, capsys):
    values = _values({"type": "intel-i915"}, prefill_accelerator={"type": "intel"})
    _, cannot = render(values)
    assert [key for key, _ in cannot] == ["prefill.accelerator.type"]
    code, out = _check(tmp_path, capsys, values)
    assert code == 3 and any("prefill.accelerator.type" in str(n) for n in out["notChecked"])


@pytest.mark.parametrize(("accelerator", "want"), [
    ({"type": "intel-i915"}, "gpu.intel.com/i915"),                           # the key from v0.2.12 on
    ({"type": "intel-xe"}, "gpu.intel.com/xe"),
    ({"type": "intel", "resources": {"intel": "gpu.intel.com/xe"}}, "gpu.intel.com/xe"),  # the values' own map
    ({"type": "nvidia"}, "nvidia.com/gpu"),
])
def test_a_key_every_release_reads_alike_renders_its_resource(accelerator, want):
    got = _resources(_values(accelerator, own=None))
    assert got == {"decode": {"memory", want}, "prefill": {"memory", want}}


def test_dra_adds_no_resource_so_type_intel_renders(tmp_path, capsys):
    got = _resources(_values({"type": "intel", "dra": True}))
    assert got == {"decode": {"memory", "gpu.intel.com/i915"}, "prefill": {"memory", "gpu.intel.com/i915"}}
