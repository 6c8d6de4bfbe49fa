"""Launcher scripts whose arguments choose the engines they start (issue 9, fixT item 3; set 89's
ddps-launch-configs): ``bash launch.sh configC1 prefill`` runs one bash function of several. Each alternative is read
as its own deployment (:func:`pdd_operator.vllm.script.argument_alternatives`), its roles each started by their own
invocation on hosts not known, and the finding names the functions; the shell reader also reads
``--kv-transfer-config "$(cat <<JSON ... JSON)"`` and comment lines inside an array. Before, the script was run with
no arguments, started no engine and was "not checked" as an unread shell script."""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.expansion import ContainerEnv
from pdd_operator.vllm.script import argument_alternatives, launches
from tests.unit.cli_check import check_text

NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def run(tmp_path, capsys, text: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, "launch.sh")


def errors(out: dict) -> set[str]:
    return {f["rule"] for r in out["results"] for f in r["findings"] if f["severity"] == "error"}


def launcher(pin: str = "0.21.0", d_tp: dict | None = None, dispatch: str = "case", heredoc: str = "JSON") -> str:
    """A launcher of two P/D configs (``small``: TP 1/1, ``big``: TP 2/2 unless ``d_tp`` changes a decode's) and a
    monolithic one, chosen by ``$1`` (config) and ``$2`` (role)."""
    d_tp = d_tp or {}

    def fn(name: str, tp: int, port: int, gpus: str) -> str:
        kv = json.dumps(NIXL).replace('"kv_both"', '"kv_both", "kv_connector_extra_config": {"x": "$HOST"}')
        return (f"{name}() {{\n  VLLM_NIXL_SIDE_CHANNEL_PORT={port - 2600} CUDA_VISIBLE_DEVICES={gpus} "
                f"vllm serve \"${{COMMON[@]}}\" --tensor-parallel-size {tp} "
                f"--port {port} \\\n    --kv-transfer-config \"$(cat <<{heredoc}\n{kv}\n{heredoc.strip(chr(39))}\n)\"\n}}\n")
    if dispatch == "case":
        body = ('case "$CONFIG" in\n  mono) mono ;;\n  small|big)\n    case "$ROLE" in\n'
                '      prefill) "${CONFIG}_prefill" ;;\n      decode) "${CONFIG}_decode" ;;\n'
                '      *) echo usage; exit 1 ;;\n    esac ;;\n  *) echo usage; exit 1 ;;\nesac\n')
        body = body.replace('"${CONFIG}_prefill"', 'if [ "$CONFIG" = small ]; then small_prefill; else big_prefill; fi')
        body = body.replace('"${CONFIG}_decode"', 'if [ "$CONFIG" = small ]; then small_decode; else big_decode; fi')
    else:  # if/elif on the arguments
        body = ('if [ "$1" = small ] && [ "$2" = prefill ]; then small_prefill\n'
                'elif [ "$1" = small ]; then small_decode\n'
                'elif [ "$2" = prefill ]; then big_prefill\nelse big_decode\nfi\n')
    return ("#!/bin/bash\nset -euo pipefail\n" + (f"pip install vllm=={pin}\n" if pin else "")
            + 'CONFIG="${1:-}"\nROLE="${2:-}"\nHOST="${HOST:-127.0.0.1}"\n'
            + 'export VLLM_NIXL_SIDE_CHANNEL_HOST="$(hostname -i)"\n'
            + 'COMMON=(\n  --model Qwen/Qwen3-8B\n  # the same flags on every engine\n  --max-model-len 4096\n)\n'
            + 'mono() { vllm serve "${COMMON[@]}" --tensor-parallel-size 4 --port 8000; }\n'
            + fn("small_prefill", 1, 8100, "0") + fn("small_decode", d_tp.get("small", 1), 8200, "1")
            + fn("big_prefill", 2, 8100, "0,1") + fn("big_decode", d_tp.get("big", 2), 8200, "2,3") + body)


