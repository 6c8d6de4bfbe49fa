"""Variants of what the sixty-eighth public-report set (tests/unit/data/public_reports_68) taught, with negative
controls: launch commands pasted into question threads.

- A host script's ``docker run`` of vLLM's OpenAI image that gives the image only the engine's arguments (``docker run
  ... vllm/vllm-openai:v0.7.3 --model /data/llama2/ --tensor-parallel-size 4 ...``, vllm-project/vllm#14118) starts the
  engine through the image's ENTRYPOINT (``python3 -m vllm.entrypoints.openai.api_server`` up to 0.11.0, ``vllm
  serve`` from 0.11.1: :func:`pdd_operator.vllm.entrypoint.image_entrypoint`); such engines are read
  (:func:`pdd_operator.vllm.script.image_engine`), not left "not checked". An ``--entrypoint`` of its own, or a
  program after the image, is not taken as the image's engine.
- A shell script whose engines run ``vllm`` by its path (``/opt/venv/bin/vllm serve``) after indented ``NAME=value``
  lines (kvcache-ai/Mooncake#416) is a shell script, not YAML that fails to parse (it crashed with exit 2).
- vLLM 0.9.0's V1 oracle sends pipeline parallelism with no ``--distributed-executor-backend`` to the V0 engine; from
  0.9.1 to 0.10.0 the unset backend stays on V1 (engine/arg_utils.py ``_is_v1_supported_oracle``: 0.9.0 line 1378,
  0.9.1 line 1434, 0.9.2 line 1482, 0.10.0 line 1439), so a V0-only connector with PP and no backend is an error
  there (``kv-connector-v0-only``), where it was only a possible fallback before.
"""

from __future__ import annotations

import pytest

from pdd_operator.compat.text_inputs import text_format
from pdd_operator.vllm.script import DockerRun, image_engine
from tests.unit.cli_check import check_text
from tests.unit.cli_check import rules_by_severity as _rules

PYNCCL = '{{"kv_connector":"PyNcclConnector","kv_role":"{role}","kv_rank":{rank},"kv_parallel_size":2}}'
NIXL = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _check(tmp_path, capsys, text: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, "pd.sh")


LLAMA = ("--model", "meta-llama/Llama-3.1-8B-Instruct")


def _docker_pair(image: str, args=LLAMA, kv=None, extra_p=(), extra_d=(), opts="") -> str:
    lines = ["#!/bin/bash"]
    for role, rank, port, extra in (("kv_producer", 0, 8100, extra_p), ("kv_consumer", 1, 8200, extra_d)):
        config = kv or PYNCCL.format(role=role, rank=rank)
        lines.append(f"docker run --gpus all --network host --ipc=host {opts} {image} {' '.join(args)} "
                     f"--port {port} {' '.join(extra)} --kv-transfer-config '{config}'")
    return "\n".join(lines) + "\n"


# --- docker run of an image whose ENTRYPOINT starts the engine -------------------------------------------------


@pytest.mark.parametrize(("image", "rule"), [
    ("vllm/vllm-openai:v0.10.1.1", "kv-connector-unregistered"),   # PyNcclConnector gone from 0.10.1
    ("vllm/vllm-openai:v0.9.2", "kv-connector-v0-only"),            # V1 engine by default, V0 connector
    ("vllm/vllm-openai:v0.10.0", "kv-connector-v0-only"),
])
def test_docker_run_with_engine_arguments_only_is_read(tmp_path, capsys, image, rule):
    code, out = _check(tmp_path, capsys, _docker_pair(image))
    assert code == 1 and rule in _rules(out)["error"]


def test_docker_run_of_a_serve_entrypoint_image_takes_a_positional_model(tmp_path, capsys):
    # from 0.11.1 the ENTRYPOINT is ``vllm serve``: the first word after the image is the model
    code, out = _check(tmp_path, capsys, _docker_pair("vllm/vllm-openai:v0.20.0", args=("Qwen/Qwen3-8B",),
                                                      kv=NIXL, extra_d=("--block-size", "32")))
    assert out["results"], out
    assert not out.get("notChecked") or all("not a Kubernetes" not in n["reason"] for n in out["notChecked"])


@pytest.mark.parametrize(("command", "entrypoint", "image", "engine"), [
    (("--model", "m"), False, "vllm/vllm-openai:v0.7.3", ["vllm.entrypoints.openai.api_server", "--model", "m"]),
    (("--model", "m"), False, "vllm/vllm-openai:v0.11.0", ["vllm.entrypoints.openai.api_server", "--model", "m"]),
    (("m", "--port", "1"), False, "vllm/vllm-openai:v0.11.1", ["vllm", "serve", "m", "--port", "1"]),
    ((), False, "vllm/vllm-openai:v0.20.0", ["vllm", "serve"]),
    (("bash", "-c", "sleep 1"), False, "vllm/vllm-openai:v0.20.0", []),   # a program of its own
    (("/bin/bash",), False, "vllm/vllm-openai:v0.20.0", []),
    (("m", "--port", "1"), False, "vllm/vllm-openai:v0.10.1.1", []),     # api_server takes no positional model
    (("--model", "m"), True, "vllm/vllm-openai:v0.10.1.1", []),         # --entrypoint replaces the image's
    (("--model", "m"), False, "rocm/vllm:latest", []),                 # ENTRYPOINT not read
    (("--model", "m"), False, "ubuntu:22.04", []),
])
def test_image_engine(command, entrypoint, image, engine):
    docker = DockerRun(0, image, tuple(command), entrypoint, {}, False, True)
    assert image_engine(docker) == engine


