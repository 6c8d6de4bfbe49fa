"""Variants of what the sixty-ninth public-report set (tests/unit/data/public_reports_69) taught, with negative
controls: a shell script's ``pip install vllm==X`` lines give each engine the release installed when it starts.

A script that installs one release, starts the prefill, installs another and starts the decode (one host's steps
pasted after the other's, or an upgrade half done) runs two vLLM releases: each ``pip install`` replaces the package
the next ``vllm serve`` imports. The NIXL handshake of 0.13.0 and later hashes the vLLM version and refuses the pair
(``compute_nixl_compatibility_hash``, distributed/kv_transfer/kv_connector/v1/nixl_connector.py 0.14.0 lines 158-215,
the refusal at lines 1040-1062; 0.16.0 lines 175-232 and 1092): ``vllm-version-mismatch``. The reader
(:func:`pdd_operator.compat.script_inputs._vllm_pin`) takes the last pin on a line of its own before the engine; a pin
in a comment does not install anything, and where no pin comes before an engine the script's first pin still names its
release.
"""

from __future__ import annotations

import pytest

from .test_script_inputs import KV_BOTH, _check, _errors


def _script(model: str, p_pin: str | None, d_pin: str | None, head: str = "", tail: str = "") -> str:
    """A one-host NIXL pair: ``head``, the prefill's pin and engine, the decode's pin and engine, a proxy, ``tail``."""
    p = f"pip install vllm=={p_pin} nixl\n" if p_pin else ""
    d = f"pip install vllm=={d_pin}\n" if d_pin else ""
    return f"""#!/bin/bash
{head}{p}CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve {model} --port 8100 --enforce-eager \\
  --kv-transfer-config '{KV_BOTH}' &
{d}CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve {model} --port 8200 --enforce-eager \\
  --kv-transfer-config '{KV_BOTH}' &
python toy_proxy_server.py --port 8192 --prefiller-hosts localhost --prefiller-ports 8100 \\
  --decoder-hosts localhost --decoder-ports 8200
{tail}"""


@pytest.mark.parametrize(("model", "p_pin", "d_pin"), [
    ("Qwen/Qwen3-0.6B", "0.14.0", "0.16.0"),                  # the set's entry
    ("meta-llama/Llama-3.1-8B-Instruct", "0.19.0", "0.20.0"),  # other model, other releases
    ("Qwen/Qwen2.5-7B-Instruct", "0.14.0", "0.13.0"),          # the decode's host installs the older release
])
def test_a_second_pin_before_the_decode_gives_it_another_release(tmp_path, capsys, model, p_pin, d_pin):
    code, out = _check(tmp_path, capsys, _script(model, p_pin, d_pin))
    assert code == 1 and "vllm-version-mismatch" in _errors(out)
    message = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "vllm-version-mismatch")
    assert f"prefill {p_pin}" in message and f"decode {d_pin}" in message


def test_the_same_release_installed_twice_is_one_release(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _script("Qwen/Qwen3-0.6B", "0.14.0", "0.14.0"))
    assert code == 0 and not _errors(out)
    assert out["results"][0]["vllmVersion"] == "0.14.0"


def test_a_pin_in_a_comment_installs_nothing(tmp_path, capsys):
    text = _script("Qwen/Qwen3-0.6B", "0.14.0", None).replace(
        "CUDA_VISIBLE_DEVICES=1", "# on the decode host: pip install vllm==0.16.0\nCUDA_VISIBLE_DEVICES=1")
    code, out = _check(tmp_path, capsys, text)
    assert code == 0 and not _errors(out)
    assert out["results"][0]["vllmVersion"] == "0.14.0"


def test_a_pin_only_after_the_engines_still_names_their_release(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _script("Qwen/Qwen3-0.6B", None, None, tail="pip install vllm==0.14.0\n"))
    assert code == 0 and not _errors(out)
    assert out["results"][0]["vllmVersion"] == "0.14.0"


def test_a_comment_pin_before_a_real_one_gives_way_to_it(tmp_path, capsys):
    """The script's instructions name 0.11.0 in a comment, then install 0.14.0: the engines run 0.14.0."""
    code, out = _check(tmp_path, capsys, _script("Qwen/Qwen3-0.6B", "0.14.0", None,
                                                 head="# tested with: pip install vllm==0.11.0\n"))
    assert code == 0 and out["results"][0]["vllmVersion"] == "0.14.0"


# --- a script whose engines take their role from the unreleased VLLM_DISTRIBUTED_KV_ROLE -----------------------------


def _fork_script(model: str, assign: str = "inline", wrapper: str = "") -> str:
    """Two engines of the vllm#8498 prototype (Mooncake's kvcache-ai/vllm fork): roles from VLLM_DISTRIBUTED_KV_ROLE."""
    lines = []
    for role, port in (("producer", 8100), ("consumer", 8200)):
        cmd = (f"{wrapper}python3 -m vllm.entrypoints.openai.api_server --model {model} --port {port} "
               "--max-model-len 10000 --gpu-memory-utilization 0.95 &")
        if assign == "export":
            lines += [f"export VLLM_DISTRIBUTED_KV_ROLE={role}", "export MOONCAKE_CONFIG_PATH=./mooncake.json", cmd]
        else:
            lines.append(f'MASTER_ADDR="10.0.0.1" MASTER_PORT="54324" MOONCAKE_CONFIG_PATH=./mooncake.json '
                         f"VLLM_DISTRIBUTED_KV_ROLE={role} {cmd}")
    return "git clone git@github.com:kvcache-ai/vllm.git\npip3 install vllm==0.6.2\n" + "\n".join(lines) + "\n"


@pytest.mark.parametrize(("model", "assign", "wrapper"), [
    ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "inline", ""),       # the set's entry (Mooncake's zh doc)
    ("meta-llama/Llama-3.1-8B-Instruct", "export", ""),         # roles exported before each engine
    ("Qwen/Qwen2.5-7B-Instruct", "inline", "CUDA_VISIBLE_DEVICES=0 "),
])
def test_fork_kv_role_scripts_are_not_checked_not_unreadable_yaml(tmp_path, capsys, model, assign, wrapper):
    code, out = _check(tmp_path, capsys, _fork_script(model, assign, wrapper))
    assert code == 3 and not out.get("inputErrors") and not out["results"]
    assert "VLLM_DISTRIBUTED_KV_ROLE" in out["notChecked"][0]["reason"]


def test_a_role_variable_only_in_a_comment_is_no_such_script(tmp_path, capsys):
    text = _fork_script("Qwen/Qwen2.5-7B-Instruct").replace("VLLM_DISTRIBUTED_KV_ROLE=", "ROLE=")
    text = "# the old demo set VLLM_DISTRIBUTED_KV_ROLE=producer here\n" + text
    code, out = _check(tmp_path, capsys, text)
    assert not any("VLLM_DISTRIBUTED_KV_ROLE" in n["reason"] for n in out.get("notChecked", []))


def test_a_script_with_a_kv_transfer_config_is_read_as_before(tmp_path, capsys):
    """A released vLLM's --kv-transfer-config makes the script one the reader reads, whatever else it sets."""
    text = _script("Qwen/Qwen3-0.6B", "0.14.0", None, head="export VLLM_DISTRIBUTED_KV_ROLE=producer\n")
    code, out = _check(tmp_path, capsys, text)
    assert code == 0 and out["results"] and not _errors(out)
