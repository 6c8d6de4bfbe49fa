"""Launcher and vendor images whose tag is not vLLM's version (issue 9 item 4: versions read from image tags).

- Ray's LLM images (``rayproject/ray-llm:<ray release>-<python>-<cuda>``): every Ray release with the P/D builder
  (2.47.0-2.60.0) is a row of ``wrapped_vllm_versions.json`` read from its setup.py ``llm`` extra (the wheel's
  METADATA): an exact ``vllm[audio]==X`` from 2.56.0 names the image's vLLM and what ``pip install "ray[llm]==R"``
  installs; a ``vllm>=X`` floor before it names the image's vLLM only where another source states it (2.50.0, 2.51.0),
  else the vLLM is unknown and the warning says the floor.
- NVIDIA's NGC vLLM containers (``nvcr.io/nvidia/vllm:YY.MM-py3``): the releases whose notes name the vLLM.
- Red Hat AI Inference Server and OpenShift AI images: tagged with the product's releases, which no public source read
  here maps: unknown, and said.
"""

from __future__ import annotations

import pytest

from pdd_operator.vllm.versions import parse_version, ray_llm_vllm, unknown_tag_note, version_from_image
from tests.unit.test_script_inputs import _check
from tests.unit.test_turn2_variants import KV, check, container, rules, workload

RAY = "rayproject/ray-llm"


@pytest.mark.parametrize(("tag", "vllm"), [
    ("2.56.0-py311-cu128", "0.22.0"), ("2.56.1", "0.22.0"), ("2.57.0-py312-cu130", "0.25.1"),
    ("2.57.1-py311-gpu", "0.25.1"), ("2.58.0-py312-cu129", "0.26.0"), ("2.58.1-gpu", "0.26.0"),
    ("2.59.0-py312-cu130", "0.27.0"), ("2.60.0-py313-cu130", "0.29.0"), ("2.60.0-py312-cu130-aarch64", "0.29.0"),
    # floors whose image vLLM another public source states
    ("2.50.0-py311-cu128", "0.10.2"), ("2.51.0-py311-cu124", "0.11.0"),
])
def test_ray_llm_tags_give_the_vllm_their_release_pins(tag, vllm):
    assert version_from_image(f"{RAY}:{tag}") == parse_version(vllm)
    assert unknown_tag_note(f"{RAY}:{tag}") is None


@pytest.mark.parametrize(("tag", "floor"), [
    ("2.47.0-py311-cu124", "vllm>=0.8.5"), ("2.48.0-py311-cu128", "vllm>=0.9.2"), ("2.49.0-py311-cu128", "vllm>=0.10.0"),
    ("2.50.1-py311-cu128", "vllm>=0.10.2"), ("2.52.1-py311-cu128", "vllm>=0.11.0"), ("2.53.0", "vllm>=0.12.0"),
    ("2.54.1-py311-cu128", "vllm>=0.15.0"), ("2.55.0-py312-cu128", "vllm>=0.18.0"),
])
def test_ray_releases_with_only_a_floor_stay_unknown_and_say_the_floor(tag, floor):
    assert version_from_image(f"{RAY}:{tag}") is None
    assert f"is Ray {tag.split('-')[0]}, which requires {floor}" in unknown_tag_note(f"{RAY}:{tag}")


