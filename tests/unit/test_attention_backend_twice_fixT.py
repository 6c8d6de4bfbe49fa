"""--attention-backend beside another backend setting (issue 9, fixT item 4): vLLM's create_engine_config raises
"attention_backend and attention_config.backend are mutually exclusive" where --attention-config names a backend too
(every release with the flag, 0.13.0-0.34.0) or where VLLM_ATTENTION_BACKEND is set on 0.13.0-0.14.1, whose
AttentionConfig copies the variable into that field; 0.16.0 on ignore the variable, 0.15.x and unknown releases warn."""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import KV, check, container, rules, workload

RULE = "attention-backend-set-twice"


def _pair(tmp_path, capsys, version: str | None, d_args=(), d_env=(), model="Qwen/Qwen3-8B", one=False):
    image = f"vllm/vllm-openai:v{version}" if version else "registry.example.com/team/vllm:prod"
    docs = []
    for role, args, env in (("prefill", (), ()), ("decode", d_args, d_env)):
        c = container([model, "--kv-transfer-config", KV, *args], image=image,
                      env=[{"name": k, "value": v} for k, v in env])
        docs.append(workload(f"m-{role}", role, c, app="m"))
    return check(tmp_path, capsys, *(docs[1:] if one else docs))


BOTH_ENV = (["--attention-backend", "FLASH_ATTN"], [("VLLM_ATTENTION_BACKEND", "FLASH_ATTN")])


@pytest.mark.parametrize(("version", "severity"), [
    ("0.13.0", "error"), ("0.14.0", "error"), ("0.14.1", "error"),
    ("0.15.1", "warning"),                          # no sdist read between 0.14.1 and 0.16.0
    ("0.16.0", None), ("0.20.0", None), ("0.34.0", None),   # the variable is read by no file
    (None, "warning"),
])
def test_the_flag_beside_the_variable(tmp_path, capsys, version, severity):
    _, out = _pair(tmp_path, capsys, version, *BOTH_ENV)
    assert (RULE in rules(out, severity)) if severity else RULE not in rules(out), out


@pytest.mark.parametrize("version", ["0.13.0", "0.18.0", "0.28.0", "0.34.0"])
def test_the_flag_beside_the_attention_config_backend_on_every_release(tmp_path, capsys, version):
    args = ["--attention-backend", "TRITON_ATTN", "--attention-config", json.dumps({"backend": "TRITON_ATTN"})]
    code, out = _pair(tmp_path, capsys, version, args)
    assert code == 1 and RULE in rules(out, "error"), out


def test_a_lone_engine_is_judged(tmp_path, capsys):
    code, out = _pair(tmp_path, capsys, "0.14.1", *BOTH_ENV, one=True)
    assert code == 1 and RULE in rules(out, "error"), out


@pytest.mark.parametrize(("args", "env"), [
    (["--attention-backend", "FLASH_ATTN"], []),                                       # the flag alone
    ([], [("VLLM_ATTENTION_BACKEND", "FLASH_ATTN")]),                                 # the variable alone
    (["--attention-config", json.dumps({"backend": "FLASH_ATTN"})], [("VLLM_ATTENTION_BACKEND", "FLASH_ATTN")]),
    (["--attention-backend", "FLASH_ATTN"], [("VLLM_ATTENTION_BACKEND", "")]),         # empty: not set to a backend
])
def test_one_setting_is_no_finding(tmp_path, capsys, args, env):
    _, out = _pair(tmp_path, capsys, "0.14.1", args, env)
    assert RULE not in rules(out), out
