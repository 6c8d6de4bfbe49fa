"""The kind of checker fault the sixty-first held-out set (tests/unit/data/public_reports_61) found, with variants
beyond its entries (other releases, models, ssh options, faults).

- A shell script that starts an engine on another host with ``ssh HOST "ENV=... vllm serve ..."`` (elizabetht/spark's
  two-node DGX Spark notebook): ssh(1) joins the words after the host and hands them to the remote user's shell, so
  the quoted string is a command line of its own. The script reader took it for one argument and found only the
  local engine, so the pair was "not checked". It now reads that string as shell input on HOST
  (:func:`pdd_operator.vllm.script._ssh_command`), with none of the local shell's exported variables (the remote
  shell does not inherit them), and the engine's node is HOST.
"""

from __future__ import annotations

import pytest

from .test_script_inputs import KV_BOTH, KV_D, KV_P, _check, _errors

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _two_hosts(kv_p: str = KV_P, kv_d: str = KV_D, vllm: str = "0.13.0", ssh: str = "ssh nvidia@10.0.0.2",
               p_extra: str = "", d_extra: str = "", d_env: str = "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2",
               model_d: str = MODEL, before: str = "") -> str:
    """A prefill started here and a decode started over ssh on another host (its JSON escaped inside the double
    quotes, as users write it)."""
    kv_d = kv_d.replace('"', '\\"')
    return f"""#!/bin/bash
pip install vllm=={vllm}
{before}
VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1 vllm serve {MODEL} --port 8100 {p_extra} --kv-transfer-config '{kv_p}' &
{ssh} "{d_env} vllm serve {model_d} --port 8200 {d_extra} --kv-transfer-config '{kv_d}' > /tmp/d.log 2>&1" &
"""


@pytest.mark.parametrize(("vllm", "ssh", "kv"), [
    ("0.13.0", "ssh nvidia@10.0.0.2", (KV_BOTH, KV_BOTH)),                     # the set's entry (kv_both both)
    ("0.11.0", "ssh -p 2222 -i ~/.ssh/id_ed25519 10.0.0.2", (KV_P, KV_D)),      # options with arguments
    ("0.14.1", "ssh -o StrictHostKeyChecking=no -tt node2", (KV_P, KV_D)),     # -o ARG, a flag without one
])
def test_a_kv_dtype_fault_across_ssh_is_found(tmp_path, capsys, vllm, ssh, kv):
    code, out = _check(tmp_path, capsys, _two_hosts(*kv, vllm=vllm, ssh=ssh, p_extra="--kv-cache-dtype fp8"))
    assert code == 1 and "kv-cache-dtype-mismatch" in _errors(out), out


def test_a_valid_two_host_pair_over_ssh_is_checked_and_passes(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _two_hosts(KV_BOTH, KV_BOTH))
    assert code == 0 and not _errors(out), out


def test_the_remote_shell_gets_no_local_export(tmp_path, capsys):
    """The decode runs here, the prefill over ssh. The side-channel host this script exports does not reach the
    ssh-started prefill (vLLM 0.13.0 envs.py lines 1254-1255: it falls back to localhost), so the prefill binds and
    advertises localhost (nixl_connector.py lines 461, 553) and the decode on the other host dials its own."""
    text = _two_hosts(KV_D, KV_P, d_env="", before="export VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1")
    text = text.replace("VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1 vllm serve", "vllm serve")
    code, out = _check(tmp_path, capsys, text)
    assert code == 1 and "side-channel-host-not-routable" in _errors(out), out


def test_a_remote_command_sets_its_own_environment(tmp_path, capsys):
    """The same with the host set on the ssh command line itself: valid."""
    text = _two_hosts(KV_D, KV_P, before="export VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1")
    code, out = _check(tmp_path, capsys, text)
    assert code == 0 and not _errors(out), out


def test_no_side_channel_host_on_either_node(tmp_path, capsys):
    text = _two_hosts(KV_BOTH, KV_BOTH, d_env="").replace("VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1 ", "")
    code, out = _check(tmp_path, capsys, text)
    assert code == 1 and "side-channel-host-not-routable" in _errors(out), out


def test_an_ssh_without_a_command_starts_nothing(tmp_path, capsys):
    """``ssh host`` alone is a login: no engine comes from it, the local one stays alone (not checked)."""
    text = _two_hosts().replace('ssh nvidia@10.0.0.2 "', 'ssh nvidia@10.0.0.2\n: "')
    code, out = _check(tmp_path, capsys, text)
    assert code != 1, out
