"""Short options vLLM added after their long flag (issue 9, set 29): ``-ac`` (``--attention-config``) from 0.13.0,
``-cc`` (``--compilation-config``) from 0.12.0, ``-sc`` (``--speculative-config``) from 0.21.0 and ``-dc``
(``--diffusion-config``) from 0.24.0 (vllm/engine/arg_utils.py ``EngineArgs.add_cli_args``; 0.13.0 l.1137, 0.12.0
l.1128, 0.21.0 l.1417, 0.24.0 l.1508). Before, ``-ac`` was neither read as ``--attention-config`` nor dated, so an
engine on 0.12.0 given ``-ac`` passed ``cli-flag-not-yet`` although its parser stops with 'unrecognized arguments'."""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.added_flags import ADDED_FLAGS, added_flags
from pdd_operator.vllm.flags import parse_flags, short_options
from tests.unit.test_public_report_kinds_14 import _pair
from tests.unit.test_turn2_variants import check, rules

MODEL = "openai-community/gpt2"
KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


@pytest.mark.parametrize(("short", "long"), [("-ac", "--attention-config"), ("-cc", "--compilation-config"),
                                             ("-sc", "--speculative-config"), ("-dc", "--diffusion-config")])
def test_short_option_reads_as_its_long_flag(short, long):
    argv = ["vllm", "serve", MODEL, short, '{"x": 1}']
    assert parse_flags(argv) == (MODEL, {long: '{"x": 1}'})
    assert short_options(argv) == {short: long}
    assert short in added_flags(parse_flags(argv)[1], short_options(argv))


@pytest.mark.parametrize(("short", "without", "with_"), [("-ac", (0, 12, 0), (0, 13, 0)),
                                                          ("-cc", (0, 11, 2), (0, 12, 0)),
                                                          ("-sc", (0, 18, 1), (0, 19, 0)),
                                                          ("-dc", (0, 23, 0), (0, 24, 0))])
def test_short_options_are_dated(short, without, with_):
    assert (ADDED_FLAGS[short].absent_in, ADDED_FLAGS[short].present_in) == (without, with_)


@pytest.mark.parametrize(("tag", "want"), [("v0.12.0", True), ("v0.13.0", False), ("v0.14.0", False)])
def test_ac_on_a_release_before_it_is_refused(tmp_path, capsys, tag, want):
    args = [MODEL, "-ac", '{"backend": "FLASH_ATTN"}', "--kv-transfer-config", KV]
    code, out = check(tmp_path, capsys, *_pair(args, args, image=f"vllm/vllm-openai:{tag}"))
    assert ("cli-flag-not-yet" in rules(out, "error")) == want, out


def test_control_cc_on_0_12_passes_and_long_attention_config_on_0_12_is_refused(tmp_path, capsys):
    args = [MODEL, "-cc", '{"mode": 0}', "--kv-transfer-config", KV]
    code, out = check(tmp_path, capsys, *_pair(args, args, image="vllm/vllm-openai:v0.12.0"))
    assert "cli-flag-not-yet" not in rules(out, "error"), out
    args = [MODEL, "--attention-config", '{"backend": "FLASH_ATTN"}', "--kv-transfer-config", KV]
    code, out = check(tmp_path, capsys, *_pair(args, args, image="vllm/vllm-openai:v0.12.0"))
    assert "cli-flag-not-yet" in rules(out, "error"), out

