"""A manifest field the apiserver refuses for its type is the ``manifest-field-type-invalid`` error of its object,
never an input error (fixY, from held-out set 106: a renderer's pod annotations ``prometheus.io/scrape: true`` and
``prometheus.io/port: 9400`` unquoted hid the pair's missing KV connector behind exit 2).

Where every such field is a boolean or a number where the Kubernetes API wants a string (ObjectMeta labels and
annotations, PodSpec nodeSelector, EnvVar values, args items), the object is judged as quoting makes it, so its P/D
findings appear beside the type finding; a string where a list is wanted leaves the object not checked. The inputs are
YAML text, so the scalars are what YAML 1.1 reads unquoted. A Compose file is not a Kubernetes object: its
``environment`` numbers are Compose's business and stay as they were.
"""

from __future__ import annotations

import pytest

from pdd_operator.compat.shapes import as_quoted, quoted_scalars, shape_problems
from tests.unit.cli_check import check_text

RULE = "manifest-field-type-invalid"
KV = """'{"kv_connector":"NixlConnector","kv_role":"kv_both"}'"""


def _deployment(role: str, *, args: str, meta: str = "", pod: str = "", env: str = "", kind: str = "Deployment",
                kv: bool = True) -> str:
    kv_args = f", --kv-transfer-config, {KV}" if kv else ""
    return f"""apiVersion: apps/v1
kind: {kind}
metadata: {{name: qwen-{role}, labels: {{app: qwen, role: {role}}}}}
spec:
  template:
    metadata:
      labels: {{app: qwen, role: {role}}}
      annotations: {{{meta}}}
    spec:
      {pod}
      containers:
      - name: {role}
        image: vllm/vllm-openai:v0.11.0
        command: [vllm, serve]
        args: [Qwen/Qwen3-8B, {args}{kv_args}]
        env:
        - {{name: VLLM_NIXL_SIDE_CHANNEL_HOST, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}
        {env}
        resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""


def _check(tmp_path, capsys, text: str, name: str = "pd.yaml") -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, name)


def _rules(out: dict) -> dict[str, set[str]]:
    return {r["object"]: {f["rule"] for f in r["findings"]} for r in out["results"]}


def _typed(out: dict, obj: str) -> dict:
    return next(f for r in out["results"] if r["object"] == obj for f in r["findings"] if f["rule"] == RULE)


def test_unquoted_annotations_are_the_objects_error_and_the_pair_is_still_judged(tmp_path, capsys):
    """Set 106's kind: a pair without any --kv-transfer-config behind unquoted prometheus annotations."""
    meta = "prometheus.io/scrape: true, prometheus.io/port: 9400, prometheus.io/path: /metrics"
    text = "---\n".join(_deployment(r, args="--tensor-parallel-size, '1'", meta=meta, kv=False)
                        for r in ("prefill", "decode"))
    code, out = _check(tmp_path, capsys, text)
    assert code == 1 and out["inputErrors"] == []
    rules = _rules(out)
    assert rules["Deployment/qwen-prefill"] == {RULE} and rules["Deployment/qwen-decode"] == {RULE}
    assert any("kv-connector-missing" in found for obj, found in rules.items() if "+" in obj), rules
    typed = _typed(out, "Deployment/qwen-prefill")
    assert "spec.template.metadata.annotations.prometheus.io/scrape is a boolean (true)" in typed["message"]
    assert "prometheus.io/port is a number (9400)" in typed["message"]
    assert "checked as if each were quoted" in typed["message"]
    assert 'prometheus.io/scrape: "true"' in typed["fix"] and 'prometheus.io/port: "9400"' in typed["fix"]
    assert "Deployment/qwen-prefill spec.template.metadata.annotations.prometheus.io/port" in typed["fields"]


def test_numbers_in_args_are_read_as_the_strings_quoting_gives(tmp_path, capsys):
    """--block-size 16 and 32 unquoted: the pair is judged with those block sizes (0.11.0 refuses different ones)."""
    text = "---\n".join(_deployment(r, args=f"--block-size, {b}") for r, b in (("prefill", 16), ("decode", 32)))
    code, out = _check(tmp_path, capsys, text)
    assert code == 1 and out["inputErrors"] == [] and out["notChecked"] == []
    pair = next(found for obj, found in _rules(out).items() if "+" in obj)
    assert "block-size-hetero-unsupported" in pair, pair
    assert 'args[2]: "16"' in _typed(out, "Deployment/qwen-prefill")["fix"]


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet"])
def test_env_values_and_node_selector_numbers_on_a_valid_pair_give_the_type_error_alone(tmp_path, capsys, kind):
    env = "- {name: VLLM_NIXL_SIDE_CHANNEL_PORT, value: 5600}"
    pod = "nodeSelector: {gpu-count: 8, nvidia.com/gpu.present: true}"
    text = "---\n".join(_deployment(r, args="--block-size, '16'", env=env, pod=pod, kind=kind)
                        for r in ("prefill", "decode"))
    code, out = _check(tmp_path, capsys, text)
    assert code == 1 and out["inputErrors"] == [] and out["notChecked"] == []
    message = _typed(out, f"{kind}/qwen-decode")["message"]
    assert "spec.template.spec.env" not in message  # the container's env, by its own path
    assert "spec.template.spec.containers[0].env[1].value is a number (5600)" in message
    assert "spec.template.spec.nodeSelector.gpu-count is a number (8)" in message
    assert "nodeSelector.nvidia.com/gpu.present is a boolean (true)" in message
    pair = next(r for r in out["results"] if "+" in r["object"])
    assert pair["compatible"] is True, pair["findings"]


