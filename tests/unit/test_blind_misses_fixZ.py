"""Kinds the blind sets 107 and 108 missed (tests/unit/data/public_reports_107, _108), with negative controls.

Set 107: DeepSeek-V4 over NIXL with the hybrid KV cache manager on vLLM 0.20.0-0.29.0. The engine core sets
``cache_config.block_size`` to the smallest KV cache group's (4 tokens, the compress-ratio-4 state); a worker in the
engine core's process (the ``uni`` executor of world size 1) shares it and NixlConnector's worker finds no kernel
block size the sparse MLA backend (256 only) takes: ``ValueError("No common block size for 4")``
(``nixl-hma-block-size-no-kernel``, :mod:`pdd_operator.vllm.kernel_block`). 0.30.0 sizes the NIXL block as the lcm.

Set 108: ``ghcr.io/llm-d/llm-d:v0.2.0``, llm-d's image repository before ``llm-d-cuda``, ships vLLM 0.10.0 (llm-d's
v0.3.0 release notes: "Diff: v0.10.0 -> v0.11.0"; llm-d/llm-d#355), a row of ``wrapped_vllm_versions.json``; its
0.0.x tags built a fork's commit and stay unknown.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.kernel_block import hma_nixl_kernel_refusal
from pdd_operator.vllm.versions import version_from_image
from tests.unit.test_turn2_variants import POD_IP, check, workload

RULE = "nixl-hma-block-size-no-kernel"
KV = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def _docs(image="vllm/vllm-openai:v0.26.0", model="deepseek-ai/DeepSeek-V4-Flash", extra=(), tp=1, kv=None):
    docs = []
    for role in ("prefill", "decode"):
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": [model, "--tensor-parallel-size", str(tp), "--kv-cache-dtype", "fp8",
                      "--kv-transfer-config", json.dumps(kv or KV), *extra],
             "env": [POD_IP], "resources": {"limits": {"nvidia.com/gpu": str(tp)}}}
        docs.append(workload(f"dsv4-{role}", role, c, app="dsv4"))
    return docs


def _found(out: dict) -> list[str]:
    return [f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == RULE]


# --- the facts, as a pure function -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("arch", "version", "expected"), [
    ("DeepseekV4ForCausalLM", (0, 20, 0), (4, (256,))),   # first release serving DeepSeek-V4
    ("DeepseekV4ForCausalLM", (0, 26, 0), (4, (256,))),
    ("DeepseekV4ForCausalLM", (0, 29, 0), (4, (256,))),
    ("DeepseekV4ForCausalLM", (0, 30, 0), None),          # lcm of the groups' block sizes (nixl/base_worker.py)
    ("DeepseekV4ForCausalLM", (0, 19, 1), None),
    ("DeepseekV4ForCausalLM", None, None),
    ("DeepseekV3ForCausalLM", (0, 26, 0), None),
    (None, (0, 26, 0), None),
])
def test_hma_nixl_kernel_refusal(arch, version, expected):
    assert hma_nixl_kernel_refusal(arch, version) == expected


# --- the rule, on manifests ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.26.0", "vllm/vllm-openai:v0.27.0", "vllm/vllm-openai:v0.22.0",
                                   "vllm/vllm-openai:v0.29.0"])
def test_dsv4_tp1_nixl_hma_on_by_default_is_an_error(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, *_docs(image=image))
    assert code != 0 and _found(out) == ["error", "error"], out   # both engines stop


def test_dsv4_pro_and_explicit_flag_on_0210(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_docs(image="vllm/vllm-openai:v0.21.0", model="deepseek-ai/DeepSeek-V4-Pro",
                                               extra=("--no-disable-hybrid-kv-cache-manager",)))
    assert _found(out) == ["error", "error"], out


@pytest.mark.parametrize(("image", "model", "extra", "tp"), [
    ("vllm/vllm-openai:v0.30.0", "deepseek-ai/DeepSeek-V4-Flash", (), 1),        # fixed: lcm
    ("vllm/vllm-openai:v0.21.0", "deepseek-ai/DeepSeek-V4-Flash", (), 1),        # HMA off under a connector up to 0.21
    ("vllm/vllm-openai:v0.26.0", "deepseek-ai/DeepSeek-V4-Flash", ("--disable-hybrid-kv-cache-manager",), 1),
    ("vllm/vllm-openai:v0.26.0", "deepseek-ai/DeepSeek-V4-Flash", (), 2),        # mp workers keep their own config
    ("vllm/vllm-openai:v0.26.0", "deepseek-ai/DeepSeek-V4-Flash", ("--data-parallel-size", "2"), 1),
    ("vllm/vllm-openai:v0.26.0", "deepseek-ai/DeepSeek-V4-Flash", ("--distributed-executor-backend", "mp"), 1),
    ("vllm/vllm-openai:v0.26.0", "deepseek-ai/DeepSeek-V3", (), 1),              # no compressor groups
    ("rocm/vllm:v0.26.0", "deepseek-ai/DeepSeek-V4-Flash", (), 1),               # ROCm backends not read
])
def test_not_refused(tmp_path, capsys, image, model, extra, tp):
    _, out = check(tmp_path, capsys, *_docs(image=image, model=model, extra=extra, tp=tp))
    assert "error" not in _found(out), out


def test_unknown_release_is_not_an_error(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_docs(image="registry.example.com/team/vllm:latest"))
    assert "error" not in _found(out), out
    assert any(RULE in n["reason"] for n in out["notChecked"]), out   # named as not checked, never silent


# --- set 108: llm-d's legacy image repository -------------------------------------------------------------------------


@pytest.mark.parametrize(("image", "expected"), [
    ("ghcr.io/llm-d/llm-d:v0.2.0", (0, 10, 0)),
    ("ghcr.io/llm-d/llm-d:0.0.10", None),       # neuralmagic/vllm pd-launch-branch at a commit: no release
    ("ghcr.io/llm-d/llm-d:0.0.8", None),
    ("ghcr.io/llm-d/llm-d:v0.3.0", None),       # v0.3.0 is published as llm-d-cuda, not here
    ("ghcr.io/llm-d/llm-d-cuda:v0.3.0", (0, 11, 0)),
])
def test_llm_d_legacy_repository(image, expected):
    assert version_from_image(image) == expected


def test_llm_d_v020_prefill_tp_over_decode_tp_is_judged(tmp_path, capsys):
    docs = []
    for role, tp in (("prefill", 8), ("decode", 4)):
        c = {"name": "vllm", "image": "ghcr.io/llm-d/llm-d:v0.2.0", "command": ["vllm", "serve"],
             "args": ["meta-llama/Llama-3.3-70B-Instruct", "--tensor-parallel-size", str(tp),
                      "--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})],
             "env": [POD_IP], "resources": {"limits": {"nvidia.com/gpu": str(tp)}}}
        docs.append(workload(f"l-{role}", role, c, app="l"))
    code, out = check(tmp_path, capsys, *docs)
    found = {f["rule"]: f["severity"] for r in out["results"] for f in r["findings"]}
    assert out["results"][0]["vllmVersion"] == "0.10.0", out
    assert code != 0 and found.get("hetero-tp-p-gt-d-unsupported") == "error", found


def test_a_parallel_size_not_in_the_files_is_a_warning_not_held_back(tmp_path, capsys):
    docs = _docs(extra=("--data-parallel-size", "$(DP)"))
    for d in docs:
        d["spec"]["template"]["spec"]["containers"][0]["env"].append(
            {"name": "DP", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "dp"}}})
    _, out = check(tmp_path, capsys, *docs)
    assert _found(out) == ["warning", "warning"], out
