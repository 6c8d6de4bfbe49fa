"""The kinds held-out set 41 (tests/unit/data/public_reports_41) found, each with variants of its own (other models,
connectors, versions, shapes): P/D setups as people run them outside Kubernetes.

- a ``vllm serve`` command pasted with inline ``NAME=value`` prefixes and no ``#!`` line is a shell script
  (:data:`pdd_operator.compat.text_inputs._FORMATS`), not YAML;
- foreground commands with no ``&`` are a pasted pair, each run in its own terminal, on one host or several
  (:func:`pdd_operator.compat.script_inputs._pasted_foreground`): their placement is not known;
- a Slurm or shell script that runs another script to start its engines is "not checked", not a YAML error
  (:func:`pdd_operator.compat.text_inputs._delegated_pd_script`);
- P2pNcclConnector engines of one host bind kv_port + rank each (``p2p-nccl-kv-port-conflict``).
"""

from __future__ import annotations

from pdd_operator.cli import main
from pdd_operator.compat.text_inputs import text_format, unreadable_text
from tests.unit.cli_check import check_text

KV_BOTH = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'


def _check(tmp_path, capsys, text: str, name: str = "pair.sh", *extra: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, name, *extra)


def _rules(out: dict, severity: str) -> set[str]:
    return {f["rule"] for r in out.get("results", []) for f in r["findings"] if f["severity"] == severity}


def _nixl(env: str, port: int, gpu: int, tail: str = "", kv: str = KV_BOTH) -> str:
    return (f"{env} CUDA_VISIBLE_DEVICES={gpu} vllm serve meta-llama/Llama-3.1-8B-Instruct --port {port} "
            f"--kv-transfer-config '{kv}'{tail}\n")


# --- pasted command lines are shell -------------------------------------------------------------------------------


def test_a_command_line_with_inline_assignments_is_a_shell_script():
    assert text_format("UCX_TLS=all VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve m --port 8100\n") == "shell script"
    assert text_format("A=1 B=2 python3 -m vllm.entrypoints.openai.api_server --model m\n") == "shell script"
    assert text_format("HIP_VISIBLE_DEVICES=0 nsys profile -o p vllm serve m\n") == "shell script"
    assert text_format("key: value\nother: 2\n") is None  # a YAML mapping stays YAML


def test_a_pasted_pair_without_shebang_is_read(tmp_path, capsys):
    text = (_nixl("VLLM_NIXL_SIDE_CHANNEL_PORT=5600", 8100, 0, " &")
            + _nixl("VLLM_NIXL_SIDE_CHANNEL_PORT=5601", 8200, 1, " &"))
    code, out = _check(tmp_path, capsys, text, "pair.txt", "--vllm-version", "0.11.0")
    assert code == 0 and not _rules(out, "error"), out


# --- foreground commands: a pasted pair, placement unknown -------------------------------------------------------


def test_foreground_commands_on_one_port_are_not_refused_for_it(tmp_path, capsys):
    # each on its own machine, as the NixlConnector usage doc runs them: ports may repeat across hosts
    text = (_nixl("VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1 VLLM_NIXL_SIDE_CHANNEL_PORT=5600", 8000, 0)
            + _nixl("VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2 VLLM_NIXL_SIDE_CHANNEL_PORT=5600", 8000, 0))
    code, out = _check(tmp_path, capsys, text, "pair.sh", "--vllm-version", "0.18.0")
    assert code == 0 and not _rules(out, "error"), out
    # distinct side-channel bind addresses never collide, one host or two (set 47: rules/network.py
    # _bind_addresses_differ), so no side-channel finding is left to placement
    assert "side-channel-port-conflict" not in _rules(out, "warning") | _rules(out, "error"), out


def test_the_same_commands_backgrounded_on_one_host_are_refused(tmp_path, capsys):
    text = (_nixl("VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1 VLLM_NIXL_SIDE_CHANNEL_PORT=5600", 8000, 0, " &")
            + _nixl("VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1 VLLM_NIXL_SIDE_CHANNEL_PORT=5600", 8000, 1, " &"))
    code, out = _check(tmp_path, capsys, text, "pair.sh", "--vllm-version", "0.18.0")
    assert code == 1 and _rules(out, "error") & {"listener-port-conflict", "side-channel-port-conflict"}, out


def test_foreground_commands_on_the_same_gpus_are_not_refused_for_them(tmp_path, capsys):
    text = (_nixl("VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1", 8100, 0)
            + _nixl("VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2", 8200, 0))
    code, out = _check(tmp_path, capsys, text, "pair.sh", "--vllm-version", "0.14.0")
    assert code == 0 and "engines-share-gpu" not in _rules(out, "error"), out


