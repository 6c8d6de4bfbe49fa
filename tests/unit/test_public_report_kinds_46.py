"""Variants of what the forty-sixth public-report set (tests/unit/data/public_reports_46) taught, with negative
controls: ``vllm serve`` refuses a flag its release no longer defines (``FlexibleArgumentParser``: 'unrecognized
arguments', exit 2), and the flags vLLM dropped are many more than the two written by hand before. They are read
release by release in the sdists (``pdd_operator/vllm/removed_flags_read.py``): the set's miss was
``--calculate-kv-scales`` (defined up to 0.27.0, gone from 0.28.0) on a Llama-4 Maverick FP8-KV pair.

Reading the parsers also dated ``--disable-log-requests`` right: deprecated but still defined by 0.12.0-0.16.0, gone
from 0.17.0 (it had been recorded as refused from 0.12.0). The same reads give the flags each release added
(``pdd_operator/vllm/added_flags_read.py``): an engine whose release predates one of them is refused as well
(``cli-flag-not-yet``), e.g. ``--mm-encoder-tp-mode`` before 0.10.2 or ``--kv-cache-dtype-skip-layers`` before 0.19.0.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.added_flags import ADDED_FLAGS
from pdd_operator.vllm.added_flags_read import READ_ADDITIONS
from pdd_operator.vllm.removed_flags import REMOVED_FLAGS, removed_flags
from pdd_operator.vllm.removed_flags_read import READ_REMOVALS, RELEASES_READ
from tests.unit.test_turn2_variants import check, container, rules, workload

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def _pair(image, p_extra=(), d_extra=(), model="Qwen/Qwen3-8B", kind="StatefulSet"):
    return [workload(f"q-{role}", role, container([model, *extra, "--kv-transfer-config", KV], image=image),
                     kind=kind, app="q")
            for role, extra in (("prefill", p_extra), ("decode", d_extra))]


@pytest.mark.parametrize(("image", "flags"), [
    ("vllm/vllm-openai:v0.31.0", ("--kv-cache-dtype", "fp8", "--calculate-kv-scales")),
    ("vllm/vllm-openai:v0.30.0", ("--kv-cache-dtype", "fp8_e4m3", "--no-calculate-kv-scales")),
    ("vllm/vllm-openai:v0.18.0", ("--swap-space", "16")),
    ("vllm/vllm-openai:v0.12.0", ("--guided-decoding-backend", "xgrammar")),
    ("vllm/vllm-openai:v0.13.0", ("--disable-mm-preprocessor-cache",)),
    ("vllm/vllm-openai:v0.17.0", ("--disable-log-requests",)),
])
def test_a_flag_the_release_no_longer_defines_stops_the_engine(tmp_path, capsys, image, flags):
    code, out = check(tmp_path, capsys, *_pair(image, d_extra=flags))
    assert code == 1 and "cli-flag-removed" in rules(out, "error")


@pytest.mark.parametrize(("image", "flags"), [
    ("vllm/vllm-openai:v0.27.0", ("--kv-cache-dtype", "fp8", "--calculate-kv-scales")),
    ("vllm/vllm-openai:v0.17.0", ("--swap-space", "16")),
    ("vllm/vllm-openai:v0.11.1", ("--guided-decoding-backend", "xgrammar")),
    ("vllm/vllm-openai:v0.14.0", ("--disable-log-requests",)),
    ("vllm/vllm-openai:v0.12.0", ("--disable-log-requests",)),
])
def test_the_same_flag_on_a_release_that_still_defines_it_is_not_refused(tmp_path, capsys, image, flags):
    code, out = check(tmp_path, capsys, *_pair(image, flags, flags))
    assert "cli-flag-removed" not in rules(out)


def test_an_engine_of_unknown_version_with_a_removed_flag_is_warned(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("registry.example.com/team/vllm:prod", ("--preemption-mode", "swap"),
                                                ("--preemption-mode", "swap"), kind="Deployment"))
    assert "cli-flag-removed" in rules(out, "warning") and "cli-flag-removed" not in rules(out, "error")


def test_the_read_table_is_dated_by_releases_read_and_feeds_the_rule():
    for flag, (with_, without, instead) in READ_REMOVALS.items():
        assert with_ in RELEASES_READ and without in RELEASES_READ and with_ < without, flag
        assert RELEASES_READ.index(without) == RELEASES_READ.index(with_) + 1, flag
        assert instead and flag.startswith("--"), flag
        assert REMOVED_FLAGS[flag].refused_since == without, flag
    assert REMOVED_FLAGS["--disable-log-requests"].refused_since == (0, 17, 0)
    assert removed_flags({"--max-seq-len-to-capture": "8192", "--block-size": "16"}) == ("--max-seq-len-to-capture",)


@pytest.mark.parametrize(("image", "flags"), [
    ("vllm/vllm-openai:v0.10.1.1", ("--mm-encoder-tp-mode", "data")),
    ("vllm/vllm-openai:v0.10.1.1", ("--structured-outputs-config", '{"backend": "xgrammar"}')),
    ("vllm/vllm-openai:v0.18.0", ("--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "sliding_window")),
])
def test_a_flag_the_release_does_not_define_yet_stops_the_engine(tmp_path, capsys, image, flags):
    code, out = check(tmp_path, capsys, *_pair(image, flags, flags, model="Qwen/Qwen2.5-VL-7B-Instruct"))
    assert code == 1 and "cli-flag-not-yet" in rules(out, "error")


@pytest.mark.parametrize(("image", "flags"), [
    ("vllm/vllm-openai:v0.11.0", ("--mm-encoder-tp-mode", "data")),
    ("vllm/vllm-openai:v0.21.0", ("--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "sliding_window")),
])
def test_the_same_flag_on_a_release_that_defines_it_is_not_refused(tmp_path, capsys, image, flags):
    code, out = check(tmp_path, capsys, *_pair(image, flags, flags, model="Qwen/Qwen2.5-VL-7B-Instruct"))
    assert "cli-flag-not-yet" not in rules(out)


def test_a_flag_first_read_after_an_unread_release_is_only_warned_on_that_release(tmp_path, capsys):
    # 0.15.x was not read: --mamba-cache-mode is absent in 0.14.0 and defined from 0.16.0
    flags = ("--mamba-cache-mode", "align")
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.15.1", flags, flags))
    assert "cli-flag-not-yet" in rules(out, "warning") and "cli-flag-not-yet" not in rules(out, "error")


def test_the_read_additions_are_dated_by_consecutive_releases_read():
    for flag, (without, with_) in READ_ADDITIONS.items():
        assert without in RELEASES_READ and with_ in RELEASES_READ, flag
        assert RELEASES_READ.index(with_) == RELEASES_READ.index(without) + 1, flag
        assert flag in ADDED_FLAGS and flag not in REMOVED_FLAGS, flag
    assert ADDED_FLAGS["--kv-cache-dtype-skip-layers"].floor == (0, 19, 0)
