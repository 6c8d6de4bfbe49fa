"""Variants of what the eighty-fifth public-report set (tests/unit/data/public_reports_85) taught: prefill/decode
launched outside Kubernetes, in the launcher's own format, with negative controls.

- ``p2p-nccl-kv-port-conflict`` compares the engines of one role in one network namespace too (the xPyD engines of
  one script's host): every P2pNcclEngine binds kv_port + rank whatever its role (p2p_nccl_engine.py 0.13.0 lines
  91, 125-127), so two prefills given one kv_port collide as a prefill and a decode would;
- a Python launcher (a program that builds the vllm serve argument lists at run time) is "not checked" with its
  reason and exit 3, not an input error and not read as a shell script.
"""

from __future__ import annotations

import pytest

from pdd_operator.compat.text_inputs import text_format
from tests.unit.cli_check import check_text


def _check(tmp_path, capsys, name: str, text: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, name)


def _findings(report: dict) -> list[dict]:
    return [f for r in report.get("results", []) for f in r.get("findings", [])]


def _rules(report: dict, severity: str = "error") -> set[str]:
    return {f["rule"] for f in _findings(report) if f["severity"] == severity}


# --- P2pNcclConnector kv_port among engines of one role ---------------------------------------------------------


def _p2p(gpu: int, port: int, role: str, kv_port: int, model: str, tp: int = 1, image_env: str = "") -> str:
    devices = ",".join(str(gpu + i) for i in range(tp))
    return (f"{image_env}CUDA_VISIBLE_DEVICES={devices} vllm serve {model} --port {port} --tensor-parallel-size {tp} "
            f"--kv-transfer-config '{{\"kv_connector\":\"P2pNcclConnector\",\"kv_role\":\"{role}\",\"kv_port\":"
            f"\"{kv_port}\",\"kv_connector_extra_config\":{{\"proxy_ip\":\"10.0.1.1\",\"proxy_port\":\"30001\","
            f"\"http_port\":\"{port}\"}}}}' &\n")


def _xpyd(version: str, engines: list[tuple[str, int]], model: str = "meta-llama/Llama-3.1-8B-Instruct",
          tp: int = 1) -> str:
    """A script of vLLM's xPyD design page: ``engines`` are (role, kv_port), one GPU group and HTTP port each."""
    lines = [f"pip install vllm=={version}\n"]
    for i, (role, kv_port) in enumerate(engines):
        lines.append(_p2p(i * tp, 20001 + i, role, kv_port, model, tp))
    return "".join(lines) + "wait\n"


@pytest.mark.parametrize(("version", "engines", "model"), [
    ("0.13.0", [("kv_producer", 21001), ("kv_producer", 21001), ("kv_consumer", 24001)],
     "meta-llama/Llama-3.1-8B-Instruct"),  # the set's 3P1D page, Prefill2 copying Prefill1's kv_port
    ("0.11.0", [("kv_producer", 21001), ("kv_consumer", 22001), ("kv_consumer", 22001)],
     "Qwen/Qwen3-8B"),  # 1P2D: two decodes on one kv_port
    ("0.12.0", [("kv_producer", 21001), ("kv_producer", 23001), ("kv_producer", 21001), ("kv_consumer", 24001)],
     "Qwen/Qwen2.5-7B-Instruct"),
])
def test_two_engines_of_one_role_on_one_kv_port_are_an_error(tmp_path, capsys, version, engines, model):
    code, out = _check(tmp_path, capsys, "xpyd.sh", _xpyd(version, engines, model))
    assert code == 1
    assert "p2p-nccl-kv-port-conflict" in _rules(out)
    text = " ".join(f["message"] for f in _findings(out) if f["rule"] == "p2p-nccl-kv-port-conflict")
    assert "bound twice" in text and ("prefill engine" in text or "decode engine" in text)


def test_a_kv_port_range_of_a_tp2_engine_meets_its_neighbours_port(tmp_path, capsys):
    # kv_port + rank: TP 2 binds 21001 and 21002, the next prefill asks for 21002
    engines = [("kv_producer", 21001), ("kv_producer", 21002), ("kv_consumer", 24001)]
    code, out = _check(tmp_path, capsys, "xpyd.sh", _xpyd("0.13.0", engines, "Qwen/Qwen3-8B", tp=2))
    assert code == 1 and "p2p-nccl-kv-port-conflict" in _rules(out)