@pytest.mark.parametrize(("image", "says"), [
    (f"{RAY}:nightly-py311-cu128", "release nightly"), (f"{RAY}:latest", "release latest"),
    (f"{RAY}:2.43.0-py311-cu124", "release 2.43.0"),  # before the P/D builder: no row
    ("rayproject/ray:2.50.1-py311-gpu", "without Ray's LLM stack"),
    ("nvcr.io/nvidia/vllm:25.11-py3", "release 25.11"), ("nvcr.io/nvidia/vllm:26.03.post1-py3", "release 26.03.post1"),
    ("nvcr.io/nvidia/vllm:25.09-py3", "release 25.09"),
    ("ghcr.io/llm-d/llm-d-cuda:v0.4.0", "llm-d/llm-d-cuda release 0.4.0"),  # the other wrapping tables alike
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.2", "ai-dynamo/vllm-runtime release 1.3.2"),
    ("registry.redhat.io/rhaiis/vllm-cuda-rhel9:3.2.1", "Red Hat AI Inference Server release (3.2.1)"),
    ("registry.redhat.io/rhaiis/vllm-rocm-rhel9:3.2.3", "Red Hat AI Inference Server release (3.2.3)"),
    ("quay.io/aipcc/rhaiis/cuda-ubi9:3.3.0", "Red Hat AI Inference Server release (3.3.0)"),
    ("registry.redhat.io/rhoai/odh-vllm-cuda-rhel9:v2.25", "Red Hat OpenShift AI release (v2.25)"),
])
def test_unmapped_launcher_and_vendor_tags_say_why_they_name_no_vllm(image, says):
    assert version_from_image(image) is None
    assert says in unknown_tag_note(image)


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.20.2", "ghcr.io/llm-d/llm-d-cuda:v0.3.0", "myorg/engine:1.0",
                                   "quay.io/vllm/vllm-cuda:0.14.1_rhai0"])
def test_other_images_get_no_launcher_note(image):
    assert unknown_tag_note(image) is None


@pytest.mark.parametrize(("tag", "vllm"), [("25.10-py3", "0.10.2"), ("26.01-py3", "0.11.1"), ("26.03-py3", "0.17.1"),
                                           ("26.05-py3", "0.20.1"), ("26.10-py3", "0.31.0")])
def test_ngc_releases_whose_notes_name_the_vllm(tag, vllm):
    assert version_from_image(f"nvcr.io/nvidia/vllm:{tag}") == parse_version(vllm)


def _pair(p_image: str, d_image: str, *args: str) -> list[dict]:
    return [workload(f"m-{r}", r, container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV, *args], image=image))
            for r, image in (("prefill", p_image), ("decode", d_image))]


def _messages(out: dict, rule: str) -> str:
    return " ".join(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule)


@pytest.mark.parametrize("image", ["nvcr.io/nvidia/vllm:25.10-py3", f"{RAY}:2.50.0-py311-cu128"])
def test_a_known_bad_vllm_release_through_a_launcher_tag_is_found(tmp_path, capsys, image):
    # vLLM 0.10.0 <= v < 0.11.0: the prefill's KeyError under load (known_bad.py), reached through NGC 25.10 / Ray 2.50
    code, out = check(tmp_path, capsys, *_pair(image, image))
    assert "vllm-version-known-bad" in rules(out) and {r["vllmVersion"] for r in out["results"]} == {"0.10.2"}


def test_a_launcher_tag_of_a_fixed_release_is_not_known_bad(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("nvcr.io/nvidia/vllm:26.05-py3", "nvcr.io/nvidia/vllm:26.05-py3"))
    assert "vllm-version-known-bad" not in rules(out) and not rules(out, "error") and code == 0


@pytest.mark.parametrize(("p", "d"), [(f"{RAY}:2.56.0-py311-cu128", f"{RAY}:2.57.0-py311-cu128"),
                                      (f"{RAY}:2.58.0-py312-cu130", f"{RAY}:2.60.0-py312-cu130"),
                                      ("nvcr.io/nvidia/vllm:26.03-py3", "nvcr.io/nvidia/vllm:26.05-py3")])
def test_roles_on_different_launcher_releases_are_a_version_skew(tmp_path, capsys, p, d):
    code, out = check(tmp_path, capsys, *_pair(p, d))
    assert code == 1 and "vllm-version-mismatch" in rules(out, "error"), out


def test_roles_on_one_launcher_release_are_no_skew(tmp_path, capsys):
    image = f"{RAY}:2.58.1-py312-cu130"
    code, out = check(tmp_path, capsys, *_pair(image, f"{RAY}:2.58.0-py311-cu128"))  # two patch releases, one vLLM
    assert code == 0 and "vllm-version-mismatch" not in rules(out), out


