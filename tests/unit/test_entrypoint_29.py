"""Issue 9 (session 29, helper E1): a container whose ``args`` repeat its image's entrypoint.

``args: [vllm, serve, Qwen/Qwen3-8B, ...]`` with no ``command`` on vllm/vllm-openai runs ``vllm serve vllm serve
Qwen/Qwen3-8B ...`` (``python3 -m vllm.entrypoints.openai.api_server vllm serve ...`` up to 0.11.0): vLLM's parser
takes ``vllm`` for its one positional and refuses ``serve`` ('unrecognized arguments', exit 2). The checker used to
read the model as ``vllm`` and only warn ``architecture-unknown``; now ``entrypoint-repeated`` is an error there
(a warning on vLLM's other images, whose ENTRYPOINT was not read) and the engine is read from the args' own entry
point (pdd_operator/vllm/entrypoint.py).
"""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.vllm.args import split_command
from pdd_operator.vllm.entrypoint import API_SERVER, SERVE, image_entrypoint, leading_entry, repeated_entrypoint
from tests.unit.cli_check import check_text
from tests.unit.test_public_report_kinds_14 import POD_IP, _deployment, _messages
from tests.unit.test_turn2_variants import check, rules

MODEL = "Qwen/Qwen3-8B"
RULE = "entrypoint-repeated"


def _kv(role: str) -> str:
    return json.dumps({"kv_connector": "NixlConnector", "kv_role": role})


def _container(args: list[str], image: str, command: list[str] | None = None) -> dict:
    out = {"name": "vllm", "image": image, "args": list(args), "env": [POD_IP],
           "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    if command is not None:
        out["command"] = command
    return out


def _pair(lead: list[str], image: str, command: list[str] | None = None) -> list[dict]:
    return [_deployment(role, _container([*lead, MODEL, "--kv-transfer-config", _kv(kv)], image, command))
            for role, kv in (("prefill", "kv_producer"), ("decode", "kv_consumer"))]


# --- the image's entrypoint, per release -------------------------------------------------------------------------


@pytest.mark.parametrize(("image", "entry"), [
    ("vllm/vllm-openai:v0.10.1.1", API_SERVER), ("vllm/vllm-openai:v0.11.0", API_SERVER),
    ("vllm/vllm-openai:v0.11.1", SERVE), ("vllm/vllm-openai:v0.32.0", SERVE), ("docker.io/vllm/vllm-openai:latest", SERVE),
    ("rocm/vllm:rocm6.3.1_vllm_0.8.5_20250521", None), ("lmcache/vllm-openai:v0.3.3", None),
    ("my.io/team/engine:1", None),
])
def test_the_image_entrypoint_is_read_per_release_only_for_vllm_openai(image, entry):
    # Set 30 reads vLLM's CPU, ROCm and XPU release images too (tests/unit/test_entrypoint_30.py).
    assert image_entrypoint(image) == entry


@pytest.mark.parametrize(("args", "n"), [
    (["vllm", "serve", MODEL], 2), (["/usr/local/bin/vllm", "serve"], 2),
    (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", MODEL], 3),
    ([MODEL, "--port", "8000"], 0), (["--model", MODEL], 0), (["vllm"], 0), (["serve", MODEL], 0),
])
def test_leading_entry(args, n):
    assert leading_entry(args) == n


def test_a_command_or_another_image_repeats_nothing():
    assert repeated_entrypoint({"image": "vllm/vllm-openai:v0.32.0", "args": ["vllm", "serve", MODEL]}).entrypoint == SERVE
    assert repeated_entrypoint({"image": "vllm/vllm-openai:v0.32.0", "command": ["vllm", "serve"],
                                "args": ["vllm", "serve", MODEL]}) is None
    assert repeated_entrypoint({"image": "my.io/team/engine:1", "args": ["vllm", "serve", MODEL]}) is None
    assert repeated_entrypoint({"image": "vllm/vllm-openai:v0.32.0", "args": [MODEL]}) is None


def test_the_engine_is_read_from_the_args_own_entry_point():
    # Before: ["vllm", "serve", "vllm", "serve", MODEL] (the model read as "vllm").
    assert split_command(None, ["vllm", "serve", MODEL, "--port", "8000"], image_runs_vllm=True) == [
        "vllm", "serve", MODEL, "--port", "8000"]
    assert split_command(None, [MODEL], image_runs_vllm=True) == ["vllm", "serve", MODEL]


# --- Deployments -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("tag", "entry"), [("v0.32.0", "vllm serve"), ("v0.11.1", "vllm serve"),
                                            ("latest", "vllm serve"),
                                            ("v0.11.0", "python3 -m vllm.entrypoints.openai.api_server")])
