"""Input-reading kinds the held-out sets 100, 103, 105 and 106 still missed (i9-fixA), each with variants in other
models, versions and formats, and negative controls.

- KServe: an LLMInferenceService read with the LLMInferenceServiceConfigs its ``baseRefs`` name, Go template actions
  such as ``{{ .Spec.Model.Name }}`` filled from the service (set 106), :mod:`pdd_operator.compat.kserve_merge`
  (set 111's reader; these are its behaviour on set 106's kind).
- The user's image tag tied to its Dockerfile by a README or script ``docker build -t``, a Tiltfile, a Skaffold or
  DevSpace config or a GitHub Actions build-push-action, or else, where the folder holds one Dockerfile built on a
  vLLM image and the workloads one unlinked user image, that one (said in a note) (set 100,
  :mod:`pdd_operator.compat.image_builds`); ``--worker-use-ray`` refused from 0.7.0; an entrypoint's ``-z``/``-n``
  test of a variable nothing sets reads it empty.
- ``pdd check <folder>`` reads the Python launchers and notebooks that name vLLM, and a Flux Kustomization or Argo CD
  Application whose source the files do not hold is "not checked", naming the render command
  (:mod:`pdd_operator.compat.gitops_sources`).
"""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.cli import main
from pdd_operator.compat.image_builds import ImageBuild, build_for, script_builds
from tests.unit.test_turn2_variants import check, rules, workload

KV = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


# --- KServe baseRefs (set 106) ---------------------------------------------------------------------------------------


def _config(name, section, command, args, image="ghcr.io/llm-d/llm-d-cuda:v0.3.0", ns="llm", env=()):
    container = {"name": "main", "image": image, "command": command, "args": args, "env": list(env)}
    spec = {"template": {"containers": [container]}}
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceServiceConfig",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"prefill": spec} if section == "prefill" else spec}


def _service(refs, model="granite-8b", ns="llm", api="v1alpha1"):
    spec = {"baseRefs": [{"name": r} for r in refs], "model": {"uri": "hf://ibm-granite/granite-8b-code-instruct"},
            "prefill": {"replicas": 1, "parallelism": {"tensor": 1}}, "replicas": 1, "router": {"route": {}}}
    if model is not None:
        spec["model"]["name"] = model
    return {"apiVersion": f"serving.kserve.io/{api}", "kind": "LLMInferenceService",
            "metadata": {"name": "svc", "namespace": ns}, "spec": spec}


def _pd_configs(p_extra=(), d_extra=(), model_arg="{{ .Spec.Model.Name }}", **kw):
    return [_config("p-cfg", "prefill", ["vllm", "serve", model_arg], ["--port=8000", *p_extra], **kw),
            _config("d-cfg", "decode", ["vllm", "serve", model_arg], ["--port=8001", *d_extra], **kw)]


def test_base_refs_without_connector_are_a_pair_without_connector(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pd_configs(), _service(["p-cfg", "d-cfg"]))
    assert code == 1 and rules(out, "error") == {"kv-connector-missing"}
    assert all("LLMInferenceService/svc" in r["object"] for r in out["results"])
    assert not any("LLMInferenceServiceConfig" in s["object"] for s in out["notChecked"])


@pytest.mark.parametrize("api", ["v1alpha1", "v1alpha2"])
def test_base_refs_with_a_kv_dtype_mismatch_are_judged(tmp_path, capsys, api):
    kv = ["--kv-transfer-config", json.dumps(KV)]
    docs = _pd_configs(kv, [*kv, "--kv-cache-dtype", "fp8"])
    code, out = check(tmp_path, capsys, *docs, _service(["p-cfg", "d-cfg"], api=api))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error")


