"""Variants of what the forty-fifth public-report set (tests/unit/data/public_reports_45) taught, with negative
controls, on other models, releases and orchestrators than the set's:

- vLLM 0.11.0-0.34.0 ``ParallelConfig.__post_init__`` refuses expert load balancing without expert parallelism, with a
  single-GPU expert group, and redundant experts without ``--enable-eplb`` (``eplb-config-invalid``);
- ``ModelConfig._verify_with_expert_parallelism`` refuses ``--enable-expert-parallel`` on a model without experts
  (``expert-parallel-dense-model``);
- a Modelplane engine's GPUs are its member's DRA GPU request (``nodeSelector.devices``), which
  ``parallelism-gpu-count`` now counts.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.modelplane import gpu_request
from pdd_operator.compat.pair import RoleConfig
from pdd_operator.compat.rules.expert_parallel import eplb_refusal, redundant_experts
from tests.unit.test_turn2_variants import check, container, rules, workload

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
QWEN_MOE = "Qwen/Qwen3-30B-A3B"


def _pair(model, p_args, d_args, image, gpus=2, kind="StatefulSet"):
    return [workload(f"m-{role}", role, container([model, *args, "--kv-transfer-config", KV], image=image, gpus=gpus),
                     kind=kind, app="m")
            for role, args in (("prefill", p_args), ("decode", d_args))]


def test_eplb_without_expert_parallel_is_refused_on_a_qwen_moe_statefulset(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(QWEN_MOE, ["-dp", "2", "-ep"], ["-dp", "2", "--enable-eplb"],
                                               "vllm/vllm-openai:v0.18.0"))
    assert code == 1 and "eplb-config-invalid" in rules(out, "error")


def test_eplb_with_expert_parallel_is_not(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(QWEN_MOE, ["-dp", "2", "-ep"], ["-dp", "2", "-ep", "--enable-eplb"],
                                               "vllm/vllm-openai:v0.18.0"))
    assert "eplb-config-invalid" not in rules(out)


def test_dotted_redundant_experts_without_eplb_are_refused_on_mixtral(tmp_path, capsys):
    args = ["--tensor-parallel-size", "2", "--enable-expert-parallel", "--eplb-config.num_redundant_experts", "16"]
    code, out = check(tmp_path, capsys, *_pair("mistralai/Mixtral-8x7B-Instruct-v0.1", args, args,
                                               "vllm/vllm-openai:v0.32.0"))
    assert code == 1 and "eplb-config-invalid" in rules(out, "error")


def test_redundant_experts_with_eplb_are_not(tmp_path, capsys):
    args = ["--tensor-parallel-size", "2", "--enable-expert-parallel", "--enable-eplb",
            "--eplb-config", '{"num_redundant_experts": "16", "window_size": "1000"}']
    code, out = check(tmp_path, capsys, *_pair("mistralai/Mixtral-8x7B-Instruct-v0.1", args, args,
                                               "vllm/vllm-openai:v0.32.0"))
    assert "eplb-config-invalid" not in rules(out)


def test_eplb_on_a_single_gpu_expert_group_is_refused(tmp_path, capsys):
    args = ["--enable-expert-parallel", "--enable-eplb"]
    code, out = check(tmp_path, capsys, *_pair(QWEN_MOE, args, args, "vllm/vllm-openai:v0.24.0", gpus=1))
    assert code == 1 and "eplb-config-invalid" in rules(out, "error")


def test_releases_before_the_read_ones_are_not_judged(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(QWEN_MOE, ["-dp", "2"], ["--data-parallel-size", "2", "--enable-eplb"],
                                               "vllm/vllm-openai:v0.10.1"))
    assert "eplb-config-invalid" not in rules(out, "error")


@pytest.mark.parametrize(("flags", "expected"), [
    ((), 0),
    ((("--eplb-config", '{"num_redundant_experts": 32}'),), 32),
    ((("--eplb-config", '{"window_size": 1000}'),), 0),
    ((("--eplb-config.num_redundant_experts", "8"), ("--eplb-config", '{"num_redundant_experts": 32}')), 8),
    ((("--num-redundant-experts", "4"),), 4),
    ((("--eplb-config", "<unknown:EPLB>"),), None),
    ((("--eplb-config", "{not json"),), None),
])
def test_redundant_experts_are_read_from_every_spelling(flags, expected):
    assert redundant_experts(RoleConfig(role="decode", moe_flags=flags)) == expected


def test_an_eplb_switch_whose_value_is_not_in_the_files_is_not_judged():
    r = RoleConfig(role="decode", tp=2, moe_flags=(("--enable-eplb", True), ("--enable-expert-parallel", "<unknown:EP>")))
    assert eplb_refusal(r) is None


def test_expert_parallel_on_a_dense_qwen3_is_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-8B", ["-tp", "2"], ["-tp", "2", "-ep"],
                                               "vllm/vllm-openai:v0.24.0"))
    assert code == 1 and "expert-parallel-dense-model" in rules(out, "error")


def test_expert_parallel_on_a_moe_model_is_not(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(QWEN_MOE, ["-tp", "2", "-ep"], ["-tp", "2", "-ep"],
                                               "vllm/vllm-openai:v0.24.0"))
    assert "expert-parallel-dense-model" not in rules(out)


def test_expert_parallel_on_a_model_whose_config_is_not_known_is_not_judged(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("/models/private-moe", ["-tp", "2", "-ep"], ["-tp", "2", "-ep"],
                                               "vllm/vllm-openai:v0.24.0"))
    assert "expert-parallel-dense-model" not in rules(out)


def _member(devices):
    return {"role": "Standalone", "nodeSelector": {"devices": devices}}


NVIDIA_GPU = {"name": "gpu", "count": 4, "selectors": [{"cel": 'device.driver == "gpu.nvidia.com"'}]}
EFA = {"name": "efa", "count": 16, "selectors": [{"cel": 'device.driver == "dra.net"'}]}


@pytest.mark.parametrize(("devices", "expected"), [
    ([NVIDIA_GPU, EFA], ("nvidia.com/gpu", 4)),
    ([{"name": "accel", "count": 8, "selectors": [{"cel": 'device.driver == "gpu.amd.com"'}]}], ("amd.com/gpu", 8)),
    ([{"name": "gpu", "selectors": [{"cel": 'device.attributes["x"].y == 1'}]}], ("nvidia.com/gpu", 1)),
    ([EFA], None),
    ([NVIDIA_GPU, {**NVIDIA_GPU, "name": "gpu2"}], None),
    ([{**NVIDIA_GPU, "count": "4"}], None),
])
def test_a_members_gpu_request_is_read_from_its_device_requests(devices, expected):
    assert gpu_request(_member(devices)) == expected


def _modelplane(decode_args, gpu_count):
    def engine(name, phase, args):
        return {"name": name, "phase": phase, "members": [{
            "role": "Standalone",
            "nodeSelector": {"devices": [{**NVIDIA_GPU, "count": gpu_count}]},
            "template": {"spec": {"containers": [{
                "name": "engine", "image": "vllm/vllm-openai:v0.24.0", "command": ["vllm", "serve", QWEN_MOE],
                "args": [*args, f"--kv-transfer-config={KV}"]}]}}}]}
    return {"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": "qwen"},
            "spec": {"template": {"spec": {"serving": {"mode": "PrefillDecode"}, "engines": [
                engine("p", "Prefill", ["--tensor-parallel-size=2"]), engine("d", "Decode", decode_args)]}}}}


def test_a_modelplane_engine_with_more_ranks_than_its_gpu_request_is_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _modelplane(["--tensor-parallel-size=2", "--data-parallel-size=4"], 4))
    assert code == 1 and "parallelism-gpu-count" in rules(out, "error")


def test_a_modelplane_engine_within_its_gpu_request_is_not(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _modelplane(["--tensor-parallel-size=2", "--data-parallel-size=2"], 4))
    assert "parallelism-gpu-count" not in rules(out)


LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize("rank_flags", [["--data-parallel-rank", "1"], ["-dpn", "0"], ["--data-parallel-external-lb",
                                                                                       "--data-parallel-rank", "0"]])
def test_external_data_parallel_on_a_dense_model_is_refused_from_0_21(tmp_path, capsys, rank_flags):
    args = ["--data-parallel-size", "2", *rank_flags]
    code, out = check(tmp_path, capsys, *_pair(LLAMA, args, args, "vllm/vllm-openai:v0.24.0", gpus=1))
    assert code == 1 and "external-dp-dense-model" in rules(out, "error")


def test_external_data_parallel_on_a_dense_model_before_0_21_is_not(tmp_path, capsys):
    args = ["--data-parallel-size", "2", "--data-parallel-rank", "1"]
    code, out = check(tmp_path, capsys, *_pair(LLAMA, args, args, "vllm/vllm-openai:v0.20.0", gpus=1))
    assert "external-dp-dense-model" not in rules(out)


def test_external_data_parallel_on_a_moe_model_is_not(tmp_path, capsys):
    args = ["--data-parallel-size", "2", "--data-parallel-rank", "1", "--enable-expert-parallel"]
    code, out = check(tmp_path, capsys, *_pair(QWEN_MOE, args, args, "vllm/vllm-openai:v0.24.0", gpus=1))
    assert "external-dp-dense-model" not in rules(out)


def test_internal_data_parallel_on_a_dense_model_is_not(tmp_path, capsys):
    args = ["--data-parallel-size", "2"]
    code, out = check(tmp_path, capsys, *_pair(LLAMA, args, args, "vllm/vllm-openai:v0.24.0", gpus=2))
    assert "external-dp-dense-model" not in rules(out)


@pytest.mark.parametrize(("image", "backend", "refused"), [
    ("vllm/vllm-openai:v0.17.1", "flashinfer_nvlink_two_sided", True),
    ("vllm/vllm-openai:v0.18.0", "flashinfer_nvlink_two_sided", False),
    ("vllm/vllm-openai:v0.26.0", "mori", True),
    ("vllm/vllm-openai:v0.34.0", "mori", False),
    ("vllm/vllm-openai:v0.23.0", "deepep_v2", True),
    ("vllm/vllm-openai:v0.26.0", "pplx", False),
])
def test_all2all_backends_are_judged_against_the_release_that_parses_them(tmp_path, capsys, image, backend, refused):
    args = ["--data-parallel-size", "2", "--enable-expert-parallel", "--all2all-backend", backend]
    code, out = check(tmp_path, capsys, *_pair(QWEN_MOE, args, args, image))
    assert ("all2all-backend-unknown" in rules(out, "error")) is refused


def test_a_modelplane_gpu_count_fix_names_the_members_device_request(tmp_path, capsys):
    """Set 29 (issue 9): a Modelplane engine's GPUs are its member's ``nodeSelector.devices`` GPU request (no
    ``resources.limits`` in the input), so the fix names that field, not the container's limits."""
    code, out = check(tmp_path, capsys, _modelplane(["--tensor-parallel-size=2", "--data-parallel-size=4"], 4))
    fixes = [f["fix"] for r in out["results"] for f in r["findings"] if f["rule"] == "parallelism-gpu-count"]
    assert fixes and all("member's nodeSelector.devices" in f and "resources.limits" not in f for f in fixes), fixes


def test_control_a_deployment_gpu_count_fix_still_names_resources_limits(tmp_path, capsys):
    args = ["--tensor-parallel-size", "2", "--data-parallel-size", "4"]
    code, out = check(tmp_path, capsys, *_pair(LLAMA, args, args, "vllm/vllm-openai:v0.24.0", gpus=4))
    fixes = [f["fix"] for r in out["results"] for f in r["findings"] if f["rule"] == "parallelism-gpu-count"]
    assert fixes and all("container's resources.limits" in f for f in fixes), fixes
