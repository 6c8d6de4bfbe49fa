"""Variants of the kinds of fault the public-report set (tests/unit/data/public_reports) found missed, each
with a negative control: loopback side-channel hosts inside one network namespace, ``--model-config`` for
foreign manifests, decode TP past the KV heads (GQA replication), and NIXL releases older than the vLLM
release needs."""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.known_bad import known_bad
from tests.unit.test_turn2_variants import KV, check, pd, rules

L1B = "meta-llama/Llama-3.2-1B-Instruct"
CONFIG_8_HEADS = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
                  "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 16}


# --- side-channel host: loopback is right inside one network namespace ------------------------------------


def _same_host(host_env, p_node="gpu-1", d_node="gpu-1", host_network=True):
    docs = pd("q", ["--kv-transfer-config", KV, "--port", "8100"], ["--kv-transfer-config", KV, "--port", "8200"])
    for doc, node, port in zip(docs, (p_node, d_node), ("5600", "5700"), strict=True):
        pod = doc["spec"]["template"]["spec"]
        pod["hostNetwork"] = host_network
        if node:
            pod["nodeSelector"] = {"kubernetes.io/hostname": node}
        env = [{"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": port}]
        if host_env is not None:
            env.append({"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": host_env})
        pod["containers"][0]["env"] = env
    return docs


@pytest.mark.parametrize("host", [None, "localhost", "127.0.0.1"])
def test_loopback_side_channel_host_on_one_pinned_node_with_host_network_is_accepted(tmp_path, capsys, host):
    code, out = check(tmp_path, capsys, *_same_host(host))
    assert "side-channel-host-not-routable" not in rules(out), out
    assert code == 0


@pytest.mark.parametrize("kw", [
    {"d_node": "gpu-2"},            # two nodes: decode dials its own loopback
    {"host_network": False},        # one node, but each pod has its own network namespace
])
def test_loopback_side_channel_host_across_namespaces_is_refused(tmp_path, capsys, kw):
    code, out = check(tmp_path, capsys, *_same_host(None, **kw))
    assert code == 1 and "side-channel-host-not-routable" in rules(out, "error")


def test_loopback_side_channel_host_on_unpinned_hostnetwork_pods_is_a_warning(tmp_path, capsys):
    # the scheduler may put both on one node, where loopback works, or split them: not a promise that vLLM fails
    # (more variants in test_placement_filters)
    code, out = check(tmp_path, capsys, *_same_host(None, p_node=None, d_node=None))
    assert code == 0 and "side-channel-host-not-routable" in rules(out, "warning")
    assert "side-channel-host-not-routable" not in rules(out, "error")


# --- --model-config reaches foreign manifests ---------------------------------------------------------------


def _tp_pair(p, d, image="vllm/vllm-openai:v0.21.0", model=L1B):
    docs = pd("llama", ["--tensor-parallel-size", str(p), "--kv-transfer-config", KV],
              ["--tensor-parallel-size", str(d), "--kv-transfer-config", KV], model=model, image=image)
    for doc, gpus in zip(docs, (p, d), strict=True):
        doc["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = str(gpus)
    return docs


def test_model_config_gives_a_deployment_pair_its_kv_heads(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG_8_HEADS))
    code, out = check(tmp_path, capsys, *_tp_pair(16, 8), extra=("--model-config", str(config)))
    assert code == 1 and "tp-exceeds-kv-heads" in rules(out, "error")
    # without it a name the known-checkpoint table does not hold stays unknown (Llama-3.2-1B-Instruct itself is in
    # the table since session 28, which gives the same refusal)
    code, out = check(tmp_path, capsys, *_tp_pair(16, 8, model="my-org/Llama-3.2-1B-Instruct-ft"))
    assert "tp-kv-heads-unknown" in rules(out, "warning") and "tp-exceeds-kv-heads" not in rules(out)
    code, out = check(tmp_path, capsys, *_tp_pair(16, 8))
    assert code == 1 and "tp-exceeds-kv-heads" in rules(out, "error")


# --- decode TP past the KV heads (vllm#45330) -----------------------------------------------------------------