def test_base_refs_of_a_valid_pair_pass(tmp_path, capsys):
    env = [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    kv = ["--kv-transfer-config", json.dumps(KV)]
    code, out = check(tmp_path, capsys, *_pd_configs(kv, kv, env=env), _service(["p-cfg", "d-cfg"]))
    assert code == 0 and out["results"] and not rules(out, "error")


def test_an_action_the_files_do_not_fill_is_not_checked(tmp_path, capsys):
    """An action KServe fills from its global config (not in the files) leaves the model unknown: not checked."""
    env = [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    kv = ["--kv-transfer-config", json.dumps(KV)]
    docs = _pd_configs(kv, kv, env=env, model_arg="{{ .GlobalConfig.SystemNamespace }}")
    code, out = check(tmp_path, capsys, *docs, _service(["p-cfg", "d-cfg"]))
    assert code == 3 and not rules(out, "error")
    assert "template action" in " ".join(s["reason"] for s in out["notChecked"])


def test_a_model_name_the_service_does_not_set_is_the_service_s_name(tmp_path, capsys):
    """KServe defaults spec.model.name to the service's name (set 111's reader, compat/kserve_merge.py)."""
    env = [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    kv = ["--kv-transfer-config", json.dumps(KV)]
    code, out = check(tmp_path, capsys, *_pd_configs(kv, kv, env=env), _service(["p-cfg", "d-cfg"], model=None))
    assert code == 0 and "'svc'" in json.dumps(out)


def test_configs_of_another_namespace_are_not_folded_in(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pd_configs(ns="other"), _service(["p-cfg", "d-cfg"]))
    assert code != 1 and "kv-connector-missing" not in rules(out, "error")


# --- the user's image linked to its Dockerfile by a README, script, Tilt, Skaffold, DevSpace, workflow (set 100) -------

ENTRYPOINT = """#!/usr/bin/env bash
additional_args=${EXTRA_ARGS:-""}
if [[ ! -z "${QUANTIZATION}" ]]; then
    additional_args="${additional_args} -q ${QUANTIZATION} --dtype ${DTYPE}"
fi
exec python3 -m vllm.entrypoints.openai.api_server --host 0.0.0.0 --port 8080 --model "${MODEL}" ${additional_args}
"""


def _pd_folder(tmp_path, image, base="v0.11.0", decode_extra="", dockerfile="Dockerfile", extra_dockerfile=False):
    """A repository folder: the image's Dockerfile and entrypoint, and a prefill and a decode Deployment of
    ``image`` (no command) whose EXTRA_ARGS carry the KV transfer config."""
    (tmp_path / dockerfile).write_text(f"ARG VERSION={base}\nFROM vllm/vllm-openai:${{VERSION}}\nENV PORT 8080\n"
                                       "COPY entrypoint.sh /usr/local/bin/\nENTRYPOINT [ \"entrypoint.sh\" ]\n")
    (tmp_path / "entrypoint.sh").write_text(ENTRYPOINT)
    if extra_dockerfile:  # a second Dockerfile, so no tag is read as the lone Dockerfile's
        (tmp_path / "router.Dockerfile").write_text("FROM python:3.12\nCMD [\"python\", \"router.py\"]\n")
    docs = []
    for role, extra in (("prefill", ""), ("decode", decode_extra)):
        env = [{"name": "MODEL", "value": "Qwen/Qwen2.5-7B-Instruct"},
               {"name": "EXTRA_ARGS", "value": f"--kv-transfer-config {json.dumps(KV, separators=(',', ':'))}{extra}"},
               {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
        c = {"name": "vllm", "image": image, "env": env, "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        labels = {"app": "qwen", "llm-d.ai/role": role}
        docs.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"qwen-{role}"},
                     "spec": {"selector": {"matchLabels": labels},
                              "template": {"metadata": {"labels": labels}, "spec": {"containers": [c]}}}})
    (tmp_path / "k8s").mkdir(exist_ok=True)
    (tmp_path / "k8s" / "pd.yaml").write_text(yaml.safe_dump_all(docs))
    return tmp_path


def _check_folder(capsys, folder):
    code = main(["check", str(folder), "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


LINKS = {
    "readme": ("README.md", "## Build\n\n```bash\n$ docker build -t {tag} .\n```\n"),
    "script": ("build.sh", "#!/bin/sh\nREGISTRY=ghcr.io/acme\ndocker buildx build --push -t ${{REGISTRY}}/{name} -f "
                           "Dockerfile .\n"),
    "tiltfile": ("Tiltfile", "docker_build('{repo}', '.', dockerfile='Dockerfile')\nk8s_yaml('k8s/pd.yaml')\n"),
    "skaffold": ("skaffold.yaml", "apiVersion: skaffold/v4beta6\nkind: Config\nbuild:\n  artifacts:\n  - image: {repo}\n"
                                  "    docker:\n      dockerfile: Dockerfile\nmanifests:\n  rawYaml: [k8s/pd.yaml]\n"),
    "devspace": ("devspace.yaml", "version: v2beta1\nimages:\n  vllm:\n    image: {repo}\n    dockerfile: ./Dockerfile\n"),
    "workflow": (".github/workflows/image.yml", "on: push\nenv:\n  IMAGE: {repo}\njobs:\n  build:\n    runs-on: ubuntu-latest\n"
                 "    steps:\n    - uses: docker/build-push-action@v6\n      with:\n        context: .\n"
                 "        file: ./Dockerfile\n        push: true\n        tags: |\n          ${{{{ env.IMAGE }}}}:{tagpart}\n"),
}


@pytest.mark.parametrize("link", sorted(LINKS))
def test_a_tag_linked_to_its_dockerfile_is_read_through_its_entrypoint(tmp_path, capsys, link):
    name, text = LINKS[link]
    tag = "ghcr.io/acme/vllm-pd:1.0"
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text(text.format(tag=tag, name="vllm-pd:1.0", repo="ghcr.io/acme/vllm-pd", tagpart="1.0"))
    folder = _pd_folder(tmp_path, tag, decode_extra=" --block-size 32", extra_dockerfile=True)
    code, out = _check_folder(capsys, folder)
    assert code == 1 and "block-size-hetero-unsupported" in rules(out, "error"), out
    assert "notes" not in out  # linked, not guessed


def test_an_unlinked_tag_stays_not_checked_where_two_dockerfiles_could_build_it(tmp_path, capsys):
    code, out = _check_folder(capsys, _pd_folder(tmp_path, "ghcr.io/acme/vllm-pd:1.0", extra_dockerfile=True))
    assert code == 3 and not out["results"]
    assert any("entrypoint of ghcr.io/acme/vllm-pd:1.0" in s["reason"] for s in out["notChecked"])


@pytest.mark.parametrize(("base", "extra", "rule"), [
    ("v0.10.1.1", " --block-size 32", "block-size-hetero-unsupported"),
    ("v0.11.0", " --kv-cache-dtype fp8", "kv-cache-dtype-mismatch"),
    ("v0.11.0", "", None),
])
def test_the_one_dockerfile_builds_the_one_unlinked_user_image_and_says_so(tmp_path, capsys, base, extra, rule):
    code, out = _check_folder(capsys, _pd_folder(tmp_path, "registry.example.com/team/llm:prod", base=base,
                                                 decode_extra=extra))
    assert out["notes"] and "read as built from" in out["notes"][0] and "registry.example.com/team/llm:prod" in \
        out["notes"][0]
    if rule:
        assert code == 1 and rule in rules(out, "error")
    else:
        assert code == 0 and out["results"] and not rules(out, "error")


def test_the_one_dockerfile_is_not_taken_for_a_published_image(tmp_path, capsys):
    folder = _pd_folder(tmp_path, "ghcr.io/llm-d/llm-d:v0.2.0")
    code, out = _check_folder(capsys, folder)
    assert "notes" not in out


def test_worker_use_ray_is_refused_from_0_7_0(tmp_path, capsys):
    folder = _pd_folder(tmp_path, "ghcr.io/acme/vllm-pd:1.0", base="v0.11.0")
    (folder / "entrypoint.sh").write_text(ENTRYPOINT.replace("--host", "--worker-use-ray --host"))
    code, out = _check_folder(capsys, folder)
    assert code == 1 and "cli-flag-removed" in rules(out, "error")


def test_an_optional_variable_tested_with_z_is_empty_when_nothing_sets_it(tmp_path, capsys):
    """The entrypoint's ``[[ ! -z "${QUANTIZATION}" ]]`` branch does not run where no env, valueFrom or envFrom sets
    it: the pair is judged, not "not checked" for --dtype ${DTYPE}."""
    code, out = _check_folder(capsys, _pd_folder(tmp_path, "ghcr.io/acme/vllm-pd:1.0"))
    assert code == 0 and out["results"] and not out["notChecked"]


def test_an_optional_variable_an_env_from_may_set_stays_unknown(tmp_path, capsys):
    folder = _pd_folder(tmp_path, "ghcr.io/acme/vllm-pd:1.0")
    docs = list(yaml.safe_load_all((folder / "k8s" / "pd.yaml").read_text()))
    for d in docs:
        d["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "quant"}}]
    (folder / "k8s" / "pd.yaml").write_text(yaml.safe_dump_all(docs))
    code, out = _check_folder(capsys, folder)
    assert code == 3 and out["notChecked"]


@pytest.mark.parametrize(("text", "expected"), [
    ("docker build -t a/b:1 -f docker/Dockerfile.gpu .", {"a/b:1": ("docker/Dockerfile.gpu", ".", {})}),
    ("$ podman build --tag=a/b:2 --build-arg V=0.11.0 ctx", {"a/b:2": ("ctx/Dockerfile", "ctx", {"V": "0.11.0"})}),
    ("TAG=3\ndocker build -t a/b:$TAG .", {"a/b:3": ("Dockerfile", ".", {})}),
    ("docker build -t a/b:$UNSET .", {}),
    ("# docker pull a/b:1", {}),
])
def test_script_builds(text, expected):
    assert script_builds(text) == expected


def test_build_for_matches_a_tagless_name_whatever_the_tag():
    build = ImageBuild(path="Dockerfile", base="vllm/vllm-openai:v0.11.0")
    assert build_for("ghcr.io/acme/x:abc", {"ghcr.io/acme/x": build}) is build
    assert build_for("ghcr.io/acme/x:abc", {"ghcr.io/acme/x:def": build}) is None
    assert build_for("localhost:5000/x", {"localhost:5000/x": build}) is build


# --- pdd check <folder>: Python launchers, notebooks, Flux Kustomizations and Argo CD Applications ---------------------

LAUNCHER = '''# /// script
# dependencies = ["vllm==0.11.0"]
# ///
import os

from vllm import LLM
from vllm.config import KVTransferConfig


def prefill():
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    os.environ["VLLM_NIXL_SIDE_CHANNEL_PORT"] = "5600"
    LLM(model="Qwen/Qwen2.5-7B-Instruct",
        kv_transfer_config=KVTransferConfig(kv_connector="NixlConnector", kv_role="kv_both"){p})


def decode():
    os.environ["CUDA_VISIBLE_DEVICES"] = "1"
    os.environ["VLLM_NIXL_SIDE_CHANNEL_PORT"] = "5700"
    LLM(model="Qwen/Qwen2.5-7B-Instruct",
        kv_transfer_config=KVTransferConfig(kv_connector="NixlConnector", kv_role="kv_both"){d})
'''


def test_a_folder_s_python_launcher_is_read(tmp_path, capsys):
    (tmp_path / "pd.py").write_text(LAUNCHER.format(p="", d=", kv_cache_dtype=\"fp8\""))
    (tmp_path / "helpers.py").write_text("def add(a, b):\n    return a + b\n")  # no vLLM in it: no input
    code, out = _check_folder(capsys, tmp_path)
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error")
    assert not out["inputErrors"]


def test_a_folder_s_notebook_is_read(tmp_path, capsys):
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": LAUNCHER.format(p="", d=", block_size=32").splitlines(keepends=True)[3:]}
    pip = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
           "source": ["%pip install vllm==0.11.0\n"]}
    (tmp_path / "pd.ipynb").write_text(json.dumps({"cells": [pip, cell], "metadata": {}, "nbformat": 4,
                                                   "nbformat_minor": 5}))
    code, out = _check_folder(capsys, tmp_path)
    assert code == 1 and "block-size-hetero-unsupported" in rules(out, "error")


FLUX = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "vllm-pd", "namespace": "flux-system"},
        "spec": {"interval": "10m", "path": "./apps/vllm-pd", "prune": True,
                 "sourceRef": {"kind": "GitRepository", "name": "infra"}}}
ARGO = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "vllm-pd"},
        "spec": {"source": {"repoURL": "https://github.com/acme/infra", "path": "apps/vllm-pd",
                            "targetRevision": "main"},
                 "destination": {"server": "https://kubernetes.default.svc", "namespace": "llm"}}}
ARGO_CHART = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "vllm-chart"},
              "spec": {"source": {"repoURL": "https://charts.example.com", "chart": "vllm-pd", "targetRevision": "1.2.0",
                                  "helm": {"values": "decode: {}"}}}}