@pytest.mark.parametrize(("image", "says"), [
    (f"{RAY}:2.53.0-py311-cu128", "requires vllm>=0.12.0"),
    ("registry.redhat.io/rhaiis/vllm-cuda-rhel9:3.2.1", "Red Hat AI Inference Server"),
    ("nvcr.io/nvidia/vllm:25.11-py3", "nvidia/vllm release 25.11"),
])
def test_an_unmapped_tag_is_said_in_the_unknown_version_warning(tmp_path, capsys, image, says):
    code, out = check(tmp_path, capsys, *_pair(image, image))
    assert code == 0 and says in _messages(out, "vllm-version-unknown"), out


def test_an_unmapped_tag_is_said_for_a_pddeployment(tmp_path, capsys):
    doc = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "x"},
           "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"image": f"{RAY}:2.49.0-py311-cu128"},
                    "network": {"rdma": {"resourceName": "rdma/ib", "count": 1}},
                    "prefill": {"replicas": 1, "tensorParallelSize": 1}, "decode": {"replicas": 1, "tensorParallelSize": 1}}}
    code, out = check(tmp_path, capsys, doc)
    assert "requires vllm>=0.10.0" in _messages(out, "vllm-version-unknown"), out


# --- pip install "ray[llm]==R" ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("release", "vllm"), [("2.56.0", "0.22.0"), ("2.57.1", "0.25.1"), ("2.60.0", "0.29.0"),
                                               ("2.53.0", None), ("2.50.0", None), ("2.40.0", None)])
def test_pip_ray_llm_gives_the_exact_pin_only(release, vllm):
    # a floor (vllm>=X, before 2.56.0) lets pip install the newest vLLM: not the image's, and unknown
    assert (ray_llm_vllm(release) or (None,))[0] == vllm


def _script(install: str) -> str:
    return f"""#!/bin/bash
{install}
CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen3-8B --port 8100 --kv-transfer-config '{KV}' &
CUDA_VISIBLE_DEVICES=1 vllm serve Qwen/Qwen3-8B --port 8200 --kv-transfer-config '{KV}' &
"""


@pytest.mark.parametrize(("install", "vllm"), [
    ('pip install "ray[llm]==2.57.0"', "0.25.1"),
    ("uv pip install -U 'ray[serve,llm]==2.58.1' nixl", "0.26.0"),
    ('pip install "ray[llm]==2.53.0"', "unknown"),  # a floor
    ('pip install "ray[llm]==2.57.0" vllm==0.26.0', "0.26.0"),  # the explicit vLLM pin wins
    ('pip install vllm==0.20.0\npip install "ray[llm]==2.53.0"', "unknown"),  # the later install replaces it
    ('# pip install "ray[llm]==2.57.0"\npip install vllm==0.20.0', "0.20.0"),  # a comment installs nothing
])
def test_a_script_that_installs_ray_llm_runs_its_vllm(tmp_path, capsys, install, vllm):
    code, out = _check(tmp_path, capsys, _script(install))
    assert {r["vllmVersion"] for r in out["results"]} == {vllm}, out


@pytest.mark.parametrize(("requirement", "vllm"), [("ray[llm]==2.58.0", "0.26.0"), ("ray[serve,llm]==2.52.0", "unknown")])
def test_a_ray_serve_runtime_env_that_installs_ray_llm_runs_its_vllm(tmp_path, capsys, requirement, vllm):
    llm = {"model_loading_config": {"model_id": "q", "model_source": "Qwen/Qwen3-8B"},
           "engine_kwargs": {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}}}
    config = {"applications": [{"name": "pd", "import_path": "ray.serve.llm:build_pd_openai_app",
                                "runtime_env": {"pip": [requirement]},
                                "args": {"prefill_config": llm, "decode_config": llm}}]}
    code, out = check(tmp_path, capsys, config)
    assert out["results"][0]["vllmVersion"] == vllm, out
