"""Issue 9 (set 30, helper F1): ``args`` that start with a bare ``serve``, and the ENTRYPOINT of vLLM's other images.

A container without ``command`` runs its image's ENTRYPOINT with ``args`` appended. ``args: [serve, MODEL, ...]`` is
written for an ENTRYPOINT of ``vllm`` alone; on vLLM's images it runs ``vllm serve serve MODEL ...`` (or ``python3 -m
vllm.entrypoints.openai.api_server serve MODEL ...`` up to 0.11.0): ``serve`` becomes the one positional
``model_tag`` and MODEL is refused ('unrecognized arguments', exit 2). The checker read the model as ``serve`` and
passed (exit 0, ``architecture-unknown`` only). The ENTRYPOINT is now read for vLLM's CPU, ROCm and XPU release
images too (docker/Dockerfile.cpu, .rocm, .xpu ``vllm-openai`` stages, the ones .buildkite/release-pipeline.yaml
publishes; pdd_operator/vllm/entrypoint.py IMAGE_ENTRYPOINTS), and a container whose args carry a P/D engine's
settings on an image whose ENTRYPOINT is not known is "not checked" instead of nothing found.
"""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.cli import main
from pdd_operator.vllm.args import split_command
from pdd_operator.vllm.entrypoint import API_SERVER, SERVE, image_entrypoint, repeated_entrypoint
from tests.unit.test_entrypoint_29 import MODEL, _compose, _compose_check, _pair
from tests.unit.test_public_report_kinds_14 import _messages
from tests.unit.test_turn2_variants import check, rules

RULE = "entrypoint-repeated"

SERVE_IMAGES = ["vllm/vllm-openai:v0.32.0", "vllm/vllm-openai:v0.11.1", "vllm/vllm-openai:latest",
                "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.32.0",
                "public.ecr.aws/q9t5s3a7/vllm-arm64-cpu-release-repo:v0.14.0", "vllm/vllm-openai-cpu:v0.32.0-x86_64",
                "vllm/vllm-openai-rocm:v0.32.0", "vllm/vllm-openai-rocm:latest", "vllm/vllm-openai-xpu:v0.32.0",
                "intel/vllm:0.26.0-xpu", "intel/vllm:0.14.1-xpu", "intel/vllm:xpu"]
API_SERVER_IMAGES = ["vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.10.1.1",
                     "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.11.0", "intel/vllm:0.10.2-xpu"]


# --- the ENTRYPOINT per image and release ------------------------------------------------------------------------


@pytest.mark.parametrize("image", SERVE_IMAGES)
def test_vllm_release_images_run_vllm_serve(image):
    assert image_entrypoint(image) == SERVE


@pytest.mark.parametrize("image", API_SERVER_IMAGES)
def test_releases_up_to_0_11_0_run_the_api_server(image):
    assert image_entrypoint(image) == API_SERVER


@pytest.mark.parametrize("image", [
    "vllm/vllm-openai-rocm:latest-base", "vllm/vllm-openai-rocm:base-nightly", "vllm/vllm-openai-rocm:v0.32.0-base",
    "rocm/vllm:rocm6.3.1_vllm_0.8.5_20250521", "rocm/vllm-dev:nightly",
    "vllm/vllm-tpu:nightly", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.0", "ghcr.io/llm-d/llm-d-cuda:v0.4.0",
])
def test_images_whose_entrypoint_was_not_read(image):
    assert image_entrypoint(image) is None


# --- args: [serve, ...] ------------------------------------------------------------------------------------------


def test_a_bare_serve_is_read_as_vllm_serve():
    # Before: ["vllm", "serve", "serve", MODEL] (the model read as "serve").
    assert split_command(None, ["serve", MODEL, "--port", "8000"], image_runs_vllm=True) == [
        "vllm", "serve", MODEL, "--port", "8000"]


@pytest.mark.parametrize("image", SERVE_IMAGES + API_SERVER_IMAGES)
def test_serve_and_a_model_is_an_error(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, *_pair(["serve"], image))
    assert code == 1 and RULE in rules(out, "error"), out
    entry = " ".join(image_entrypoint(image))
    messages = _messages(out, RULE)
    assert len(messages) == 2 and all(f"'{entry} serve ...'" in m for m in messages), messages
    assert f"unrecognized arguments: {MODEL}" in messages[0]
    assert "architecture-unknown" not in rules(out), out  # the model is read as the args mean it


@pytest.mark.parametrize(("image", "said"), [
    ("vllm/vllm-openai:v0.32.0", "unrecognized arguments: serve"),
    ("vllm/vllm-openai:v0.14.0", "unrecognized arguments: serve"),
    ("vllm/vllm-openai:v0.11.0", "provide the model as a positional argument"),
])
def test_serve_with_model_flag_is_an_error(tmp_path, capsys, image, said):
    # 0.11.1 on: parse_args moves the --model value to the front, 'serve' is left over; up to 0.11.0 parse_args
    # refuses --model after 'serve' (the api_server's argv starts with it).
    docs = _pair(["serve", "--model"], image)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and RULE in rules(out, "error"), out
    assert said in _messages(out, RULE)[0]