def test_a_string_where_a_list_is_wanted_leaves_the_object_not_checked_never_an_input_error(tmp_path, capsys):
    prefill = _deployment("prefill", args="--block-size, '16'").replace(
        "args: [Qwen/Qwen3-8B, --block-size, '16'", "args: 'Qwen/Qwen3-8B --block-size 16'").replace(
        f", --kv-transfer-config, {KV}]", "")
    text = prefill + "---\n" + _deployment("decode", args="--block-size, '16'", meta="prometheus.io/scrape: true")
    code, out = _check(tmp_path, capsys, text)
    assert code == 1 and out["inputErrors"] == []
    typed = _typed(out, "Deployment/qwen-prefill")
    assert "containers[0].args is a string where the Kubernetes PodSpec wants a list" in typed["message"]
    assert "not checked until they are fixed" in typed["message"]
    assert "Deployment/qwen-prefill" in {s["object"] for s in out["notChecked"]}
    assert RULE in _rules(out)["Deployment/qwen-decode"]


def test_lws_labels_are_judged_as_quoted(tmp_path, capsys):
    lws = """apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {{name: qwen-{role}, labels: {{app: qwen, tier: 1}}}}
spec:
  leaderWorkerTemplate:
    size: 1
    workerTemplate:
      metadata: {{labels: {{app: qwen, role: {role}, gpu: 1}}}}
      spec:
        containers:
        - name: {role}
          image: vllm/vllm-openai:v0.11.0
          command: [vllm, serve]
          args: [Qwen/Qwen3-8B, --block-size, '{block}']
          resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""
    text = "---\n".join(lws.format(role=r, block=b) for r, b in (("prefill", 16), ("decode", 16)))
    code, out = _check(tmp_path, capsys, text)
    assert code == 1 and out["inputErrors"] == []
    message = _typed(out, "LeaderWorkerSet/qwen-prefill")["message"]
    assert "metadata.labels.tier is a number (1)" in message
    assert "spec.leaderWorkerTemplate.workerTemplate.metadata.labels.gpu is a number (1)" in message
    assert any("kv-connector-missing" in found for obj, found in _rules(out).items() if "+" in obj), out


def test_dynamo_graph_extra_pod_spec_numbers(tmp_path, capsys):
    graph = """apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: qwen}
spec:
  services:
    VllmPrefillWorker:
      componentType: worker
      subComponentType: prefill
      envs:
      - {name: DYN_LOG_LEVEL, value: 3}
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1
          command: [python3, -m, dynamo.vllm]
          args: [--model, Qwen/Qwen3-8B, --is-prefill-worker, --block-size, 16]
    VllmDecodeWorker:
      componentType: worker
      subComponentType: decode
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1
          command: [python3, -m, dynamo.vllm]
          args: [--model, Qwen/Qwen3-8B, --block-size, 32]
"""
    code, out = _check(tmp_path, capsys, graph)
    assert code == 1 and out["inputErrors"] == []
    typed = _typed(out, "DynamoGraphDeployment/qwen")
    assert "spec.services.VllmPrefillWorker.envs[0].value is a number (3)" in typed["message"]
    assert "extraPodSpec.mainContainer.args[4] is a number (16)" in typed["message"]
    assert "extraPodSpec.mainContainer.args[3] is a number (32)" in typed["message"]
    assert any(obj != "DynamoGraphDeployment/qwen" for obj in _rules(out)), out  # the workers were read and paired


def test_control_a_compose_file_is_not_a_kubernetes_object(tmp_path, capsys):
    compose = f"""services:
  prefill:
    image: vllm/vllm-openai:v0.11.0
    command: [vllm, serve, Qwen/Qwen3-8B, --port, '8100', --kv-transfer-config, {KV}]
    environment: {{VLLM_NIXL_SIDE_CHANNEL_PORT: 5600, CUDA_VISIBLE_DEVICES: 0}}
  decode:
    image: vllm/vllm-openai:v0.11.0
    command: [vllm, serve, Qwen/Qwen3-8B, --port, '8200', --kv-transfer-config, {KV}]
    environment: {{VLLM_NIXL_SIDE_CHANNEL_PORT: 5601, CUDA_VISIBLE_DEVICES: 1}}
"""
    _, out = _check(tmp_path, capsys, compose, "compose.yaml")
    assert out["inputErrors"] == []
    assert all(RULE not in found for found in _rules(out).values()), out


def test_quoting_helpers():
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": {"a": True, "b": 0.9}},
           "spec": {"containers": [{"name": "c", "args": ["--x", 8], "env": [{"name": "N", "value": False}]}]}}
    problems = shape_problems(doc)
    assert [p.where for p in problems] == ["metadata.annotations.a", "metadata.annotations.b",
                                           "spec.containers[0].args[1]", "spec.containers[0].env[0].value"]
    quoted = quoted_scalars(doc, problems)
    assert quoted["metadata"]["annotations"] == {"a": "true", "b": "0.9"}
    assert quoted["spec"]["containers"][0]["args"] == ["--x", "8"]
    assert quoted["spec"]["containers"][0]["env"][0]["value"] == "false"
    assert doc["metadata"]["annotations"]["a"] is True and shape_problems(quoted) == []
    assert as_quoted(False) == "false" and as_quoted(9400) == "9400"
    wrong = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "c", "args": "--x 8"}]}}
    assert quoted_scalars(wrong, shape_problems(wrong)) is None
