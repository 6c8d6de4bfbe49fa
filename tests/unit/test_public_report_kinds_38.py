"""Variants of what the thirty-eighth public-report set (tests/unit/data/public_reports_38) taught, with negative
controls.

- A file that is not a Kubernetes manifest but configures P/D KV transfer (NVIDIA/cloudai's vllm-disagg.sbatch: a
  Slurm job whose srun steps run vllm serve with NixlConnector) was refused as "not valid YAML" (exit 2), or, where
  the script happened to parse as a YAML string, reported as "nothing to check" (exit 4). It is now "not checked"
  (exit 3), naming its format: Slurm batch script, systemd unit, Nomad job (HCL), shell script
  (:mod:`pdd_operator.compat.text_inputs`). Shell and Slurm batch scripts are read since
  (:mod:`pdd_operator.compat.script_inputs`, tests/unit/test_script_inputs.py); systemd units and Nomad jobs stay so.
- A Kustomize overlay whose patches set the roles' KV connector args (llm-d's gke/a4x P/D kustomization) gave "nothing
  to check" (exit 4): its API group ends in ``.k8s.io`` like the built-in kinds. It is now "not checked"
  (:mod:`pdd_operator.compat.kustomize`).
"""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.cli import main
from pdd_operator.compat.kustomize import kustomize_overlay
from pdd_operator.compat.text_inputs import text_format

from .test_script_inputs import _check as _check_file

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _check_text(tmp_path, capsys, text: str, name: str = "input") -> tuple[int, dict]:
    return _check_file(tmp_path, capsys, text, name)


SYSTEMD = f"""[Unit]
Description=vLLM decode (P/D)
After=network-online.target

[Service]
Environment=VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.12
Environment=CUDA_VISIBLE_DEVICES=4,5,6,7
ExecStart=/opt/vllm/bin/vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --port 8200 \\
    --kv-transfer-config '{KV}'
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""

NOMAD = """job "vllm-pd" {
  datacenters = ["dc1"]
  group "prefill" {
    task "vllm" {
      driver = "docker"
      config {
        image = "vllm/vllm-openai:v0.20.0"
        args  = ["--model", "Qwen/Qwen3-8B", "--kv-transfer-config",
                 "{\\"kv_connector\\":\\"NixlConnector\\",\\"kv_role\\":\\"kv_both\\"}"]
      }
      env { VLLM_NIXL_SIDE_CHANNEL_HOST = "${NOMAD_IP_http}" }
    }
  }
}
"""

LAUNCH = f"""#!/usr/bin/env bash
set -euo pipefail
export VLLM_NIXL_SIDE_CHANNEL_PORT=5600
echo "starting: prefill then decode"
CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen3-8B --port 8100 --kv-transfer-config '{KV}' &
VLLM_NIXL_SIDE_CHANNEL_PORT=5601 CUDA_VISIBLE_DEVICES=1 vllm serve Qwen/Qwen3-8B --port 8200 --kv-transfer-config '{KV}' &
wait
"""

SBATCH = f"""#!/bin/bash
#SBATCH --nodes=2
#SBATCH --gres=gpu:8
NODES=($(scontrol show hostnames $SLURM_JOB_NODELIST))
srun -N1 -w ${{NODES[0]}} vllm serve deepseek-ai/DeepSeek-V2-Lite --tensor-parallel-size 8 --kv-transfer-config '{KV}' &
srun -N1 -w ${{NODES[1]}} vllm serve deepseek-ai/DeepSeek-V2-Lite --tensor-parallel-size 8 --kv-transfer-config '{KV}' &
echo "waiting: both"
wait
"""


# --- the format names ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "fmt"), [
    (SBATCH, "Slurm batch script"), (SYSTEMD, "systemd unit"), (NOMAD, "Nomad job (HCL)"), (LAUNCH, "shell script"),
    (f"python3 -m vllm.entrypoints.openai.api_server --kv-transfer-config '{KV}'\n", "shell script"),
    ("kv_connector NixlConnector, as the notes say\n", None),
    ("apiVersion: v1\nkind: Pod\nspec: {containers: [\n", None)])
def test_the_format_of_a_non_manifest_file_is_named(text, fmt):
    assert text_format(text) == fmt


# --- non-manifest files that configure P/D: not checked, not an input error -----------------------------------------


@pytest.mark.parametrize(("text", "name", "fmt"), [
    (SYSTEMD, "vllm-decode.service", "systemd unit"), (NOMAD, "vllm-pd.nomad", "Nomad job (HCL)")])
def test_a_script_or_unit_that_configures_pd_is_not_checked(tmp_path, capsys, text, name, fmt):
    code, out = _check_text(tmp_path, capsys, text, name)
    assert code == 3 and not out["inputErrors"] and not out["results"], out
    assert [s["object"] for s in out["notChecked"]] == [f"{tmp_path / name} ({fmt})"], out


def test_a_one_line_launch_that_parses_as_a_yaml_string_is_not_checked(tmp_path, capsys):
    # A plain scalar to YAML (no ": "): it used to load as no document at all and say "nothing to check".
    code, out = _check_text(tmp_path, capsys, f"vllm serve Qwen/Qwen3-8B --kv-transfer-config '{KV}'\n", "run.sh")
    assert code == 3 and "shell script" in out["notChecked"][0]["object"], out


def test_a_script_without_a_kv_connector_is_nothing_to_check(tmp_path, capsys):
    # Not "not checked" (it configures no P/D), and since set 97 no input error either: a shell script that is no
    # valid YAML holds nothing to check, as the same script whose text parses as a YAML string (cli._runs_without_pd).
    code, out = _check_text(tmp_path, capsys, 'echo "serving: now"\nvllm serve Qwen/Qwen3-8B --port 8000\n', "plain.sh")
    assert code == 4 and not out["inputErrors"] and not out["notChecked"], out


def test_a_broken_manifest_naming_a_kv_connector_stays_an_input_error(tmp_path, capsys):
    broken = f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - args: ['{KV}'\n"
    code, out = _check_text(tmp_path, capsys, broken, "pod.yaml")
    assert code == 2 and out["inputErrors"] and not out["notChecked"], out


def test_a_manifest_beside_a_script_is_still_checked(tmp_path, capsys):
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {}}))
    script = tmp_path / "vllm-decode.service"
    script.write_text(SYSTEMD)
    code = main(["check", str(manifest), str(script), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and len(out["notChecked"]) == 1 and not out["inputErrors"], out


# --- Kustomize overlays -------------------------------------------------------------------------------------------


def _kustomization(patch: str, kind: str = "Kustomization", version: str = "v1beta1") -> dict:
    return {"apiVersion": f"kustomize.config.k8s.io/{version}", "kind": kind, "resources": ["../base"],
            "patches": [{"target": {"kind": "LeaderWorkerSet", "name": "decode"}, "patch": patch}]}


JSON6902 = f"""- op: replace
  path: /spec/leaderWorkerTemplate/workerTemplate/spec/containers/0/args/3
  value: '{KV}'
