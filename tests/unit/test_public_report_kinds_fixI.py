"""Set 129's kinds that helper fixI took (each with variants that fail without the fix).

1. ``${V:?msg}`` (in a ``:`` command or anywhere) makes bash exit where ``V`` is unset or empty (bash manual, "Shell
   Parameter Expansion"; POSIX 2.6.2 "Indicate Error if Null or Unset"), so after it ``V`` is set and non-empty, its
   value unknown: a later ``"$V"`` is no empty word vLLM's parser would refuse (``cli-option-malformed``). ``${V?msg}``
   exits only where ``V`` is unset: a ``V`` set to empty stays an empty word (set 129's spark dispatch.sh). The finding
   names the word the empty one follows ("right after '--master-addr'"), since an empty word has no text of its own.
2. A command whose program is a value not in the files (``"$PY"``, ``PY="${PY:-$(command -v python3)}"``) run as
   ``"$PY" -c CODE`` and nothing else, where CODE names nothing that starts an engine (no vLLM entry point, serve,
   LLM class, subprocess or module runner), is a preflight check, not an engine whose program is unknown (set 129's
   nvlink start_server.sh: ``"$PY" -c 'from nixl._api import nixl_agent'``).
"""

from __future__ import annotations

import pytest

from tests.unit.test_leftovers_fixX import KVQ, _malformed, _script
from tests.unit.test_turn2_variants import check


@pytest.mark.parametrize("script", [
    # set 129's dispatch.sh: an empty default, a guard, the value on the command line
    f'A="${{PD_A:-}}"; : "${{A:?A is required}}"; vllm serve Qwen/Qwen3-8B --served-model-name "$A" '
    f'--kv-transfer-config {KVQ}',
    f'A=; : "${{A:?}}"; vllm serve Qwen/Qwen3-8B --served-model-name "$A" --kv-transfer-config {KVQ}',
    # the guard inline, in the engine's own command or an earlier one
    f'A=; vllm serve Qwen/Qwen3-8B --served-model-name "${{A:?}}" --kv-transfer-config {KVQ}',
    f'A="${{PD_A:-}}"; echo "addr=${{A:?no addr}}"; vllm serve Qwen/Qwen3-8B --served-model-name "$A" '
    f'--kv-transfer-config {KVQ}',
    # in an array the command is built in (dispatch.sh's DECODE_CMD)
    f'A="${{PD_A:-}}"; : "${{A:?}}"; CMD=(vllm serve Qwen/Qwen3-8B --served-model-name "$A" '
    f'--kv-transfer-config {KVQ}); exec "${{CMD[@]}}"',
])
def test_a_variable_after_a_colon_question_guard_is_no_empty_word(tmp_path, capsys, script):
    code, out = check(tmp_path, capsys, *_script(script))
    assert not _malformed(out) and code != 1, (code, out)


@pytest.mark.parametrize("script", [
    # no guard: the empty word reaches vLLM (a real failure)
    f'A="${{PD_A:-}}"; vllm serve Qwen/Qwen3-8B --served-model-name "$A" --kv-transfer-config {KVQ}',
    f'A=; vllm serve Qwen/Qwen3-8B --served-model-name "$A" --kv-transfer-config {KVQ}',
    # ${A?} passes a set, empty A: argparse still gets the empty word
    f'A=; : "${{A?}}"; vllm serve Qwen/Qwen3-8B --served-model-name "$A" --kv-transfer-config {KVQ}',
    f'A="${{PD_A:-}}"; vllm serve Qwen/Qwen3-8B --served-model-name "${{A?unset}}" --kv-transfer-config {KVQ}',
    # a guard of another variable guards nothing here
    f'A=; B=x; : "${{B:?}}"; vllm serve Qwen/Qwen3-8B --served-model-name "$A" --kv-transfer-config {KVQ}',
])
def test_controls_an_unguarded_or_question_only_empty_word_is_still_refused(tmp_path, capsys, script):
    code, out = check(tmp_path, capsys, *_script(script))
    found = _malformed(out)
    assert code == 1 and len(found) == 1 and found[0]["severity"] == "error", (code, out)


@pytest.mark.parametrize(("script", "said"), [
    (f'A=; vllm serve Qwen/Qwen3-8B --served-model-name "$A" --kv-transfer-config {KVQ}',
     "right after '--served-model-name'"),
    (f'A=; vllm serve Qwen/Qwen3-8B --enforce-eager "$A" --kv-transfer-config {KVQ}', "right after '--enforce-eager'"),
])
def test_the_empty_word_finding_names_the_word_it_follows(tmp_path, capsys, script, said):
    code, out = check(tmp_path, capsys, *_script(script))
    found = _malformed(out)
    assert code == 1 and len(found) == 1 and said in found[0]["message"], (code, out)


PY = 'PY="${PY:-$(command -v python3)}"; '
ENGINE = f'"$PY" -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B --kv-transfer-config {KVQ}'


def _not_checked(out):
    return " ".join(n["reason"] for n in out.get("notChecked", []))


@pytest.mark.parametrize("check_line", [
    '"$PY" -c "from nixl._api import nixl_agent" >/dev/null 2>&1 || exit 1; ',
    'if ! "$PY" -c "import fastapi, uvicorn, httpx" >/dev/null 2>&1; then echo missing; exit 1; fi; ',
    '$PYTHON -c "import torch; print(torch.cuda.device_count())"; ',
    '"$PY" -c "import vllm; print(vllm.__version__)"; ',
])
def test_a_python_c_preflight_from_a_variable_starts_no_engine(tmp_path, capsys, check_line):
    code, out = check(tmp_path, capsys, *_script(PY + check_line + ENGINE))
    assert code == 0 and not _not_checked(out), (code, out)


@pytest.mark.parametrize("check_line", [
    '"$PY" -c "import runpy; runpy.run_module(\'vllm.entrypoints.openai.api_server\')"; ',  # code that serves
    '"$PY" -c "from vllm.entrypoints.cli.main import main; main()" serve Qwen/Qwen3-8B; ',
    '"$PY" -c "$CODE"; ',                                                                    # code not in the files
    '"$PY" -u -c "import sys"; ',                                                            # another shape
])
def test_controls_code_that_may_serve_is_still_not_checked(tmp_path, capsys, check_line):
    code, out = check(tmp_path, capsys, *_script(PY + check_line + ENGINE))
    assert code == 3 and "runs the command held in $" in _not_checked(out), (code, out)