@pytest.mark.parametrize(("p", "d", "image", "severity"), [
    (8, 16, "vllm/vllm-openai:v0.21.0", "error"),   # the report
    (4, 16, "vllm/vllm-openai:v0.20.2", "error"),   # same assert in 0.20.x
    (2, 16, "vllm/vllm-openai:v0.23.0", "error"),   # same assert in 0.22.0 and 0.23.0 (read in the wheels)
    (8, 16, "vllm/vllm-openai:v0.24.0", None),       # the fix (vllm#45879) is in 0.24.0
    (16, 32, "vllm/vllm-openai:v0.21.0", None),      # prefill TP > KV heads: replicated, equal block lengths
    (8, 16, "vllm/vllm-openai:v0.19.1", None),       # 0.14-0.19: a prefill at TP == KV heads counts as replicated
    (4, 16, "vllm/vllm-openai:v0.19.1", "error"),    # ... one below them asserts
    (4, 16, "vllm/vllm-openai:v0.13.0", "error"),    # 0.9.2-0.13.0 assert alike (sdists read for set 26)
    (4, 8, "vllm/vllm-openai:v0.21.0", None),        # decode TP == KV heads: no capping (the report's PASS row)
    (2, 4, "vllm/vllm-openai:v0.21.0", None),
])
def test_decode_tp_past_the_kv_heads(tmp_path, capsys, p, d, image, severity):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG_8_HEADS))
    code, out = check(tmp_path, capsys, *_tp_pair(p, d, image), extra=("--model-config", str(config)))
    if severity is None:
        assert "hetero-tp-kv-replicated" not in rules(out)
    else:
        assert "hetero-tp-kv-replicated" in rules(out, severity)
        assert code == (1 if severity == "error" else 0)


def test_decode_tp_past_the_kv_heads_of_an_mla_model_is_not_this_rule(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_tp_pair(1, 16, model="deepseek-ai/DeepSeek-V2-Lite"))
    assert "hetero-tp-kv-replicated" not in rules(out)


# --- NIXL too old for the vLLM release (ray#57201) --------------------------------------------------------------


def _pinned_nixl(nixl, image, extra=""):
    cmd = f"pip install nixl=={nixl} && exec vllm serve Qwen/Qwen3-8B --kv-transfer-config '{extra or KV}'"
    docs = pd("q", [cmd], [cmd], image=image)
    for doc in docs:
        c = doc["spec"]["template"]["spec"]["containers"][0]
        c["command"], c["args"] = ["sh", "-c"], [cmd]
    return docs


@pytest.mark.parametrize(("nixl", "image", "refused"), [
    ("0.4.1", "vllm/vllm-openai:v0.11.0", True),
    ("0.5.0", "vllm/vllm-openai:v0.20.0", True),
    ("0.6.0", "vllm/vllm-openai:v0.11.0", False),   # the first NIXL with num_threads
    ("0.4.1", "vllm/vllm-openai:v0.10.1", False),   # vLLM before num_threads
])
def test_nixl_older_than_the_vllm_release_needs(tmp_path, capsys, nixl, image, refused):
    code, out = check(tmp_path, capsys, *_pinned_nixl(nixl, image))
    assert ("nixl-version-known-bad" in rules(out, "error")) is refused, out
    if refused:
        assert code == 1


def test_old_nixl_with_libfabric_only_is_not_the_num_threads_fault(tmp_path, capsys):
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_connector_extra_config":{"backends":["LIBFABRIC"]}}'
    code, out = check(tmp_path, capsys, *_pinned_nixl("0.4.1", "vllm/vllm-openai:v0.11.0", kv))
    assert "nixl-version-known-bad" not in rules(out)


def test_known_bad_rows_need_their_vllm_range_and_backends():
    assert [k.fixed_in for k in known_bad("nixl", (0, 4, 1), (0, 11, 0))] == ["0.6.0"]
    assert known_bad("nixl", (0, 4, 1), None) == []            # vLLM unknown: not reported
    assert known_bad("nixl", (0, 4, 1), (0, 10, 1)) == []
    assert known_bad("nixl", (0, 4, 1), (0, 11, 0), ("LIBFABRIC",)) == []
    assert [k.fixed_in for k in known_bad("nixl", (1, 3, 1))] == ["1.3.2"]  # rows without a vLLM range