def test_serve_with_flags_only_is_a_warning_on_vllm_serve():
    repeated = repeated_entrypoint({"image": "vllm/vllm-openai:v0.32.0", "args": ["serve", "--port", "8000"]})
    assert repeated is not None and not repeated.fails  # the model is "serve": not the intended one


def test_the_api_server_with_model_equals_serves_that_model():
    # python3 -m vllm.entrypoints.openai.api_server serve --model=M: model_tag 'serve' is ignored, --model=M parses.
    assert repeated_entrypoint({"image": "vllm/vllm-openai:v0.11.0", "args": ["serve", f"--model={MODEL}"]}) is None
    assert repeated_entrypoint({"image": "vllm/vllm-openai:v0.32.0", "args": ["serve", f"--model={MODEL}"]}).fails


@pytest.mark.parametrize("image", ["vllm/vllm-openai-rocm:v0.32.0", "vllm/vllm-openai-xpu:v0.32.0",
                                   "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.32.0"])
def test_vllm_serve_repeated_on_the_other_release_images_is_an_error(tmp_path, capsys, image):
    # Before: a warning (their ENTRYPOINT was not read).
    code, out = check(tmp_path, capsys, *_pair(["vllm", "serve"], image))
    assert code == 1 and RULE in rules(out, "error"), out


@pytest.mark.parametrize("image", ["vllm/vllm-openai-rocm:latest-base", "rocm/vllm:rocm7.0.0_vllm_0.11.1_20251103"])
def test_serve_on_a_vllm_image_whose_entrypoint_was_not_read_is_a_warning(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, *_pair(["serve"], image))
    assert RULE in rules(out, "warning") and RULE not in rules(out, "error"), out
    assert "not checked: entrypoint of" in _messages(out, RULE)[0]


@pytest.mark.parametrize("image", ["my.io/team/engine:1", "rocm/vllm-dev:nightly", "ghcr.io/llm-d/llm-d-cuda:v0.4.0"])
@pytest.mark.parametrize("lead", [["serve"], []])
def test_args_for_an_unknown_entrypoint_are_not_checked(tmp_path, capsys, image, lead):
    # Before: "nothing to check" (no engine found) although the args carry a KV transfer config.
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(_pair(lead, image)))
    code = main(["check", str(path)])
    text = capsys.readouterr().out
    assert code != 0 and f"the entrypoint of {image} is unknown" in text, text


@pytest.mark.parametrize(("lead", "command", "image"), [
    ([], None, "vllm/vllm-openai-rocm:v0.32.0"), ([], None, "vllm/vllm-openai-xpu:v0.32.0"),
    ([], None, "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.11.0"),
    (["serve"], ["vllm"], "vllm/vllm-openai:v0.32.0"),  # command: [vllm] + args: [serve, ...] runs vllm serve
    (["serve"], ["vllm"], "my.io/team/engine:1"),
    ([], ["vllm", "serve"], "my.io/team/engine:1"),
])
def test_controls(tmp_path, capsys, lead, command, image):
    code, out = check(tmp_path, capsys, *_pair(lead, image, command))
    assert out["results"] and RULE not in rules(out), out
    assert "architecture-unknown" not in rules(out), out


# --- Compose: command is the args of the ENTRYPOINT --------------------------------------------------------------


def test_a_compose_command_starting_with_serve_is_an_error(tmp_path, capsys):
    doc = _compose({"image": "vllm/vllm-openai:v0.32.0", "command": ["serve", MODEL, "--kv-transfer-config", "KV"]})
    code, out = _compose_check(tmp_path, capsys, doc)
    assert code == 1 and RULE in rules(out, "error"), out


def test_a_compose_string_command_starting_with_serve_is_an_error(tmp_path, capsys):
    doc = _compose({"image": "vllm/vllm-openai-rocm:v0.32.0", "command": ["serve", MODEL, "--kv-transfer-config", "KV"]})
    doc = json.loads(json.dumps(doc))
    for service in doc["services"].values():
        service["command"] = " ".join(f"'{w}'" if "{" in w else w for w in service["command"])
    code, out = _compose_check(tmp_path, capsys, doc)
    assert code == 1 and RULE in rules(out, "error"), out


def test_a_compose_entrypoint_vllm_with_serve_is_a_control(tmp_path, capsys):
    doc = _compose({"image": "vllm/vllm-openai:v0.32.0", "entrypoint": ["vllm"],
                    "command": ["serve", MODEL, "--kv-transfer-config", "KV"]})
    code, out = _compose_check(tmp_path, capsys, doc)
    assert out["results"] and RULE not in rules(out), out
