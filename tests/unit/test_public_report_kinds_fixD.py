"""Variants of what the hundred-and-twenty-first public-report set (tests/unit/data/public_reports_121) taught: the
vLLM router's ROCm P/D lanes build each engine's ``--kv-transfer-config`` with a shell function called in a command
substitution, ``PREFILL_KV_CONFIG=$(make_kv_config kv_producer 8100 ...)``, whose body sets ``local`` variables from
its positional parameters and ``printf``-s the connector JSON. The script reader read only one-statement bodies, so
every engine's connector was unknown and the whole script "not checked". It now runs such a function as the shell
runs it in the command substitution's subshell (:meth:`pdd_operator.vllm.script._Shell.function_output`): positional
parameters, ``local``, ``printf``/``echo``, ``if`` and ``&&`` on known tests, ``return``, ``shift``; anything it
cannot follow (another command, a test of an unknown value) leaves the output unknown, as before.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.expansion import unknown_names
from pdd_operator.vllm.script import launches
from tests.unit.cli_check import check_text
from tests.unit.cli_check import rules as _rules


def _check(tmp_path, capsys, text: str, *extra: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, "run.sh", *extra)


def _kv(launch) -> str:
    argv = list(launch.argv)
    return argv[argv.index("--kv-transfer-config") + 1]


def _pair(function: str, p_call: str, d_call: str, p_extra: str = "", d_extra: str = "",
          pin: str = "pip install vllm==0.24.0\n") -> str:
    return (pin + function
            + f"P_KV=$({p_call})\nD_KV=$({d_call})\n"
            + f'CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen3-8B --port 8100 {p_extra} --kv-transfer-config "$P_KV" &\n'
            + f"CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve Qwen/Qwen3-8B --port 8200 {d_extra} "
              '--kv-transfer-config "$D_KV" &\nwait\n')


# --- locals from positional parameters, as set 121's make_kv_config ------------------------------------------------

NIXL_LOCALS = """BACKENDS='["UCX"]'
make_kv_config() {
  local role=$1
  local http_port=$2

  printf '{"kv_connector":"NixlConnector","kv_role":"%s","kv_connector_extra_config":{"backends":%s,"http_port":%s}}' \\
    "${role}" \\
    "${BACKENDS}" \\
    "${http_port}"
}
"""


def test_locals_from_positional_parameters_give_the_engines_kv_transfer_config():
    got = launches(_pair(NIXL_LOCALS, "make_kv_config kv_both 8097", "make_kv_config kv_both 8098"))
    assert [json.loads(_kv(x)) for x in got] == [
        {"kv_connector": "NixlConnector", "kv_role": "kv_both",
         "kv_connector_extra_config": {"backends": ["UCX"], "http_port": port}} for port in (8097, 8098)]


def test_the_locals_are_gone_after_the_call():
    # the function runs in the command substitution's subshell: neither its locals nor its plain assignments last
    script = ("f() { local role=$1; seen=yes; printf '%s' \"$role\"; }\nR=$(f kv_producer)\n"
              'vllm serve m --port 8100 --kv-transfer-config "{\\"kv_role\\":\\"$R\\",\\"x\\":\\"${role}${seen}\\"}"\n')
    kv = _kv(launches(script)[0])
    assert kv.startswith('{"kv_role":"kv_producer","x":"') and set(unknown_names(kv)) == {"role", "seen"}


@pytest.mark.parametrize(("p_dtype", "d_dtype", "code"), [("auto", "auto", 0), ("auto", "fp8", 1)])
def test_nixl_pair_from_a_function_is_judged(tmp_path, capsys, p_dtype, d_dtype, code):
    text = _pair(NIXL_LOCALS, "make_kv_config kv_both 8097", "make_kv_config kv_both 8098",
                 f"--kv-cache-dtype {p_dtype}", f"--kv-cache-dtype {d_dtype}")
    got, out = _check(tmp_path, capsys, text)
    assert got == code and not out["notChecked"]
    assert ("kv-cache-dtype-mismatch" in _rules(out, "error")) == (code == 1)


# --- other connectors ----------------------------------------------------------------------------------------------

MORIIO = """make_kv_config() {
  local role=$1 handshake=$2 notify=$3
  local form='{"kv_connector":"MoRIIOConnector","kv_role":"%s","kv_connector_extra_config":{"proxy_ip":"127.0.0.1",'
  form+='"proxy_ping_port":36367,"http_port":%d,"handshake_port":%d,"notify_port":%d,"backend":"xgmi"}}'
  printf "$form" \\
    "$role" "$4" "$handshake" "$notify"
}
"""


@pytest.mark.parametrize(("d_handshake", "code"), [(7301, 0), (6301, 1)])
def test_moriio_pair_from_a_function_is_judged(tmp_path, capsys, d_handshake, code):
    text = _pair(MORIIO, "make_kv_config kv_producer 6301 61005 8100",
                 f"make_kv_config kv_consumer {d_handshake} 62005 8200", pin="pip install vllm==0.34.0\n")
    got, out = _check(tmp_path, capsys, text)
    assert got == code and not out["notChecked"]
    assert ("listener-port-conflict" in _rules(out, "error")) == (code == 1)


def test_lmcache_json_from_echo_with_all_arguments():
    # echo of "$@" joins every argument with one blank; $# counts them
    function = ("lm() {\n  local role=$1\n  shift\n"
                "  echo -n '{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"'\"$role\"'\","
                "\"n\":'$#',\"tags\":\"'\"$@\"'\"}'\n"
                "}\n")
    got = launches(_pair(function, "lm kv_producer a b", "lm kv_consumer c"))
    assert [json.loads(_kv(x)) for x in got] == [
        {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_producer", "n": 2, "tags": "a b"},
        {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_consumer", "n": 1, "tags": "c"}]


# --- a function that prints a whole argument list ------------------------------------------------------------------

ARGS = """engine_args() {
  local port=$1 dtype=$2
  printf '%s ' --port "$port" --block-size 16 --kv-cache-dtype "$dtype"
  echo --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
}
"""


def test_a_function_printing_the_engines_arguments_is_split_into_them(tmp_path, capsys):
    script = ("pip install vllm==0.24.0\n" + ARGS
              + "CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen3-8B $(engine_args 8100 auto) &\n"
              + "CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve Qwen/Qwen3-8B "
                "$(engine_args 8200 fp8) &\nwait\n")
    got = launches(script)
    assert list(got[1].argv[3:]) == ["--port", "8200", "--block-size", "16", "--kv-cache-dtype", "fp8",
                                     "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']
    code, out = _check(tmp_path, capsys, script)
    assert code == 1 and "kv-cache-dtype-mismatch" in _rules(out, "error")


# --- a function with a conditional ---------------------------------------------------------------------------------

CONDITIONAL = """kv_for() {
  local role
  if [ "$1" = "prefill" ]; then
    role=kv_producer
  elif [ "$1" = "decode" ]; then
    role=kv_consumer
  else
    echo "unknown role $1" >&2
    return 1
  fi
  [ -n "$2" ] && echo "using buffer $2" >&2
  printf '{"kv_connector":"P2pNcclConnector","kv_role":"%s","kv_buffer_size":"%s"}' "$role" "${2:-1e9}"
}
"""


def test_a_function_with_a_known_conditional_takes_the_shells_branch():
    got = launches(_pair(CONDITIONAL, "kv_for prefill", "kv_for decode 8e9"))
    assert [json.loads(_kv(x)) for x in got] == [
        {"kv_connector": "P2pNcclConnector", "kv_role": "kv_producer", "kv_buffer_size": "1e9"},
        {"kv_connector": "P2pNcclConnector", "kv_role": "kv_consumer", "kv_buffer_size": "8e9"}]


def test_return_ends_the_output():
    script = ("f() { printf '%s' '{\"kv_role\":\"kv_both\"}'; return 0; echo trailing; }\n"
              'vllm serve m --kv-transfer-config "$(f)"\n')
    assert _kv(launches(script)[0]) == '{"kv_role":"kv_both"}'


def test_printf_v_and_a_nested_function_call():
    script = ("role() { [[ $1 == p* ]] && echo kv_producer || echo kv_consumer; }\n"
              "kv() { local r; r=$(role \"$1\"); printf -v out '{\"kv_role\":\"%s\"}' \"$r\"; echo \"$out\"; }\n"
              'vllm serve m --port 8100 --kv-transfer-config "$(kv prefill)"\n'
              'vllm serve m --port 8200 --kv-transfer-config "$(kv decode)"\n')
    assert [_kv(x) for x in launches(script)] == ['{"kv_role":"kv_producer"}', '{"kv_role":"kv_consumer"}']


# --- what the reader cannot follow stays unknown -------------------------------------------------------------------


@pytest.mark.parametrize("body", [
    # a condition on a value these files do not give
    'if [ -n "$KV_OVERRIDE" ]; then echo "$KV_OVERRIDE"; return; fi\n  printf \'{"kv_role":"%s"}\' "$1"',
    # another command's output
    "jq -nc --arg r \"$1\" '{kv_connector:\"NixlConnector\",kv_role:$r}'",
    # a loop
    "for x in a b; do echo \"$x\"; done\n  printf '{\"kv_role\":\"%s\"}' \"$1\"",
    # a conversion printf is not read for
    "printf '{\"kv_role\":\"%q\"}' \"$1\"",
])
def test_a_function_the_reader_cannot_follow_is_still_not_checked(tmp_path, capsys, body):
    function = "make_kv_config() {\n  local role=$1\n  " + body + "\n}\n"
    text = _pair(function, "make_kv_config kv_both", "make_kv_config kv_both")
    assert all(unknown_names(_kv(x)) == ["make_kv_config"] for x in launches(text))
    code, out = _check(tmp_path, capsys, text)
    assert code == 3 and out["notChecked"]


def test_a_function_printing_a_here_document():
    script = ('kv() {\n  local role=$1\n  cat <<JSON\n{"kv_connector":"NixlConnector","kv_role":"${role}"}\nJSON\n}\n'
              'vllm serve m --kv-transfer-config "$(kv kv_both)"\n')
    assert _kv(launches(script)[0]) == '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
