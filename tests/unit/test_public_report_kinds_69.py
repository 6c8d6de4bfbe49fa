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