def test_alternatives_are_read_one_deployment_each():
    alts = argument_alternatives(launcher(), ContainerEnv(kubernetes=False))
    assert [a.functions for a in alts] == [("mono",), ("small_prefill", "small_decode"), ("big_prefill", "big_decode")]
    assert [a.invocations for a in alts] == [1, 2, 2]
    kv = alts[1].launches[0].argv[alts[1].launches[0].argv.index("--kv-transfer-config") + 1]
    assert json.loads(kv)["kv_connector_extra_config"] == {"x": "127.0.0.1"}   # the here-document, expanded
    assert "# the same flags on every engine" not in alts[1].launches[0].argv    # a comment in the array


@pytest.mark.parametrize("dispatch", ["case", "if"])
def test_a_launcher_of_valid_configs_is_judged_ok(tmp_path, capsys, dispatch):
    code, out = run(tmp_path, capsys, launcher(dispatch=dispatch))
    assert code == 0 and not out["notChecked"] and len(out["results"]) == 2, out
    assert all("chosen by its arguments" in r["object"] for r in out["results"]), out


@pytest.mark.parametrize(("d_tp", "named"), [({"big": 3}, "big_prefill / big_decode"),
                                             ({"small": 3}, "small_prefill / small_decode")])
def test_the_faulty_alternative_is_named(tmp_path, capsys, d_tp, named):
    """Decode TP 3 against prefill TP 2 (or 1): tp-divisibility / the NIXL mapping, in that alternative only."""
    code, out = run(tmp_path, capsys, launcher(d_tp=d_tp))
    bad = [r for r in out["results"] if any(f["severity"] == "error" for f in r["findings"])]
    assert code == 1 and len(bad) == 1 and named in bad[0]["object"], out


def test_alternatives_never_pair_across(tmp_path, capsys):
    """small (TP 1) and big (TP 2) are two deployments: no prefill of one is paired with the decode of the other."""
    _, out = run(tmp_path, capsys, launcher())
    assert len(out["results"]) == 2, out
    for r in out["results"]:
        halves = r["object"].split(" + ")
        assert len({h.split("run as ", 1)[1].split(",", 1)[0] for h in halves}) == 1, r["object"]


def test_a_quoted_here_document_is_literal():
    text = 'A="x"\nvllm serve m --kv-transfer-config "$(cat <<\'EOF\'\n{"v": "$A"}\nEOF\n)" &\n'
    (launch,) = launches(text, ContainerEnv(kubernetes=False))
    assert launch.argv[-1] == '{"v": "$A"}'
    text = 'A="x"\nvllm serve m --kv-transfer-config "$(cat <<-EOF\n\t{"v": "$A"}\n\tEOF\n)" &\n'
    (launch,) = launches(text, ContainerEnv(kubernetes=False))
    assert launch.argv[-1] == '{"v": "x"}'


def test_a_script_whose_arguments_choose_no_engine_stays_one_run():
    """$1 that only names the model starts the same engine lines whatever it is: read as before (one run)."""
    text = ('MODEL="${1:-Qwen/Qwen3-8B}"\n'
            f"vllm serve $MODEL --port 8100 --kv-transfer-config '{json.dumps(NIXL)}' &\n"
            f"vllm serve $MODEL --port 8200 --kv-transfer-config '{json.dumps(NIXL)}' &\nwait\n")
    assert argument_alternatives(text, ContainerEnv(kubernetes=False)) is None
    assert len(launches(text, ContainerEnv(kubernetes=False))) == 2


def test_without_a_release_the_verdict_that_depends_on_it_is_not_checked(tmp_path, capsys):
    """The alternatives are read; what needs the vLLM release (none pinned) is "not checked", never a pass."""
    text = launcher(pin="").replace("NixlConnector", "P2pNcclConnector").replace('"kv_both"', '"kv_producer"')
    code, out = run(tmp_path, capsys, text)
    assert code == 3 and out["notChecked"] and all("chosen by its arguments" in n["object"] for n in out["notChecked"])
