"""Variants of what the twentieth public-report set (tests/unit/data/public_reports_20) taught, with negative
controls.

Four kinds the set found:

- Flags vLLM removed (``--disable-log-requests`` from 0.17.0, ``--task`` by 0.13.0): vLLM's argument parser stops
  with "unrecognized arguments" and the server never starts (``cli-flag-removed``,
  :mod:`pdd_operator.vllm.removed_flags`).
- An attention backend named on the command line that does not serve the model's attention (a non-MLA backend on an
  MLA model, an MLA one on a plain model, dense MLA on sparse MLA): vLLM validates a selected backend alone and stops
  the engine (``attention-backend-unsupported``, :mod:`pdd_operator.vllm.attention_backends`).
- A backend named on one role only: the other runs vLLM's own choice for its GPU (FLASH_ATTN on compute capability
  8.x/9.x, FLASHINFER on 10.x), which the handshake hashes too (``attention-backend-mismatch``).
- P/D roles whose containers run a simulator of vLLM's API (Dynamo's mocker, llm-d's inference-sim) start no vLLM
  engine: nothing to check (exit 4), as roles that only sleep (set 20 first said "not checked"; sets 126 and 128,
  blind, expected nothing to check, and the lead settled it so: no vLLM pair and no KV transfer exists).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.gpu_product import pinned_gpu_major
from pdd_operator.compat.placement import label_values
from pdd_operator.vllm.attention_backends import backend_refusal, gpu_capability
from pdd_operator.vllm.removed_flags import removed_flags
from tests.unit.test_turn2_variants import KV, POD_IP, check, container, pd, rules, workload

# --- flags vLLM removed ------------------------------------------------------------------------------------


def test_removed_flags_are_found_among_the_parsed_flags():
    assert removed_flags({"--disable-log-requests": True, "--port": "8000"}) == ("--disable-log-requests",)
    assert removed_flags({"--task": "generate", "--disable-log-requests": True}) == ("--disable-log-requests", "--task")
    assert removed_flags({"--enable-log-requests": True, "--no-enable-log-requests": True}) == ()


@pytest.mark.parametrize(("flag", "image", "severity"), [
    (["--disable-log-requests"], "vllm/vllm-openai:v0.32.0", "error"),
    (["--disable-log-requests"], "vllm/vllm-openai:v0.17.0", "error"),
    (["--disable-log-requests"], "vllm/vllm-openai:v0.12.0", None),  # 0.12.0-0.16.0 still define it (deprecated)
    (["--disable_log_requests"], "vllm/vllm-openai:v0.20.2", "error"),  # vLLM reads underscores as dashes
    (["--task", "generate"], "vllm/vllm-openai:v0.13.0", "error"),
    (["--disable-log-requests"], "registry.local/vllm-custom:latest", "warning"),  # version unknown
    (["--disable-log-requests"], "vllm/vllm-openai:v0.11.0", None),  # deprecated, still accepted
    (["--task", "generate"], "vllm/vllm-openai:v0.10.2", None),
    (["--enable-log-requests"], "vllm/vllm-openai:v0.32.0", None),  # its replacement
], ids=["0.32", "0.17", "0.12", "underscores", "task-0.13", "unknown", "0.11", "task-0.10", "replacement"])
def test_a_flag_vllm_removed_is_refused_from_its_release(tmp_path, capsys, flag, image, severity):
    docs = pd("llama", ["--kv-transfer-config", KV, *flag], ["--kv-transfer-config", KV],
              model="meta-llama/Llama-3.1-8B-Instruct", image=image)
    code, out = check(tmp_path, capsys, *docs)
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == "cli-flag-removed"}
    assert found == ({severity} if severity else set()), out
    if severity == "error":
        assert code == 1


def test_a_removed_flag_stops_an_engine_without_a_connector_too(tmp_path, capsys):
    docs = pd("llama", ["--kv-transfer-config", KV], ["--disable-log-requests"], model="meta-llama/Llama-3.1-8B-Instruct",
              image="vllm/vllm-openai:v0.30.0")
    code, out = check(tmp_path, capsys, *docs)
    assert "cli-flag-removed" in rules(out, "error"), out


# --- an attention backend the model cannot use --------------------------------------------------------------


@pytest.mark.parametrize(("backend", "family", "want"), [
    ("FLASHINFER", "mla", "MLA not supported"),
    ("flash_attn", "mla", "MLA not supported"),
    ("TRITON_MLA", "dense", "non-MLA not supported"),
    ("TRITON_MLA", "sparse-mla", "sparse not supported"),
    ("FLASHMLA_SPARSE", "mla", "non-sparse not supported"),
    ("FLASHINFER_MLA", "mla", None),
    ("FLASH_ATTN", "moe", None),
    ("FLASHINFER", "hybrid-ssm", None),  # hybrid and multimodal attention may be either: not judged
    ("B12X", "mla", None),  # a backend not listed
    ("FLASHINFER", None, None),  # an unknown model
])
def test_backend_refusal_follows_validate_configuration(backend, family, want):
    assert backend_refusal(backend, family) == want


DSR1 = "deepseek-ai/DeepSeek-R1-0528"


@pytest.mark.parametrize(("model", "backend_args", "image", "severity"), [
    (DSR1, ["--attention-backend", "FLASHINFER"], "vllm/vllm-openai:v0.32.0", "error"),
    (DSR1, ["--attention-backend=TRITON_ATTN"], "vllm/vllm-openai:v0.18.0", "error"),
    (DSR1, ["--attention-config", json.dumps({"backend": "FLASH_ATTN"})], "vllm/vllm-openai:v0.24.0", "error"),
    ("Qwen/Qwen3-8B", ["--attention-backend", "FLASHMLA"], "vllm/vllm-openai:v0.26.0", "error"),
    (DSR1, ["--attention-backend", "FLASHINFER"], "registry.local/vllm-custom:latest", "warning"),  # version unknown
    (DSR1, ["--attention-backend", "FLASHINFER"], "vllm/vllm-openai:v0.17.1", "warning"),  # not read before 0.18
    (DSR1, ["--attention-backend", "FLASHINFER_MLA"], "vllm/vllm-openai:v0.32.0", None),
    (DSR1, [], "vllm/vllm-openai:v0.32.0", None),
], ids=["mla-flashinfer", "mla-triton-0.18", "mla-attention-config", "dense-flashmla", "unknown-version", "0.17",
        "mla-backend", "none"])
def test_a_backend_of_the_wrong_kind_stops_the_engine(tmp_path, capsys, model, backend_args, image, severity):
    docs = pd("m", ["--kv-transfer-config", KV, *backend_args], ["--kv-transfer-config", KV, *backend_args],
              model=model, image=image)
    code, out = check(tmp_path, capsys, *docs)
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == "attention-backend-unsupported"}
    assert found == ({severity} if severity else set()), out


def test_a_wrong_backend_on_rocm_is_a_warning(tmp_path, capsys):
    args = ["--kv-transfer-config", KV, "--attention-backend", "FLASHINFER"]
    docs = pd("m", args, args, model=DSR1, image="vllm/vllm-openai-rocm:v0.32.0",
              extra_resources={"nvidia.com/gpu": "0", "amd.com/gpu": "8"})
    code, out = check(tmp_path, capsys, *docs)
    assert "attention-backend-unsupported" in rules(out, "warning"), out
    assert "attention-backend-unsupported" not in rules(out, "error"), out


# --- a backend on one role only, against the other role's GPU ---------------------------------------------


@pytest.mark.parametrize(("product", "major"), [
    ("NVIDIA-H100-80GB-HBM3", 9), ("NVIDIA-H200", 9), ("NVIDIA-GH200-480GB", 9), ("NVIDIA-A100-SXM4-80GB", 8),
    ("NVIDIA-L40S", 8), ("NVIDIA-A10G", 8), ("NVIDIA-B200", 10), ("NVIDIA-GB200", 10), ("Tesla-T4", 7),  # fixN: T4 (7.5)
    ("Tesla-V100-SXM2-16GB", 7),
    ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", None),
])
def test_gpu_products_map_to_their_compute_capability(product, major):
    assert gpu_capability(product) == major


def test_a_pinned_capability_needs_every_allowed_product_to_share_it():
    def pinned(*products):
        return ((("nvidia.com/gpu.product", "In", products),),)
    assert pinned_gpu_major(pinned("NVIDIA-H100-80GB-HBM3", "NVIDIA-H200")) == 9
    assert pinned_gpu_major(pinned("NVIDIA-H100-80GB-HBM3", "NVIDIA-B200")) is None
    assert pinned_gpu_major(None) is None and pinned_gpu_major(((),)) is None


def test_label_values_are_known_only_where_every_term_pins_the_label():
    key = "nvidia.com/gpu.product"
    assert label_values((((key, "In", ("a", "b")), ("zone", "In", ("z",))),), key) == {"a", "b"}
    assert label_values((((key, "In", ("a", "b")),), ((key, "In", ("c",)),)), key) == {"a", "b", "c"}
    assert label_values((((key, "In", ("a",)),), (("zone", "In", ("z",)),)), key) is None
    assert label_values(None, key) is None


def _pinned_pair(p_args, d_args, d_nodes, image="vllm/vllm-openai:v0.32.0", model="Qwen/Qwen3-8B", p_nodes=None):
    def pod(selector):
        return {"nodeSelector": {"nvidia.com/gpu.product": selector}} if isinstance(selector, str) else (
            {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": selector}]}]}}}}
            if selector else {})
    return [workload("qwen-prefill", "prefill", container([model, "--kv-transfer-config", KV, *p_args], image=image),
                     pod=pod(p_nodes)),
            workload("qwen-decode", "decode", container([model, "--kv-transfer-config", KV, *d_args], image=image),
                     pod=pod(d_nodes))]


@pytest.mark.parametrize(("p_args", "d_args", "d_nodes", "severity"), [
    (["--attention-backend", "FLASHINFER"], [], "NVIDIA-H100-80GB-HBM3", "error"),  # decode runs FLASH_ATTN
    # the prefill is not pinned: no NVIDIA GPU from 7.5 up defaults to TRITON_ATTN for head size 128 (set 80), but a
    # V100 (7.0) does (FLASH_ATTN needs 8.0, FLASHINFER 7.5: fixN), so a warning that says so
    ([], ["--attention-backend=TRITON_ATTN"], "NVIDIA-A100-SXM4-80GB", "warning"),
    (["--attention-backend", "TRITON_ATTN"], [], ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"], "error"),
    (["--attention-backend", "FLASH_ATTN"], [], "NVIDIA-H100-80GB-HBM3", None),
    (["--attention-backend", "FLASHINFER"], [], None, "warning"),  # the decode's GPU is not pinned
    (["--attention-backend", "FLASHINFER"], [], ["NVIDIA-H100-80GB-HBM3", "NVIDIA-B200"], "warning"),
    (["--attention-backend", "FLASHINFER"], ["--kv-cache-dtype", "fp8"], "NVIDIA-H100-80GB-HBM3", "warning"),
    (["--attention-backend", "FLASHINFER"], ["--attention-backend", "FLASHINFER"], "NVIDIA-H100-80GB-HBM3", None),
    (["--attention-backend", "FLASHINFER"], ["--attention-backend", "auto"], "NVIDIA-H100-80GB-HBM3", "error"),
    (["--attention-backend", "auto"], [], None, None),  # auto is vLLM's own choice on both
], ids=["h100", "a100-decode-named", "hopper-affinity", "h100-fa", "unpinned",
        "mixed-gpus", "fp8-cache", "both-named", "auto-is-default", "auto-only"])
def test_a_backend_named_on_one_role_only_meets_the_other_gpus_default(tmp_path, capsys, p_args, d_args, d_nodes,
                                                                       severity):
    code, out = check(tmp_path, capsys, *_pinned_pair(p_args, d_args, d_nodes))
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == "attention-backend-mismatch"}
    assert found == ({severity} if severity else set()), out


def test_on_compute_capability_10_a_head_size_not_known_leaves_the_default_open(tmp_path, capsys):
    # 10.x: FLASHINFER if the head size fits. A fine-tune whose config.json the checker does not know (Qwen3-8B's own
    # head size 128 is known since session 27: the case below).
    docs = _pinned_pair(["--attention-backend", "FLASH_ATTN"], [], "NVIDIA-B200", model="NousResearch/Hermes-3-Llama-3.1-8B")
    _, out = check(tmp_path, capsys, *docs)
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == "attention-backend-mismatch"}
    assert found == {"warning"}, out


@pytest.mark.parametrize(("named", "severity"), [("FLASH_ATTN", "error"), ("FLASHINFER", None)])
def test_on_compute_capability_10_the_default_is_flashinfer_for_a_known_head_size(tmp_path, capsys, named, severity):
    docs = _pinned_pair(["--attention-backend", named], [], "NVIDIA-B200", model="facebook/opt-6.7b")  # head size 128
    code, out = check(tmp_path, capsys, *docs)
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == "attention-backend-mismatch"}
    assert found == ({severity} if severity else set()), out


@pytest.mark.parametrize(("image", "severity"), [
    ("vllm/vllm-openai:v0.17.1", "warning"),  # before 0.18.0: the default choice was not read, VLLM_ATTENTION_BACKEND
    ("vllm/vllm-openai:v0.22.0", "error"),    # 0.18.0-0.26.0 priority lists read alike (set 80)
])
def test_a_one_sided_backend_before_the_releases_read_is_a_warning(tmp_path, capsys, image, severity):
    docs = _pinned_pair(["--attention-backend", "FLASHINFER"], [], "NVIDIA-H100-80GB-HBM3", image=image)
    code, out = check(tmp_path, capsys, *docs)
    assert "attention-backend-mismatch" in rules(out, severity) and code == (1 if severity == "error" else 0), out


# --- simulators of vLLM's API --------------------------------------------------------------------------------


def _model_serving(image, args=None):
    role = {"replicas": 1, "workerReplicas": 0}
    c = {"name": "leader", "image": image, "env": [{"name": "MODEL_NAME", "value": "Qwen/Qwen3-8B"}, POD_IP],
         **({"command": ["vllm", "serve"], "args": args} if args else {})}
    return {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing",
            "metadata": {"name": "qwen", "namespace": "default"},
            "spec": {"replicas": 1, "template": {"roles": [
                {"name": name, **role, "entryTemplate": {"metadata": {"labels": {"app": "qwen"}},
                                                          "spec": {"containers": [c]}}}
                for name in ("prefill", "decode")]}}}


@pytest.mark.parametrize("image", ["ghcr.io/faust-benchou/dynamo-mocker-vllm:latest",
                                   "ghcr.io/llm-d/llm-d-inference-sim:v0.5.0"])
def test_p_d_roles_that_run_a_simulator_are_nothing_to_check(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, _model_serving(image))
    assert code == 4 and not out["notChecked"] and not out["results"], out


def test_a_simulator_beside_a_vllm_engine_leaves_the_engine_unpaired(tmp_path, capsys):
    docs = [workload("sim-prefill", "prefill", {"name": "sim", "image": "ghcr.io/llm-d/llm-d-inference-sim:v0.5.0",
                                                "args": ["--model", "Qwen/Qwen3-8B", "--port", "8000"]}),
            workload("vllm-decode", "decode", container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV]))]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and out["notChecked"], out


def test_a_simulator_deployment_pair_with_role_labels_is_nothing_to_check(tmp_path, capsys):
    docs = [workload(f"sim-{role}", role, {"name": "sim", "image": "ghcr.io/llm-d/llm-d-inference-sim:v0.5.0",
                                          "args": ["--model", "Qwen/Qwen3-8B", "--port", "8000"]})
            for role in ("prefill", "decode")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 4 and not out["notChecked"], out


def test_a_model_serving_of_vllm_engines_is_still_checked(tmp_path, capsys):
    doc = _model_serving("vllm/vllm-openai:v0.32.0", ["Qwen/Qwen3-8B", "--kv-transfer-config", KV])
    code, out = check(tmp_path, capsys, doc)
    assert code == 0 and len(out["results"]) == 1 and not out.get("notChecked"), out
