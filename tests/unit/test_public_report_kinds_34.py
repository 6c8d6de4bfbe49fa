"""Variants of what the thirty-fourth public-report set (tests/unit/data/public_reports_34) taught, with negative
controls.

- The kernel block split under NIXL (vllm#28925, after #28677): from 0.11.1 FLASH_ATTN and FLASHINFER run KV blocks
  of 16, 32 or 64 tokens (``supported_kernel_block_sizes``), so ``--block-size 128`` runs on 64-token kernel blocks;
  0.11.1 and 0.11.2's NIXL worker publishes the kernel size while its ``TpKVTopology`` keeps the logical one, and the
  decode's handshake fails. 0.11.0 (no split) and 0.12.0 (topology on the kernel size) are fine. Such a pair passed
  as compatible (:mod:`pdd_operator.compat.rules.kernel_block`, :mod:`pdd_operator.vllm.kernel_block`).
"""

from __future__ import annotations

import pytest

from pdd_operator.vllm.kernel_block import kernel_block_size
from tests.unit.test_turn2_variants import check, pd, rules

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
RULE = "block-size-kernel-split"


def _pair(block_size, image="vllm/vllm-openai:v0.11.1", backend=None, kv=KV, model="meta-llama/Llama-3.1-8B-Instruct",
          kind="Deployment", tp=1):
    env = [{"name": "VLLM_ATTENTION_BACKEND", "value": backend}] if backend else []
    args = ["--tensor-parallel-size", str(tp), "--block-size", str(block_size), "--kv-transfer-config", kv]
    docs = pd("bs", args, args, model=model, image=image, env=env, gpus=tp)
    for doc in docs:
        doc["kind"] = kind
    return docs


# --- the facts: select_common_block_size for one backend (0.11.1 / 0.11.2) ------------------------------------


@pytest.mark.parametrize(("logical", "backend", "kernel"), [
    (128, "FLASH_ATTN", 64), (128, "flashinfer", 64), (256, "FLASH_ATTN", 64), (96, "FLASH_ATTN", 32),
    (64, "FLASH_ATTN", 64), (16, "FLASHINFER", 16), (128, "TRITON_ATTN", 128), (128, "FLEX_ATTENTION", 128),
    (24, "FLASH_ATTN", None), (24, "TRITON_ATTN", None), (128, "SOMETHING_NEW", None)])
def test_kernel_block_size_is_the_largest_supported_divisor(logical, backend, kernel):
    assert kernel_block_size(logical, backend) == kernel


# --- the rule ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("image", "backend", "block_size", "kind"), [
    ("vllm/vllm-openai:v0.11.1", "FLASH_ATTN", 128, "Deployment"),
    ("vllm/vllm-openai:v0.11.2", "FLASHINFER", 128, "StatefulSet"),
    ("vllm/vllm-openai:v0.11.1", "FLASH_ATTN", 256, "Deployment"),
])
def test_a_split_block_on_a_nixl_decode_in_0111_or_0112_is_an_error(tmp_path, capsys, image, backend, block_size, kind):
    code, out = check(tmp_path, capsys, *_pair(block_size, image=image, backend=backend, kind=kind))
    assert code == 1 and RULE in rules(out, "error"), out


def test_a_split_block_inside_a_multiconnector_is_still_nixl(tmp_path, capsys):
    multi = ('{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":['
             '{"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"OffloadingConnector",'
             '"kv_role":"kv_both","kv_connector_extra_config":{"num_cpu_blocks":1000}}]}}')
    code, out = check(tmp_path, capsys, *_pair(128, backend="FLASH_ATTN", kv=multi, model="Qwen/Qwen3-30B-A3B"))
    assert RULE in rules(out, "error"), out


def test_a_split_block_with_the_default_backend_is_a_warning(tmp_path, capsys):
    """Without VLLM_ATTENTION_BACKEND the backend depends on the GPU (FLASH_ATTN / FLASHINFER on Ampere and newer,
    a multiple-of-16 backend before): a warning, not silence."""
    code, out = check(tmp_path, capsys, *_pair(128))
    assert RULE in rules(out, "warning") and RULE not in rules(out, "error"), out


def test_an_undescribed_backend_is_a_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(128, backend="SOMETHING_NEW"))
    assert RULE in rules(out, "warning"), out


@pytest.mark.parametrize(("image", "backend", "block_size"), [
    ("vllm/vllm-openai:v0.11.0", "FLASH_ATTN", 128),   # no split before 0.11.1
    ("vllm/vllm-openai:v0.12.0", "FLASH_ATTN", 128),   # topology on the kernel size
    ("vllm/vllm-openai:v0.11.1", "FLASH_ATTN", 64),    # a kernel size: no split
    ("vllm/vllm-openai:v0.11.1", "TRITON_ATTN", 128),  # multiples of 16 run as they are
    ("vllm/vllm-openai:v0.11.1", None, 32),
])
def test_no_split_is_no_finding(tmp_path, capsys, image, backend, block_size):
    code, out = check(tmp_path, capsys, *_pair(block_size, image=image, backend=backend))
    assert RULE not in rules(out), out


def test_an_mla_model_is_not_described(tmp_path, capsys):
    """MLA backends get their block sizes forced by platforms/cuda.py: out of the rule's scope."""
    code, out = check(tmp_path, capsys, *_pair(128, backend="FLASH_ATTN", model="deepseek-ai/DeepSeek-V2-Lite-Chat"))
    assert RULE not in rules(out), out
