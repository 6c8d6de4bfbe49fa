"""Variants of the kind of fault the hundred-and-twenty-sixth public-report set (tests/unit/data/public_reports_126)
found: an orchestrator resource whose prefill and decode roles run placeholder scripts (print something about the
pod, then idle: ``echo 'Prefill Worker on node:' && hostname && sleep infinity``, as NVIDIA Grove's user-guide
PodCliqueSets do) starts no engine, so it is nothing to check (exit 4), not a P/D deployment left unchecked (exit 3).
And the sibling gap: Grove's PodClique templates (``{name, spec: {roleName, replicas, podSpec}}``) declare P/D roles,
so cliques whose images start the engine from their own entrypoint are "not checked", not "nothing to check".
Negative controls: a script that prints and then starts an engine, one that runs a command substitution, a pipeline,
or ``env``/``exec`` of another program, and roles that run their image's entrypoint."""

from __future__ import annotations

import pytest

from pdd_operator.compat.manifests import idle_container
from pdd_operator.vllm.script import simple_commands
from tests.unit.test_turn2_variants import check

#: Placeholder scripts: they print, then idle.
PLACEHOLDERS = (
    ["/bin/sh", "-c", "echo 'Prefill Worker on node:' && hostname && sleep infinity"],
    ["sh", "-c", 'echo "decode on $HOSTNAME"; date; sleep 3600'],
    ["bash", "-c", "printf '%s\\n' ready && uname -a && exec sleep 1d"],
    ["bash", "-lc", "echo starting\ntrue\ntail -f /dev/null"],
)


def _pcs(prefill: dict, decode: dict, *, scaling_groups: bool = False) -> dict:
    """A Grove PodCliqueSet: standalone prefill / decode cliques, or (``scaling_groups``) leader/worker cliques in
    PodCliqueScalingGroups named prefill and decode, each pod holding ``prefill``/``decode``."""
    def clique(name: str, role: str, container: dict) -> dict:
        return {"name": name, "spec": {"roleName": name, "replicas": 1, "podSpec": {
            "containers": [{"name": role, **container}]}}}
    if not scaling_groups:
        cliques = [clique("prefill", "prefill", prefill), clique("decode", "decode", decode)]
        template = {"cliques": cliques}
    else:
        cliques = [clique("pleader", "prefill", prefill), clique("pworker", "prefill", prefill),
                   clique("dleader", "decode", decode), clique("dworker", "decode", decode)]
        template = {"cliques": cliques, "podCliqueScalingGroups": [
            {"name": "prefill", "cliqueNames": ["pleader", "pworker"], "replicas": 2},
            {"name": "decode", "cliqueNames": ["dleader", "dworker"], "replicas": 1}]}
    return {"apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet", "metadata": {"name": "pd"},
            "spec": {"replicas": 1, "template": template}}


def _storm(container: dict) -> dict:
    """An AIBrix StormService whose prefill and decode roles hold ``container``."""
    def role(name: str) -> dict:
        return {"name": name, "replicas": 1, "template": {"spec": {"containers": [{"name": name, **container}]}}}
    return {"apiVersion": "orchestration.aibrix.ai/v1alpha1", "kind": "StormService", "metadata": {"name": "pd"},
            "spec": {"replicas": 1, "template": {"spec": {"roles": [role("prefill"), role("decode")]}}}}


@pytest.mark.parametrize("scaling_groups", [False, True], ids=["cliques", "scaling-groups"])
@pytest.mark.parametrize("command", PLACEHOLDERS, ids=[c[-1][:24] for c in PLACEHOLDERS])
def test_grove_roles_running_placeholder_scripts_are_nothing_to_check(tmp_path, capsys, command, scaling_groups):
    nginx = {"image": "nginx:latest", "command": command[:1], "args": command[1:]}
    code, out = check(tmp_path, capsys, _pcs(nginx, nginx, scaling_groups=scaling_groups))
    assert code == 4 and not out["notChecked"] and not out["results"], out


@pytest.mark.parametrize("command", PLACEHOLDERS, ids=[c[-1][:24] for c in PLACEHOLDERS])
def test_other_orchestrators_roles_running_placeholder_scripts_are_nothing_to_check(tmp_path, capsys, command):
    code, out = check(tmp_path, capsys, _storm({"image": "busybox:1.36", "command": command}))
    assert code == 4 and not out["notChecked"], out


@pytest.mark.parametrize("scaling_groups", [False, True], ids=["cliques", "scaling-groups"])
def test_grove_cliques_running_their_images_entrypoint_are_not_checked(tmp_path, capsys, scaling_groups):
    entry = {"image": "registry.example.com/qwen3-pd:1.0"}
    code, out = check(tmp_path, capsys, _pcs(entry, entry, scaling_groups=scaling_groups))
    assert code == 3 and "declares prefill and decode roles" in out["notChecked"][0]["reason"], out


def test_a_placeholder_prefill_beside_an_entrypoint_decode_is_not_checked(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _pcs({"image": "nginx:latest", "command": list(PLACEHOLDERS[0])},
                                             {"image": "registry.example.com/qwen3-pd:1.0"}))
    assert code == 3 and out["notChecked"], out


def test_grove_cliques_running_vllm_are_still_checked(tmp_path, capsys):
    def engine(tp: int) -> dict:
        return {"image": "vllm/vllm-openai:v0.26.0", "command": ["vllm", "serve"],
                "args": ["Qwen/Qwen3-0.6B", "--tensor-parallel-size", str(tp), "--kv-transfer-config",
                         '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']}
    code, out = check(tmp_path, capsys, _pcs(engine(1), engine(3)))
    assert code == 1, out


@pytest.mark.parametrize("command", [
    ["sh", "-c", "echo starting && vllm serve Qwen/Qwen3-8B"],  # prints, then an engine
    ["sh", "-c", "echo $(vllm serve Qwen/Qwen3-8B) && sleep infinity"],  # a command substitution runs a program
    ["sh", "-c", "echo ready | tee /tmp/x && sleep infinity"],  # a pipeline
    ["sh", "-c", "env vllm serve Qwen/Qwen3-8B; sleep infinity"],  # env runs its operand
    ["sh", "-c", "echo ready > /tmp/ready && sleep infinity"],  # a redirection
    ["sh", "-c", "echo ready && hostname"],  # does not idle: the container exits, a restart loop, not a placeholder
    ["sh", "-c", "if true; then echo a; fi; sleep infinity"],  # a compound command
    ["echo", "ready", "&&", "sleep", "infinity"],  # no shell: echo prints its arguments and exits
])
def test_scripts_that_do_more_than_print_and_idle_are_not_idle(command):
    assert not idle_container({"image": "busybox", "command": command})


def test_simple_commands_reads_a_list_of_simple_commands_and_nothing_else():
    assert simple_commands("echo 'a b' && hostname; sleep infinity") == [["echo", "a b"], ["hostname"],
                                                                        ["sleep", "infinity"]]
    assert simple_commands("X=1 sleep 3") is None
    assert simple_commands("while true; do sleep 3; done") is None
    assert simple_commands("sleep 'unterminated") is None
