"""hybrid-prefix-caching follows the attention kernel's split of the logical block (vLLM's
``_physical_blocks_per_logical_kv_block``): backends that run the logical block never raise
'Prefix caching with heterogeneous physical_blocks_per_logical', fixed-page backends may; a decode with the
larger TP past the KV heads fails the handshake on every kernel."""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.kernel_block import runs_logical_block
from tests.unit.test_public_report_kinds_4 import DS, HYBRID_FLAGS, _kv
from tests.unit.test_turn2_variants import check, container, rules, workload


def _config(tmp_path, heads=2, head_dim=None):
    text = {"num_key_value_heads": heads, "layer_types": ["linear_attention", "full_attention"]}
    if head_dim is not None:
        text["head_dim"] = head_dim
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": ["Qwen3_5ForConditionalGeneration"], "text_config": text}))
    return ("--model-config", str(path))


def _pair(p_tp, d_tp, version, backend=None, block=None, model="Qwen/Qwen3.5-397B-A17B"):
    extra = ([f"--attention-backend={backend}"] if backend else []) + (["--block-size", str(block)] if block else [])

    def role(name, tp):
        args = [model, "--tensor-parallel-size", str(tp), *HYBRID_FLAGS, "--kv-transfer-config", _kv(), *extra]
        return workload(f"hyb-{name}", name, container(args, image=f"vllm/vllm-openai:v{version}", env=[DS], gpus=tp))
    return [role("prefill", p_tp), role("decode", d_tp)]


def _severity(out) -> str | None:
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == "hybrid-prefix-caching"}
    assert len(found) <= 1, found
    return found.pop() if found else None


# The brief's case: Qwen3.5-397B, prefill TP 8 / decode TP 4 (2 KV heads) on 0.33 gets blocks 528 and 1056 on Hopper.
@pytest.mark.parametrize("backend, version, head_dim, expected", [
    ("FLASH_ATTN", "0.33.0", 128, None),       # FlashAttention 2/3: the logical block is the kernel block on both
    ("TRITON_ATTN", "0.33.0", 256, None),      # MultipleOf(16) in every release read
    ("FLEX_ATTENTION", "0.27.0", 256, None),
    ("FLASH_ATTN", "0.27.0", 256, None),       # before FlashAttention 4's 128-token pages (0.29)
    ("FLASH_ATTN", "0.33.0", 256, "warning"),  # FA4's pages for head size 256 on Blackwell
    ("FLASH_ATTN", "0.24.0", 128, "warning"),  # 0.22-0.24: [16, 32, 64] for a float32 Mamba cache (NemotronH)
    ("FLASH_ATTN", "0.25.0", 128, None),
    ("FLASHINFER", "0.33.0", 128, "warning"),  # fixed pages: 528/1056 split into 33 each, 528/1072 do not
    (None, "0.33.0", 128, "warning"),          # the GPU picks the backend
])
def test_prefill_larger_past_the_kv_heads_follows_the_kernel(tmp_path, capsys, backend, version, head_dim, expected):
    pair = _pair(8, 4, version, backend)
    pair[1]["spec"]["template"]["spec"]["containers"][0]["args"].append("--enable-prefix-caching")  # off before 0.26
    _, out = check(tmp_path, capsys, *pair, extra=_config(tmp_path, 2, head_dim))
    assert _severity(out) == expected, out
    assert "hybrid-prefix-caching" not in rules(out, "error")


@pytest.mark.parametrize("backend", ["FLASH_ATTN", "TRITON_ATTN", "FLASHINFER", None])
@pytest.mark.parametrize("version", ["0.22.0", "0.27.0", "0.34.0"])
def test_decode_larger_past_the_kv_heads_fails_on_every_kernel(tmp_path, capsys, backend, version):
    # The decode's block is the smaller: a kernel that runs the logical block fails 'Local block size ... is not
    # divisible'; fixed pages either that or this RuntimeError. An error whatever the backend (up to 0.27.1 prefix
    # caching is off by default for hybrid models, engine/arg_utils.py, so it is asked for here).
    pair = _pair(4, 8, version, backend)
    if version in ("0.22.0", "0.27.0"):
        pair[1]["spec"]["template"]["spec"]["containers"][0]["args"].append("--enable-prefix-caching")
    code, out = check(tmp_path, capsys, *pair, extra=_config(tmp_path, 2, 128))
    assert code == 1 and _severity(out) == "error", out
    message = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "hybrid-prefix-caching")
    assert "fails on every kernel" in message
    if backend == "FLASHINFER":
        assert "fixed pages" in message


@pytest.mark.parametrize("block, expected", [(16, "error"), (1024, "warning")])
def test_decode_larger_with_a_large_block_size_may_get_equal_blocks(tmp_path, capsys, block, expected):
    # --block-size above the smallest kernel page raises vLLM's hybrid alignment: both roles may get that block.
    _, out = check(tmp_path, capsys, *_pair(1, 4, "0.33.0", "FLASHINFER", block), extra=_config(tmp_path, 2, 128))
    assert _severity(out) == expected, out


def test_within_the_kv_heads_and_prefix_caching_off_stay_silent(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_pair(2, 4, "0.33.0", "FLASHINFER"), extra=_config(tmp_path, 4, 128))
    assert _severity(out) is None, out
    pair = _pair(1, 4, "0.33.0", "FLASHINFER")
    pair[1]["spec"]["template"]["spec"]["containers"][0]["args"].append("--no-enable-prefix-caching")
    _, out = check(tmp_path, capsys, *pair, extra=_config(tmp_path, 2, 128))
    assert _severity(out) is None, out


@pytest.mark.parametrize("backend, version, head_size, runs", [
    ("flash_attn", (0, 25, 0), None, True),
    ("FLASH_ATTN", (0, 24, 0), 128, False),
    ("FLASH_ATTN", (0, 29, 0), None, False),
    ("FLASH_ATTN", (0, 30, 0), 512, True),
    ("FLASH_ATTN", (0, 31, 0), 512, False),
    ("FLASH_ATTN", (0, 34, 0), 128, True),
    ("TRITON_ATTN", (0, 22, 0), 256, True),
    ("FLASHINFER", (0, 33, 0), 128, False),
    (None, (0, 33, 0), 128, False),
    ("TRITON_ATTN", None, 128, False),
])
def test_runs_logical_block(backend, version, head_size, runs):
    assert runs_logical_block(backend, version, head_size) is runs
