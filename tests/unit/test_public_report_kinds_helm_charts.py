"""Variants of the kind of fault the hundred-and-twenty-eighth public-report set (tests/unit/data/public_reports_128)
found: a user's Helm chart folder given to ``pdd check`` (a folder holding ``Chart.yaml``) was read file by file, so
each Go template under ``templates/`` failed as YAML (input errors, exit 2), the chart's ``values.schema.json`` was
read as a manifest (a false ``manifest-field-type-invalid``), and nothing said that the chart deploys only what helm
renders. Now a chart is one "not checked" entry naming ``helm template <release> <chart> [-f <values file>] | pdd
check -`` (exit 3), files beside the chart (an override values file, rendered manifests) are still read, a subchart
is part of its chart, and a JSON Schema given alone deploys nothing. Negative controls: a file named Chart.yaml that is
a Kubernetes manifest, and Chart.yaml metadata of an unknown apiVersion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pdd_operator.cli import main
from pdd_operator.compat.helm_charts import is_chart_metadata, is_json_schema

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'

#: A Go template of a decode Deployment, as users' charts write one (no YAML until rendered).
TEMPLATE = """{{- if .Values.decode.enabled }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "pd.fullname" . }}-decode
spec:
  replicas: {{ .Values.decode.replicas }}
  template:
    spec:
      containers:
      - name: vllm
        image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
        args:
        {{- toYaml .Values.decode.args | nindent 8 }}
{{- end }}
"""

#: A values schema as helm create / chart authors write one.
SCHEMA = {"$schema": "https://json-schema.org/draft-07/schema#", "type": "object", "properties": {
    "decode": {"type": "object", "properties": {"containers": {"type": "array"}}},
    "prefill": {"type": "object", "properties": {"containers": {"type": "array"}}}}}


def _chart(root: Path, api_version: str = "v2", subchart: bool = False) -> Path:
    """A chart folder under ``root``: Chart.yaml, values.yaml (vLLM P/D args), a values schema, templates/ with a Go
    template and _helpers.tpl, and (``subchart``) a subchart under charts/."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": api_version, "name": "my-vllm-pd", "version": "0.1.0",
                                                     "appVersion": "v0.11.0"}))
    (root / "values.yaml").write_text(yaml.safe_dump({
        "image": {"repository": "vllm/vllm-openai", "tag": "v0.11.0"},
        "decode": {"enabled": True, "replicas": 1, "args": ["Qwen/Qwen3-8B", "--kv-transfer-config", KV]},
        "prefill": {"enabled": True, "replicas": 1, "args": ["Qwen/Qwen3-8B", "--kv-transfer-config", KV]}}))
    (root / "values.schema.json").write_text(json.dumps(SCHEMA))
    (root / "templates").mkdir()
    (root / "templates" / "decode-deployment.yaml").write_text(TEMPLATE)
    (root / "templates" / "prefill-deployment.yaml").write_text(TEMPLATE.replace("decode", "prefill"))
    (root / "templates" / "_helpers.tpl").write_text('{{- define "pd.fullname" -}}{{ .Release.Name }}{{- end }}\n')
    if subchart:
        sub = root / "charts" / "common"
        (sub / "templates").mkdir(parents=True)
        (sub / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": "common", "version": "2.27.0",
                                                        "type": "library"}))
        (sub / "templates" / "_names.tpl").write_text('{{- define "common.names.name" -}}x{{- end -}}\n')
    return root


