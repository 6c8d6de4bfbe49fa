"""Variants of what the hundred-and-third public-report set (tests/unit/data/public_reports_103) taught: prefill/decode
started from Python, with negative controls.

- a Python launcher or a Jupyter notebook whose engine constructors (``LLM``, ``EngineArgs``, ``AsyncEngineArgs``)
  take literal keywords (a ``KVTransferConfig(...)``, a dict, ``KVTransferConfig.from_cli(json)``, names bound to
  them) or that starts literal ``["vllm", "serve", ...]`` lists is read as the ``vllm serve`` lines it stands for
  (entrypoints/llm.py ``LLM.__init__`` builds ``EngineArgs(model=..., **kwargs)``, the fields the CLI sets), with the
  ``os.environ`` it sets before each engine and the release its PEP 723 block or ``%pip install`` pins: the rules
  judge the pair; a value it computes when it runs keeps it "not checked", naming the line;
- an engine built in-process (``LLM(...)``) starts no API server, so it has no HTTP port to share
  (:data:`~pdd_operator.vllm.script.IN_PROCESS_ENGINE`);
- a notebook is read as its code cells, never as a Helm values document;
- a shell script that only runs the prefill and decode Python files (``python3 prefill_example.py``, vLLM 0.10.0's
  offline disaggregated-prefill run.sh, no ``#!`` line) is "not checked" (engines in files not here), not an input
  error.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.python_inputs import notebook_code, python_launch_script, python_vllm_pin
from tests.unit.cli_check import check_text


def _check(tmp_path, capsys, name: str, text: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, name)


def _rules(report: dict, severity: str = "error") -> set[str]:
    return {f["rule"] for r in report.get("results", []) for f in r.get("findings", []) if f["severity"] == severity}


def _reasons(report: dict) -> str:
    return " ".join(n["reason"] for n in report.get("notChecked", []))


def _pin(version: str | None) -> str:
    return f'# /// script\n# dependencies = ["vllm=={version}"]\n# ///\n' if version else ""


def _offline(version: str | None, model: str, *, connector: str = "NixlConnector", ports: bool = True,
             decode_extra: str = "", ctor: str = "LLM", ktc: str = "call") -> str:
    """vLLM's offline disaggregated-prefill example as users adapt it: two processes, each its own GPU (and NIXL side
    channel port where ``ports``), an engine constructor ``ctor`` with a literal KV transfer config written as a
    ``KVTransferConfig(...)`` call, a dict or ``KVTransferConfig.from_cli(json)`` (``ktc``)."""
    def config(role: str) -> str:
        if ktc == "dict":
            return f'{{"kv_connector": "{connector}", "kv_role": "{role}"}}'
        if ktc == "from_cli":
            return f"""KVTransferConfig.from_cli('{{"kv_connector":"{connector}","kv_role":"{role}"}}')"""
        return f'KVTransferConfig(kv_connector="{connector}", kv_role="{role}")'

    def run(name: str, gpu: str, port: int, role: str, extra: str) -> str:
        env = f'    os.environ["VLLM_NIXL_SIDE_CHANNEL_PORT"] = "{port}"\n' if ports else ""
        return (f"def {name}(done):\n    os.environ[\"CUDA_VISIBLE_DEVICES\"] = \"{gpu}\"\n{env}"
                f"    ktc = {config(role)}\n"
                f"    llm = {ctor}(\n        model=\"{model}\",\n        kv_transfer_config=ktc,\n"
                f"        max_model_len=2000,\n{extra}    )\n    done.set()\n\n\n")
    return (f"{_pin(version)}import os\nfrom multiprocessing import Event, Process\n\n"
            "from vllm import LLM\nfrom vllm.config import KVTransferConfig\nfrom vllm.engine.arg_utils import "
            "AsyncEngineArgs, EngineArgs\n\n\n"
            + run("run_prefill", "0", 5600, "kv_producer", "")
            + run("run_decode", "1", 5601, "kv_consumer", decode_extra)
            + "def main():\n    done = Event()\n    for target in (run_prefill, run_decode):\n"
              "        Process(target=target, args=(done,)).start()\n\n\nif __name__ == \"__main__\":\n    main()\n")


# --- literal engine constructors are read and judged ------------------------------------------------------------


@pytest.mark.parametrize(("version", "model", "ctor", "ktc"), [
    ("0.11.0", "meta-llama/Llama-3.1-8B-Instruct", "LLM", "call"),  # the set's example moved to NIXL
    ("0.20.0", "Qwen/Qwen3-8B", "AsyncEngineArgs", "dict"),  # an asyncio launcher, another model and release
    ("0.9.2", "mistralai/Mistral-7B-Instruct-v0.3", "EngineArgs", "call"),  # EngineArgs, an older release
])
def test_a_literal_kv_dtype_difference_is_found_and_the_control_passes(tmp_path, capsys, version, model, ctor, ktc):
    code, report = _check(tmp_path, capsys, "pd.py",
                          _offline(version, model, ctor=ctor, ktc=ktc, decode_extra='        kv_cache_dtype="fp8",\n'))
    assert code == 1 and "kv-cache-dtype-mismatch" in _rules(report), report
    assert all(version in r["vllmVersion"] for r in report["results"]), report
    code, report = _check(tmp_path, capsys, "pd.py", _offline(version, model, ctor=ctor, ktc=ktc))
    assert code == 0 and not _rules(report), report
    # engines built in-process start no API server: no HTTP port 8000 for the two to share
    assert "listener-port-conflict" not in _rules(report, "warning"), report


@pytest.mark.parametrize("version", ["0.11.0", "0.20.0"])
def test_engines_on_one_host_without_their_own_side_channel_port_collide(tmp_path, capsys, version):
    code, report = _check(tmp_path, capsys, "pd.py", _offline(version, "Qwen/Qwen3-8B", ports=False))
    assert code == 1 and "side-channel-port-conflict" in _rules(report), report


def test_the_pep723_pin_gives_the_release(tmp_path, capsys):
    """vLLM 0.9.0 runs a PyNcclConnector engine on V1 and refuses it: the pin is what says 0.9.0."""
    text = _offline("0.9.0", "meta-llama/Llama-3.1-8B-Instruct", connector="PyNcclConnector", ports=False)
    code, report = _check(tmp_path, capsys, "pd.py", text)
    assert code == 1 and "kv-connector-v0-only" in _rules(report), report
    v0 = text.replace("from vllm import LLM\n", 'from vllm import LLM\n\nos.environ["VLLM_USE_V1"] = "0"\n')
    code, report = _check(tmp_path, capsys, "pd.py", v0)  # module level: both processes inherit it
    assert "kv-connector-v0-only" not in _rules(report), report
    assert python_vllm_pin(text) == (2, "0.9.0")
    assert python_vllm_pin(text.replace(_pin("0.9.0"), "")) is None


def test_a_literal_vllm_serve_list_is_read(tmp_path, capsys):
    """A ``vllm serve`` list is a server: two on one host on the default --port share it (unlike ``LLM(...)``)."""
    text = ('import json\nimport subprocess\n\n'
            'KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})\n\n\n'
            'def start(cmd, env):\n    return subprocess.Popen(cmd, env=env)\n\n\n'
            'def main():\n    os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'
            '    start(["vllm", "serve", "Qwen/Qwen3-8B", "--port", "8100", "--kv-transfer-config", KV], None)\n'
            '    start(["vllm", "serve", "Qwen/Qwen3-8B", "--port", "8200", "--kv-transfer-config", KV], None)\n')
    read = python_launch_script("import os\n" + text)
    assert read.script is not None and not read.unread
    assert read.script.count("vllm serve Qwen/Qwen3-8B") == 2
    code, report = _check(tmp_path, capsys, "launch.py", "import os\n" + text)
    assert code == 1 and _rules(report) & {"engines-share-gpu", "side-channel-port-conflict"}, report
    code, report = _check(tmp_path, capsys, "launch.py", "import os\n" + text.replace('"--port", "8100", ', "")
                          .replace('"--port", "8200", ', ""))
    assert "listener-port-conflict" in _rules(report) | _rules(report, "warning"), report


# --- what the file computes when it runs stays not checked, named ------------------------------------------------


@pytest.mark.parametrize(("old", "new", "said"), [
    ('model="Qwen/Qwen3-8B"', 'model=MODEL', "MODEL is not assigned"),
    ('model="Qwen/Qwen3-8B"', 'model=f"Qwen/{NAME}"', "f-string"),
    ('max_model_len=2000', '**EXTRA', "**kwargs"),
    ('ktc = KVTransferConfig(kv_connector="NixlConnector", kv_role="kv_consumer")',
     """ktc = KVTransferConfig.from_cli('{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}')""", "from_cli"),
])
def test_a_value_computed_at_run_time_keeps_it_not_checked(tmp_path, capsys, old, new, said):
    text = _offline("0.20.0", "Qwen/Qwen3-8B").replace(old, new)
    code, report = _check(tmp_path, capsys, "pd.py", text)
    assert code == 3 and said in _reasons(report) and "line " in _reasons(report), report


# --- notebooks ---------------------------------------------------------------------------------------------------


def _notebook(cells: list[str]) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
         "source": [line + "\n" for line in c.splitlines()]} for c in cells]})


@pytest.mark.parametrize(("version", "model"), [("0.11.0", "meta-llama/Llama-3.1-8B-Instruct"),
                                                ("0.20.0", "Qwen/Qwen3-8B")])
def test_a_notebooks_code_cells_are_read(tmp_path, capsys, version, model):
    cells = [f"%pip install vllm=={version}", "import os\nfrom vllm import LLM\nfrom vllm.config import KVTransferConfig",
             _offline(None, model, decode_extra='        kv_cache_dtype="fp8",\n')]
    code, report = _check(tmp_path, capsys, "pd.ipynb", _notebook(cells))
    assert code == 1 and "kv-cache-dtype-mismatch" in _rules(report), report
    assert all(version in r["vllmVersion"] and "Jupyter notebook" in r["object"] for r in report["results"]), report
    assert "#%pip install" in (notebook_code(_notebook(cells)) or "")
    code, report = _check(tmp_path, capsys, "pd.ipynb", _notebook(["%%bash\nnvidia-smi -L\nls -la", *cells]))
    assert code == 1 and "kv-cache-dtype-mismatch" in _rules(report), report  # a cell magic's cell is no Python


def test_a_notebooks_cells_set_the_environment_in_order(tmp_path, capsys):
    """Module code runs in order: each cell's CUDA_VISIBLE_DEVICES is the one its engine starts with."""
    engine = ('os.environ["CUDA_VISIBLE_DEVICES"] = "{gpu}"\nos.environ["VLLM_NIXL_SIDE_CHANNEL_PORT"] = "{port}"\n'
              'llm_{name} = LLM(model="Qwen/Qwen3-8B", kv_transfer_config=KVTransferConfig('
              'kv_connector="NixlConnector", kv_role="kv_both"))')
    cells = ["%pip install vllm==0.20.0", "import os\nfrom vllm import LLM\nfrom vllm.config import KVTransferConfig",
             engine.format(gpu=0, port=5600, name="p"), engine.format(gpu=1, port=5601, name="d")]
    code, report = _check(tmp_path, capsys, "pd.ipynb", _notebook(cells))
    assert code == 0 and not _rules(report), report
    cells[3] = cells[3].replace('"1"', '"0"')
    code, report = _check(tmp_path, capsys, "pd.ipynb", _notebook(cells))
    assert code == 1 and "engines-share-gpu" in _rules(report), report


