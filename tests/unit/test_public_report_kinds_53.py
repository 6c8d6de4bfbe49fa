"""Variants of what the fifty-third public-report set (tests/unit/data/public_reports_53) led to, with negative
controls: a hybrid SSM pair with heterogeneous TP past the model's KV heads gets different KV cache blocks per role.

The set itself scored full marks blind; probing its Qwen3.5 pd_cluster recipe with a 4-GPU role showed the kind the
checker passed in silence once decode prefix caching is off: vLLM sizes a hybrid model's attention block to hold its
Mamba page, which shrinks with TP while the per-token attention page stops shrinking at one KV head per rank, and the
NIXL handshake asserts the decode's kernel block is a multiple of the prefill's
(:mod:`pdd_operator.compat.rules.hybrid_block_geometry`). Which kernel block runs depends on the GPU's attention
kernel: a warning, and an error where ``--attention-backend`` pins one that runs the logical block on both roles and
the decode has the larger TP.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tests.unit.test_turn2_variants import check, container, rules, workload

RULE = "hybrid-hetero-tp-block-geometry"
KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
DS = [{"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}]
NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"   # Mamba2 hybrid: 2 KV heads, head size 128
QWEN35 = "Qwen/Qwen3.5-397B-A17B"                     # GDN hybrid: 2 KV heads, head size 256
NEMOTRON_H_56B = "nvidia/Nemotron-H-56B-Base-8K"      # Mamba2 hybrid: 8 KV heads
EXAMPLE = Path(__file__).parents[2] / "examples" / "nemotron-nano-pd.yaml"


def _pair(model, p_tp, d_tp, image="vllm/vllm-openai:v0.34.0", p_extra=(), d_extra=(), decode_pc=False):
    d_pc = () if decode_pc else ("--no-enable-prefix-caching",)
    p = container([model, "--tensor-parallel-size", str(p_tp), "--kv-transfer-config", KV_P, *p_extra],
                  image=image, env=DS, gpus=p_tp)
    d = container([model, "--tensor-parallel-size", str(d_tp), "--kv-transfer-config", KV_D, *d_pc, *d_extra],
                  image=image, env=DS, gpus=d_tp)
    return [workload("m-prefill", "prefill", p, app="m"), workload("m-decode", "decode", d, app="m")]


def _severity(out, rule=RULE):
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == rule}
    assert len(found) <= 1, found
    return next(iter(found), None)


@pytest.mark.parametrize(("model", "p_tp", "d_tp"), [
    (QWEN35, 4, 8),          # GDN, decode TP larger
    (QWEN35, 8, 4),          # GDN, prefill TP larger: passes only where the rounding keeps an exact multiple
    (NANO, 1, 4),            # Mamba2: TP 1 within the 2 KV heads, TP 4 past them
    (NANO, 4, 2),
])
def test_past_the_kv_heads_without_decode_prefix_caching_is_no_longer_silent(tmp_path, capsys, model, p_tp, d_tp):
    code, out = check(tmp_path, capsys, *_pair(model, p_tp, d_tp))
    assert code == 0 and _severity(out) == "warning", out
    assert "hybrid-prefix-caching" not in rules(out)


@pytest.mark.parametrize(("model", "p_tp", "d_tp"), [
    (NANO, 2, 2),              # equal TP
    (NANO, 1, 2),              # both within the 2 KV heads: the same block on both
    (NEMOTRON_H_56B, 2, 4),    # within 8 KV heads
    (NEMOTRON_H_56B, 8, 4),
    ("meta-llama/Llama-3.1-8B-Instruct", 2, 16),  # no Mamba page: plain attention keeps the same block
])
def test_same_block_on_both_roles_is_not_flagged(tmp_path, capsys, model, p_tp, d_tp):
    _, out = check(tmp_path, capsys, *_pair(model, p_tp, d_tp))
    assert _severity(out) is None, out


def test_a_pinned_logical_block_backend_with_the_larger_decode_tp_is_refused(tmp_path, capsys):
    pin = ("--attention-backend", "FLASH_ATTN")
    code, out = check(tmp_path, capsys, *_pair(NANO, 1, 4, p_extra=pin, d_extra=pin))
    assert code == 1 and _severity(out) == "error", out
    msg = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == RULE)
    assert "not divisible by remote block size" in msg and "FLASH_ATTN" in msg


@pytest.mark.parametrize(("model", "p_tp", "d_tp", "p_extra", "d_extra"), [
    (NANO, 4, 1, ("--attention-backend", "TRITON_ATTN"), ("--attention-backend", "TRITON_ATTN")),  # prefill larger
    (QWEN35, 4, 8, ("--attention-backend", "FLASH_ATTN"), ("--attention-backend", "FLASH_ATTN")),  # FA4 page possible
    (NANO, 1, 4, ("--attention-backend", "FLASH_ATTN"), ()),                                       # decode not pinned
    (NANO, 1, 4, ("--attention-backend", "FLASHINFER"), ("--attention-backend", "FLASHINFER")),    # fixed pages
    (NANO, 1, 4, ("--attention-backend", "FLASH_ATTN", "--block-size", "2048"),
     ("--attention-backend", "FLASH_ATTN", "--block-size", "2048")),                               # explicit blocks
])
def test_where_the_kernel_block_is_not_settled_it_stays_a_warning(tmp_path, capsys, model, p_tp, d_tp, p_extra,
                                                                  d_extra):
    code, out = check(tmp_path, capsys, *_pair(model, p_tp, d_tp, p_extra=p_extra, d_extra=d_extra))
    assert code == 0 and _severity(out) == "warning", out


@pytest.mark.parametrize(("image", "expected"), [
    ("vllm/vllm-openai:v0.21.0", None),        # before the releases read
    ("vllm/vllm-openai:v0.22.0", "warning"),
    ("vllm/vllm-openai:v0.27.0", "warning"),
    ("vllm/vllm-openai:v0.33.0", "warning"),
])
def test_the_rule_speaks_for_the_releases_read(tmp_path, capsys, image, expected):
    _, out = check(tmp_path, capsys, *_pair(NANO, 1, 4, image=image))
    assert _severity(out) == expected, out


@pytest.mark.parametrize(("image", "expected"), [
    ("vllm/vllm-openai:v0.22.0", "error"),     # the Mamba descriptors assert a block ratio of exactly 1
    ("vllm/vllm-openai:v0.26.0", "error"),
    ("vllm/vllm-openai:v0.27.0", "warning"),   # a larger decode block may be an exact multiple
    ("vllm/vllm-openai:v0.34.0", "warning"),
])
def test_a_larger_prefill_tp_is_refused_only_where_blocks_must_be_equal(tmp_path, capsys, image, expected):
    pin = ("--attention-backend", "TRITON_ATTN")
    code, out = check(tmp_path, capsys, *_pair(NANO, 4, 1, image=image, p_extra=pin, d_extra=pin))
    assert _severity(out) == expected and code == (1 if expected == "error" else 0), out


def test_decode_prefix_caching_leaves_the_finding_to_hybrid_prefix_caching(tmp_path, capsys):
    # The decode with the larger TP holds the smaller block: the handshake fails on every kernel (an error).
    code, out = check(tmp_path, capsys, *_pair(QWEN35, 4, 8, decode_pc=True))
    assert code == 1 and "hybrid-prefix-caching" in rules(out, "error")
    assert _severity(out) is None
    # The prefill with the larger TP (blocks 528 and 1056 on Hopper): FlashAttention 2/3 run each block unsplit and
    # never raise the prefix-caching error, fixed pages may: the GPU's kernel decides, a warning.
    code, out = check(tmp_path, capsys, *_pair(QWEN35, 8, 4, decode_pc=True))
    assert code == 0 and "hybrid-prefix-caching" in rules(out, "warning"), out


def test_a_pddeployment_past_the_kv_heads_is_warned_in_its_own_fields(tmp_path, capsys):
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec = copy.deepcopy(spec)
    spec["spec"]["engine"]["image"] = "ghcr.io/pdd-operator/vllm-nixl:v0.34.0"
    spec["spec"]["prefill"]["tensorParallelSize"] = 2
    spec["spec"]["decode"]["tensorParallelSize"] = 4
    code, out = check(tmp_path, capsys, spec)
    assert code == 0 and _severity(out) == "warning", out
    finding = next(f for r in out["results"] for f in r["findings"] if f["rule"] == RULE)
    assert "spec.decode.tensorParallelSize" in finding["fields"]