# --- fields of findings on foreign manifests ------------------------------------------------------------------

def test_manifest_fields_map_pddeployment_paths_to_the_containers():
    from pdd_operator.compat.rules.base import manifest_fields

    containers = (("Deployment/l-prefill spec.template.spec.containers[0]", "args"),
                  ("DynamoGraphDeployment/g spec.services.D.extraPodSpec.mainContainer", "command"))
    p, d = (c for c, _ in containers)
    assert manifest_fields(("spec.prefill.blockSize", "spec.decode.blockSize"), containers) == [f"{p}.args", f"{d}.command"]
    assert manifest_fields(("spec.engine.image",), containers) == [f"{p}.image", f"{d}.image"]
    assert manifest_fields(("spec.kvTransfer.sideChannelPort",), containers) == [
        f"{p}.env[VLLM_NIXL_SIDE_CHANNEL_PORT]", f"{d}.env[VLLM_NIXL_SIDE_CHANNEL_PORT]"]
    assert manifest_fields(("spec.network.hostNetwork",), containers) == [
        "Deployment/l-prefill spec.template.spec.hostNetwork", "DynamoGraphDeployment/g spec.services.D.extraPodSpec.hostNetwork"]
    assert manifest_fields(("spec.model.numKvHeads", "spec.model.mambaNGroups"), containers) == [
        "config.json (pdd check --model-config)"]
    assert manifest_fields(("spec.engine",), containers, ("securityContext.capabilities",)) == [
        f"{p}.securityContext.capabilities", f"{d}.securityContext.capabilities"]
    # A PDDeployment (no containers) keeps its own paths: the webhook and status print them.
    assert manifest_fields(("spec.prefill.blockSize",), ()) == ["spec.prefill.blockSize"]


def test_pddeployment_findings_keep_pddeployment_fields(tmp_path, capsys):
    doc = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "l"},
           "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"image": "vllm/vllm-openai:v0.24.0"},
                    "prefill": {"replicas": 1, "blockSize": 32}, "decode": {"replicas": 1, "blockSize": 16}}}
    code, out = check(tmp_path, capsys, doc)
    fields = {f for r in out["results"] for finding in r["findings"] for f in finding["fields"]}
    assert code == 1 and {"spec.prefill.blockSize", "spec.decode.blockSize"} <= fields


def test_loopback_side_channel_host_in_statefulsets_pinned_to_one_node_is_accepted(tmp_path, capsys):
    docs = _same_host(None)
    for doc in docs:
        doc["kind"] = "StatefulSet"
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and "side-channel-host-not-routable" not in rules(out)


def test_decode_tp_past_the_kv_heads_in_a_dynamo_graph(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG_8_HEADS))

    def worker(sub, tp):
        return {"componentType": "worker", "subComponentType": sub,
                "extraPodSpec": {"mainContainer": {
                    "image": "vllm/vllm-openai:v0.21.0", "command": ["python3", "-m", "dynamo.vllm"],
                    "args": ["--model", L1B, "--tensor-parallel-size", str(tp), "--disaggregation-mode", sub,
                             "--kv-transfer-config", KV],
                    "resources": {"limits": {"nvidia.com/gpu": str(tp), "rdma/ib": "1"}}}}}

    graph = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
             "spec": {"services": {"P": worker("prefill", 8), "D": worker("decode", 16)}}}
    code, out = check(tmp_path, capsys, graph, extra=("--model-config", str(config)))
    assert code == 1 and "hetero-tp-kv-replicated" in rules(out, "error")
    fields = {f for r in out["results"] for finding in r["findings"] if finding["rule"] == "hetero-tp-kv-replicated"
              for f in finding["fields"]}
    assert "DynamoGraphDeployment/g spec.services.D.extraPodSpec.mainContainer.args" in fields
