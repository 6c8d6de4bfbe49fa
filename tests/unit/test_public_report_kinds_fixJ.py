"""The crash the hundred-and-thirtieth held-out set (tests/unit/data/public_reports_130) found, with variants beyond
its entry (transcripts with prompts and command output, a plain text file of commands, other launchers, other vLLM
releases).

- Shell commands pasted into an issue (triton-inference-server/triton_distributed#195: ``## First node``, ``GPU 0:``
  notes between ``VLLM_WORKER_MULTIPROC_METHOD=spawn CUDA_VISIBLE_DEVICES=0 python3 -m disaggregated.prefill_worker
  \\`` command lines) were read as YAML and ``pdd check`` exited 2 ("not valid YAML"): such text is a shell script,
  its engines read where they are vLLM's, else "not checked" naming the launcher; a pasted terminal session (``$ ``
  prompts, ``nvidia-smi`` output) is read as the commands it ran. A manifest (``apiVersion:`` and ``kind:``) that does
  not parse stays an input error.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main
from pdd_operator.compat.text_inputs import text_format, transcript_commands

from .test_script_inputs import _check, _errors

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def _out(tmp_path, capsys, text: str, name: str) -> tuple[int, dict]:
    """``pdd check -o json`` of ``text`` written to ``name``: the exit code and the report."""
    return _check(tmp_path, capsys, text, name)


# --- the set's entry: a launcher module's commands with notes between them ----------------------------------------

def _issue_195(module: str = "disaggregated", notes: str = "GPU 0:") -> str:
    return f"""## First node

{notes}

VLLM_WORKER_MULTIPROC_METHOD=spawn CUDA_VISIBLE_DEVICES=0 python3 -m {module}.prefill_worker \\
    --model deepseek-ai/DeepSeek-R1-Distill-Llama-8B \\
    --max-model-len 100 \\
    --kv-transfer-config \\
    '{{"kv_connector":"PyNcclConnector","kv_role":"kv_producer","kv_rank":0,"kv_parallel_size":2}}' &

## Second node

GPU 2, 3:

CUDA_VISIBLE_DEVICES=2,3 python3 -m {module}.decode_worker --model deepseek-ai/DeepSeek-R1-Distill-Llama-8B \\
    --tensor-parallel-size 2 --kv-transfer-config '{{"kv_connector":"PyNcclConnector","kv_role":"kv_consumer"}}'
"""


@pytest.mark.parametrize("module,notes", [("disaggregated", "GPU 0:"), ("workers", "Node 1: 8x H100"),
                                          ("my_launcher.pd", "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1a2b)")])
@pytest.mark.parametrize("name", ["commands.sh", "issue-195.txt", "commands"])
def test_launcher_module_commands_are_not_checked_naming_the_module(tmp_path, capsys, module, notes, name):
    code, out = _out(tmp_path, capsys, _issue_195(module, notes), name)
    assert code == 3, out
    assert not out["inputErrors"]
    [record] = out["notChecked"]
    assert f"python -m {module}.prefill_worker" in record["reason"]
    assert "(shell script)" in record["object"]


def test_set_130_issue_195_entry_is_not_checked(capsys):
    path = "tests/unit/data/public_reports_130/inputs/td-issue-195-commands-as-published.sh"
    code = main(["check", path, "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and not out["inputErrors"]
    assert "disaggregated.prefill_worker" in out["notChecked"][0]["reason"]


def test_plain_text_of_vllm_commands_with_notes_is_read(tmp_path, capsys):
    """A markdown-free .txt of commands with ``Prefill (GPU 0):`` notes, continued lines: its engines are read."""
    text = f"""Prefill (GPU 0):
CUDA_VISIBLE_DEVICES=0 python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-0.6B \\
  --port 8100 --kv-transfer-config '{NIXL}'
Decode (GPU 1):
CUDA_VISIBLE_DEVICES=1 python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-0.6B \\
  --port 8200 --kv-transfer-config '{NIXL}'
"""
    code, out = _out(tmp_path, capsys, text, "commands.txt")
    assert code == 1 and not out["inputErrors"] and not out["notChecked"]
    # both engines read, at the default side-channel host and port: an error either way they are placed
    assert _errors(out) & {"side-channel-port-conflict", "side-channel-host-not-routable"}
    assert len(out["results"]) == 1 and "line 2" in out["results"][0]["object"]


# --- pasted terminal sessions -------------------------------------------------------------------------------------

def _transcript(prompt: str = "$ ", version: str = "0.10.1", decode_port: int = 5601) -> str:
    return f"""{prompt}nvidia-smi -L
GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234abcd)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-5678efgh)
{prompt}pip install vllm=={version}
Successfully installed vllm-{version}
{prompt}CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve Qwen/Qwen3-0.6B --port 8100 \\
> --kv-transfer-config '{NIXL}' &
[1] 12345
INFO 05-01 10:00:00 api_server.py:1: vLLM API server version {version}
{prompt}CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT={decode_port} vllm serve Qwen/Qwen3-0.6B --port 8200 \\
  --kv-transfer-config '{NIXL}' &
"""


@pytest.mark.parametrize("prompt", ["$ ", "(venv) $ ", "user@gpu-node:~$ ", "root@h100:/workspace# "])
def test_transcript_with_prompts_and_output_is_read_as_its_commands(tmp_path, capsys, prompt):
    code, out = _out(tmp_path, capsys, _transcript(prompt), "session.txt")
    assert not out["inputErrors"] and not out["notChecked"], out
    assert code == 0, out  # separate side-channel ports on one host: nothing fails
    [result] = out["results"]
    assert "line 6" in json.dumps(result) and "line 10" in json.dumps(result)  # the file's own line numbers


@pytest.mark.parametrize("version", ["0.10.1", "0.11.0"])
def test_transcript_finds_the_error_its_commands_hold(tmp_path, capsys, version):
    code, out = _out(tmp_path, capsys, _transcript(version=version, decode_port=5600), "session.log")
    assert code == 1, out
    assert "side-channel-port-conflict" in _errors(out)


def test_transcript_commands_keep_line_numbers_and_drop_output():
    script = transcript_commands(_transcript())
    lines = script.splitlines()
    assert lines[0] == "nvidia-smi -L" and lines[1] == "" and lines[5].startswith("CUDA_VISIBLE_DEVICES=0")
    assert lines[6].startswith("--kv-transfer-config")  # the continuation, its "> " prompt removed
    assert lines[7] == "" and lines[8] == ""  # the job number and the server's log
    assert transcript_commands(f"vllm serve m --kv-transfer-config '{NIXL}'\n") is None  # a script: no prompt


def test_transcript_of_a_launcher_module_is_not_checked(tmp_path, capsys):
    text = "$ " + _issue_195().split("\n\n", 2)[2].replace("\n\n## Second node\n\nGPU 2, 3:\n\n", "\n$ ")
    code, out = _out(tmp_path, capsys, text, "session.txt")
    assert code == 3 and not out["inputErrors"], out
    assert "disaggregated.prefill_worker" in out["notChecked"][0]["reason"]


def test_transcript_without_pd_is_nothing_to_check(tmp_path, capsys):
    text = "$ nvidia-smi -L\nGPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n$ vllm serve Qwen/Qwen3-0.6B --port 8000\n"
    code, out = _out(tmp_path, capsys, text, "session.txt")
    assert code == 4 and not out["inputErrors"], out


# --- a broken manifest stays an input error -------------------------------------------------------------------------

BROKEN_MANIFEST = f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-prefill
spec:
  template:
    spec:
      containers:
      - name: vllm
        command: ["sh", "-c"]
        args: ["CUDA_VISIBLE_DEVICES=0 python3 -m vllm.entrypoints.openai.api_server --model m \\
          --kv-transfer-config '{NIXL}'"]
        GPU 0: nvidia.com/gpu: 1
"""


@pytest.mark.parametrize("name", ["prefill.yaml", "prefill.txt"])
def test_broken_manifest_with_command_lines_stays_an_input_error(tmp_path, capsys, name):
    code, out = _out(tmp_path, capsys, BROKEN_MANIFEST, name)
    assert code == 2
    assert "not valid YAML" in out["inputErrors"][0]
    assert text_format(BROKEN_MANIFEST) is None


def test_python_module_and_continued_commands_are_a_shell_script():
    assert text_format("GPU 0:\npython3 -m workers.prefill --model m\n") == "shell script"
    assert text_format("GPU 0:\n./launch_prefill \\\n  --model m\n") == "shell script"
    assert text_format("key: value\nother: [a, b\n") is None  # broken YAML that holds no command