def test_args_repeating_vllm_serve_are_an_error(tmp_path, capsys, tag, entry):
    code, out = check(tmp_path, capsys, *_pair(["vllm", "serve"], f"vllm/vllm-openai:{tag}"))
    assert code == 1 and RULE in rules(out, "error"), out
    messages = _messages(out, RULE)
    assert len(messages) == 2 and all(f"'{entry} vllm serve ...'" in m for m in messages), messages
    assert "unrecognized arguments: serve" in messages[0]
    # The model is read from the args' own entry point, not as "vllm".
    assert "architecture-unknown" not in rules(out), out
    fixes = [f["fix"] for r in out["results"] for f in r["findings"] if f["rule"] == RULE]
    assert "Drop the leading 'vllm serve'" in fixes[0] and "containers[].args" in fixes[0]


def test_args_repeating_the_api_server_module_are_an_error(tmp_path, capsys):
    lead = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model"]
    code, out = check(tmp_path, capsys, *_pair(lead, "vllm/vllm-openai:v0.32.0"))
    assert code == 1 and RULE in rules(out, "error"), out
    assert "unrecognized arguments: -m vllm.entrypoints.openai.api_server" in _messages(out, RULE)[0]


def test_another_vllm_image_whose_entrypoint_was_not_read_is_a_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(["vllm", "serve"], "rocm/vllm:rocm7.0.0_vllm_0.11.1_20251103"))
    assert RULE in rules(out, "warning") and RULE not in rules(out, "error"), out


@pytest.mark.parametrize(("lead", "command", "image"), [
    ([], ["vllm", "serve"], "vllm/vllm-openai:v0.32.0"),  # command: [vllm, serve] + args
    ([], None, "vllm/vllm-openai:v0.32.0"),  # args: the model and flags only
    ([], None, "vllm/vllm-openai:v0.11.0"),
    (["vllm", "serve"], None, "my.io/team/engine:1"),  # an image whose entrypoint is not known: args as written
    (["vllm", "serve"], ["/bin/sh", "-c", "exec \"$@\"", "--"], "vllm/vllm-openai:v0.32.0"),  # a command runs them
])
def test_controls(tmp_path, capsys, lead, command, image):
    code, out = check(tmp_path, capsys, *_pair(lead, image, command))
    assert out["results"] and RULE not in rules(out), out
    assert "architecture-unknown" not in rules(out), out


# --- Compose: the service's command is the args of the image's ENTRYPOINT -----------------------------------------


def _compose(service: dict) -> dict:
    out = {}
    for role, kv in (("prefill", "kv_producer"), ("decode", "kv_consumer")):
        s = json.loads(json.dumps(service))
        for key in ("command", "entrypoint"):
            if isinstance(s.get(key), list):
                s[key] = [x.replace("KV", _kv(kv)) for x in s[key]]
        s["environment"] = {"VLLM_NIXL_SIDE_CHANNEL_HOST": role}
        out[role] = s
    return {"services": out}


def _compose_check(tmp_path, capsys, doc: dict) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, yaml.safe_dump(doc), "compose.yaml")


def test_a_compose_command_repeating_vllm_serve_is_an_error(tmp_path, capsys):
    doc = _compose({"image": "vllm/vllm-openai:v0.32.0",
                    "command": ["vllm", "serve", MODEL, "--kv-transfer-config", "KV"]})
    code, out = _compose_check(tmp_path, capsys, doc)
    assert code == 1 and RULE in rules(out, "error"), out


def test_a_compose_entrypoint_with_the_command_is_a_control(tmp_path, capsys):
    doc = _compose({"image": "vllm/vllm-openai:v0.32.0", "entrypoint": ["vllm", "serve"],
                    "command": [MODEL, "--kv-transfer-config", "KV"]})
    code, out = _compose_check(tmp_path, capsys, doc)
    assert out["results"] and RULE not in rules(out), out
