"""hybrid-hetero-tp-block-geometry and hybrid-prefix-caching read one definition of the backends that run a hybrid
model's logical block as their kernel block (:func:`~pdd_operator.vllm.kernel_block.runs_logical_block`) and agree
on every backend, release and head size: past the KV heads with heterogeneous TP exactly one of them speaks.

Two faults this pins: the geometry rule kept silent whenever the decode had prefix caching on, although
hybrid-prefix-caching is silent too where both roles run the logical block and the prefill has the larger TP (before
0.27 the Mamba descriptors then assert ``block_size_ratio == 1``: nixl/worker.py lines 1021-1024 of 0.22.0); and its
own backend table counted FLASH_ATTN as whole-block in 0.22-0.24, where a float32 Mamba cache (NemotronH's default)
gets fixed 16/32/64 pages (flash_attn.py lines 77-94 of 0.22.0 and 0.24.0)."""

from __future__ import annotations

import pytest

from pdd_operator.vllm.kernel_block import runs_logical_block
from tests.unit.test_hybrid_prefix_caching_kernels import _config, _pair
from tests.unit.test_turn2_variants import check

GEOMETRY = "hybrid-hetero-tp-block-geometry"
PREFIX = "hybrid-prefix-caching"
#: Every boundary of :func:`runs_logical_block` (FLASH_ATTN whole-block from 0.25, FlashAttention 4's pages for head
#: size 256 from 0.29 and 512 from 0.31) and of the geometry rule (heterogeneous blocks read from 0.27).
RELEASES = ["0.22.0", "0.24.0", "0.25.0", "0.27.0", "0.29.0", "0.31.0"]
#: Head sizes matter to FLASH_ATTN only; the other backends are taken at one.
KERNELS = [("FLASH_ATTN", h) for h in (128, 256, 512)] + [(b, 128) for b in
                                                         ("TRITON_ATTN", "FLEX_ATTENTION", "FLASHINFER", None)]
#: (prefill TP, decode TP, decode prefix caching): both directions with it on, and the decode-larger one with it off
#: (the prefill-larger one with it off is judged as with it on where both roles run the logical block).
SHAPES = [(8, 4, True), (4, 8, True), (4, 8, False)]


def _severities(out) -> dict[str, str]:
    found: dict[str, set[str]] = {}
    for r in out["results"]:
        for f in r["findings"]:
            if f["rule"] in (GEOMETRY, PREFIX):
                found.setdefault(f["rule"], set()).add(f["severity"])
    assert all(len(s) == 1 for s in found.values()), found
    return {rule: s.pop() for rule, s in found.items()}


def _decode_args(pair, *args):
    pair[1]["spec"]["template"]["spec"]["containers"][0]["args"].extend(args)
    return pair


def _version(text: str) -> tuple[int, int, int]:
    a, b, c = (int(x) for x in text.split("."))
    return a, b, c


@pytest.mark.parametrize("version", RELEASES)
@pytest.mark.parametrize("backend, head_dim", KERNELS)
@pytest.mark.parametrize("p_tp, d_tp, prefix_caching", SHAPES)
def test_the_two_rules_agree_on_every_kernel(tmp_path, capsys, p_tp, d_tp, prefix_caching, backend, head_dim,
                                             version):
    # Qwen3.5 with 2 KV heads: both TP sizes are past them, so the roles' logical blocks differ.
    pair = _decode_args(_pair(p_tp, d_tp, version, backend),
                        "--enable-prefix-caching" if prefix_caching else "--no-enable-prefix-caching")
    _, out = check(tmp_path, capsys, *pair, extra=_config(tmp_path, 2, head_dim))
    found = _severities(out)
    assert len(found) == 1, found  # never a gap, never both
    logical = runs_logical_block(backend, _version(version), head_dim)
    either_way = _version(version) < (0, 27, 0)  # the Mamba descriptors assert a block size ratio of exactly 1
    if prefix_caching and (d_tp > p_tp or not logical):
        assert found == {PREFIX: "error" if d_tp > p_tp else "warning"}, found
    else:
        certain = logical and (d_tp > p_tp or either_way)
        assert found == {GEOMETRY: "error" if certain else "warning"}, found


@pytest.mark.parametrize("backend, version, expected", [
    ("FLASH_ATTN", "0.24.0", {PREFIX: "warning"}),   # float32 Mamba cache: fixed 16/32/64 pages, may match on both
    ("FLASH_ATTN", "0.25.0", {GEOMETRY: "error"}),   # MultipleOf(16): the logical block runs, ratio != 1 before 0.27
    ("TRITON_ATTN", "0.22.0", {GEOMETRY: "error"}),
    ("FLASH_ATTN", "0.27.0", {GEOMETRY: "warning"}),  # heterogeneous blocks read: passes where the multiple is exact
    ("FLASHINFER", "0.26.0", {PREFIX: "warning"}),
])
def test_prefill_larger_with_decode_prefix_caching_is_judged_by_the_geometry(tmp_path, capsys, backend, version,
                                                                              expected):
    pair = _decode_args(_pair(8, 4, version, backend), "--enable-prefix-caching")
    code, out = check(tmp_path, capsys, *pair, extra=_config(tmp_path, 2, 128))
    assert _severities(out) == expected, out
    if expected.get(GEOMETRY) == "error":
        assert code == 1
        message = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == GEOMETRY)
        assert "block_size_ratio != 1 is not tested" in message and backend in message
