"""Variants of what the thirty-sixth public-report set (tests/unit/data/public_reports_36) taught, with negative
controls.

- The connector registry of a release: vLLM 0.13.0 renamed SharedStorageConnector to ExampleConnector in its
  connector factory, and an unregistered name without ``kv_connector_module_path`` is refused when the engine builds
  its connector (:mod:`pdd_operator.compat.rules.connector_registry`). Such a filesystem pair was "not checked".
- An orchestrator that renders what the manifest does not say: Modelplane's compose function gives every engine of a
  PrefillDecode ModelDeployment the side-channel host (status.podIP) and port 5557, and the decode pod a pd-sidecar on
  8000 (:mod:`pdd_operator.compat.modelplane`). Its valid pairs were refused (side-channel-host-not-routable).
- A sidecar container of the engine's pod on the engine's own port (:mod:`pdd_operator.compat.rules.pod_ports`).
- An engine whose ``--kv-transfer-config`` is not JSON as vLLM gets it (an unquoted value in ``sh -c``): dropped
  silently by the scanner, now reported as ``engine-args-invalid``.
- ``tp-kv-heads-unknown`` when prefill TP > decode TP and the model's architecture is unknown.
"""

from __future__ import annotations

import copy
import json

import pytest

from pdd_operator.compat.modelplane import resolve_modelplane_plumbing
from tests.unit.test_turn2_variants import KV, check, container, pd, rules, workload

# --- the connector registry -------------------------------------------------------------------------------------


def _storage_pair(connector, image, module_path=None, kind="Deployment"):
    cfg = {"kv_connector": connector, "kv_connector_extra_config": {"shared_storage_path": "/kv"}}
    if module_path:
        cfg["kv_connector_module_path"] = module_path
    docs = []
    for role, kv_role in (("prefill", "kv_producer"), ("decode", "kv_consumer")):
        c = container(["meta-llama/Llama-3.1-8B-Instruct", "--kv-transfer-config",
                       json.dumps({**cfg, "kv_role": kv_role})], image=image)
        docs.append(workload(f"fs-{role}", role, c, kind=kind, app="fs"))
    return docs


@pytest.mark.parametrize(("connector", "image", "kind"), [
    ("ExampleConnector", "vllm/vllm-openai:v0.12.0", "Deployment"),
    ("ExampleConnector", "vllm/vllm-openai:v0.10.1.1", "StatefulSet"),
    ("SharedStorageConnector", "vllm/vllm-openai:v0.13.0", "Deployment"),
    ("SharedStorageConnector", "vllm/vllm-openai:v0.24.0", "StatefulSet"),
])
def test_a_connector_name_the_release_does_not_register_is_an_error(tmp_path, capsys, connector, image, kind):
    code, out = check(tmp_path, capsys, *_storage_pair(connector, image, kind=kind))
    assert code == 1 and "kv-connector-unregistered" in rules(out, "error"), out


@pytest.mark.parametrize(("connector", "image", "module_path"), [
    ("ExampleConnector", "vllm/vllm-openai:v0.13.0", None),         # registered from 0.13.0
    ("ExampleConnector", "vllm/vllm-openai:v0.27.0", None),
    ("SharedStorageConnector", "vllm/vllm-openai:v0.12.0", None),   # registered up to 0.12.x
    ("SharedStorageConnector", "vllm/vllm-openai:v0.24.0", "my_pkg.storage"),  # loaded from its module path
    ("ExampleConnector", "registry.example.com/fork/vllm:v0.12.0", None),      # not an upstream image
])
def test_a_registered_or_module_path_connector_is_not_refused(tmp_path, capsys, connector, image, module_path):
    code, out = check(tmp_path, capsys, *_storage_pair(connector, image, module_path=module_path))
    assert "kv-connector-unregistered" not in rules(out), out


# --- Modelplane's PrefillDecode plumbing --------------------------------------------------------------------------


def _engine(args, image, port=None):
    extra = [f"--port={port}"] if port else []
    return {"name": "engine", "image": image, "args": [*args, *extra]}