def test_a_localhost_side_channel_fails_in_every_placement_of_a_pasted_pair(tmp_path, capsys):
    # one host: both bind 8000 and 5600; two hosts: the decode dials its own localhost
    text = (_nixl("VLLM_NIXL_SIDE_CHANNEL_PORT=5600", 8000, 0, kv=KV_P)
            + _nixl("VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2 VLLM_NIXL_SIDE_CHANNEL_PORT=5600", 8000, 0, kv=KV_D))
    code, out = _check(tmp_path, capsys, text, "pair.sh", "--vllm-version", "0.18.0")
    assert code == 1 and "side-channel-host-not-routable" in _rules(out, "error"), out


# --- a script that runs another script -----------------------------------------------------------------------------


def test_a_slurm_script_that_runs_the_engines_script_is_not_checked(tmp_path, capsys):
    text = ("#!/bin/bash\n#SBATCH -N 2\nP=$(scontrol show hostnames | head -1)\n"
            "srun -N 2 --ntasks-per-node=1 bash ./launch_pd.sh \"$P\"  # prefill on node 0, decode on node 1\n")
    path = tmp_path / "job.sbatch"
    path.write_text(text)
    assert main(["check", str(path)]) == 3
    assert "launch_pd.sh" in capsys.readouterr().out


def test_a_shell_script_sourcing_another_is_not_checked_only_when_it_names_prefill_and_decode():
    record = unreadable_text("run.sh", "#!/bin/bash\nsource ./start_prefill_decode.sh 8100 8200\n")
    assert record and "start_prefill_decode.sh" in record["reason"]
    assert unreadable_text("train.sh", "#!/bin/bash\nsource ./env.sh\npython train.py\n") is None


# --- P2pNcclConnector kv_port binds ---------------------------------------------------------------------------------


def _p2p(role: str, port: int, kv_port: int | None, gpu: str, tp: int = 1) -> str:
    kv = f'"kv_port":"{kv_port}",' if kv_port is not None else ""
    return (f"CUDA_VISIBLE_DEVICES={gpu} vllm serve Qwen/Qwen3-8B --port {port} --tensor-parallel-size {tp} "
            f"--kv-transfer-config '{{\"kv_connector\":\"P2pNcclConnector\",\"kv_role\":\"{role}\",{kv}"
            f"\"kv_connector_extra_config\":{{\"http_port\":\"{port}\"}}}}' &\n")


def test_p2p_nccl_engines_of_one_host_with_the_default_kv_port_are_refused(tmp_path, capsys):
    text = _p2p("kv_producer", 8100, None, "0") + _p2p("kv_consumer", 8200, None, "1")
    code, out = _check(tmp_path, capsys, text, "p2p.sh", "--vllm-version", "0.10.1.1")
    assert code == 1 and "p2p-nccl-kv-port-conflict" in _rules(out, "error"), out


def test_p2p_nccl_kv_port_ranges_overlap_through_the_prefill_tp(tmp_path, capsys):
    text = _p2p("kv_producer", 8100, 21001, "0,1", tp=2) + _p2p("kv_consumer", 8200, 21002, "2")
    code, out = _check(tmp_path, capsys, text, "p2p.sh")
    assert code == 1 and "p2p-nccl-kv-port-conflict" in _rules(out, "error"), out


def test_p2p_nccl_kv_ports_apart_pass_the_rule(tmp_path, capsys):  # control
    text = _p2p("kv_producer", 8100, 21001, "0,1", tp=2) + _p2p("kv_consumer", 8200, 22001, "2")
    code, out = _check(tmp_path, capsys, text, "p2p.sh", "--vllm-version", "0.11.0")
    # TP 2 against TP 1: P2pNcclConnector pairs rank i with rank i only (p2p-nccl-parallel-mismatch), not a port clash
    assert "p2p-nccl-kv-port-conflict" not in _rules(out, "error"), out
    assert _rules(out, "error") == {"p2p-nccl-parallel-mismatch"}, out


def test_p2p_nccl_engines_of_a_pasted_pair_are_not_refused_for_kv_ports(tmp_path, capsys):
    text = (_p2p("kv_producer", 8100, 21001, "0") + _p2p("kv_consumer", 8200, 21001, "0")).replace(" &\n", "\n")
    code, out = _check(tmp_path, capsys, text, "p2p.sh", "--vllm-version", "0.11.0")
    assert code != 1, out
