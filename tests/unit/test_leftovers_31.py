"""Kinds left over from rules round 30 (leftovers 31), each read in vLLM's code per release, with variants that fail
without the fix and negative controls.

- ``hetero-tp-kv-layout`` on a written ``VLLM_KV_CACHE_LAYOUT``: vLLM's head-splitting guard (nixl add_remote_agent,
  0.20.0-0.34.0) skips the handshaking engine's ``enable_permute_local_kv`` and a replicated remote KV cache (the
  remote TP above the model's KV heads), for a written layout as for a TurboQuant-forced one; the remote is the
  prefill for pull, so a decode-side replication does not exempt a pull pair.
- ``kv-layout-dtype-unsupported``: from 0.34.0 a turboquant_* KV cache with a written VLLM_KV_CACHE_LAYOUT other than
  LBNHC stops the engine at layout resolution ("does not satisfy every supported set").
"""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

LAYOUT = "hetero-tp-kv-layout"
DTYPE_LAYOUT = "kv-layout-dtype-unsupported"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"  # 8 KV heads
GEMMA = "google/gemma-2-2b-it"              # 4 KV heads


def _kv(role, connector="NixlConnector", **extra):
    return json.dumps({"kv_connector": connector, "kv_role": role, **extra})


def _pair(model, image, tps, layout=None, dtype=None, kv_d=None, kv_p=None, connector=True):
    docs = []
    env = [{"name": "VLLM_KV_CACHE_LAYOUT", "value": layout}] if layout else []
    for role, kv, n in (("prefill", kv_p or _kv("kv_producer"), tps[0]), ("decode", kv_d or _kv("kv_consumer"), tps[1])):
        args = [model, "--tensor-parallel-size", str(n)]
        if dtype:
            args += ["--kv-cache-dtype", dtype]
        if connector:
            args += ["--kv-transfer-config", kv]
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"], "args": args, "env": [POD_IP, *env],
             "resources": {"limits": {"nvidia.com/gpu": str(n)}},
             "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}
        docs.append(workload(f"m-{role}", role, c, app="m"))
    return docs


# --- a written token-major layout with heterogeneous TP: the guard's exemptions ------------------------------------

@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.22.0", "vllm/vllm-openai:v0.26.0", "vllm/vllm-openai:v0.34.0"])
def test_written_nhd_with_heterogeneous_tp_is_refused(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, *_pair(LLAMA, image, (1, 2), layout="NHD"))
    assert code == 1 and LAYOUT in rules(out, "error"), image


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.22.0", "vllm/vllm-openai:v0.26.0", "vllm/vllm-openai:v0.34.0"])
def test_written_nhd_with_the_decode_permuting_is_not_refused(tmp_path, capsys, image):
    kv_d = _kv("kv_consumer", enable_permute_local_kv=True)
    _, out = check(tmp_path, capsys, *_pair(LLAMA, image, (1, 2), layout="NHD", kv_d=kv_d))
    assert LAYOUT not in rules(out), image


@pytest.mark.parametrize(("model", "layout"), [(GEMMA, "NHD"), (GEMMA, "LBNHC")])
def test_written_token_major_layout_with_a_replicated_prefill_cache_is_not_refused(tmp_path, capsys, model, layout):
    # prefill TP 8 > 4 KV heads: the decode's handshake sees a replicated remote cache and splits no heads
    _, out = check(tmp_path, capsys, *_pair(model, "vllm/vllm-openai:v0.30.0", (8, 4), layout=layout))
    assert LAYOUT not in rules(out)


def test_a_replicated_decode_cache_does_not_exempt_a_pull_pair(tmp_path, capsys):
    # decode TP 8 > 4 KV heads, prefill TP 2: the pull decode's remote (the prefill) is split by heads
    code, out = check(tmp_path, capsys, *_pair(GEMMA, "vllm/vllm-openai:v0.30.0", (2, 8), layout="NHD"))
    assert code == 1 and LAYOUT in rules(out, "error")
    _, out = check(tmp_path, capsys, *_pair(GEMMA, "vllm/vllm-openai:v0.34.0", (2, 8), dtype="turboquant_k8v4"))
    assert LAYOUT in rules(out, "error")


def test_written_nhd_for_a_model_of_unknown_heads_is_a_warning(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_pair("acme/private-model-7b", "vllm/vllm-openai:v0.26.0", (1, 2), layout="NHD"))
    assert LAYOUT in rules(out, "warning") and LAYOUT not in rules(out, "error")


# --- a TurboQuant KV cache refuses a written layout other than LBNHC from 0.34.0 -------------------------------------

@pytest.mark.parametrize(("layout", "tps", "connector"), [
    ("LBHNC", (1, 1), True), ("HND", (2, 2), True), ("LBHNC", (1, 1), False), ("BLHNC", (1, 1), True),
])
def test_turboquant_with_another_written_layout_on_034_is_refused(tmp_path, capsys, layout, tps, connector):
    docs = _pair(LLAMA, "vllm/vllm-openai:v0.34.0", tps, layout=layout, dtype="turboquant_k8v4", connector=connector)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and DTYPE_LAYOUT in rules(out, "error"), (layout, tps, connector)


@pytest.mark.parametrize(("image", "layout", "dtype"), [
    ("vllm/vllm-openai:v0.33.0", "LBHNC", "turboquant_k8v4"),  # the 0.33 backend declares no layout
    ("vllm/vllm-openai:v0.34.0", "LBNHC", "turboquant_k8v4"),  # the layout it supports
    ("vllm/vllm-openai:v0.34.0", "NHD", "turboquant_k8v4"),    # its legacy alias
    ("vllm/vllm-openai:v0.34.0", None, "turboquant_k8v4"),     # no written layout: NIXL's preference is dropped
    ("vllm/vllm-openai:v0.34.0", "LBHNC", "fp8"),
])
def test_turboquant_layout_controls_say_nothing(tmp_path, capsys, image, layout, dtype):
    _, out = check(tmp_path, capsys, *_pair(LLAMA, image, (1, 1), layout=layout, dtype=dtype))
    assert DTYPE_LAYOUT not in rules(out), (image, layout, dtype)