def _modelplane(model, p_args, d_args, image="vllm/vllm-openai:v0.23.0", decode_port=8001, released=True,
                mode="PrefillDecode"):
    engines = [
        {"name": "prefill", "phase": "Prefill", "members": [{"role": "Standalone", "template": {"spec": {
            "containers": [_engine([f"--model={model}", *p_args, '--kv-transfer-config={"kv_connector":"NixlConnector",'
                                    '"kv_role":"kv_producer"}'], image)]}}}]},
        {"name": "decode", "phase": "Decode", "members": [{"role": "Standalone", "template": {"spec": {
            "containers": [_engine([f"--model={model}", *d_args, '--kv-transfer-config={"kv_connector":"NixlConnector",'
                                    '"kv_role":"kv_consumer"}'], image, decode_port)]}}}]},
    ]
    spec = {"serving": {"mode": mode}, "engines": engines}
    return {"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment",
            "metadata": {"name": "m", "namespace": "ml-team"},
            "spec": {"replicas": 1, "template": {"spec": spec}} if released else spec}


@pytest.mark.parametrize("released", [True, False])
@pytest.mark.parametrize(("model", "p_args", "d_args", "image"), [
    ("Qwen/Qwen3-8B", [], [], "vllm/vllm-openai:v0.23.0"),
    ("meta-llama/Llama-3.1-8B-Instruct", [], ["--tensor-parallel-size=2"], "vllm/vllm-openai:v0.20.2"),
])
def test_a_modelplane_pd_pair_gets_its_side_channel_host_from_the_platform(tmp_path, capsys, released, model,
                                                                           p_args, d_args, image):
    code, out = check(tmp_path, capsys, _modelplane(model, p_args, d_args, image=image, released=released))
    assert code == 0 and "side-channel-host-not-routable" not in rules(out), out


def test_the_plumbing_is_what_modelplane_adds_and_only_for_prefill_decode():
    doc = _modelplane("Qwen/Qwen3-8B", [], [])
    resolve_modelplane_plumbing(doc)
    engines = doc["spec"]["template"]["spec"]["engines"]
    prefill, decode = (e["members"][0]["template"]["spec"]["containers"] for e in engines)
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in prefill[0]["env"]}
    assert env == {"VLLM_NIXL_SIDE_CHANNEL_HOST": {"fieldRef": {"fieldPath": "status.podIP"}},
                   "VLLM_NIXL_SIDE_CHANNEL_PORT": "5557"}
    assert [c["name"] for c in prefill] == ["engine"] and [c["name"] for c in decode] == ["engine", "pd-sidecar"]
    unified = _modelplane("Qwen/Qwen3-8B", [], [], mode="Unified")
    before = copy.deepcopy(unified)
    resolve_modelplane_plumbing(unified)
    assert unified == before
    other_group = {**_modelplane("Qwen/Qwen3-8B", [], []), "apiVersion": "example.com/v1"}
    before = copy.deepcopy(other_group)
    resolve_modelplane_plumbing(other_group)
    assert other_group == before


def test_a_written_side_channel_host_is_kept():
    doc = _modelplane("Qwen/Qwen3-8B", [], [])
    decode = doc["spec"]["template"]["spec"]["engines"][1]["members"][0]["template"]["spec"]["containers"][0]
    decode["env"] = [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "10.0.0.9"}]
    resolve_modelplane_plumbing(doc)
    assert [e for e in decode["env"] if e["name"] == "VLLM_NIXL_SIDE_CHANNEL_HOST"] == [
        {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "10.0.0.9"}]


# --- a sidecar on the engine's port ------------------------------------------------------------------------------


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.12.0", "vllm/vllm-openai:v0.23.0"])
def test_a_modelplane_decode_engine_on_vllms_default_port_collides_with_the_pd_sidecar(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, _modelplane("Qwen/Qwen3-8B", [], [], image=image, decode_port=None))
    assert code == 1 and "pod-port-conflict" in rules(out, "error"), out


