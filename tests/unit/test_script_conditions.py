"""A container script's conditions, evaluated where their operands are known: the engine gets the flags of the branch
the shell takes (POSIX Shell Command Language 2.9.4 ``if``/``case``, 2.9.3 ``&&``/``||``; POSIX ``test``; bash's
manual, "Bash Conditional Expressions" and "Shell Arithmetic"). Where a condition reads a value the manifest does not
hold, every way through is read and a flag the ways set differently is unknown, so the rules that read it say "not
checked" instead of judging one branch's value.

The expected argv of each known case was written from those semantics first; :func:`test_bash_agrees` then runs the
same scripts in a real bash with a ``vllm`` on ``PATH`` that prints its arguments, as a second witness.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest

from pdd_operator.compat.manifests import _lws_env
from pdd_operator.vllm.args import parse_flags
from pdd_operator.vllm.expansion import ContainerEnv, unknown
from pdd_operator.vllm.script import BRANCH, launches
from tests.unit.test_turn2_variants import check, rules

#: llm-d style: a value chosen by two conditions joined with &&, an elif with a [[ ]] glob, an else.
KV_BY_MODE = """\
if [ "${MODE:-agg}" = "disagg" ] && [ "${NODES:-1}" -ge 2 ]; then
  EXTRA="--kv-cache-dtype fp8_e4m3"
elif [[ $MODE == dis* ]]; then
  EXTRA="--kv-cache-dtype fp8"
else
  EXTRA=""
fi
exec vllm serve Qwen/Qwen3-30B-A3B $EXTRA --port 8000
"""

#: An args array built by (( )), test -n, [ ! -z ] || and then one vllm serve (no engine starts in a branch).
ARRAY_BY_TESTS = """\
ARGS=(--model deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8)
(( GROUP > 1 )) && ARGS+=(--data-parallel-size $((GROUP * 8)) --data-parallel-size-local 8)
test -n "$DRAFT" && ARGS+=(--speculative-config "{\\"method\\":\\"mtp\\",\\"num_speculative_tokens\\":$DRAFT}")
[ ! -z "$EAGER" ] || ARGS+=(--enforce-eager)
vllm serve "${ARGS[@]}"
"""

#: A case on the role, with alternatives and a glob.
KV_BY_ROLE = """\
case "$ROLE" in
  prefill|prefiller) KV='{"kv_connector":"NixlConnector","kv_role":"kv_producer"}' ;;
  decode*) KV='{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}' ;;
  *) KV='{"kv_connector":"NixlConnector","kv_role":"kv_both"}' ;;
