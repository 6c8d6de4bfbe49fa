"""Images that wrap vLLM under their own release tags (NVIDIA Dynamo's vllm-runtime, llm-d's llm-d-cuda): the vLLM they
ship comes from the publisher's table (vllm/wrapped_vllm_versions.json: Dynamo docs/reference/release-artifacts.md, llm-d's
release component summaries), and only there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdd_operator.compat import evaluate
from pdd_operator.compat.manifests import find_engines, pair_engines
from pdd_operator.vllm.versions import parse_version, unknown_tag_note, version_from_image, wrapped_vllm_version

RUNTIME = "nvcr.io/nvidia/ai-dynamo/vllm-runtime"


@pytest.mark.parametrize(("tag", "vllm"), [
    ("0.6.0", "0.11.0"), ("0.7.0.post2", "0.11.2"), ("0.7.1", "0.11.0"), ("0.8.1", "0.12.0"),
    ("0.9.0-cuda13", "0.14.1"), ("1.0.0", "0.16.0"), ("1.0.2-efa-amd64", "0.16.0"), ("1.1.1", "0.19.0"),
    ("1.2.0", "0.20.1"), ("1.2.0-cuda13", "0.20.1"), ("1.2.1", "0.20.1"), ("1.2.1-efa-amd64", "0.20.1"),
    ("1.3.0", "0.23.0"), ("1.3.0-efa", "0.23.0"), ("1.3.1", "0.23.0"),
    # pre-releases whose image rows name their vLLM
    ("1.1.0-dev.1", "0.17.1"), ("1.1.0-dev.1-efa-amd64", "0.17.1"), ("1.2.0-deepseek-v4-cuda13-dev.2", "0.20.0"),
    ("1.2.0-deepseek-v4-cuda13-dev.3", "0.20.1"), ("1.3.0-dev.1-cuda12", "0.22.0"), ("1.3.0-dev.1-efa", "0.22.0"),
])
def test_documented_dynamo_tags_give_the_vllm_they_ship(tag, vllm):
    assert version_from_image(f"{RUNTIME}:{tag}") == parse_version(vllm)
    assert "release-artifacts" in wrapped_vllm_version(f"{RUNTIME}:{tag}")[1]  # the .md or its docs.nvidia.com page


@pytest.mark.parametrize("image", [
    f"{RUNTIME}:1.3.2", f"{RUNTIME}:1.2.2", f"{RUNTIME}:latest", f"{RUNTIME}@sha256:" + "a" * 64,
    # no vllm-runtime image was published for these pre-releases (their "branch ToT" vLLM is no image's)
    f"{RUNTIME}:1.1.0-dev.2", f"{RUNTIME}:1.1.0-dev.3", f"{RUNTIME}:1.2.0-deepseek-v4-cuda12-dev.2",
    f"{RUNTIME}:1.0.0rc5", "nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.7.0", "ghcr.io/llm-d/llm-d-cuda:v0.4.0",
    "lmcache/vllm-openai:v0.3.3",
])
def test_other_tags_and_images_stay_unknown(image):
    assert version_from_image(image) is None


def test_every_table_row_parses_and_names_its_own_public_source():
    table = json.loads((Path(__file__).parents[2] / "operator/pdd_operator/vllm/wrapped_vllm_versions.json").read_text())
    # Dynamo's release-artifacts page begins at v0.6.0; the releases before it are mapped by their own ai-dynamo
    # wheel's vllm pin and the pull request that moved the container with it (set 101).
    pages = {"ai-dynamo/vllm-runtime": ("release-artifacts", "ai-dynamo wheel on PyPI, METADATA"),
             "llm-d/llm-d-cuda": ("llm-d/llm-d GitHub releases",),
             "llm-d/llm-d": ("llm-d/llm-d GitHub releases",), "rayproject/ray-llm": ("ray-project/ray GitHub",),
             "nvidia/vllm": ("vllm-release-notes/rel-",)}
    assert set(table["repositories"]) == set(pages)
    for name, repo in table["repositories"].items():
        for tag, row in repo["tags"].items():
            image = f"{repo['registry']}/{name}:v{tag}"
            assert any(page in row["source"] for page in pages[name]), tag
            if "vllm" not in row:  # a Ray release whose llm extra names only a floor: unknown, and said
                assert row["pin"] == ">=" and row["requires"] in row["source"].replace("vllm[audio]", "vllm"), tag
                assert version_from_image(image) is None and row["requires"] in unknown_tag_note(image), image
                continue
            assert parse_version(row["vllm"]), tag
            assert row["vllm"] in row["source"], tag
            assert wrapped_vllm_version(image)[1].endswith(f"({row['source']})"), image


def _dgd(prefill_tag: str, decode_tag: str) -> dict:
    def worker(mode, tag):
        return {"componentType": "worker", "subComponentType": mode, "resources": {"limits": {"gpu": "1"}},
                "extraPodSpec": {"mainContainer": {
                    "image": f"{RUNTIME}:{tag}", "command": ["python3", "-m", "dynamo.vllm"],
                    "args": ["--model", "Qwen/Qwen3-8B", "--disaggregation-mode", mode, "--kv-transfer-config",
                             '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']}}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"services": {"P": worker("prefill", prefill_tag), "D": worker("decode", decode_tag)}}}


def _rules(doc):
    (pair, _, _), = pair_engines(find_engines(doc))[0]
    return pair, {f.rule for f in evaluate(pair).findings}


def test_dynamo_graph_on_a_documented_tag_runs_the_version_rules():
    pair, rules = _rules(_dgd("0.9.0", "0.9.0"))
    assert pair.version == (0, 14, 1)
    assert "vllm-version-unknown" not in rules


def test_dynamo_roles_on_releases_with_different_vllm_are_a_version_mismatch():
    _, rules = _rules(_dgd("0.9.0", "1.0.0"))
    assert "vllm-version-mismatch" in rules
    _, same = _rules(_dgd("1.0.0", "1.0.1-cuda13"))  # two Dynamo releases, one vLLM (0.16.0)
    assert "vllm-version-mismatch" not in same


def test_undocumented_dynamo_tag_still_says_unknown():
    _, rules = _rules(_dgd("1.3.2", "1.3.2"))
    assert "vllm-version-unknown" in rules