@pytest.mark.parametrize("native", [False, True])
def test_a_routing_sidecar_on_the_decode_engines_port_is_an_error(tmp_path, capsys, native):
    """llm-d's layout: the routing proxy on 8000 and vLLM on 8200; a decode engine left on 8000 collides."""
    docs = pd("llama", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV], model="meta-llama/Llama-3.1-8B-Instruct")
    proxy = {"name": "routing-proxy", "image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.2.0",
             "args": ["--port=8000", "--vllm-port=8000"], "ports": [{"containerPort": 8000}]}
    pod = docs[1]["spec"]["template"]["spec"]
    if native:
        pod["initContainers"] = [{**proxy, "restartPolicy": "Always"}]
    else:
        pod["containers"].append(proxy)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "pod-port-conflict" in rules(out, "error"), out


def test_a_sidecar_on_another_port_or_an_ordinary_init_container_is_fine(tmp_path, capsys):
    docs = pd("llama", ["--kv-transfer-config", KV], ["--port", "8200", "--kv-transfer-config", KV],
              model="meta-llama/Llama-3.1-8B-Instruct")
    pod = docs[1]["spec"]["template"]["spec"]
    pod["containers"].append({"name": "routing-proxy", "image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.2.0",
                              "ports": [{"containerPort": 8000}]})
    docs[0]["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "fetch", "image": "busybox", "ports": [{"containerPort": 8000}]}]  # runs to completion first
    code, out = check(tmp_path, capsys, *docs)
    assert "pod-port-conflict" not in rules(out), out


# --- an engine whose --kv-transfer-config is not JSON --------------------------------------------------------------


@pytest.mark.parametrize("shell", [True, False])
def test_an_engine_with_a_non_json_kv_transfer_config_is_reported_not_dropped(tmp_path, capsys, shell):
    good = container(["Qwen/Qwen3-8B", "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'])
    if shell:  # sh -c removes the unquoted double quotes before vLLM parses the value
        bad = container(['exec vllm serve Qwen/Qwen3-8B --kv-transfer-config={"kv_connector":"NixlConnector",'
                         '"kv_role":"kv_consumer"}'], command=["/bin/sh", "-c"])
    else:
        bad = container(["Qwen/Qwen3-8B", "--kv-transfer-config={kv_connector:NixlConnector,kv_role:kv_consumer}"])
    # no role label: the decode's role comes from its name only, as the Modelplane engine named "decode" did
    docs = [workload("qwen-prefill", "prefill", good, app="qwen", labels_key="tier"),
            workload("qwen-decode", "decode", bad, app="qwen", labels_key="tier")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out


def test_a_server_named_decode_without_kv_transfer_config_is_still_no_pd_engine(tmp_path, capsys):
    plain = workload("chat-decode", "decode", container(["Qwen/Qwen3-8B", "--max-model-len", "4096"]), app="chat",
                     labels_key="tier")
    code, out = check(tmp_path, capsys, plain)
    assert not out["results"] and "engine-args-invalid" not in rules(out), out


# --- tp-kv-heads-unknown with an unknown architecture --------------------------------------------------------------


def test_prefill_tp_above_decode_tp_of_an_unknown_model_names_the_kv_heads(tmp_path, capsys):
    docs = pd("x", ["--tensor-parallel-size", "8", "--kv-transfer-config", KV],
              ["--tensor-parallel-size", "4", "--kv-transfer-config", KV],
              model="/mnt/models/private-model", image="vllm/vllm-openai:v0.27.1", gpus=8)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and "tp-kv-heads-unknown" in rules(out, "warning"), out


def test_decode_tp_above_prefill_tp_of_an_unknown_model_is_left_to_architecture_unknown(tmp_path, capsys):
    docs = pd("x", ["--tensor-parallel-size", "2", "--kv-transfer-config", KV],
              ["--tensor-parallel-size", "4", "--kv-transfer-config", KV],
              model="/mnt/models/private-model", image="vllm/vllm-openai:v0.27.1", gpus=4)
    code, out = check(tmp_path, capsys, *docs)
    assert "tp-kv-heads-unknown" not in rules(out), out

