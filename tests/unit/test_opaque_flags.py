"""A gap the seventh held-out round left (issue 9), with variants and negative controls: a JSON flag other than
--kv-transfer-config whose value is not in the manifest (a shell command substitution, a
ConfigMap/Secret/envFrom variable, the image's ENV) is "not checked" for the rules that read it
(:func:`pdd_operator.vllm.expansion.opaque_value`, ``Rule.needs``), never ``engine-args-invalid``, and the other
rules still run.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.pair import role_from_container
from pdd_operator.vllm.expansion import opaque_value
from tests.unit.test_turn2_variants import check, container, rules, workload

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
SPEC_RULES = {"spec-decode-mismatch", "speculative-incomplete", "hybrid-spec-tokens-mismatch"}


def _script_pair(p_tail, d_tail, image="vllm/vllm-openai:v0.28.0", env=()):
    """Prefill and decode Deployments whose engine an ``sh -c`` script starts with a literal NIXL
    --kv-transfer-config and ``*_tail`` (more words of the script) after it."""
    def one(role, tail):
        script = f"vllm serve Qwen/Qwen3-8B --port 8000 --kv-transfer-config '{KV}' {tail}"
        return workload(f"m-{role}", role, container([script], image=image, command=["sh", "-c"], env=list(env)))
    return [one("prefill", p_tail), one("decode", d_tail)]


def _reasons(out):
    return " ".join(n["reason"] for n in out["notChecked"])


# --- opaque values of JSON flags --------------------------------------------------------------------------------


@pytest.mark.parametrize("expr", ['"$(python3 -c \'import json; print(json.dumps({}))\')"', '"`cat /etc/spec.json`"',
                                  '"$SPEC_CONFIG"', "${SPEC_CONFIG}"])
def test_a_speculative_config_nobody_can_read_is_not_checked_not_invalid(tmp_path, capsys, expr):
    tail = f"--speculative-config {expr}"
    code, out = check(tmp_path, capsys, *_script_pair(tail, tail))
    assert code == 3 and not rules(out, "error"), out
    reasons = _reasons(out)
    assert "--speculative-config" in reasons and all(r in reasons for r in SPEC_RULES), out


def test_a_speculative_config_from_a_configmap_on_one_role_is_not_called_a_mismatch(tmp_path, capsys):
    # decode's value is in a ConfigMap: it may equal prefill's literal eagle3 config, so no spec-decode-mismatch
    env = [{"name": "SPEC", "valueFrom": {"configMapKeyRef": {"name": "spec", "key": "config.json"}}}]
    literal = json.dumps({"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                          "num_speculative_tokens": 3})
    docs = _script_pair(f"--speculative-config '{literal}'", '--speculative-config "$SPEC"', env=env)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and "spec-decode-mismatch" not in rules(out), out
    assert "Decode's --speculative-config is the value of $SPEC" in _reasons(out), out


@pytest.mark.parametrize("flag, held", [
    ("--kv-events-config", {"listener-port-conflict", "side-channel-listener-conflict"}),
    ("--attention-config", {"attention-backend-mismatch", "cross-layers-blocks-mismatch"}),
])
def test_other_json_flags_nobody_can_read_hold_only_their_rules(tmp_path, capsys, flag, held):
    tail = f'{flag} "$(cat /etc/vllm/config.json)"'
    code, out = check(tmp_path, capsys, *_script_pair(tail, tail))
    assert code == 3 and not rules(out, "error"), out
    reasons = _reasons(out)
    assert all(r in reasons for r in held) and "spec-decode-mismatch" not in reasons, out
    assert "computed by a command when the container starts" in reasons, out


@pytest.mark.parametrize("flag", ["--compilation-config", "-O", "--hf-overrides", "--override-generation-config"])
def test_json_flags_no_rule_reads_pass_when_computed(tmp_path, capsys, flag):
    tail = f'{flag} "$(cat /etc/vllm/config.json)"'
    code, out = check(tmp_path, capsys, *_script_pair(tail, tail))
    assert code == 0 and not out["notChecked"] and len(out["results"]) == 1, out


def test_other_rules_still_run_beside_an_opaque_speculative_config(tmp_path, capsys):
    # the block sizes still differ on vLLM 0.11 (no heterogeneous block size there): still refused
    tail = '--speculative-config "$SPEC_CONFIG" --block-size {}'
    code, out = check(tmp_path, capsys, *_script_pair(tail.format(16), tail.format(32),
                                                      image="vllm/vllm-openai:v0.11.0"))
    assert code == 1 and rules(out, "error") and "engine-args-invalid" not in rules(out), out
    assert "--speculative-config" in _reasons(out), out


def test_invalid_literal_json_is_still_refused(tmp_path, capsys):
    tail = "--speculative-config '{\"method\": \"ngram\",'"
    code, out = check(tmp_path, capsys, *_script_pair(tail, tail))
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out


def test_an_undefined_kubelet_reference_outside_a_shell_is_what_vllm_parses():
    # exec form, no such variable: the kubelet passes $(SPEC) literally; vLLM's JSON parser then fails
    c = container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV, "--speculative-config", "$(SPEC)"])
    role = role_from_container("decode", c, {}, version_text="0.28.0")
    assert role.opaque == () and any("--speculative-config" in e for e in role.errors)


def test_a_kubelet_reference_to_a_secret_is_opaque():
    env = [{"name": "SPEC", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
    c = container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV, "--speculative-config", "$(SPEC)"], env=env)
    role = role_from_container("decode", c, {}, version_text="0.28.0")
    named = "(Secret 's' key 'k' (valueFrom): give it to pdd check)"  # the source named (fixW)
    assert dict(role.opaque) == {"--speculative-config": f"the value of $SPEC, which is not in these files {named}",
                                 "SPEC": f"set from a valueFrom source whose value is not in these files {named}"}
    assert role.errors == () and role.speculative is None


@pytest.mark.parametrize("raw, command, opaque", [
    ("{\"a\": 1}", ["sh", "-c", "x"], False),
    ("$(cat f)", ["vllm", "serve"], False),  # outside a shell nothing runs it: vLLM reads it as written
    ("$(cat f)", ["bash", "-lc", "x"], True),
    ("<unknown:CFG>", ["vllm", "serve"], True),
    (True, ["sh", "-c"], False),
    (None, ["sh", "-c"], False),
])
def test_opaque_value(raw, command, opaque):
    assert bool(opaque_value(raw, command)) is opaque


def test_a_kubelet_reference_a_config_map_envfrom_may_define_is_opaque(tmp_path, capsys):
    # exec form: $(SPEC) may come from the envFrom ConfigMap, so vLLM may get a valid JSON: not checked, not invalid
    spec = ["--speculative-config", "$(SPEC)"]
    docs = [workload(f"m-{role}", role, container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV, *spec],
                                                  envFrom=[{"configMapRef": {"name": "engine-flags"}}]))
            for role in ("prefill", "decode")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and not rules(out, "error") and "--speculative-config" in _reasons(out), out
