"""One definition of when vLLM counts an engine's KV as replicated (issue 9, fixT item 2):
:mod:`pdd_operator.vllm.kv_replication` (``is_kv_replicated``: TP // heads >= 1 on 0.9.2-0.19.1, TP > heads from
0.20.0), read by tp-exceeds-kv-heads (whose assert exists from 0.14.0), hetero-tp-kv-replicated (0.9.2-0.23.x) and the
MooncakeConnector rules (0.19.x ask the same function of their own engine; before, they read TP > heads on 0.19.x too)."""

from __future__ import annotations

import pytest

from pdd_operator.vllm.kv_replication import kv_replicated, replicated_at_heads
from tests.unit.test_leftovers_fixS import _mooncake_pair, _tp_pair
from tests.unit.test_turn2_variants import rules


@pytest.mark.parametrize(("tp", "heads", "version", "expected"), [
    (8, 8, (0, 9, 2), True), (8, 8, (0, 13, 0), True), (8, 8, (0, 19, 1), True),
    (8, 8, (0, 20, 0), False), (8, 8, (0, 34, 0), False), (8, 8, None, None),
    (4, 4, (0, 14, 0), True), (2, 2, (0, 21, 0), False),                  # other head counts
    (16, 8, (0, 20, 0), True), (16, 8, None, True), (4, 8, (0, 19, 1), False), (4, 8, None, False),
])
def test_kv_replicated_per_release(tp, heads, version, expected):
    assert kv_replicated(tp, heads, version) is expected


def test_replicated_at_heads_bounds():
    assert not replicated_at_heads((0, 9, 1)) and replicated_at_heads((0, 9, 2))
    assert replicated_at_heads((0, 19, 1)) and not replicated_at_heads((0, 20, 0)) and not replicated_at_heads(None)


@pytest.mark.parametrize(("image", "refused"), [
    ("vllm/vllm-openai:v0.13.0", False),   # P TP > D TP is refused by hetero-tp-p-gt-d-unsupported, not this assert
    ("vllm/vllm-openai:v0.14.0", True), ("vllm/vllm-openai:v0.19.1", True), ("vllm/vllm-openai:v0.20.0", False),
])
def test_the_replicated_remote_assert_at_the_heads_exists_from_0_14(tmp_path, capsys, image, refused):
    """Qwen2.5-7B (4 KV heads), prefill TP 4 > decode TP 2: the same fact, another model and TP."""
    _, out = _tp_pair(tmp_path, capsys, 4, 2, image, model="Qwen/Qwen2.5-7B-Instruct")
    assert ("tp-exceeds-kv-heads" in rules(out, "error")) == refused, out


@pytest.mark.parametrize(("image", "p", "d", "refused"), [
    ("vllm/vllm-openai:v0.19.0", 8, 16, False),  # prefill TP == 8 KV heads: 0.19.x skips the length check
    ("vllm/vllm-openai:v0.19.1", 8, 16, False),
    ("vllm/vllm-openai:v0.19.1", 4, 16, True),   # below the heads: checked, and the ratio fails
    ("vllm/vllm-openai:v0.20.0", 8, 16, True),   # from 0.20.0 only TP > heads skips it
])
def test_mooncake_reads_the_replication_of_its_release(tmp_path, capsys, image, p, d, refused):
    _, out = _mooncake_pair(tmp_path, capsys, p, d, image)
    assert ("mooncake-decode-kv-replicated" in rules(out, "error")) == refused, out
