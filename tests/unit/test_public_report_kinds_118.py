"""Variants of what the hundred-and-eighteenth public-report set (tests/unit/data/public_reports_118: vLLM 0.34.0's
hybrid prefix-cache and speculative-decoding P/D scripts, and vllm#52276's DeepSeek-V4 pair of ``docker run`` lines)
taught, with negative controls.

Findings name what to do in the user's own format (issue 9, item 6). A script whose engines run in ``docker run`` /
``podman run`` containers was told to change "its srun --container-image" (a Slurm/Pyxis option it does not use)
when a fix concerns the engine's image (a NIXL release with a known fault, two vLLM releases): the script's terms
assumed every image of a script comes from ``srun``. Such an engine's image is the one its ``docker run`` line names
(:attr:`pdd_operator.compat.pair.RoleConfig.script_docker`); a Slurm script with ``srun --container-image`` and a
script with a ``pip install vllm==X`` pin keep their wording.
"""

from __future__ import annotations

import json

import pytest

MODEL = "Qwen/Qwen3-8B"
KV = {"prefill": '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}',
      "decode": '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'}


def _serve(role: str, port: int) -> str:
    return f"{MODEL} --port {port} --kv-transfer-config '{KV[role]}'"


def _docker(tool: str, prefill_tag: str, decode_tag: str) -> str:
    """Two engines on two hosts, each a detached ``docker run`` / ``podman run`` of the vllm-openai image (the image's
    entrypoint is ``vllm serve``)."""
    lines = ["#!/bin/bash"]
    for role, tag, host, port in (("prefill", prefill_tag, "10.0.0.11", 8100), ("decode", decode_tag, "10.0.0.12", 8200)):
        lines.append(f"{tool} run -d --gpus all --ipc=host --network host -e VLLM_NIXL_SIDE_CHANNEL_HOST={host} "
                     f"vllm/vllm-openai:v{tag} {_serve(role, port)}")
    return "\n".join(lines) + "\n"


def _srun(prefill_tag: str, decode_tag: str) -> str:
    """A Slurm job: each engine an ``srun --container-image`` (Pyxis) on its own node."""
    lines = ["#!/bin/bash", "#SBATCH --nodes=2"]
    for role, tag, node, port in (("prefill", prefill_tag, "node1", 8100), ("decode", decode_tag, "node2", 8200)):
        lines.append(f"srun --nodes=1 --ntasks=1 -w {node} --container-image=vllm/vllm-openai:v{tag} "
                     f"--export=ALL,VLLM_NIXL_SIDE_CHANNEL_HOST={node} vllm serve {_serve(role, port)} &")
    return "\n".join(lines) + "\nwait\n"


def _pip(tag: str) -> str:
    """Both engines on one host from a ``pip install vllm==X`` pin."""
    return (f"#!/bin/bash\npip install vllm=={tag}\n"
            f"CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve {_serve('prefill', 8100)} &\n"
            f"CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve {_serve('decode', 8200)} &\nwait\n")


def _findings(tmp_path, capsys, text: str) -> dict[str, list[dict]]:
    from pdd_operator.cli import main

    path = tmp_path / "run.sh"
    path.write_text(text)
    main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    found: dict[str, list[dict]] = {}
    for r in out["results"]:
        for f in r["findings"]:
            found.setdefault(f["rule"], []).append(f)
    return found


def _words(findings: list[dict]) -> str:
    return " ".join(f"{f.get('message', '')} {f.get('fix', '')} {' '.join(f.get('fields') or [])}" for f in findings)


@pytest.mark.parametrize("tool", ["docker", "podman"])
def test_a_known_bad_nixl_fix_names_the_docker_run_image(tmp_path, capsys, tool):
    # vLLM 0.27.0 pins NIXL 1.3.1 (nixl-version-known-bad); its fix is about the engine's image
    found = _findings(tmp_path, capsys, _docker(tool, "0.27.0", "0.27.0"))
    text = _words(found["nixl-version-known-bad"])
    assert "docker run" in text and "srun" not in text, text


def test_a_version_mismatch_of_two_docker_run_lines_names_their_images(tmp_path, capsys):
    found = _findings(tmp_path, capsys, _docker("docker", "0.33.0", "0.34.0"))
    text = _words(found["vllm-version-mismatch"])
    assert "srun" not in text, text


def test_a_slurm_container_image_keeps_its_srun_wording(tmp_path, capsys):
    found = _findings(tmp_path, capsys, _srun("0.27.0", "0.27.0"))
    text = _words(found["nixl-version-known-bad"])
    assert "srun --container-image" in text and "docker run" not in text, text


def test_a_pip_pinned_script_is_not_told_of_docker(tmp_path, capsys):
    found = _findings(tmp_path, capsys, _pip("0.27.0"))
    text = _words(found["nixl-version-known-bad"])
    assert "pip install" in text and "docker run" not in text, text
