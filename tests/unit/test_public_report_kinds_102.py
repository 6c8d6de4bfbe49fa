"""Variants of what the hundred-and-second public-report set (tests/unit/data/public_reports_102) taught: users'
GitOps trees hand the checker kustomizations, which it read as holding nothing.

- A ``kustomization.yaml`` without ``apiVersion``/``kind`` (kustomize's loader defaults them,
  api/types/kustomization.go ``FixKustomization``) was not taken for a Kustomization at all, and one with them that
  carried no P/D text of its own (resources only, a patch by path naming neither role, ``helmCharts``, an ``images``
  override) gave "nothing to check" (exit 4), although the P/D engines it deploys are in the bases it names. Every
  kustomization whose build the given files do not show is now "not checked" (exit 3) with the command to run
  (``kubectl kustomize <folder> | pdd check -``, ``--enable-helm`` for charts);
- negative controls: a kustomization given together with every file it builds from, changing none of them, adds no
  record (those files are checked as they are); Helm values (``resources`` a mapping, other keys) and kind-less
  documents with a key kustomize does not know are no kustomizations.
"""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.cli import main
from pdd_operator.compat.kustomize import is_kustomization, kustomize_overlay

_GROUP = "kustomize.config.k8s.io"
NIXL = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _check(capsys, *paths) -> tuple[int, dict]:
    code = main(["check", *map(str, paths), "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def _write(folder, name: str, *docs: dict):
    path = folder / name
    path.write_text(yaml.safe_dump_all(docs))
    return path


def _engine(role: str, image: str = "vllm/vllm-openai:v0.11.0") -> dict:
    """A P/D role's Deployment of Qwen/Qwen3-0.6B on one GPU (NixlConnector kv_both, the side channel on the pod IP),
    as users' bases hold them."""
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"qwen-{role}"},
            "spec": {"selector": {"matchLabels": {"app": f"qwen-{role}"}}, "template": {
                "metadata": {"labels": {"app": f"qwen-{role}", "llm-d.ai/role": role}},
                "spec": {"containers": [{
                    "name": "vllm", "image": image,
                    "command": ["vllm", "serve", "Qwen/Qwen3-0.6B", "--port", "8000", "--kv-transfer-config", NIXL],
                    "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
                             "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}


#: Kustomizations that name what they build and no P/D role or connector of their own, each with the fields that set 102
#: found in users' repositories (cnuland/hello-chris-llm-d, rh-aiservices-bu/llm-d-playbook, redhat-na-ssa/demo-ocp-llm-d).
PLAIN = {
    "kindless-resources": {"resources": ["deployment.yaml", "service.yaml", "route.yaml"]},
    "kindless-images": {"resources": ["deployment.yaml"], "images": [{"name": "ghcr.io/llm-d/llm-d", "newTag": "v0.2.0"}]},
    "kindless-bases": {"bases": ["../base"], "namePrefix": "prod-"},
    "kindless-component": {"kind": "Component", "patchesStrategicMerge": ["sidecar.yaml"]},
    "resources-only": {"apiVersion": f"{_GROUP}/v1beta1", "kind": "Kustomization", "resources": ["llm-infra.yaml"]},
    "overlay-patch-by-path": {"apiVersion": f"{_GROUP}/v1beta1", "kind": "Kustomization", "resources": ["../../base"],
                              "patches": [{"path": "llm-infra-patch.yaml",
                                           "target": {"kind": "LLMInferenceService", "name": "gpt-oss-20b-pfd"}}]},
    "remote-base": {"apiVersion": f"{_GROUP}/v1beta1", "kind": "Kustomization",
                    "resources": ["https://github.com/example/serving//deploy?ref=v1"]},
}


@pytest.mark.parametrize("name", PLAIN)
def test_a_kustomization_whose_build_is_not_given_is_not_checked_naming_the_command(tmp_path, capsys, name):
    path = _write(tmp_path, "kustomization.yaml", PLAIN[name])
    code, out = _check(capsys, path)
    assert code == 3 and not out["inputErrors"], out
    [entry] = out["notChecked"]
    assert entry["object"].startswith(f"{PLAIN[name].get('kind', 'Kustomization')} ({_GROUP}")
    assert f"kubectl kustomize {tmp_path} | pdd check -" in entry["reason"], entry


def test_helm_charts_are_built_with_enable_helm(tmp_path, capsys):
    doc = {"apiVersion": f"{_GROUP}/v1beta1", "kind": "Kustomization", "namespace": "gpt-oss-20b",
           "helmCharts": [{"name": "vllm-kserve", "releaseName": "gpt-oss-20b", "version": "0.6.1",
                           "repo": "https://redhat-ai-services.github.io/helm-charts/", "valuesFile": "values.yaml"}]}
    code, out = _check(capsys, _write(tmp_path, "kustomization.yaml", doc))
    assert code == 3 and f"kubectl kustomize --enable-helm {tmp_path} | pdd check -" in out["notChecked"][0]["reason"]


def test_a_kustomization_given_with_what_it_builds_adds_nothing(tmp_path, capsys):
    """Negative control: resources all among the files, only names and labels changed: the pair itself is checked."""
    kust = _write(tmp_path, "kustomization.yaml",
                  {"resources": ["prefill.yaml", "decode.yaml"], "namespace": "llm-d", "commonLabels": {"app": "qwen"}})
    prefill = _write(tmp_path, "prefill.yaml", _engine("prefill"))
    decode = _write(tmp_path, "decode.yaml", _engine("decode"))
    code, out = _check(capsys, kust, prefill, decode)
    assert code == 0 and not out.get("notChecked"), out
    assert [r["vllmVersion"] for r in out["results"]] == ["0.11.0"]


def test_a_kustomization_that_changes_what_it_builds_is_not_checked_even_when_given(tmp_path, capsys):
    """An ``images`` override on the decode's image: the files show the engines before the build changes them."""
    kust = _write(tmp_path, "kustomization.yaml", {
        "resources": ["prefill.yaml", "decode.yaml"],
        "images": [{"name": "vllm/vllm-openai", "newTag": "v0.12.0"}]})
    code, out = _check(capsys, kust, _write(tmp_path, "prefill.yaml", _engine("prefill")),
                       _write(tmp_path, "decode.yaml", _engine("decode")))
    assert code == 3 and [e["object"] for e in out["notChecked"]] == [
        f"Kustomization ({_GROUP}, apiVersion left to kustomize's default)"], out


@pytest.mark.parametrize("doc", [
    # llm-d-modelservice / vllm-kserve values: resources is a mapping, other keys are the chart's
    {"resources": {"limits": {"nvidia.com/gpu": 1}}, "model": {"uri": "hf://Qwen/Qwen3-0.6B"}},
    {"resources": ["a.yaml"], "replicaCount": 2},  # a key kustomize does not know
    {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "spec": {"path": "./deploy"}},
    {"kind": "Deployment", "resources": ["a.yaml"]},
])
def test_other_documents_are_no_kustomizations(doc):
    assert not is_kustomization(doc) and kustomize_overlay(doc) is None


def test_helm_values_with_a_kv_connector_keep_their_own_reason(tmp_path, capsys):
    """Negative control: llm-d-modelservice values (no kind, ``resources`` mappings) are still read as Helm values."""
    values = {"modelArtifacts": {"uri": "hf://Qwen/Qwen3-0.6B"},
              "prefill": {"containers": [{"name": "vllm", "args": ["--kv-transfer-config", NIXL]}],
                          "resources": {"limits": {"nvidia.com/gpu": 1}}},
              "decode": {"containers": [{"name": "vllm", "args": ["--kv-transfer-config", NIXL]}]}}
    code, out = _check(capsys, _write(tmp_path, "values.yaml", values))
    assert all(_GROUP not in e["object"] for e in out.get("notChecked", [])), out
    assert code in (0, 1, 3)
