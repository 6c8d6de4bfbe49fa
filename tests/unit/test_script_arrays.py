"""Bash indexed arrays in launch scripts: each case is run by the real bash too (``vllm`` defined as a function
that records its arguments) and the engines the reader finds must be exactly the commands bash runs. What the
reader cannot follow (arrays from ``read -a`` / ``mapfile``, associative arrays, slices) is named unknown, and
then the script's proxy cannot set the roles: the pair is judged both ways round."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from pdd_operator.vllm.expansion import unknown
from pdd_operator.vllm.script import launches
from tests.unit.test_turn2_variants import check, rules

BASH = shutil.which("bash")

#: Scripts whose engines the reader must expand exactly as bash does.
SCRIPTS = {
    "loop over an array": 'P=(8100 8101)\nfor port in "${P[@]}"; do\n  vllm serve m --port $port &\ndone\nwait',
    "quoted elements keep their blanks": 'F=(--served-model-name "a b" --max-model-len 4096)\nvllm serve m "${F[@]}"',
    "unquoted elements are split": 'F=(--served-model-name "a b")\nvllm serve m ${F[@]}',
    "star joins into one field when quoted": 'F=(a b)\nvllm serve m "${F[*]}" ${F[*]}',
    "append, index, count, last, indices, $A": 'A=(1 2)\nA+=(3)\nA[3]=4\nA[0]=0\n'
                                                 'vllm serve m --n ${#A[@]} --last ${A[-1]} --idx ${!A[@]} --first $A',
    "declare -a and local -a": 'declare -a D=(x y)\nf() { local -a L=(p "$1"); vllm serve "${L[@]}" "${D[@]}"; }\nf q',
    "an empty array gives no field": 'E=()\nvllm serve m "${E[@]}" --x "${E[*]}"',
    "arithmetic subscripts": 'A=(a b c)\ni=1\nvllm serve ${A[i+1]} ${A[$i]} ${A[i-1]} "${A[5]}" --y',
    "a scalar assigned to an array sets element 0": 'A=(a b)\nA=z\nvllm serve "${A[@]}"',
    "elements inside a word": 'A=(a b)\nvllm serve "x${A[@]}y"',
    "an assignment joins the elements": 'A=(a b)\nX="${A[@]}"\nvllm serve "$X"',
    "indices loop": 'P=(8100 8200)\nfor i in "${!P[@]}"; do\n  vllm serve m --port "${P[$i]}" --rank $i &\ndone\nwait',
    "element length": 'A=(abc)\nvllm serve m --n ${#A[0]} ${#A[@]}',
    "an array built from an array": 'A=(a b)\nB=(0 "${A[@]}" z)\nvllm serve "${B[@]}" ${#B[@]}',
}


def _bash_commands(script: str) -> list[tuple[str, ...]]:
    """The ``vllm`` commands bash itself runs for ``script`` (sorted: background jobs finish in any order)."""
    prelude = 'vllm() { local a out=vllm; for a in "$@"; do out+=$\'\\x1f\'"$a"; done; printf \'%s\\n\' "$out"; }\n'
    done = subprocess.run([BASH, "-c", prelude + script], capture_output=True, text=True, timeout=60, check=True)
    return sorted(tuple(line.split("\x1f")) for line in done.stdout.splitlines())


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
@pytest.mark.parametrize("script", SCRIPTS.values(), ids=SCRIPTS.keys())
def test_engines_are_the_commands_bash_runs(script):
    assert sorted(x.argv for x in launches(script)) == _bash_commands(script)


def test_the_reference_is_not_vacuous():
    # the prelude records what bash passes: a reader that ignores arrays would disagree on every case above
    assert _bash_commands('A=(1 "2 3")\nvllm serve "${A[@]}"') == [("vllm", "serve", "1", "2 3")]


@pytest.mark.parametrize(("script", "name"), [
    ('read -ra P <<< "$PORTS"\nvllm serve m --port "${P[0]}"', "P"),
    ('read -r -a P\nvllm serve m --port ${P[@]}', "P"),
    ('mapfile -t P < ports.txt\nvllm serve m --port "${P[1]}"', "P"),
    ('readarray\nvllm serve m --port "${MAPFILE[0]}"', "MAPFILE"),
    ('declare -A P=([prefill]=8100)\nvllm serve m --port "${P[prefill]}"', "P"),
    ('P=([3]=8100)\nvllm serve m --port "${P[3]}"', "P"),
    ('P=(8100)\nP[5]=8105\nvllm serve m --port "${P[5]}"', "P"),
    ('P=(8100 8101)\nvllm serve m --port "${P[@]:1}"', "P"),
    ('vllm serve m --port "${NOT_SET[1]}"', "NOT_SET"),
    ('P=(8100)\nvllm serve m --port "${P[$((RANDOM % 2))]}"', "P"),
])
def test_what_the_reader_cannot_follow_is_unknown_not_guessed(script, name):
    (launch,) = launches(script)
    assert launch.argv[launch.argv.index("--port") + 1] == unknown(name)


def test_arrays_are_not_exported_to_an_engine():
    (launch,) = launches("export A=(1 2)\nexport B=x\nvllm serve m")
    assert launch.env == {"B": "x"}


# --- through pdd check: the script's proxy names the engines' ports from arrays ----------------------------------


KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
TP2 = f"Qwen/Qwen3-0.6B --tensor-parallel-size 2 --kv-transfer-config '{KV}'"
TP1 = f"Qwen/Qwen3-0.6B --tensor-parallel-size 1 --kv-transfer-config '{KV}'"


def _pod(script: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t", "labels": {"app": "t"}},
            "spec": {"containers": [{"name": "test", "image": "vllm/vllm-openai:v0.13.0", "command": ["bash", "-c"],
                                     "args": [script], "resources": {"limits": {"nvidia.com/gpu": "3"}}}]}}


def _script(proxy_args: str, ports: str = "PREFILL_PORTS=(8100)\nDECODE_PORTS=(8200)", tp2_port: str = "8100",
            tp1_port: str = "8200") -> str:
    return (f"set -xe\n{ports}\n"
            f"CUDA_VISIBLE_DEVICES=0,1 VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve {TP2} --port {tp2_port} &\n"
            f"CUDA_VISIBLE_DEVICES=2 VLLM_NIXL_SIDE_CHANNEL_PORT=5659 vllm serve {TP1} --port {tp1_port} &\n"
            f"python3 tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8192 {proxy_args} &\nwait\n")


@pytest.mark.parametrize("proxy_args", [
    "--prefiller-ports ${PREFILL_PORTS[@]} --decoder-ports ${DECODE_PORTS[@]}",
    '--prefiller-ports "${PREFILL_PORTS[@]}" --decoder-ports "${DECODE_PORTS[@]}"',
    '--prefiller-ports "${PREFILL_PORTS[0]}" --decoder-ports "${DECODE_PORTS[-1]}"',
])
def test_a_proxy_naming_ports_from_arrays_sets_the_roles(tmp_path, capsys, proxy_args):
    # prefill TP 2 to decode TP 1 on 0.13.0 fails (assert tp_ratio > 0): the proxy says the TP 2 engine prefills
    code, out = check(tmp_path, capsys, _pod(_script(proxy_args)))
    assert code == 1 and "hetero-tp-p-gt-d-unsupported" in rules(out, "error")
    assert "both ways round" not in out["results"][0]["pairedBy"]


def test_the_same_arrays_naming_the_other_engine_prefill_accept_the_pair(tmp_path, capsys):
    script = _script('--prefiller-ports "${PREFILL_PORTS[@]}" --decoder-ports "${DECODE_PORTS[@]}"',
                     ports="PREFILL_PORTS=(8200)\nDECODE_PORTS=(8100)")
    code, out = check(tmp_path, capsys, _pod(script))
    assert code == 0 and "hetero-tp-p-gt-d-unsupported" not in rules(out)
    assert "both ways round" not in out["results"][0]["pairedBy"]


def test_engines_started_by_a_loop_over_the_array_get_its_roles(tmp_path, capsys):
    ports = "PREFILL_PORTS=(8100)\nDECODE_PORTS=(8200)\nALL=(\"${PREFILL_PORTS[@]}\" \"${DECODE_PORTS[@]}\")"
    script = (f"set -xe\n{ports}\nTPS=(2 1)\nGPUS=(0,1 2)\n"
              f'for i in "${{!ALL[@]}}"; do\n'
              f'  CUDA_VISIBLE_DEVICES=${{GPUS[$i]}} VLLM_NIXL_SIDE_CHANNEL_PORT=$((5559 + 100 * i)) vllm serve Qwen/Qwen3-0.6B '
              f'--tensor-parallel-size ${{TPS[$i]}} --kv-transfer-config \'{KV}\' --port ${{ALL[$i]}} &\ndone\n'
              'python3 toy_proxy_server.py --prefiller-ports "${PREFILL_PORTS[@]}" --decoder-ports "${DECODE_PORTS[@]}" &'
              "\nwait\n")
    code, out = check(tmp_path, capsys, _pod(script))
    assert code == 1 and "hetero-tp-p-gt-d-unsupported" in rules(out, "error")
    assert "both ways round" not in out["results"][0]["pairedBy"]


def test_ports_from_an_array_the_reader_cannot_follow_leave_the_roles_to_both_ways(tmp_path, capsys):
    # the proxy's ports come from read -a: not in the files, so the script does not name the roles; judged both
    # ways round, the pair is refused only where both orientations fail (TP 1 -> TP 2 is supported: accepted)
    script = _script('--prefiller-ports "${PREFILL_PORTS[@]}" --decoder-ports "${DECODE_PORTS[@]}"',
                     ports='read -ra PREFILL_PORTS <<< "$P"\nread -ra DECODE_PORTS <<< "$D"')
    code, out = check(tmp_path, capsys, _pod(script))
    assert code == 0 and "hetero-tp-p-gt-d-unsupported" not in rules(out, "error")
    assert "both ways round" in out["results"][0]["pairedBy"]
