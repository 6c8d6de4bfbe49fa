"""The kinds of checker fault the hundred-and-twenty-fourth held-out set (tests/unit/data/public_reports_124) found,
with variants beyond its entries (other models, vLLM releases, template shapes, wrappers).

- A Jinja2 template that writes a P/D deployment (a generator's source, as ai-dynamo/aiconfigurator's
  vllm/llm-d-values.yaml.j2, llm-d-kcustomization.yaml.j2 and k8s_deploy.yaml.j2; an Ansible role's template) was an
  input error ("not valid YAML", exit 2): it is "not checked", naming the format, like a Helm chart template.
- A Helmfile whose release carries llm-d-modelservice values inline was walked as a generic object, its values'
  containers paired as whole pods without the chart's rendering, and passed (a silent pass): a Helmfile is "not
  checked", naming ``helmfile template``.
- llm-d-modelservice values that create both roles but name no KV connector anywhere (aiconfigurator's generated
  values) were taken for an aggregated service (nothing to check): both roles are created and the decode's routing
  proxy sends each request to a prefill first, so each connector-less engine is ``kv-connector-missing``'s.
"""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.compat.gitops_sources import helmfile_unrendered
from pdd_operator.compat.llmd_values import creates_both_roles
from pdd_operator.compat.text_inputs import text_format

from .test_script_inputs import _check, _errors

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
POD_IP = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def _values(model: str = "Qwen/Qwen3-0.6B", image: str = "vllm/vllm-openai:v0.11.0", connector: bool = False,
            prefill: dict | None = None, tp: int = 1) -> dict:
    """llm-d-modelservice values with a decode and a prefill role (each one vLLM container, modelCommand vllmServe);
    ``prefill`` overrides keys of the prefill role (``{"create": False}``)."""
    def role(port: int) -> dict:
        args = ["--max-num-seqs", "64"] + (["--kv-transfer-config", NIXL] if connector else [])
        return {"create": True, "replicas": 1, "parallelism": {"tensor": tp},
                "containers": [{"name": "vllm", "image": image, "modelCommand": "vllmServe", "args": args,
                                "env": [POD_IP] if connector else [],
                                "ports": [{"containerPort": port, "name": "metrics"}],
                                "resources": {"limits": {"nvidia.com/gpu": tp}}}]}
    return {"modelArtifacts": {"name": model, "uri": f"hf://{model}"},
            "routing": {"servicePort": 8000, "proxy": {"enabled": True, "targetPort": 8200, "connector": "nixlv2"}},
            "multinode": False, "decode": role(8200), "prefill": {**role(8000), **(prefill or {})}}


# --- Jinja2 templates ---------------------------------------------------------------------------------------------

#: A Jinja template (an Ansible role's templates/vllm-pd.yaml.j2) writing both roles in a loop, the connector from a
#: variable: no connector name in its text, only the role words.
ANSIBLE_J2 = """{% for role in ['prefill', 'decode'] %}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ model_slug }}-{{ role }}
spec:
  replicas: {{ replicas[role] }}
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:{{ vllm_tag }}
          args: ["--model", "{{ model }}", "--kv-transfer-config", '{{ kv_config | to_json }}']
{% endfor %}
"""

#: A DynamoGraphDeployment template whose disagg branch names NixlConnector literally.
DGD_J2 = """{#- rendered by our generator -#}
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: {{ name }}
spec:
  services:
{%- if disagg %}
    VllmPrefillWorker:
      componentType: worker
      subComponentType: prefill
      extraPodSpec:
        mainContainer:
          image: {{ image }}
          args: ["--model", "{{ model }}", "--disaggregation-mode", "prefill",
                 "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']
{%- endif %}
"""

#: A launcher script template (a generator's run.sh.j2): a shebang, then Jinja around two vllm serve lines.
RUN_SH_J2 = """#!/bin/bash
{% set kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' %}
CUDA_VISIBLE_DEVICES=0 vllm serve {{ model }} --port 8100 --kv-transfer-config '{{ kv }}' &
{% if mode == 'disagg' %}
CUDA_VISIBLE_DEVICES=1 vllm serve {{ model }} --port 8200 --kv-transfer-config '{{ kv }}' &
{% endif %}
"""


@pytest.mark.parametrize(("text", "name"), [(ANSIBLE_J2, "vllm-pd.yaml.j2"), (DGD_J2, "dgd.yaml.j2"),
                                            (RUN_SH_J2, "run.sh.j2")], ids=["ansible-loop", "dgd-if", "run-sh"])
def test_a_jinja_template_of_a_pd_deployment_is_not_checked(tmp_path, capsys, text, name):
    assert text_format(text) == "Jinja template"
    code, out = _check(tmp_path, capsys, text, name)
    assert code == 3 and not out.get("inputErrors"), out
    assert [u["object"] for u in out["notChecked"]] == [f"{tmp_path / name} (Jinja template)"]
    assert "render it" in out["notChecked"][0]["reason"]


