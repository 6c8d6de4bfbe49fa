"""Variants of what the eightieth public-report set (tests/unit/data/public_reports_80) taught, with negative controls:
the attention backend each role runs decides whether a P/D pair moves KV at all, and whether it moves the right heads.

- A backend named on one role only (``--attention-backend TRITON_ATTN`` on the decode, vllm#40826) meets the backend
  vLLM picks by itself on the other: FLASH_ATTN or FLASHINFER on every NVIDIA GPU from compute capability 7.5 up for
  a plain model of head size <= 256, never TRITON_ATTN or FLEX_ATTENTION (vllm/platforms/cuda.py
  ``_get_backend_priorities``, read alike 0.18.0-0.26.0). ``attn_backend_name`` is hashed, so the handshake refuses the
  pair even where the other role's GPU is not known (``attention-backend-mismatch``).
- ``VLLM_ATTENTION_BACKEND`` differing per role is certain wherever the release reads it and compares backend names:
  0.9.1-0.12.0 assert equal names in ``add_remote_agent``, 0.13.0-0.14.1 hash them (vllm#25102's CUTLASS_MLA beside
  FLASHINFER_MLA on 0.11.0; 0.9.0 knows no FlashInfer layout at all). 0.16.0 and later do not read the variable.
- FlashInfer under heterogeneous TP on 0.9.1-0.10.1.1 hands each decode rank K or V instead of its heads of both:
  the virtual K/V split came in 0.10.2 (vllm#20189; ``flashinfer-hetero-tp-kv-split``, a warning as for TRITON_ATTN).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.env_vars import read_by
from tests.unit.test_turn2_variants import check, container, rules, workload

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def _pair(model, image, p_args=(), d_args=(), p_env=(), d_env=(), tps=(1, 1), p_pod=None, d_pod=None):
    docs = []
    for role, args, env, tp, pod in (("prefill", p_args, p_env, tps[0], p_pod), ("decode", d_args, d_env, tps[1], d_pod)):
        c = container([model, "--tensor-parallel-size", str(tp), "--kv-transfer-config", KV, *args], image=image,
                      env=[{"name": k, "value": v} for k, v in env], gpus=tp)
        docs.append(workload(f"m-{role}", role, c, app="m", pod=pod))
    return docs


def _severities(out: dict, rule: str) -> set[str]:
    return {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == rule}


def _pinned(product: str) -> dict:
    return {"nodeSelector": {"nvidia.com/gpu.product": product}}


# --- the pure functions -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "expected"), [
    ((0, 9, 0), True), ((0, 11, 0), True), ((0, 14, 1), True),
    ((0, 15, 0), False),   # between 0.14.1 (reads it) and 0.16.0 (does not)
    ((0, 16, 0), False), ((0, 20, 0), False), (None, False), ((0, 8, 5), False),
])
def test_the_releases_that_certainly_read_vllm_attention_backend(version, expected):
    assert read_by("VLLM_ATTENTION_BACKEND", version) is expected


# --- a backend named on one role only, the other role's GPU not pinned --------------------------------------------


@pytest.mark.parametrize(("model", "image", "p_args", "d_args", "severity"), [
    # vllm#40826's pairing on a known model: the decode names TRITON_ATTN, the prefill runs FLASH_ATTN or FLASHINFER
    # (fixN: with no GPU pinned TRITON_ATTN is a warning: vLLM picks TRITON_ATTN itself on a V100, compute capability
    # 7.0, where FLASH_ATTN (8.0+) and FLASHINFER (7.5+) are invalid: platforms/cuda.py _get_backend_priorities,
    # flash_attn.py / flashinfer.py supports_compute_capability, 0.18.0-0.34.0)
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.20.0", [], ["--attention-backend", "TRITON_ATTN"], "warning"),
    ("Qwen/Qwen3-30B-A3B-FP8", "vllm/vllm-openai:v0.22.0", ["--attention-backend=FLEX_ATTENTION"], [], "error"),
    ("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.18.0", [], ["--attention-backend", "triton_attn"],
     "warning"),
    # negative controls
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.17.1", [], ["--attention-backend", "TRITON_ATTN"], "warning"),  # not read
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.20.0", [], ["--attention-backend", "FLASHINFER"], "warning"),  # B200's own
    ("my-org/private-model", "vllm/vllm-openai:v0.20.0", [], ["--attention-backend", "TRITON_ATTN"], "warning"),
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.20.0", ["--kv-cache-dtype", "fp8"], ["--attention-backend", "TRITON_ATTN"],
     "warning"),  # an FP8 cache on the unnamed role: its default not judged here
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.20.0", ["--attention-backend", "TRITON_ATTN"],
     ["--attention-backend", "TRITON_ATTN"], None),
], ids=["qwen3-0.6b-0.20-triton", "qwen3-30b-fp8-0.22-flex", "llama-0.18-triton", "0.17-not-read", "flashinfer-may-be-default",
        "unknown-model", "fp8-cache-other-role", "both-named"])
def test_a_backend_vllm_never_picks_named_on_one_role_is_refused_whatever_the_gpu(tmp_path, capsys, model, image,
                                                                                  p_args, d_args, severity):
    code, out = check(tmp_path, capsys, *_pair(model, image, p_args, d_args))
    assert _severities(out, "attention-backend-mismatch") == ({severity} if severity else set()), out
    if severity == "error":
        assert code == 1


def test_the_message_names_the_defaults_and_the_hash(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.20.0", [],
                                            ["--attention-backend", "FLEX_ATTENTION"]))
    (message,) = [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "attention-backend-mismatch"]
    assert "FLASH_ATTN on" in message and "TRITON_ATTN on 7.0" in message and "never FLEX_ATTENTION" in message
    assert "hash" in message


# --- VLLM_ATTENTION_BACKEND differing per role ---------------------------------------------------------------------


@pytest.mark.parametrize(("model", "image", "p_be", "d_be", "severity"), [
    ("deepseek-ai/DeepSeek-V2-Lite", "vllm/vllm-openai:v0.11.0", "FLASHINFER_MLA", "CUTLASS_MLA", "error"),  # vllm#25102
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.11.0", "FLASHINFER", "FLASH_ATTN", "error"),
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.12.0", "FLASHINFER", "FLASH_ATTN", "error"),
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.14.1", "TRITON_ATTN", "FLASH_ATTN", "error"),   # hashed, env read
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.10.0", "FLASHINFER", "FLASH_ATTN", "error"),    # as before (vllm#23587)
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.9.0", "FLASHINFER", "FLASH_ATTN", "error"),     # no FlashInfer layout
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.15.0", "FLASHINFER", "FLASH_ATTN", "warning"),  # 0.15.x not read
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.20.0", "FLASHINFER", "FLASH_ATTN", None),  # ignored (vllm-env-unread)
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.10.0", "FLASH_ATTN", "FLASH_ATTN_VLLM_V1", None),  # one backend, two names
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.11.0", "FLASH_ATTN", "flash_attn", None),
], ids=["mla-0.11", "0.11", "0.12", "0.14.1", "0.10", "0.9.0", "0.15.0", "0.20.0", "v1-alias", "case"])
def test_vllm_attention_backend_differing_where_the_release_reads_and_compares_it(tmp_path, capsys, model, image, p_be,
                                                                                 d_be, severity):
    docs = _pair(model, image, p_env=[("VLLM_ATTENTION_BACKEND", p_be)], d_env=[("VLLM_ATTENTION_BACKEND", d_be)])
    _, out = check(tmp_path, capsys, *docs)
    assert _severities(out, "attention-backend-mismatch") == ({severity} if severity else set()), out


# --- FlashInfer under heterogeneous TP before the virtual K/V split ------------------------------------------------


FI = [("VLLM_ATTENTION_BACKEND", "FLASHINFER")]


@pytest.mark.parametrize(("model", "image", "tps", "env", "d_pod", "expected"), [
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.10.1.1", (1, 2), FI, None, True),          # the set's entry
    ("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.9.2", (2, 4), FI, None, True),
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.10.1.1", (1, 2), (), _pinned("NVIDIA-B200"), True),  # Blackwell default
    # negative controls
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.10.2", (1, 2), FI, None, False),           # the split is in
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.10.1.1", (2, 2), FI, None, False),         # equal TP: whole blocks
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.10.1.1", (1, 2), (), None, False),         # FLASH_ATTN by default
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.9.1", (1, 2), (), _pinned("NVIDIA-B200"), False),  # no Blackwell default
    ("Qwen/Qwen2.5-3B-Instruct", "vllm/vllm-openai:v0.10.1.1", (2, 4), FI, None, False),  # 2 KV heads: replicated
    ("deepseek-ai/DeepSeek-V2-Lite", "vllm/vllm-openai:v0.10.1.1", (1, 2), FI, None, False),  # MLA: no heads to split
], ids=["qwen3-0.10.1.1", "llama-0.9.2", "b200-default", "0.10.2", "equal-tp", "no-flashinfer", "b200-0.9.1",
        "replicated-kv", "mla"])
def test_flashinfer_under_heterogeneous_tp_before_0_10_2(tmp_path, capsys, model, image, tps, env, d_pod, expected):
    docs = _pair(model, image, p_env=env, d_env=env, tps=tps, d_pod=d_pod)
    _, out = check(tmp_path, capsys, *docs)
    assert ("flashinfer-hetero-tp-kv-split" in rules(out, "warning")) is expected, out
    assert "flashinfer-hetero-tp-kv-split" not in rules(out, "error")