"""

SMP = f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: ms-prefill
spec:
  template:
    spec:
      containers:
        - name: vllm
          args: ["--kv-transfer-config", '{KV}']
"""


@pytest.mark.parametrize(("patch", "kind", "version"), [
    (JSON6902, "Kustomization", "v1beta1"), (SMP, "Kustomization", "v1beta1"), (SMP, "Component", "v1alpha1")])
def test_a_kustomize_overlay_whose_patches_configure_pd_is_not_checked(tmp_path, capsys, patch, kind, version):
    path = tmp_path / "kustomization.yaml"
    path.write_text(yaml.safe_dump(_kustomization(patch, kind, version)))
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and [s["object"] for s in out["notChecked"]] == [f"{kind} (kustomize.config.k8s.io)"], out


def test_a_kustomization_without_pd_text_is_not_checked_unless_what_it_builds_is_given(tmp_path, capsys):
    """Set 102 changed this control: a kustomization's bases are what it deploys, so one that names a base not among
    the files is "not checked" (run kubectl kustomize), not "nothing to check"; given with the files it builds from
    (and changing none of them) it adds nothing and those files are checked as they are."""
    path = tmp_path / "kustomization.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                                    "resources": ["../base"], "namespace": "llm-d"}))
    assert main(["check", str(path), "-o", "json"]) == 3
    assert "kubectl kustomize" in json.loads(capsys.readouterr().out)["notChecked"][0]["reason"]
    path.write_text(yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                                    "resources": ["web.yaml"], "namespace": "llm-d"}))
    (tmp_path / "web.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Service",
                                                       "metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}))
    assert main(["check", str(path), str(tmp_path / "web.yaml"), "-o", "json"]) == 4
    capsys.readouterr()


@pytest.mark.parametrize("doc", [
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {"note": KV}},
    {"apiVersion": "example.com/v1", "kind": "Kustomization", "spec": {"note": KV}},
    {"resources": {"limits": {"nvidia.com/gpu": 1}}, "image": {"tag": "v0.10.0"}}])
def test_documents_of_other_groups_and_helm_values_are_no_kustomizations(doc):
    assert kustomize_overlay(doc) is None


# --- a Flux HelmRelease whose values come from a ConfigMap or Secret in the files ---------------------------------


def _release_with_values_from(source_kind: str, values: str, key: str | None = None) -> list[dict]:
    if source_kind == "ConfigMap":
        source = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pd-values", "namespace": "llm-d"},
                  "data": {key or "values.yaml": values}}
    else:
        source = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pd-values", "namespace": "llm-d"},
                  "stringData": {key or "values.yaml": values}}
    ref = {"kind": source_kind, "name": "pd-values", **({"valuesKey": key} if key else {})}
    release = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
               "metadata": {"name": "pd", "namespace": "llm-d"},
               "spec": {"chart": {"spec": {"chart": "llm-d-modelservice",
                                           "sourceRef": {"kind": "HelmRepository", "name": "ms"}}},
                        "valuesFrom": [ref]}}
    return [source, release]