def _check(capsys, *paths) -> tuple[int, dict]:
    code = main(["check", *map(str, paths), "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def _chart_entries(out: dict) -> list[dict]:
    return [n for n in out.get("notChecked", []) if "(Helm chart)" in json.dumps(n)]


@pytest.mark.parametrize("api_version", ["v2", "v1"])
@pytest.mark.parametrize("subchart", [False, True])
def test_a_chart_folder_is_not_checked_naming_the_render_command(tmp_path, capsys, api_version, subchart):
    chart = _chart(tmp_path / "charts" / "my-vllm-pd", api_version, subchart)
    code, out = _check(capsys, chart)
    assert code == 3 and not out.get("inputErrors")
    entries = _chart_entries(out)
    assert len(entries) == 1, out  # a subchart is part of its chart
    text = json.dumps(entries[0])
    assert "helm template" in text and str(chart) in text and "pdd check -" in text
    assert not any(f["severity"] == "error" for r in out.get("results", []) for f in r["findings"])


def test_the_chart_yaml_given_alone_stands_for_its_chart(tmp_path, capsys):
    chart = _chart(tmp_path / "chart")
    code, out = _check(capsys, chart / "Chart.yaml")
    assert code == 3 and len(_chart_entries(out)) == 1 and not out.get("inputErrors")


def test_files_beside_the_chart_are_still_read(tmp_path, capsys):
    """A repository holding a chart and, beside it, the manifests one install rendered: the chart is not checked,
    the rendered pair is judged (here: the decode's --kv-cache-dtype fp8 against the prefill's bf16)."""
    _chart(tmp_path / "repo" / "charts" / "my-vllm-pd")
    rendered = []
    for role, extra in (("prefill", []), ("decode", ["--kv-cache-dtype", "fp8"])):
        rendered.append({"apiVersion": "apps/v1", "kind": "Deployment",
                         "metadata": {"name": f"pd-{role}", "labels": {"app": "pd", "llm-d.ai/role": role}},
                         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "pd", "llm-d.ai/role": role}},
                                  "template": {"metadata": {"labels": {"app": "pd", "llm-d.ai/role": role}},
                                               "spec": {"containers": [{
                                                   "name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
                                                   "command": ["vllm", "serve"],
                                                   "args": ["Qwen/Qwen3-8B", "--kv-transfer-config", KV, *extra],
                                                   "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {
                                                       "fieldRef": {"fieldPath": "status.podIP"}}}],
                                                   "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})
    (tmp_path / "repo" / "rendered").mkdir()
    (tmp_path / "repo" / "rendered" / "pd.yaml").write_text(yaml.safe_dump_all(rendered))
    code, out = _check(capsys, tmp_path / "repo")
    assert code == 1 and len(_chart_entries(out)) == 1 and not out.get("inputErrors")
    assert "kv-cache-dtype-mismatch" in {f["rule"] for r in out["results"] for f in r["findings"]}


def test_a_values_schema_alone_deploys_nothing(tmp_path, capsys):
    path = tmp_path / "values.schema.json"
    path.write_text(json.dumps(SCHEMA))
    code, out = _check(capsys, path)
    assert code == 4 and not out.get("results") and not out.get("inputErrors")
    assert is_json_schema(SCHEMA) and is_json_schema({"type": "object", "properties": {}})
    assert not is_json_schema({"kind": "Deployment", "type": "object", "properties": {}})


def test_a_manifest_named_chart_yaml_is_read_as_a_manifest(tmp_path, capsys):
    """Negative control: a Kubernetes object in a file named Chart.yaml (it has a kind) is no chart metadata."""
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {}})
    assert not is_chart_metadata(text)
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "Chart.yaml").write_text(text)
    code, out = _check(capsys, folder)
    assert code == 4 and not _chart_entries(out)


@pytest.mark.parametrize(("meta", "is_chart"), [
    ({"apiVersion": "v2", "name": "a", "version": "1.0.0"}, True),
    ({"apiVersion": "v1", "name": "a", "version": 1}, True),
    ({"apiVersion": "v3", "name": "a", "version": "1.0.0"}, False),
    ({"apiVersion": "v2", "version": "1.0.0"}, False),
    ({"apiVersion": "v2", "name": "a"}, False),
])
def test_chart_metadata(meta, is_chart):
    assert is_chart_metadata(yaml.safe_dump(meta)) is is_chart
    assert not is_chart_metadata("{{ not yaml")
