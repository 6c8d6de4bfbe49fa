"""Short options of vLLM's parser the checker did not read (issue 9, set 30, helper F1).

Every single-dash name an ``add_argument`` call registers in vllm/engine/arg_utils.py and the entrypoints'
cli_args.py of the sdists 0.9.0 ... 0.34.0 is now read (pdd_operator/vllm/flags.py ``_ALIASES``). Before, ``-q``
(``--quantization``, every release), ``-asc`` (``--api-server-count``, from 0.9.1 in vllm serve's parser), ``-n``
(``--nnodes``) and ``-r`` (``--node-rank``, both from 0.11.1) were kept as unknown names: ``vllm serve M -tp 16 -n 2``
on two 8-GPU pods was refused for ``parallelism-gpu-count`` although ``--nnodes 2`` passed, and ``-n``/``-asc`` on a
release without them passed ``cli-flag-not-yet``. argparse also takes a one-letter short option's value attached
(``-n2``, ``-qfp8``: ``ArgumentParser._get_option_tuples`` splits a single-dash word after its first two characters).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.added_flags import ADDED_FLAGS, added_flags
from pdd_operator.vllm.flags import parse_flags, short_options
from tests.unit.test_public_report_kinds_14 import _messages, _pair
from tests.unit.test_turn2_variants import check, rules

MOE = "Qwen/Qwen3-30B-A3B"
KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


@pytest.mark.parametrize(("words", "long", "value"), [
    (["-q", "fp8"], "--quantization", "fp8"), (["-qfp8"], "--quantization", "fp8"), (["-q=fp8"], "--quantization", "fp8"),
    (["-n", "2"], "--nnodes", "2"), (["-n2"], "--nnodes", "2"), (["-r", "1"], "--node-rank", "1"),
    (["-r1"], "--node-rank", "1"), (["-asc", "4"], "--api-server-count", "4"),
])
def test_short_option_reads_as_its_long_flag(words, long, value):
    argv = ["vllm", "serve", MOE, *words]
    assert parse_flags(argv) == (MOE, {long: value})
    assert short_options(argv) == {words[0][:2] if words[0][:2] in ("-q", "-n", "-r") else words[0]: long}


def test_a_short_option_before_the_model_takes_its_value_not_the_model():
    assert parse_flags(["vllm", "serve", "-q", "fp8", MOE]) == (MOE, {"--quantization": "fp8"})
    assert parse_flags(["vllm", "serve", "-n2", MOE]) == (MOE, {"--nnodes": "2"})


@pytest.mark.parametrize("word", ["-tp2", "-asc4", "-O3"])
def test_longer_short_options_take_no_attached_value(word):
    # argparse splits only after the first two characters: -tp2 is no option (vLLM's parser refuses it), -O3 is
    # rewritten by FlexibleArgumentParser itself; neither is read as a value of a listed flag.
    flags = parse_flags(["vllm", "serve", MOE, word])[1]
    assert flags == {word: True}


@pytest.mark.parametrize("nodes", [["--nnodes", "2", "--node-rank", "0"], ["-n", "2", "-r", "0"], ["-n2", "-r0"]])
def test_nnodes_by_its_short_option_spans_nodes(tmp_path, capsys, nodes):
    # TP 16 over two nodes of 8 GPUs each (vllm/engine/arg_utils.py 0.32.0 l.1145-1146: ("--nnodes", "-n"),
    # ("--node-rank", "-r")): each pod holds 8 of the 16 ranks. Before, -n was not read and the pods were refused.
    args = [MOE, "-tp", "16", "--kv-transfer-config", KV, *nodes]
    code, out = check(tmp_path, capsys, *_pair(args, args, gpus=8, image="vllm/vllm-openai:v0.32.0"))
    assert "parallelism-gpu-count" not in rules(out), out
    # Control: one node of 8 GPUs for TP 16 is refused.
    single = [MOE, "-tp", "16", "--kv-transfer-config", KV]
    code, out = check(tmp_path, capsys, *_pair(single, single, gpus=8, image="vllm/vllm-openai:v0.32.0"))
    assert "parallelism-gpu-count" in rules(out, "error"), out


@pytest.mark.parametrize(("short", "without", "with_"), [
    ("-n", (0, 11, 0), (0, 11, 1)), ("-r", (0, 11, 0), (0, 11, 1)), ("-asc", (0, 9, 0), (0, 9, 1)),
    ("--api-server-count", (0, 9, 0), (0, 9, 1)),  # vllm serve's parser, cli/serve.py 0.9.1 l.88-92 (set 86)
])
def test_short_options_are_dated(short, without, with_):
    assert (ADDED_FLAGS[short].absent_in, ADDED_FLAGS[short].present_in) == (without, with_)


@pytest.mark.parametrize(("words", "flag"), [(["-n", "1"], "-n"), (["-r", "0"], "-r")])
def test_a_short_option_on_a_release_without_it_is_refused(tmp_path, capsys, words, flag):
    args = [MOE, "--kv-transfer-config", KV, *words]
    code, out = check(tmp_path, capsys, *_pair(args, args, image="vllm/vllm-openai:v0.11.0"))
    assert "cli-flag-not-yet" in rules(out, "error"), out
    assert any(flag in m for m in _messages(out, "cli-flag-not-yet")), out
    # Control: the release that has it.
    code, out = check(tmp_path, capsys, *_pair(args, args, image="vllm/vllm-openai:v0.11.1"))
    assert "cli-flag-not-yet" not in rules(out), out


def test_quantization_by_short_option_sets_no_floor():
    argv = ["vllm", "serve", MOE, "-q", "fp8"]
    assert added_flags(parse_flags(argv)[1], short_options(argv)) == ()


# --- the data-parallel short options were dated one or two releases late --------------------------------------------
# vllm/engine/arg_utils.py of 0.11.0 registers '-dpn', '-dpr', '-dpl', '-dpa', '-dpp', '-dpb' (l.662-688, written with
# single quotes, which a search for "-dpl" misses); 0.9.0 already has -dpl, -dpa, -dpp (l.604-616); -dph and -dpe
# come in 0.11.1. The checker refused -dpl on 0.11.0 ('cli-flag-not-yet', error): a false refusal.


@pytest.mark.parametrize(("version", "words"), [
    ("v0.11.0", ["-dpl", "1"]), ("v0.11.0", ["-dpa", "10.0.0.1"]), ("v0.11.0", ["-dpp", "13345"]),
    ("v0.10.0", ["-dpn", "0"]), ("v0.10.1.1", ["-dpr", "0"]), ("v0.11.0", ["-dpb", "mp"]), ("v0.9.0", ["-dpl", "1"]),
])
def test_data_parallel_short_options_of_the_release_are_not_refused(tmp_path, capsys, version, words):
    args = [MOE, "--kv-transfer-config", KV, *words]
    code, out = check(tmp_path, capsys, *_pair(args, args, image=f"vllm/vllm-openai:{version}"))
    assert "cli-flag-not-yet" not in rules(out), out


@pytest.mark.parametrize(("version", "words"), [
    ("v0.9.0", ["-dpn", "0"]), ("v0.9.0", ["-dpb", "mp"]), ("v0.11.0", ["-dph"]), ("v0.11.0", ["-dpe"]),
])
def test_data_parallel_short_options_before_their_release_are_refused(tmp_path, capsys, version, words):
    args = [MOE, "--kv-transfer-config", KV, *words]
    code, out = check(tmp_path, capsys, *_pair(args, args, image=f"vllm/vllm-openai:{version}"))
    assert "cli-flag-not-yet" in rules(out, "error"), out
    assert any(words[0] in m for m in _messages(out, "cli-flag-not-yet")), out