PD_VALUES = yaml.safe_dump({"decode": {"containers": [{"name": "vllm", "image": "ghcr.io/llm-d/llm-d:v0.2.0",
                                                       "modelCommand": "vllmServe",
                                                       "args": ["--kv-transfer-config", KV]}]}})


@pytest.mark.parametrize(("source_kind", "key"), [("ConfigMap", None), ("Secret", None), ("ConfigMap", "pd.yaml")])
def test_a_helm_release_whose_values_from_configure_pd_is_not_checked(tmp_path, capsys, source_kind, key):
    path = tmp_path / "release.yaml"
    path.write_text(yaml.safe_dump_all(_release_with_values_from(source_kind, PD_VALUES, key)))
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    # llm-d-modelservice values (branch i9-wrapped-values): read as a values file, whose chart cannot render this
    # decode container (no modelArtifacts.uri for modelCommand vllmServe): not checked under the values' key
    assert code == 3 and [s["object"] for s in out["notChecked"]] == [
        "HelmRelease/pd (spec.valuesFrom, spec.values) decode.containers[0]"], out


def test_a_helm_release_whose_values_from_hold_no_pd_is_still_nothing_to_check(tmp_path, capsys):
    path = tmp_path / "release.yaml"
    path.write_text(yaml.safe_dump_all(_release_with_values_from("ConfigMap", "decode: {replicas: 2}\n")))
    assert main(["check", str(path), "-o", "json"]) == 4
    capsys.readouterr()


# --- launcher formats without a kind, and chart templates: named as what they are ----------------------------------


SKYPILOT = {"name": "pd-decode", "resources": {"accelerators": "H100:1", "ports": [8200]},
            "envs": {"VLLM_NIXL_SIDE_CHANNEL_PORT": "5601"}, "setup": "pip install vllm==0.11.0",
            "run": f"vllm serve Qwen/Qwen3-8B --port 8200 --kv-transfer-config '{KV}'\n"}
NOMAD_JSON = {"Job": {"ID": "vllm-pd", "TaskGroups": [{"Name": "decode", "Tasks": [{
    "Name": "vllm", "Driver": "docker", "Config": {"image": "vllm/vllm-openai:v0.11.0",
                                                   "args": ["Qwen/Qwen3-8B", "--kv-transfer-config", KV]}}]}]}}
COMPOSE_EXTENDS = {"services": {
    "prefill": {"image": "vllm/vllm-openai:v0.11.0", "command": ["Qwen/Qwen3-8B", "--kv-transfer-config", KV]},
    "decode": {"extends": {"service": "prefill"}, "command": ["Qwen/Qwen3-8B", "--port", "8200", "--kv-transfer-config", KV]}}}


@pytest.mark.parametrize(("doc", "where"), [({**SKYPILOT, "num_nodes": 2}, "SkyPilot task"),
                                           (NOMAD_JSON, "Nomad job (JSON)")])
def test_a_kindless_launcher_file_is_not_checked_under_its_own_name(tmp_path, capsys, doc, where):
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump(doc))
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and [s["object"] for s in out["notChecked"]] == [where], out


def test_a_single_node_skypilot_task_is_read_through_its_run_script(tmp_path, capsys):
    """A SkyPilot task on one node is read as its setup + run script now (compat/skypilot_inputs.py, set 95; until
    then it was "not checked" as ``SkyPilot task``): its lone kv_both engine is found, and without a counterpart or
    anything naming its role it stays "not checked" for that, at its line."""
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump(SKYPILOT))
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and [s["object"].rsplit(" (SkyPilot task setup+run)", 1)[-1] for s in out["notChecked"]] == [
        " (shell script) line 4"], out


def test_a_compose_file_whose_service_extends_another_is_read(tmp_path, capsys):
    """The Compose file of the launcher formats above is read as engines now (compat/compose_inputs.py, issue 9; until
    then it was "not checked" as ``Compose file (services)``): ``decode`` takes ``prefill``'s image by ``extends``."""
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump(COMPOSE_EXTENDS))
    main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    (result,) = out["results"]
    assert "services.decode.command" in result["object"] and result["vllmVersion"] == "0.11.0", out


HELM_TEMPLATE = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-decode
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: "{{ .Values.image }}"
        args:
        - --kv-transfer-config
        - '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
"""


def test_a_chart_template_is_not_checked_as_a_chart_template(tmp_path, capsys):
    code, out = _check_text(tmp_path, capsys, HELM_TEMPLATE, "decode.yaml")
    assert code == 3 and "(Helm chart template)" in out["notChecked"][0]["object"], out
    assert "helm template" in out["notChecked"][0]["reason"], out
