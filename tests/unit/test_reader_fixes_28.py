"""Reader fixes of round 28 (issue 9), each a kind with variants and controls:

- the shell reader keeps the blank tree-sitter-bash puts into the second of two expansions in a double-quoted string
  (``"$B $a"``: ``$B`` and `` $a``), so ``$a`` is read as ``a``; its unknown value then goes through ``eval`` and
  ``sh -c "$F"`` held in a variable (:meth:`pdd_operator.vllm.script._Shell.reread`), never as ``<``/``>``
  redirections that drop the word before it (vLLM's tests/v1/kv_connector/nixl_integration/run_accuracy_test.sh);
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main
from pdd_operator.vllm.expansion import ContainerEnv
from pdd_operator.vllm.script import launches


def _argv(script: str) -> list[tuple[str, ...]]:
    return [launch.argv for launch in launches(script, ContainerEnv())]


# 1. placeholders through eval / sh -c ------------------------------------------------------------------------------


@pytest.mark.parametrize("script", [
    'B="vllm serve m --tensor-parallel-size 2"; F="$B $a"; eval "$F &"',  # the minimal form
    'B="vllm serve m --tensor-parallel-size 2"; a=$(get_model_args m); F="$B $a"; eval "$F &"',
    'B="vllm serve m --tensor-parallel-size 2"; F="$B\t$a"; eval "$F"',  # a tab as the blank
    'B="vllm serve m --tensor-parallel-size 2"; F="${B} ${a}"; eval "$F &"',  # braced: no blank in the node
    'B="vllm serve m --tensor-parallel-size 2"; F="$B $a"; bash -c "$F"',  # sh -c re-reads the value too
    'F="vllm serve m --tensor-parallel-size 2 $X"; sh -c "$F &"',
])
def test_an_unknown_part_survives_being_read_again(script):
    (argv,) = _argv(script)
    assert argv[:5] == ("vllm", "serve", "m", "--tensor-parallel-size", "2")
    assert len(argv) == 6 and argv[5].startswith("<unknown:") and "$" not in argv[5]


def test_the_blank_before_a_second_expansion_is_string_text():
    """``"$B $a"`` with both known joins them with the blank (it was dropped: ``mX``), and ``"$@ $1"``-like
    forms keep their own reading."""
    assert _argv('B="vllm serve m"; a="--port 9"; F="$B $a"; eval "$F"') == [
        ("vllm", "serve", "m", "--port", "9")]
    assert _argv('B=m; a=x; vllm serve "$B $a"') == [("vllm", "serve", "m x")]
    assert _argv('f() { vllm serve "$1 $2"; }; f m x') == [("vllm", "serve", "m x")]


def test_controls_known_values_through_eval_and_sh_c_are_unchanged():
    assert _argv('F="vllm serve m --tensor-parallel-size 2"; eval "$F &"') == [
        ("vllm", "serve", "m", "--tensor-parallel-size", "2")]
    assert _argv('vllm serve m --port 1 > /tmp/log 2>&1 &') == [("vllm", "serve", "m", "--port", "1")]
    assert _argv("sh -c 'vllm serve m --port 1 < /dev/null'") == [("vllm", "serve", "m", "--port", "1")]


def _run_accuracy(tmp_path, capsys, *, decode_tp: str = "1", model_args: str = "$(get_model_args m)") -> tuple[int, dict]:
    """The shape of run_accuracy_test.sh: BASE_CMD then FULL_CMD="$BASE_CMD $model_args", eval "$FULL_CMD &"."""
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    script = f"""#!/bin/bash
get_model_args() {{ echo ""; }}
KV_CONFIG='{kv}'
model_args={model_args}
BASE_CMD="CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve Qwen/Qwen3-0.6B --port 8100 \\
  --tensor-parallel-size 1 --kv-transfer-config '$KV_CONFIG'"
FULL_CMD="$BASE_CMD $model_args"
eval "$FULL_CMD &"
BASE_CMD="CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5659 vllm serve Qwen/Qwen3-0.6B --port 8200 \\
  --kv-transfer-config '$KV_CONFIG'"
BASE_CMD="${{BASE_CMD}} --tensor-parallel-size {decode_tp}"
FULL_CMD="$BASE_CMD $model_args"
eval "$FULL_CMD &"
wait
"""
    path = tmp_path / "run_accuracy_test.sh"
    path.write_text(script)
    code = main(["check", str(path), "-o", "json", "--vllm-version", "0.11.0"])
    return code, json.loads(capsys.readouterr().out)


def test_run_accuracy_test_shape_is_checked(tmp_path, capsys):
    """With ``model_args`` empty the pair is judged (it was "not checked": ``$model_args`` read as ``$$model_args``)."""
    code, out = _run_accuracy(tmp_path, capsys, model_args='""')
    assert code == 0 and not out["notChecked"], out
    assert out["results"][0]["compatible"] is True


def test_run_accuracy_test_shape_with_unknown_model_args_names_them_and_keeps_the_tp(tmp_path, capsys):
    """An unknown ``$(get_model_args ...)`` may carry flags: those rules are "not checked", naming it; the TP before
    it is still read (the word before the unknown is not dropped)."""
    code, out = _run_accuracy(tmp_path, capsys)
    assert code == 3, out
    reason = out["notChecked"][0]["reason"]
    assert "possibly set by $get_model_args," in reason and "$$" not in reason


def test_run_accuracy_test_shape_control_a_wrong_decode_tp_is_still_seen(tmp_path, capsys):
    """Control: the decode's TP read through the eval is the one judged (TP 3 on Qwen3-0.6B's 8 KV heads)."""
    code, out = _run_accuracy(tmp_path, capsys, decode_tp="3")
    assert code == 1, out