def test_docker_run_with_its_own_entrypoint_is_still_read_as_before(tmp_path, capsys):
    text = _docker_pair("vllm/vllm-openai:v0.24.0", args=("serve", "Qwen/Qwen3-8B"), kv=NIXL,
                        opts="--entrypoint vllm")
    code, out = _check(tmp_path, capsys, text)
    assert out["results"]


def test_docker_run_without_host_network_stays_unread(tmp_path, capsys):
    text = _docker_pair("vllm/vllm-openai:v0.10.1.1").replace("--network host ", "")
    code, out = _check(tmp_path, capsys, text)
    assert code == 3 and not out["results"]


# --- a vllm binary by its path is a shell script ----------------------------------------------------------------


@pytest.mark.parametrize("launch", [
    "/opt/venv/bin/vllm serve /models/m",
    "  UCX_TLS=tcp \\\n  CUDA_VISIBLE_DEVICES=0,1 \\\n    /opt/venv/bin/vllm serve /models/m",
    "CUDA_VISIBLE_DEVICES=0 .venv/bin/python -m vllm.entrypoints.openai.api_server --model m",
    "  /usr/local/bin/vllm serve m",
])
def test_vllm_by_its_path_is_a_shell_script(launch):
    assert text_format(f"# pasted\n{launch} --kv-transfer-config '{NIXL}' &\n") == "shell script"


@pytest.mark.parametrize("text", [
    "vllm_args:\n  - /opt/venv/bin/vllm-tool\n",        # a YAML list item, not a command
    "model: /models/vllm\nport: 8000\n",
])
def test_yaml_naming_vllm_is_not_a_shell_script(text):
    assert text_format(text) is None


def test_indented_lmcache_pair_with_a_vllm_path_does_not_crash(tmp_path, capsys):
    role = ("  UCX_TLS=cuda_ipc,cuda_copy,tcp \\\n  CUDA_VISIBLE_DEVICES={gpus} \\\n  VLLM_USE_V1=1 \\\n"
            "    /opt/venv/bin/vllm serve /models/Qwen2.5-72B-Instruct \\\n    --port {port} \\\n"
            "    --tensor-parallel-size 2 \\\n    --kv-transfer-config \\\n"
            "    '{{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"{role}\"}}' > /{role}.log 2>&1 &\n")
    text = "# vllm base image\n" + role.format(gpus="0,1", port=8100, role="kv_producer") + "\n" + role.format(
        gpus="2,3", port=8200, role="kv_consumer")
    code, out = _check(tmp_path, capsys, text)
    assert code != 2 and not out.get("inputErrors")


# --- pipeline parallelism and the V1 oracle of 0.9.x ----------------------------------------------------------


@pytest.mark.parametrize(("image", "extra", "expected"), [
    ("vllm/vllm-openai:v0.9.2", ("--pipeline-parallel-size", "2"), 1),      # unset backend: V1 on 0.9.1+
    ("vllm/vllm-openai:v0.9.1", ("--pipeline-parallel-size", "2"), 1),
    ("vllm/vllm-openai:v0.10.0", ("--pipeline-parallel-size", "2"), 1),
    ("vllm/vllm-openai:v0.9.2", ("--pipeline-parallel-size", "2", "--distributed-executor-backend", "mp"), 1),
    ("vllm/vllm-openai:v0.9.2", ("--pipeline-parallel-size", "2", "--distributed-executor-backend", "ray"), 1),
    ("vllm/vllm-openai:v0.9.2", ("--pipeline-parallel-size", "2", "--distributed-executor-backend", "uni"), 3),
    ("vllm/vllm-openai:v0.9.0", ("--pipeline-parallel-size", "2"), 3),      # 0.9.0: unset backend falls back
    ("vllm/vllm-openai:v0.9.0", ("--pipeline-parallel-size", "2", "--distributed-executor-backend", "mp"), 1),
])
def test_pipeline_parallelism_keeps_v1_unless_the_executor_falls_back(tmp_path, capsys, image, extra, expected):
    text = _docker_pair(image, extra_p=("--tensor-parallel-size", "4", *extra),
                        extra_d=("--tensor-parallel-size", "4", *extra))
    code, out = _check(tmp_path, capsys, text)
    assert code == expected, out
    if expected == 1:
        assert "kv-connector-v0-only" in _rules(out)["error"]