esac
vllm serve meta-llama/Llama-3.1-8B-Instruct --kv-transfer-config "$KV"
"""

CASES = [
    # script, env, the engine's argv after "vllm serve" (written from the shell's rules before running)
    (KV_BY_MODE, {"MODE": "disagg", "NODES": "2"}, ["Qwen/Qwen3-30B-A3B", "--kv-cache-dtype", "fp8_e4m3",
                                                    "--port", "8000"]),
    (KV_BY_MODE, {"MODE": "disagg", "NODES": "1"}, ["Qwen/Qwen3-30B-A3B", "--kv-cache-dtype", "fp8", "--port", "8000"]),
    (KV_BY_MODE, {"MODE": "disaggregated"}, ["Qwen/Qwen3-30B-A3B", "--kv-cache-dtype", "fp8", "--port", "8000"]),
    (KV_BY_MODE, {"MODE": "agg"}, ["Qwen/Qwen3-30B-A3B", "--port", "8000"]),
    (ARRAY_BY_TESTS, {"GROUP": "2", "DRAFT": "1", "EAGER": ""},
     ["--model", "deepseek-ai/DeepSeek-V3", "--tensor-parallel-size", "8", "--data-parallel-size", "16",
      "--data-parallel-size-local", "8", "--speculative-config", '{"method":"mtp","num_speculative_tokens":1}',
      "--enforce-eager"]),
    (ARRAY_BY_TESTS, {"GROUP": "1", "DRAFT": "", "EAGER": "1"},
     ["--model", "deepseek-ai/DeepSeek-V3", "--tensor-parallel-size", "8"]),
    (KV_BY_ROLE, {"ROLE": "prefiller"}, ["meta-llama/Llama-3.1-8B-Instruct", "--kv-transfer-config",
                                         '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}']),
    (KV_BY_ROLE, {"ROLE": "decode-0"}, ["meta-llama/Llama-3.1-8B-Instruct", "--kv-transfer-config",
                                        '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}']),
    (KV_BY_ROLE, {"ROLE": "both"}, ["meta-llama/Llama-3.1-8B-Instruct", "--kv-transfer-config",
                                    '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']),
]


@pytest.mark.parametrize("script, env, argv", CASES)
def test_the_branch_the_shell_takes_gives_the_flags(script, env, argv):
    (got,) = launches(script, ContainerEnv(dict(env)))
    assert list(got.argv) == ["vllm", "serve", *argv]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
@pytest.mark.parametrize("script, env, argv", CASES)
def test_bash_agrees(tmp_path, script, env, argv):
    stub = tmp_path / "vllm"
    stub.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    run_env = {"PATH": f"{tmp_path}:{os.environ.get('PATH', '/usr/bin:/bin')}", **env}
    out = subprocess.run(["bash", "-c", script], env=run_env, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["serve", *argv]


def _secret(*names: str) -> ContainerEnv:
    """A container env whose ``names`` come from a Secret (valueFrom): their values are not in the manifest."""
    return ContainerEnv.of([{"name": n, "valueFrom": {"secretKeyRef": {"name": "s", "key": n}}} for n in names])


def test_an_unknown_condition_leaves_the_flag_it_decides_unknown():
    (got,) = launches(KV_BY_MODE, _secret("MODE"))
    model, flags = parse_flags(list(got.argv))
    # fp8_e4m3, fp8 or none: which one the shell passes depends on MODE, which a Secret holds
    assert model == "Qwen/Qwen3-30B-A3B" and flags["--kv-cache-dtype"] == unknown("MODE") and flags["--port"] == "8000"
    # MODE in no env of the manifest: ${MODE:-agg} reads as agg, but $MODE in the elif may be the image's ENV
    (got,) = launches(KV_BY_MODE)
    assert parse_flags(list(got.argv))[1]["--kv-cache-dtype"] == unknown("MODE")
    (got,) = launches(KV_BY_ROLE, _secret("ROLE"))
    assert parse_flags(list(got.argv))[1]["--kv-transfer-config"] == unknown("ROLE")


def test_an_unknown_boolean_flag_reads_as_neither_true_nor_false():
    (got,) = launches(ARRAY_BY_TESTS, ContainerEnv({"GROUP": "1", "DRAFT": ""}))
    # EAGER is in no env of the manifest (the image's ENV may set it): [ ! -z "$EAGER" ] is not known
    assert parse_flags(list(got.argv))[1]["--enforce-eager"] == unknown("EAGER")


def test_branches_that_agree_keep_the_value_and_a_condition_without_a_variable_is_named_branch():
    same = 'if [ -f /etc/cfg ]; then B=16; else B=16; fi\nvllm serve m --block-size $B'
    assert parse_flags(list(launches(same)[0].argv))[1]["--block-size"] == "16"
    differ = 'if [ -f /etc/cfg ]; then B=16; else B=32; fi\nvllm serve m --block-size $B'
    assert parse_flags(list(launches(differ)[0].argv))[1]["--block-size"] == unknown(BRANCH)


def _lws(name: str, role: str, size: int, script: str, *, leader_template: bool = False) -> dict:
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.20.2", "command": ["/bin/bash", "-c"], "args": [script],
                 "env": [{"name": "LWS_GROUP_SIZE", "value": "1"},  # LWS's own value replaces it
                         {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                 "resources": {"limits": {"nvidia.com/gpu": "4"}}}
    template = {"metadata": {"labels": {"app": "qwen3-235b", "llm-d.ai/role": role}}, "spec": {"containers": [container]}}
    lwt = {"size": size, "workerTemplate": template}
    if leader_template:
        lwt["leaderTemplate"] = template
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": name},
            "spec": {"replicas": 1, "leaderWorkerTemplate": lwt}}


#: A wide-EP wrapper (other model than llm-d's GLM guide): fp8 KV only on groups of more than two pods.
WIDE_EP = """\
KV=""
if [ "$LWS_GROUP_SIZE" -gt 2 ]; then KV="--kv-cache-dtype fp8"; fi
exec vllm serve Qwen/Qwen3-235B-A22B $KV --data-parallel-size $((LWS_GROUP_SIZE * 4)) --data-parallel-size-local 4 \\
  --data-parallel-start-rank $((LWS_WORKER_INDEX * 4)) --enable-expert-parallel \\
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
"""


def test_lws_group_size_decides_the_wrapper_branch(tmp_path, capsys):
    # LWS's webhook sets LWS_GROUP_SIZE to leaderWorkerTemplate.size in every pod, replacing the template's own
    # value (kubernetes-sigs/lws pkg/utils/pod/pod_utils.go AddLWSVariables, addEnvVarsIfNotExists)
    code, out = check(tmp_path, capsys, _lws("q-prefill", "prefill", 3, WIDE_EP), _lws("q-decode", "decode", 2, WIDE_EP))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error")
    code, out = check(tmp_path, capsys, _lws("q-prefill", "prefill", 3, WIDE_EP), _lws("q-decode", "decode", 3, WIDE_EP))
    assert code == 0 and "kv-cache-dtype-mismatch" not in rules(out)


def test_lws_worker_index_is_known_only_where_one_pod_runs_the_template():
    # the leader (index 0) runs leaderTemplate, or workerTemplate when there is none (LWS API LeaderTemplate)
    assert _lws_env({"size": 4}) == {"leaderTemplate": {"LWS_GROUP_SIZE": "4", "LWS_WORKER_INDEX": "0"},
                                     "workerTemplate": {"LWS_GROUP_SIZE": "4"}}
    assert _lws_env({"size": 1})["workerTemplate"] == {"LWS_GROUP_SIZE": "1", "LWS_WORKER_INDEX": "0"}
    two = _lws_env({"size": 2, "leaderTemplate": {}})
    assert two["workerTemplate"] == {"LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": "1"}
    assert _lws_env({"size": "${SIZE}"}) == {}


#: llm-d's wide-EP pattern: each pod of the group starts DP_SIZE_LOCAL ranks at its own start rank.
DP_OVER_GROUP = """\
exec vllm serve Qwen/Qwen3-235B-A22B --data-parallel-size {dp} --data-parallel-size-local 4 \\
  --data-parallel-start-rank $((LWS_WORKER_INDEX * 4)) --enable-expert-parallel \\
  --kv-transfer-config '{{"kv_connector":"NixlConnector","kv_role":"kv_both"}}'
"""


@pytest.mark.parametrize("dp, leader_template, refused", [
    ("$((LWS_GROUP_SIZE * 4))", False, False),  # 3 pods x 4 = 12 ranks, all started
    ("12", False, False),
    ("16", False, True),  # ranks 12-15 never start: the DP group of 16 waits for them
    ("16", True, False),  # a leaderTemplate may start other counts: not judged
])
def test_an_lws_group_starts_pods_times_local_dp_ranks(tmp_path, capsys, dp, leader_template, refused):
    script = DP_OVER_GROUP.format(dp=dp)
    docs = [_lws("q-prefill", "prefill", 3, script, leader_template=leader_template),
            _lws("q-decode", "decode", 3, DP_OVER_GROUP.format(dp="12"))]
    code, out = check(tmp_path, capsys, *docs)
    errors = [f["message"] for r in out["results"] for f in r["findings"]
              if f["rule"] == "parallelism-gpu-count" and f["severity"] == "error"]
    assert (code == 1 and len(errors) == 1 and "ranks 12 to 15 never start" in errors[0]) if refused else not errors
