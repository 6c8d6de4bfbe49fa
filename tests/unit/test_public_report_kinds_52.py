"""Variants of what the fifty-second public-report set (tests/unit/data/public_reports_52) taught, with negative
controls. Four kinds:

- a flag whose values vLLM's parser takes as ``choices`` gets a value its release lists (``--prefix-caching-hash-algo
  builtin`` ends with 0.10.1.1; ``xxhash`` starts at 0.13.0): ``engine-args-invalid``, :mod:`pdd_operator.vllm.flag_choices`;
- before the NIXL compatibility hash (0.9.1-0.12.x) the handshake asserts equal KV block bytes, judged at the block
  sizes the engines run with (an unset size is CUDA's default 16 there): ``kv-cache-dtype-mismatch``;
- Dynamo's dynamo.vllm turns an unset ``--enable-prefix-caching`` on, so a hybrid SSM decode runs prefix caching
  where vLLM's own default leaves it off: ``hybrid-ssm-prefix-caching``, ``hybrid-mamba-align-external-kv``;
- ``VLLM_USE_V1=0`` stops ``vllm serve`` of 0.11.0 (an assert; the variable is gone from 0.11.1), also in a
  KServe-templated container: ``nixl-needs-v1-engine``.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.dynamo_engine_defaults import prefix_caching_default
from pdd_operator.compat.rules.early_nixl import use_v1_zero_fault
from pdd_operator.vllm.flag_choices import CHOICE_TABLES, PREFIX_CACHING_HASH_ALGO, refusal
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def _pair(model, image, p_extra=(), d_extra=(), gpus=1, p_image=None):
    docs = []
    for role, extra, img in (("prefill", p_extra, p_image or image), ("decode", d_extra, image)):
        c = {"name": "vllm", "image": img, "command": ["vllm", "serve"],
             "args": [model, "--tensor-parallel-size", str(gpus), "--kv-transfer-config", KV, *extra],
             "env": [POD_IP], "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
        docs.append(workload(f"m-{role}", role, c, app="m"))
    return docs


def _messages(out: dict, rule: str) -> list[str]:
    return [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule]


# --- 1. flag values against the release's choices ----------------------------------------------------------------


@pytest.mark.parametrize(("value", "version", "expected"), [
    ("builtin", (0, 9, 0), None),
    ("builtin", (0, 10, 1), None),              # 0.10.1 decided by the 0.10.1.1 read
    ("builtin", (0, 10, 2), "error"),           # 0.10.2 already dropped it
    ("builtin", (0, 11, 0), "error"),
    ("builtin", (0, 16, 0), "error"),           # not read, between 0.14.1 and 0.18.0, both without it
    ("builtin", (0, 40, 0), "error"),           # a dropped value stays dropped
    ("builtin", None, "not-checked"),           # some releases accept it, others refuse it
    ("sha256_cbor_64bit", (0, 10, 0), None),
    ("sha256_cbor_64bit", (0, 12, 0), "error"),
    ("sha256_cbor", (0, 10, 1), "error"),       # renamed in 0.10.2
    ("sha256_cbor", (0, 10, 2), None),
    ("xxhash", (0, 12, 0), "error"),            # first in 0.13.0
    ("xxhash", (0, 13, 0), None),
    ("xxhash", (0, 34, 0), None),
    ("sha256", None, None),                     # every release read lists it
    ("sha-256", None, "error"),                 # no release lists it
    ("sha-256", (0, 40, 0), "warning"),         # a later release may add a value
])
def test_the_hash_algo_choices_per_release(value, version, expected):
    found = refusal(PREFIX_CACHING_HASH_ALGO, value, version)
    assert (found.verdict if found else None) == expected


def test_the_choice_tables_are_bounded_by_the_releases_read():
    for table in CHOICE_TABLES.values():
        assert table.read == tuple(sorted(table.read))
        for value, (first, last) in table.values.items():
            assert first in table.read and last in table.read and first <= last, value


def test_a_dev_build_is_judged_from_its_floor():
    # a build after 0.13: every release from there lists xxhash, none lists builtin
    assert refusal(PREFIX_CACHING_HASH_ALGO, "xxhash", None, floor=(0, 13, 0)) is None
    assert refusal(PREFIX_CACHING_HASH_ALGO, "builtin", None, floor=(0, 13, 0)).verdict == "error"


def test_a_guides_builtin_hash_on_a_later_image_is_refused(tmp_path, capsys):
    # an llm-d guide's decode (builtin hash) run on vLLM 0.12.0, another model
    docs = _pair("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.12.0",
                 d_extra=("--enable-prefix-caching", "--prefix-caching-hash-algo", "builtin"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out
    assert "invalid choice" in _messages(out, "engine-args-invalid")[0]


def test_the_same_flag_on_its_own_release_passes(tmp_path, capsys):
    docs = _pair("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.10.0",
                 d_extra=("--enable-prefix-caching", "--prefix-caching-hash-algo=builtin"))
    code, out = check(tmp_path, capsys, *docs)
    assert "engine-args-invalid" not in rules(out), out


def test_a_newer_value_on_an_older_prefill_is_refused(tmp_path, capsys):
    # xxhash copied from a 0.13+ guide onto a 0.11.2 prefill
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.11.2",
                 p_extra=("--prefix-caching-hash-algo", "xxhash"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out
    assert _messages(out, "engine-args-invalid")[0].startswith("prefill:")


def test_an_unknown_version_with_a_dropped_value_is_not_checked(tmp_path, capsys):
    docs = _pair("Qwen/Qwen3-8B", "registry.example.com/team/vllm:custom",
                 d_extra=("--prefix-caching-hash-algo", "builtin"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and "engine-args-invalid" not in rules(out), out
    assert any("prefix-caching-hash-algo" in n["reason"] for n in out["notChecked"]), out


def test_an_unknown_version_with_a_value_every_release_lists_passes(tmp_path, capsys):
    docs = _pair("Qwen/Qwen3-8B", "registry.example.com/team/vllm:custom",
                 d_extra=("--prefix-caching-hash-algo", "sha256"))
    code, out = check(tmp_path, capsys, *docs)
    assert not out.get("notChecked") and "engine-args-invalid" not in rules(out), out


# --- 2. KV dtype before the compatibility hash, at the block sizes the engines run with ---------------------------


@pytest.mark.parametrize(("image", "p_extra", "d_extra", "expected"), [
    # the decode's explicit 16 against the prefill's CUDA default (16 before 0.34)
    ("vllm/vllm-openai:v0.10.1.1", (), ("--block-size", "16", "--kv-cache-dtype", "fp8"), "error"),
    ("vllm/vllm-openai:v0.12.0", ("--kv-cache-dtype", "fp8_e4m3"), ("--block-size", "16"), "error"),
    ("vllm/vllm-openai:v0.11.0", ("--block-size", "16", "--kv-cache-dtype", "bfloat16"), (), "warning"),  # same width
    ("vllm/vllm-openai:v0.9.0", (), ("--block-size", "16", "--kv-cache-dtype", "fp8"), "error"),  # read wrong (set 82)
    ("vllm/vllm-openai:v0.10.1.1", (), ("--block-size", "16"), None),
])
def test_kv_dtype_width_before_the_hash(tmp_path, capsys, image, p_extra, d_extra, expected):
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", image, p_extra=p_extra, d_extra=d_extra)
    code, out = check(tmp_path, capsys, *docs)
    found = ("error" if "kv-cache-dtype-mismatch" in rules(out, "error")
             else "warning" if "kv-cache-dtype-mismatch" in rules(out, "warning") else None)
    assert found == expected, out


# --- 3. Dynamo's prefix caching default -----------------------------------------------------------------------------


def test_dynamo_turns_an_unset_prefix_caching_on():
    assert prefix_caching_default("dynamo.vllm", None) is True
    assert prefix_caching_default("dynamo.vllm", False) is None
    assert prefix_caching_default("", None) is None


def _dgd(model, image, decode_extra=(), prefill_extra=()):
    def worker(sub, extra):
        c = {"name": "main", "image": image, "command": ["python3", "-m", "dynamo.vllm"],
             "env": [{"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}],
             "args": ["--model", model, "--disaggregation-mode", sub, "--kv-transfer-config", KV,
                      "--no-disable-hybrid-kv-cache-manager", "--trust-remote-code", *extra],
             "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        return {"componentType": "worker", "subComponentType": sub, "replicas": 1, "extraPodSpec": {"mainContainer": c}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "h"},
            "spec": {"backendFramework": "vllm", "services": {"prefill": worker("prefill", prefill_extra),
                                                               "decode": worker("decode", decode_extra)}}}


@pytest.mark.parametrize(("image", "decode_extra", "expected"), [
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.0", (), True),                   # vLLM 0.20.1, Dynamo's default
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0", (), True),                   # vLLM 0.23.0
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0", ("--no-enable-prefix-caching",), False),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0", (), True),                   # vLLM 0.26.0: 'one local block'
])
def test_a_hybrid_dynamo_decode_with_the_default_prefix_caching(tmp_path, capsys, image, decode_extra, expected):
    dgd = _dgd("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", image, decode_extra=decode_extra,
               prefill_extra=("--no-enable-prefix-caching",))
    code, out = check(tmp_path, capsys, dgd)
    assert ("hybrid-ssm-prefix-caching" in rules(out, "error")) is expected, out
    if expected:
        assert "dynamo.vllm turns it on" in _messages(out, "hybrid-ssm-prefix-caching")[0]


def test_the_same_decode_under_vllm_serve_keeps_vllms_default(tmp_path, capsys):
    # vllm serve of 0.22.0 leaves prefix caching off for hybrid models (ModelConfig.is_prefix_caching_supported)
    docs = _pair("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", "vllm/vllm-openai:v0.22.0",
                 p_extra=("--no-disable-hybrid-kv-cache-manager", "--trust-remote-code"),
                 d_extra=("--no-disable-hybrid-kv-cache-manager", "--trust-remote-code"))
    for d in docs:
        d["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "VLLM_SSM_CONV_STATE_LAYOUT",
                                                                      "value": "DS"})
    code, out = check(tmp_path, capsys, *docs)
    assert "hybrid-ssm-prefix-caching" not in rules(out), out


def test_a_gdn_dynamo_decode_gets_mamba_align(tmp_path, capsys):
    # Qwen3-Next (Gated DeltaNet: no Mamba prefix caching support) on vllm-runtime:1.2.0 (vLLM 0.20.1): Dynamo's
    # prefix caching default makes vLLM pick mamba cache mode align, whose scheduler asserts on connector KV
    dgd = _dgd("Qwen/Qwen3-Next-80B-A3B-Instruct", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.0",
               prefill_extra=("--no-enable-prefix-caching",))
    code, out = check(tmp_path, capsys, dgd)
    assert "hybrid-mamba-align-external-kv" in rules(out, "error"), out


# --- 4. VLLM_USE_V1=0 on 0.11.0 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "value", "fails"), [
    ((0, 11, 0), "0", True),
    ((0, 11, 0), "1", False),
    ((0, 11, 0), None, False),
    ((0, 11, 1), "0", False),     # 0.11.1 no longer reads the variable
    ((0, 10, 2), "0", False),     # the V0 fallback, judged by the rule's older branch
    (None, "0", False),
])
def test_use_v1_zero_fault(version, value, fails):
    assert (use_v1_zero_fault(version, value) is not None) is fails


def test_a_deployment_with_use_v1_zero_on_0110_is_refused(tmp_path, capsys):
    docs = _pair("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.11.0")
    docs[1]["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "VLLM_USE_V1", "value": "0"})
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "nixl-needs-v1-engine" in rules(out, "error"), out
    assert _messages(out, "nixl-needs-v1-engine")[0].startswith("decode:")


def test_the_same_on_0111_passes(tmp_path, capsys):
    docs = _pair("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.11.1")
    docs[1]["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "VLLM_USE_V1", "value": "0"})
    code, out = check(tmp_path, capsys, *docs)
    assert "nixl-needs-v1-engine" not in rules(out), out


def _llmisvc(image, env):
    main = {"name": "main", "image": image, "env": env,
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService", "metadata": {"name": "q"},
            "spec": {"model": {"uri": "hf://meta-llama/Llama-3.1-8B-Instruct"}, "replicas": 1,
                     "template": {"containers": [main]}, "prefill": {"replicas": 1, "template": {"containers": [main]}}}}


@pytest.mark.parametrize(("image", "env", "refused"), [
    ("vllm/vllm-openai:v0.11.0", [{"name": "VLLM_USE_V1", "value": "0"}], True),
    ("vllm/vllm-openai:v0.11.2", [{"name": "VLLM_USE_V1", "value": "0"}], False),
    ("vllm/vllm-openai:v0.11.0", [], False),
    ("vllm/vllm-openai:v0.11.0", [{"name": "VLLM_USE_V1", "valueFrom": {"configMapKeyRef": {"name": "x", "key": "v"}}}],
     False),
])
def test_a_kserve_templated_engine_with_use_v1_zero(tmp_path, capsys, image, env, refused):
    code, out = check(tmp_path, capsys, _llmisvc(image, env))
    assert ("nixl-needs-v1-engine" in rules(out, "error")) is refused, out
    assert code == (1 if refused else 3), out