def test_a_notebook_built_at_run_time_is_not_checked_as_a_notebook(tmp_path, capsys):
    cells = ['import subprocess, json\nHOST = json.load(open("env.json"))["host"]\n'
             'kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})\n'
             'subprocess.Popen(f"vllm serve {HOST} --kv-transfer-config \'{kv}\'", shell=True)']
    code, report = _check(tmp_path, capsys, "bench.ipynb", _notebook(cells))
    assert code == 3 and "Jupyter notebook" in _reasons(report) and "chart" not in _reasons(report), report
    code, report = _check(tmp_path, capsys, "plain.ipynb", _notebook(["print(1)"]))
    assert code == 4, report


# --- a runner of Python files ------------------------------------------------------------------------------------


@pytest.mark.parametrize("runner", [
    'rm -rf local_storage/\nVLLM_ENABLE_V1_MULTIPROCESSING=0 CUDA_VISIBLE_DEVICES=0 python3 "$SCRIPT_DIR/prefill_example.py"\n'
    'VLLM_ENABLE_V1_MULTIPROCESSING=0 CUDA_VISIBLE_DEVICES=0 python3 "$SCRIPT_DIR/decode_example.py"\n',
    "#!/bin/bash\nset -e\npython run_prefill.py &\npython run_decode.py\n",
])
def test_a_script_running_the_prefill_and_decode_python_files_is_not_checked(tmp_path, capsys, runner):
    code, report = _check(tmp_path, capsys, "run.sh", runner)
    assert code == 3 and "prefill" in _reasons(report) and ".py" in _reasons(report), report
