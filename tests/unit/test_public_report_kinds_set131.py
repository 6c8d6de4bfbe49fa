"""The kind held-out set 131 (tests/unit/data/public_reports_131) found, with variants of its own (other proxies,
formats, launchers): a script that only runs a P/D proxy starts no engine.

jikunshang/vllm's pd_distributed/start_dp_proxy.sh (99a6441) runs ``python3 .../dp_proxy_demo.py --prefill host:8100
--decode host:8801 host:8802 --port 8123``: a request router that forwards to servers started elsewhere (the same
commit's dp_proxy_demo.py builds a FastAPI app around the addresses it is given and starts no engine). The checker took
it for a launcher whose prefill and decode engines the program starts (not checked, exit 3); a proxy is passed over
(:func:`pdd_operator.compat.text_inputs._delegated_pd_script`, :func:`pdd_operator.vllm.script.looks_like_proxy`), so
such a file holds nothing to check (exit 4), as a client-only file does (set 123), while a script that also runs its
engines' launcher stays not checked, naming that launcher.
"""

from __future__ import annotations

from tests.unit.cli_check import check_text


def _check(tmp_path, capsys, text: str, name: str = "start.sh") -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, name)


def _not_checked(out: dict) -> str:
    return " ".join(n["reason"] for n in out.get("notChecked", []))


def test_the_fork_proxy_alone_is_nothing_to_check(tmp_path, capsys):
    text = ("export MODEL_PATH=/models/DeepSeek-R1/\n\npython3 examples/online_serving/disagg_examples/dp_proxy_demo.py \\\n"
            "    --model $MODEL_PATH --prefill 10.0.0.5:8100 --decode 10.0.0.5:8801 10.0.0.5:8802 --port 8123\n")
    code, out = _check(tmp_path, capsys, text)
    assert code == 4 and not out.get("notChecked"), out


def test_vllm_disagg_proxy_demo_in_a_slurm_job_is_nothing_to_check(tmp_path, capsys):
    text = ("#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --job-name=pd-proxy\n"
            "python3 \"$VLLM_ROOT/examples/online_serving/disaggregated_serving/disagg_proxy_demo.py\" "
            "--model Qwen/Qwen3-8B --prefill prefill-0:8100 --decode decode-0:8200 --port 8000\n")
    code, out = _check(tmp_path, capsys, text, "proxy.slurm")
    assert code == 4 and not out.get("notChecked"), out


def test_the_toy_proxy_with_prefiller_and_decoder_hosts_is_nothing_to_check(tmp_path, capsys):
    text = ("#!/usr/bin/env bash\nset -e\n# route requests: prefill node first, then decode\n"
            "python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8192 \\\n"
            "  --prefiller-host 192.168.0.2 --prefiller-port 8100 --decoder-host 192.168.0.3 --decoder-port 8200\n")
    code, out = _check(tmp_path, capsys, text)
    assert code == 4 and not out.get("notChecked"), out


def test_a_proxy_script_run_by_bash_is_passed_over(tmp_path, capsys):
    text = ("#!/bin/bash\n# prefill and decode servers run on the GPU nodes\n"
            "bash ./start_proxy_server.sh 10.0.0.5:8100 10.0.0.6:8200\n")
    code, out = _check(tmp_path, capsys, text)
    assert code == 4 and not out.get("notChecked"), out


def test_a_script_that_also_runs_its_engines_launcher_stays_not_checked_naming_the_launcher(tmp_path, capsys):
    text = ("#!/bin/bash\n# start the proxy, then the prefill and decode servers\n"
            "python3 disagg_proxy_demo.py --prefill localhost:8100 --decode localhost:8200 --port 8000 &\n"
            "bash launch_prefill_decode.sh\n")
    code, out = _check(tmp_path, capsys, text)
    assert code == 3 and "launch_prefill_decode.sh" in _not_checked(out), out
    assert "disagg_proxy_demo.py" not in _not_checked(out), out


def test_python_prefill_and_decode_files_stay_not_checked(tmp_path, capsys):
    # vLLM's examples/offline_inference/disaggregated-prefill-v1/run.sh shape: the engines are in the files it runs
    text = "#!/bin/bash\nrm -rf local_storage/\npython3 prefill_example.py\npython3 decode_example.py\n"
    code, out = _check(tmp_path, capsys, text, "run.sh")
    assert code == 3 and "prefill_example.py" in _not_checked(out), out