@pytest.mark.parametrize(("doc", "command"), [(FLUX, "flux build kustomization vllm-pd"),
                                              (ARGO, "argocd app manifests vllm-pd"),
                                              (ARGO_CHART, "helm template vllm-pd --repo https://charts.example.com")])
def test_a_gitops_object_whose_source_is_not_in_the_files_is_not_checked(tmp_path, capsys, doc, command):
    code, out = check(tmp_path, capsys, doc)
    assert code == 3 and command in " ".join(s["reason"] for s in out["notChecked"])


@pytest.mark.parametrize("doc", [FLUX, ARGO])
def test_a_gitops_object_whose_source_folder_is_given_adds_nothing(tmp_path, capsys, doc):
    (tmp_path / "apps" / "vllm-pd").mkdir(parents=True)
    (tmp_path / "apps" / "vllm-pd" / "pd.py").write_text(LAUNCHER.format(p="", d=""))
    (tmp_path / "clusters").mkdir()
    (tmp_path / "clusters" / "app.yaml").write_text(yaml.safe_dump(doc))
    code, out = _check_folder(capsys, tmp_path)
    assert code == 0 and out["results"] and not out["notChecked"]


# --- SharedStorageConnector pairs (set 103) ---------------------------------------------------------------------------


def _storage_pair(version="v0.10.1.1", p_extra=(), d_extra=(), connector="SharedStorageConnector", env=()):
    docs = []
    for role, kv_role, extra in (("prefill", "kv_producer", p_extra), ("decode", "kv_consumer", d_extra)):
        kv = {"kv_connector": connector, "kv_role": kv_role,
              "kv_connector_extra_config": {"shared_storage_path": "/shared/kv"}}
        c = {"name": "vllm", "image": f"vllm/vllm-openai:{version}", "command": ["vllm", "serve"],
             "args": ["meta-llama/Llama-3.1-8B-Instruct", "--kv-transfer-config", json.dumps(kv), *extra],
             "env": list(env), "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        docs.append(workload(f"llama-{role}", role, c, app="llama"))
    return docs


@pytest.mark.parametrize("version", ["v0.9.0", "v0.10.0", "v0.10.1.1"])
def test_a_shared_storage_pair_of_a_read_release_is_judged(tmp_path, capsys, version):
    code, out = check(tmp_path, capsys, *_storage_pair(version))
    assert out["results"] and not out["notChecked"] and not rules(out, "error")
    assert code == 0


@pytest.mark.parametrize(("kw", "why"), [
    ({"d_extra": ["--kv-cache-dtype", "fp8"]}, "the injected tensor's element type differs"),
    ({"d_extra": ["--tensor-parallel-size", "2"]}, "the per-rank heads differ"),
    ({"version": "v0.26.0", "connector": "ExampleConnector"}, "the renamed connector, not read here"),
    ({"version": "v0.9.0", "env": [{"name": "VLLM_USE_V1", "value": "0"}]}, "the V0 engine"),
])
def test_a_shared_storage_pair_outside_what_was_read_stays_not_checked(tmp_path, capsys, kw, why):
    code, out = check(tmp_path, capsys, *_storage_pair(**kw))
    assert code in (1, 3) and (out["notChecked"] or rules(out, "error")), why
    assert not (code == 0 and out["results"]), why