@pytest.mark.parametrize("engines", [
    [("kv_producer", 21001), ("kv_producer", 22001), ("kv_producer", 23001), ("kv_consumer", 24001)],  # the page
    [("kv_producer", 21001), ("kv_consumer", 22001), ("kv_consumer", 23001)],
])
def test_distinct_kv_ports_of_one_role_are_not_flagged(tmp_path, capsys, engines):
    code, out = _check(tmp_path, capsys, "xpyd.sh", _xpyd("0.13.0", engines))
    assert "p2p-nccl-kv-port-conflict" not in _rules(out)
    assert code == 0


def test_distinct_tp2_ranges_are_not_flagged(tmp_path, capsys):
    engines = [("kv_producer", 21001), ("kv_producer", 21003), ("kv_consumer", 24001)]
    code, out = _check(tmp_path, capsys, "xpyd.sh", _xpyd("0.13.0", engines, "Qwen/Qwen3-8B", tp=2))
    assert "p2p-nccl-kv-port-conflict" not in _rules(out)


# --- Python launchers -------------------------------------------------------------------------------------------


SUBPROCESS_LAUNCHER = '''import json
import subprocess


def serve(role: str, gpu: int, port: int) -> subprocess.Popen:
    config = {"kv_connector": "NixlConnector", "kv_role": role}
    return subprocess.Popen(
        ["vllm", "serve", "Qwen/Qwen3-0.6B", "--port", str(port), "--kv-transfer-config", json.dumps(config)],
        env={"CUDA_VISIBLE_DEVICES": str(gpu)},
    )


prefill = serve("kv_producer", 0, 8100)
decode = serve("kv_consumer", 1, 8200)
'''

SHEBANG_LAUNCHER = '''#!/usr/bin/env python3
"""Start a MooncakeConnector prefill and decode."""
import os
os.system("vllm serve Qwen/Qwen3-8B --port 8010 --kv-transfer-config "
          "'{\\"kv_connector\\":\\"MooncakeConnector\\",\\"kv_role\\":\\"kv_producer\\"}' &")
os.system("vllm serve Qwen/Qwen3-8B --port 8020 --kv-transfer-config "
          "'{\\"kv_connector\\":\\"MooncakeConnector\\",\\"kv_role\\":\\"kv_consumer\\"}' &")
'''


@pytest.mark.parametrize(("name", "text"), [
    ("launch_pd.py", SUBPROCESS_LAUNCHER),
    ("run", SHEBANG_LAUNCHER),  # no suffix: the #! line says Python
    ("model.py", SUBPROCESS_LAUNCHER.replace("NixlConnector", "LMCacheConnectorV1")),
])
def test_a_python_launcher_is_not_checked_with_its_reason(tmp_path, capsys, name, text):
    assert text_format(text) == "Python launcher"
    code, out = _check(tmp_path, capsys, name, text)
    assert code == 3 and not out.get("inputErrors") and not _findings(out)
    (record,) = out["notChecked"]
    assert record["object"].endswith("(Python launcher)")
    assert "Python" in record["reason"] and "vllm serve" in record["reason"]


def test_a_shell_script_with_a_python_heredoc_is_still_read_as_a_script(tmp_path, capsys):
    script = ("#!/bin/bash\n"
              "python3 - <<'EOF'\nimport json\nprint(json.dumps({}))\nEOF\n"
              "CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve Qwen/Qwen3-0.6B --port 8100 "
              "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_producer\"}' &\n"
              "CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve Qwen/Qwen3-0.6B --port 8200 "
              "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_consumer\"}' &\n")
    assert text_format(script) == "shell script"
    code, out = _check(tmp_path, capsys, "pd.sh", script)
    assert not out.get("notChecked") and code in (0, 1)


def test_python_without_a_prefill_decode_transfer_is_no_not_checked_record(tmp_path, capsys):
    text = "import subprocess\n\n\ndef serve():\n    subprocess.run(['vllm', 'serve', 'Qwen/Qwen3-0.6B'])\n"
    assert text_format(text) == "Python launcher"
    code, out = _check(tmp_path, capsys, "serve.py", text)
    assert not out.get("notChecked") and code != 3