def test_a_jinja_template_of_no_pd_deployment_stays_an_input_error(tmp_path, capsys):
    text = ANSIBLE_J2.replace("['prefill', 'decode']", "['a', 'b']").replace('"--kv-transfer-config", ', "")
    text = text.replace("'{{ kv_config | to_json }}'", '"--enforce-eager"')
    code, out = _check(tmp_path, capsys, text, "vllm.yaml.j2")
    assert code == 2 and out.get("inputErrors") and not out.get("notChecked"), out


def test_an_inline_chat_template_leaves_a_script_a_script():
    script = ("#!/bin/bash\nvllm serve Qwen/Qwen3-0.6B --port 8100 --kv-transfer-config "
              "'{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}' "
              "--chat-template '{% for m in messages %}{{ m.content }}{% endfor %}' &\n")
    assert text_format(script) == "shell script"


# --- Helmfile ---------------------------------------------------------------------------------------------------------


def _helmfile(values, chart: str = "llm-d-modelservice/llm-d-modelservice", extra: dict | None = None) -> dict:
    return {"repositories": [{"name": "llm-d-modelservice",
                              "url": "https://llm-d-incubation.github.io/llm-d-modelservice/"}],
            "releases": [{"name": "pd", "namespace": "llm-d", "chart": chart, "version": "v0.3.6", "values": values,
                          **(extra or {})}]}


@pytest.mark.parametrize("doc", [
    _helmfile([_values(model="meta-llama/Llama-3.1-8B-Instruct", connector=True)]),
    _helmfile(["values/prefill-decode.yaml"], chart="vllm/vllm-stack"),
    _helmfile([_values(connector=True)], extra={"set": [{"name": "decode.replicas", "value": 2}]}),
], ids=["inline-llmd-values", "values-file-production-stack", "inline-and-set"])
def test_a_helmfile_is_not_checked(tmp_path, capsys, doc):
    code, out = _check(tmp_path, capsys, yaml.safe_dump(doc, sort_keys=False), "helmfile.yaml")
    assert code == 3 and not out.get("results") and not out.get("inputErrors"), out
    assert [u["object"] for u in out["notChecked"]] == [f"Helmfile releases pd ({doc['releases'][0]['chart']})"]
    assert "helmfile template | pdd check -" in out["notChecked"][0]["reason"]


def test_only_a_list_of_chart_releases_without_a_kind_is_a_helmfile():
    assert helmfile_unrendered({"releases": [{"name": "pd", "chart": "x/y"}]}) is not None
    assert helmfile_unrendered({"apiVersion": "v1", "kind": "ConfigMap", "releases": [{"chart": "x/y"}]}) is None
    assert helmfile_unrendered({"releases": [{"name": "pd", "version": "1"}]}) is None  # no chart: not a release
    assert helmfile_unrendered({"releases": {"pd": {"chart": "x/y"}}}) is None


# --- llm-d values: both roles, no connector ----------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "image", "tp"), [
    ("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.11.0", 1),
    ("Qwen/Qwen3-32B", "vllm/vllm-openai:v0.23.0", 2),
    ("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.20.0", 1),
])
def test_values_creating_both_roles_without_a_connector_are_kv_connector_missing(tmp_path, capsys, model, image, tp):
    values = _values(model=model, image=image, tp=tp)
    assert creates_both_roles(values)
    code, out = _check(tmp_path, capsys, yaml.safe_dump(values, sort_keys=False), "values.yaml")
    assert code == 1 and "kv-connector-missing" in _errors(out), out
    rules = [(f["rule"], f["severity"]) for r in out["results"] for f in r["findings"]]
    assert rules.count(("kv-connector-missing", "error")) == 2, rules  # one per role


def test_a_flux_helmrelease_of_such_values_is_kv_connector_missing(tmp_path, capsys):
    release = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
               "metadata": {"name": "pd", "namespace": "llm-d"},
               "spec": {"chart": {"spec": {"chart": "llm-d-modelservice", "version": "v0.3.6"}},
                        "values": _values(image="vllm/vllm-openai:v0.23.0")}}
    code, out = _check(tmp_path, capsys, yaml.safe_dump(release, sort_keys=False), "release.yaml")
    assert code == 1 and "kv-connector-missing" in _errors(out), out


@pytest.mark.parametrize("prefill", [{"create": False}, {"replicas": 0}, {"containers": []}],
                         ids=["prefill-not-created", "prefill-replicas-0", "prefill-no-containers"])
def test_values_with_one_serving_role_and_no_connector_hold_nothing_to_check(tmp_path, capsys, prefill):
    values = _values(prefill=prefill)
    assert not creates_both_roles(values)
    code, out = _check(tmp_path, capsys, yaml.safe_dump(values, sort_keys=False), "values.yaml")
    assert code == 4 and not out.get("results"), out
