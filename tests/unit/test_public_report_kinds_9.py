"""Variants of the kinds of fault the ninth public-report set (tests/unit/data/public_reports_9) found, each with
negative controls: a side-channel port overlap of two hostNetwork pods that only may share a node (the scheduler
decides: a warning; one node: an error; both asking the scheduler for the port as a host port: never on one node),
and a model named by its Hub id on one role and by its Hub cache snapshot path on the other (Dynamo's worker turns
the id into that path before vLLM hashes it: a warning; plain ``vllm serve`` hashes the id: still an error)."""

from __future__ import annotations

import pytest

from pdd_operator.compat.pair import host_ports
from pdd_operator.vllm.hf_cache import Snapshot, hub_cache, resolves_to_snapshot, snapshot
from tests.unit.test_turn2_variants import KV, check, pd, rules

# --- hostNetwork side-channel ports: may share a node, must share, cannot share ---------------------------------


def _hostnet(pod_p: dict, pod_d: dict, ports: bool = False):
    """Two hostNetwork Deployments with vLLM's default side-channel port 5600 (0.19.1); ``ports``: both containers
    declare it as a containerPort."""
    docs = pd("h", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV], image="vllm/vllm-openai:v0.19.1")
    for doc, extra in zip(docs, (pod_p, pod_d), strict=True):
        spec = doc["spec"]["template"]["spec"]
        spec.update({"hostNetwork": True, **extra})
        spec["containers"][0]["env"][0] = {
            "name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}
        if ports:
            spec["containers"][0]["ports"] = [{"name": "nixl", "containerPort": 5600}]
    return docs


def test_hostnetwork_pods_the_scheduler_may_put_on_one_node_are_a_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_hostnet({}, {}))
    assert code == 0 and "side-channel-port-conflict" in rules(out, "warning")
    finding = next(f for r in out["results"] for f in r["findings"] if f["rule"] == "side-channel-port-conflict")
    assert "5600" in finding["message"] and "scheduler" in finding["message"]


def test_hostnetwork_pods_pinned_to_one_hostname_are_refused(tmp_path, capsys):
    one = {"nodeSelector": {"kubernetes.io/hostname": "gpu-7"}}
    code, out = check(tmp_path, capsys, *_hostnet(one, one))
    assert code == 1 and "side-channel-port-conflict" in rules(out, "error")


def test_hostnetwork_pods_asking_for_the_port_as_a_host_port_never_share_a_node(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_hostnet({}, {}, ports=True))
    assert code == 0 and "side-channel-port-conflict" not in rules(out)


def test_a_host_port_on_one_pod_only_does_not_keep_them_apart(tmp_path, capsys):
    docs = _hostnet({}, {})
    docs[0]["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 5600}]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and "side-channel-port-conflict" in rules(out, "warning")


def test_host_ports_read_hostport_and_hostnetwork_container_ports():
    spec = {"containers": [{"ports": [{"containerPort": 8000}, {"containerPort": 9, "hostPort": 19},
                                      {"containerPort": 53, "protocol": "UDP"}]}]}
    assert host_ports(spec) == {19}
    assert host_ports({**spec, "hostNetwork": True}) == {8000, 19}


# --- a Hub id against its cache snapshot path ---------------------------------------------------------------------

SNAP = "/shared-models/hub/models--Qwen--Qwen3-32B/snapshots/9216db5781bf21249d130ec9da846c4624c16137"


def _dynamo(p_model: str, d_model: str, hf_home: str | None = "/shared-models"):
    env = [{"name": "HF_HOME", "value": hf_home}] if hf_home else []

    def worker(sub, model):
        return {"componentType": "worker", "subComponentType": sub, "replicas": 1, "resources": {"limits": {"gpu": "4"}},
                "extraPodSpec": {"mainContainer": {
                    "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.1", "command": ["python3", "-m", "dynamo.vllm"],
                    "env": env, "args": ["--model", model, "--disaggregation-mode", sub, "--tensor-parallel-size", "4",
                                         "--kv-transfer-config", KV]}}}

    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "q"},
            "spec": {"services": {"Prefill": worker("prefill", p_model), "Decode": worker("decode", d_model)}}}


@pytest.mark.parametrize("p_model, d_model", [("Qwen/Qwen3-32B", SNAP), (SNAP, "Qwen/Qwen3-32B")])
def test_dynamo_hub_id_against_its_snapshot_path_is_a_warning(tmp_path, capsys, p_model, d_model):
    code, out = check(tmp_path, capsys, _dynamo(p_model, d_model))
    assert code == 0 and "model-mismatch" in rules(out, "warning")
    assert "9216db5" in next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "model-mismatch")


@pytest.mark.parametrize("d_model, hf_home", [
    ("/shared-models/hub/models--Qwen--Qwen3-14B/snapshots/abc", "/shared-models"),  # another repo
    (SNAP, "/elsewhere"),  # the id downloads into another cache, so the strings differ
])
def test_dynamo_id_against_another_snapshot_is_still_refused(tmp_path, capsys, d_model, hf_home):
    code, out = check(tmp_path, capsys, _dynamo("Qwen/Qwen3-32B", d_model, hf_home))
    assert code == 1 and "model-mismatch" in rules(out, "error")


def test_plain_vllm_serve_hashes_the_id_as_written_so_id_against_path_is_refused(tmp_path, capsys):
    docs = pd("m", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV], model="Qwen/Qwen3-32B",
              image="vllm/vllm-openai:v0.19.1")
    docs[1]["spec"]["template"]["spec"]["containers"][0]["args"][0] = SNAP
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "model-mismatch" in rules(out, "error")


def test_hub_cache_helpers():
    assert snapshot(SNAP) == Snapshot("Qwen/Qwen3-32B", "9216db5781bf21249d130ec9da846c4624c16137", "/shared-models/hub")
    assert snapshot("/models/Qwen3-32B") is None and snapshot(None) is None
    assert hub_cache({"HF_HOME": "/m/"}) == "/m/hub" and hub_cache({"HF_HUB_CACHE": "/c", "HF_HOME": "/m"}) == "/c"
    assert hub_cache({}) is None
    assert resolves_to_snapshot("dynamo.vllm", "Qwen/Qwen3-32B")
    assert not resolves_to_snapshot("", "Qwen/Qwen3-32B") and not resolves_to_snapshot("dynamo.vllm", SNAP)
