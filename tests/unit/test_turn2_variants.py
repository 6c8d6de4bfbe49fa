"""Variants of each kind of fault in the turn2 cases, written here: other models, versions and
orchestrators (Deployments, StatefulSets, LeaderWorkerSets, KServe, Dynamo v1alpha1/v1beta1, llm-d labels).
Each has a negative control where one exists, so a rule that fires everywhere fails as well."""

from __future__ import annotations

import json

import pytest

from tests.unit.cli_check import check_docs, rules

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
POD_IP = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def container(args, image="vllm/vllm-openai:v0.24.0", env=(), gpus=1, extra_resources=None, command=None, **kw):
    return {"name": "vllm", "image": image, "command": command or ["vllm", "serve"], "args": list(args),
            "env": [POD_IP, {"name": "UCX_NET_DEVICES", "value": "mlx5_0:1"}, *env],
            "resources": {"limits": {"nvidia.com/gpu": str(gpus), "rdma/ib": "1", **(extra_resources or {})}},
            "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}, **kw}


def workload(name, role, c, kind="Deployment", namespace="default", app=None, pod=None, labels_key="llm-d.ai/role"):
    labels = {"app": app or name.rsplit("-", 1)[0], labels_key: role}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [c], **(pod or {})}}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template}}


def pd(name, p_args, d_args, model="Qwen/Qwen3-8B", **kw):
    return [workload(f"{name}-prefill", "prefill", container([model, *p_args], **kw)),
            workload(f"{name}-decode", "decode", container([model, *d_args], **kw))]


def check(tmp_path, capsys, *docs, extra=()) -> tuple[int, dict]:
    return check_docs(tmp_path, capsys, *docs, extra=tuple(extra))


# --- pairing: only roles of one deployment ------------------------------------------------------------


def test_statefulsets_in_two_namespaces_with_different_versions_pair_per_namespace(tmp_path, capsys):
    docs = []
    for ns, version in (("team-a", "v0.20.2"), ("team-b", "v0.24.0")):
        for role in ("prefill", "decode"):
            c = container(["meta-llama/Llama-3.1-8B-Instruct", "--kv-transfer-config", KV], image=f"vllm/vllm-openai:{version}")
            docs.append(workload(f"llama-{role}", role, c, kind="StatefulSet", namespace=ns, app="llama"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and len(out["results"]) == 2 and "vllm-version-mismatch" not in rules(out)


def test_two_apps_of_one_model_in_one_namespace_pair_by_labels_not_across(tmp_path, capsys):
    a = pd("llama-a", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV], image="vllm/vllm-openai:v0.20.2")
    b = pd("llama-b", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV], image="vllm/vllm-openai:v0.22.0")
    code, out = check(tmp_path, capsys, *a, *b)
    assert code == 0 and len(out["results"]) == 2
    assert all("app=llama-" in r["pairedBy"] for r in out["results"])


def test_one_version_mismatch_inside_one_deployment_is_still_refused(tmp_path, capsys):
    docs = pd("llama", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV])
    docs[1]["spec"]["template"]["spec"]["containers"][0]["image"] = "vllm/vllm-openai:v0.22.0"
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "vllm-version-mismatch" in rules(out, "error")


# --- wrapped and stacked connectors ---------------------------------------------------------------------


def _multi(inner: list[dict], role="kv_both") -> str:
    return json.dumps({"kv_connector": "MultiConnector", "kv_role": role,
                       "kv_connector_extra_config": {"connectors": inner}})


def test_nixl_inside_multiconnector_is_judged(tmp_path, capsys):
    push = _multi([{"kv_connector": "OffloadingConnector", "kv_role": "kv_both"},
                   {"kv_connector": "NixlPushConnector", "kv_role": "kv_producer"}])
    pull = _multi([{"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}])
    code, out = check(tmp_path, capsys, *pd("q", ["--kv-transfer-config", push], ["--kv-transfer-config", pull],
                                            image="vllm/vllm-openai:v0.28.0"))
    assert code == 1 and "transfer-mode-mismatch" in rules(out, "error") and "kv-connector-missing" not in rules(out)


def test_lmcache_only_stack_is_not_checked(tmp_path, capsys):
    lm = _multi([{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}])
    code, out = check(tmp_path, capsys, *pd("q", ["--kv-transfer-config", lm], ["--kv-transfer-config", lm]))
    assert code == 3 and not out["results"] and "no NixlConnector inside" in out["notChecked"][0]["reason"]
    assert check(tmp_path, capsys, *pd("q", ["--kv-transfer-config", lm], ["--kv-transfer-config", lm]),
                 extra=["--allow-unchecked"])[0] == 0


def test_dynamo_v1alpha1_kvbm_pdconnector_with_push_inside_on_old_vllm_is_refused(tmp_path, capsys):
    inner = {"kv_connector": "PdConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [
        {"kv_connector": "DynamoConnector", "kv_role": "kv_both"}, {"kv_connector": "NixlPushConnector", "kv_role": "kv_both"}]}}
    docs = pd("q", ["--kv-transfer-config", json.dumps(inner)], ["--kv-transfer-config", json.dumps(inner)],
              image="vllm/vllm-openai:v0.22.0")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "push-connector-unavailable" in rules(out, "error")


# --- placement: hostNetwork ports ----------------------------------------------------------------------------


def _hostnet(pod_extra_p, pod_extra_d):
    docs = pd("l", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV])
    for doc, extra in zip(docs, (pod_extra_p, pod_extra_d), strict=True):
        doc["spec"]["template"]["spec"].update({"hostNetwork": True, **extra})
        doc["spec"]["template"]["spec"]["containers"][0]["env"][0] = {
            "name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}
    return docs


def test_hostnetwork_pair_kept_apart_by_node_selector_is_accepted(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_hostnet({"nodeSelector": {"pool": "prefill"}}, {"nodeSelector": {"pool": "decode"}}))
    assert code == 0 and "side-channel-port-conflict" not in rules(out)


def test_hostnetwork_pair_that_may_share_a_node_is_warned_not_refused(tmp_path, capsys):
    # the scheduler decides whether the two land on one node: vLLM fails only there (set 9, see
    # test_public_report_kinds_9); pods that must share a node are still refused
    code, out = check(tmp_path, capsys, *_hostnet({}, {}))
    assert code == 0 and "side-channel-port-conflict" in rules(out, "warning")
    assert "side-channel-port-conflict" not in rules(out, "error")


# --- versions: dev builds ----------------------------------------------------------------------------------------


def test_dev_build_tag_is_unknown_not_the_release(tmp_path, capsys):
    docs = pd("q", ["--kv-transfer-config", '{"kv_connector":"NixlPushConnector","kv_role":"kv_both"}'],
              ["--kv-transfer-config", '{"kv_connector":"NixlPushConnector","kv_role":"kv_both"}'],
              image="vllm/vllm-openai:0.20.2rc1.dev265+gdd6b3a5ef")
    code, out = check(tmp_path, capsys, *docs)
    # Not read as 0.20.2 (which refuses the push connector): a build after the 0.20 line may or may not have it.
    assert code == 3 and "push-connector-unavailable" not in rules(out)
    warning = next(f for r in out["results"] for f in r["findings"] if f["rule"] == "vllm-version-unknown")
    assert "unreleased development build" in warning["message"] and "push-connector-unavailable" in warning["message"]
    assert "push-connector-unavailable (vLLM 0.20.0 <= v < 0.24.0)" in out["notChecked"][0]["reason"]


# --- engines without a connector -----------------------------------------------------------------------------------


def test_labelled_decode_without_connector_is_kv_connector_missing(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *pd("q", ["--kv-transfer-config", KV], []))
    assert code == 1 and "kv-connector-missing" in rules(out, "error")
    fix = next(f["fix"] for r in out["results"] for f in r["findings"] if f["rule"] == "kv-connector-missing")
    assert "decode container" in fix and "spec." not in fix  # the user's own format


def test_two_plain_servers_named_prefill_and_decode_without_connectors_are_not_a_pd_pair(tmp_path, capsys):
    docs = pd("q", [], [])
    for d in docs:
        d["metadata"]["labels"].pop("llm-d.ai/role", None)
        d["spec"]["template"]["metadata"]["labels"].pop("llm-d.ai/role", None)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 4 and not out["results"] and not out["notChecked"]  # nothing to check (exit 4)


def test_dynamo_v1beta1_graph_with_both_connectors_is_checked(tmp_path, capsys):
    def component(kind):
        args = ["-m", "dynamo.vllm", "--model", "Qwen/Qwen3-0.6B", "--disaggregation-mode", kind,
                "--kv-transfer-config", KV]
        return {"name": kind, "type": kind, "podTemplate": {"spec": {"containers": [
            {"name": "main", "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1", "command": ["python3"], "args": args}]}}}
    doc = {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
           "spec": {"components": [component("prefill"), component("decode")]}}
    code, out = check(tmp_path, capsys, doc)
    assert code == 0 and len(out["results"]) == 1 and "kv-connector-missing" not in rules(out)


# --- scope gaps ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("image, bad", [("vllm/vllm-openai:v0.26.0", True), ("vllm/vllm-openai:v0.27.0", False),
                                        ("vllm/vllm-openai:v0.29.0", False), ("vllm/vllm-openai:v0.18.0", False)])
def test_hybrid_ssm_decode_prefix_caching_per_version(tmp_path, capsys, image, bad):
    model = "nvidia/NVIDIA-Nemotron-H-8B-Base-8K"
    common = ["--no-disable-hybrid-kv-cache-manager", "--kv-transfer-config", KV]
    docs = pd("n", common, [*common, "--enable-prefix-caching"], model=model, image=image,
              env=[{"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}])
    _, out = check(tmp_path, capsys, *docs)
    assert ("hybrid-ssm-prefix-caching" in rules(out, "error")) == bad


def test_hybrid_ssm_without_decode_prefix_caching_passes_that_rule(tmp_path, capsys):
    common = ["--no-disable-hybrid-kv-cache-manager", "--kv-transfer-config", KV]
    docs = pd("n", common, [*common, "--no-enable-prefix-caching"], model="nvidia/NVIDIA-Nemotron-H-8B-Base-8K",
              image="vllm/vllm-openai:v0.26.0", env=[{"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}])
    _, out = check(tmp_path, capsys, *docs)
    assert "hybrid-ssm-prefix-caching" not in rules(out)


@pytest.mark.parametrize("image, flag, warned", [
    ("vllm/vllm-openai:v0.20.2", None, True), ("vllm/vllm-openai:v0.20.2", "--no-disable-hybrid-kv-cache-manager", False),
    ("vllm/vllm-openai:v0.22.0", None, False)])
def test_sliding_window_hma_implicitly_disabled(tmp_path, capsys, image, flag, warned):
    extra = [flag] if flag else []
    docs = pd("g", ["--kv-transfer-config", KV, *extra], ["--kv-transfer-config", KV, *extra],
              model="google/gemma-3-27b-it", image=image)
    _, out = check(tmp_path, capsys, *docs)
    assert ("hma-implicitly-disabled" in rules(out, "warning")) == warned


@pytest.mark.parametrize("dp_args, gpus, refused", [
    (["--data-parallel-size", "2"], 1, True), (["--data-parallel-size", "2"], 2, False),
    (["--data-parallel-size", "4", "--data-parallel-size-local", "1", "--data-parallel-address", "10.0.0.1"], 1, False)])
def test_data_parallel_against_gpus(tmp_path, capsys, dp_args, gpus, refused):
    docs = [workload("d-prefill", "prefill", container(["m", "--kv-transfer-config", KV])),
            workload("d-decode", "decode", container(["m", "--kv-transfer-config", KV, *dp_args], gpus=gpus),
                     kind="StatefulSet")]
    _, out = check(tmp_path, capsys, *docs)
    assert ("parallelism-gpu-count" in rules(out, "error")) == refused


@pytest.mark.parametrize("image, refused", [("vllm/vllm-openai:v0.10.1", True), ("vllm/vllm-openai:v0.11.1", False)])
def test_ray_instance_over_two_nodes_side_channel_per_node(tmp_path, capsys, image, refused):
    args = ["--tensor-parallel-size", "2", "--distributed-executor-backend", "ray", "--kv-transfer-config", KV]
    _, out = check(tmp_path, capsys, *pd("r", args, args, image=image))
    assert ("side-channel-host-per-node" in rules(out, "error")) == refused


@pytest.mark.parametrize("resources, annotations, warned", [
    ({"nvidia.com/hostdev": "1"}, None, True), ({"nvidia.com/hostdev": "1"}, "sriov-rdma", False),
    ({"openshift.io/mlnx_sriov_rdma": "1"}, None, True)])
def test_rdma_devices_outside_rdma_prefix(tmp_path, capsys, resources, annotations, warned):
    docs = pd("q", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV])
    for d in docs:
        c = d["spec"]["template"]["spec"]["containers"][0]
        c["resources"]["limits"] = {"nvidia.com/gpu": "1", **resources}
        c["env"] = [POD_IP]
        if annotations:
            d["spec"]["template"]["metadata"]["annotations"] = {"k8s.v1.cni.cncf.io/networks": annotations}
    _, out = check(tmp_path, capsys, *docs)
    assert ("rdma-device-visibility" in rules(out, "warning")) == warned


def test_ucx_all_without_host_network_warns_and_a_device_list_does_not(tmp_path, capsys):
    docs = pd("q", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV], env=[])
    for d in docs:
        d["spec"]["template"]["spec"]["containers"][0]["env"][1]["value"] = "all"
    _, out = check(tmp_path, capsys, *docs)
    assert "ucx-net-devices-unscoped" in rules(out, "warning")
    _, out = check(tmp_path, capsys, *pd("q", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV]))
    assert "ucx-net-devices-unscoped" not in rules(out)


@pytest.mark.parametrize("command, found", [
    (["sh", "-c", "pip install nixl==1.3.1 && vllm serve m --kv-transfer-config '" + KV + "'"], True),
    (["sh", "-c", "pip install nixl-cu12==1.3.2 && vllm serve m --kv-transfer-config '" + KV + "'"], False)])
def test_known_bad_nixl_from_pip_install(tmp_path, capsys, command, found):
    docs = [workload(f"k-{r}", r, {**container([], image="vllm/vllm-openai:v0.24.0"), "command": command, "args": []})
            for r in ("prefill", "decode")]
    _, out = check(tmp_path, capsys, *docs)
    assert ("nixl-version-known-bad" in rules(out)) == found


def test_model_revisions_differ_in_a_leaderworkerset_pair(tmp_path, capsys):
    def lws(role, rev):
        c = container(["microsoft/Phi-3-mini-4k-instruct", "--revision", rev, "--kv-transfer-config", KV])
        return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                "metadata": {"name": f"phi-{role}", "labels": {"app": "phi", "role": role}},
                "spec": {"leaderWorkerTemplate": {"size": 1, "workerTemplate": {
                    "metadata": {"labels": {"app": "phi", "role": role}}, "spec": {"containers": [c]}}}}}
    code, out = check(tmp_path, capsys, lws("prefill", "aaa"), lws("decode", "bbb"))
    assert code == 1 and "model-revision-mismatch" in rules(out, "error")
    _, out = check(tmp_path, capsys, lws("prefill", "aaa"), lws("decode", "aaa"))
    assert "model-revision-mismatch" not in rules(out)
    # A branch on one side may resolve to the other side's commit: a warning, never a refusal.
    code, out = check(tmp_path, capsys, lws("prefill", "main"), lws("decode", "aaa"))
    assert code == 0 and "model-revision-mismatch" in rules(out, "warning")


@pytest.mark.parametrize("image, p_flags, d_flags, refused", [
    ("vllm/vllm-openai:v0.24.0", ["--disable-hybrid-kv-cache-manager"], [], True),    # 0.22+: HMA on by default
    ("vllm/vllm-openai:v0.24.0", ["--disable-hybrid-kv-cache-manager"], ["--disable-hybrid-kv-cache-manager"], False),
    ("vllm/vllm-openai:v0.20.2", ["--disable-hybrid-kv-cache-manager"], [], False),   # <= 0.21: off on both anyway
    ("vllm/vllm-openai:v0.20.2", ["--no-disable-hybrid-kv-cache-manager"], [], True),
    ("vllm/vllm-openai:v0.17.1", ["--no-disable-hybrid-kv-cache-manager"], [], False),  # not hashed before 0.18
])
def test_dense_model_hma_state_is_hashed_per_version(tmp_path, capsys, image, p_flags, d_flags, refused):
    docs = pd("h", ["--kv-transfer-config", KV, *p_flags], ["--kv-transfer-config", KV, *d_flags], image=image)
    _, out = check(tmp_path, capsys, *docs)
    assert ("hma-flag-mismatch" in rules(out, "error")) == refused


@pytest.mark.parametrize("image, flags, refused", [
    ("vllm/vllm-openai:v0.20.2", ["--no-disable-hybrid-kv-cache-manager"], True),   # HMA on both: equal sizes needed
    ("vllm/vllm-openai:v0.20.2", [], False),                                        # connector turned HMA off
    ("vllm/vllm-openai:v0.24.0", [], True),                                         # HMA stays on from 0.22
    ("vllm/vllm-openai:v0.27.0", [], False),                                        # HMA + hetero block size from 0.27
])
def test_sliding_window_block_sizes_follow_the_hma_state(tmp_path, capsys, image, flags, refused):
    docs = pd("g", ["--block-size", "16", "--kv-transfer-config", KV, *flags],
              ["--block-size", "32", "--kv-transfer-config", KV, *flags], model="google/gemma-3-27b-it", image=image)
    _, out = check(tmp_path, capsys, *docs)
    assert ("block-size-hma" in rules(out, "error")) == refused


def test_kserve_with_explicit_commands_and_a_decode_without_connector(tmp_path, capsys):
    def main_container(args):
        return {"name": "main", "image": "vllm/vllm-openai:v0.24.0", "command": ["vllm", "serve", "Qwen/Qwen3-8B", *args]}
    doc = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService", "metadata": {"name": "q"},
           "spec": {"template": {"containers": [main_container([])]},
                    "prefill": {"template": {"containers": [main_container(["--kv-transfer-config", KV])]}}}}
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and "kv-connector-missing" in rules(out, "error")
    doc["spec"]["template"]["containers"][0]["command"] += ["--kv-transfer-config", KV]
    code, out = check(tmp_path, capsys, doc)
    assert "kv-connector-missing" not in rules(out) and len(out["results"]) == 1


@pytest.mark.parametrize("text, dev", [("0.1.dev1+g51f799c1a", True), ("0.20.2rc1.dev265+gdd6b3a5ef", True),
                                       ("0.20.2.dev3", True), ("0.20.2rc1", False), ("v0.20.2-cu129", False)])
def test_dev_builds_are_recognised_and_have_no_release_version(text, dev):
    from pdd_operator.vllm.versions import dev_build, resolve_version

    assert dev_build(text) == dev
    version, origin = resolve_version(text, "vllm/vllm-openai:v0.24.0")
    assert (version is None and origin == "dev build") if dev else version is not None


def test_a_shared_helm_label_alone_does_not_pair_two_apps(tmp_path, capsys):
    docs = []
    for app, image in (("x", "vllm/vllm-openai:v0.20.2"), ("y", "vllm/vllm-openai:v0.22.0")):
        for role, other in (("prefill", "p"), ("decode", "d")):
            doc = workload(f"{app}{other}", role, container(["m", "--kv-transfer-config", KV], image=image), app=app)
            for labels in (doc["metadata"]["labels"], doc["spec"]["template"]["metadata"]["labels"]):
                labels.pop("app", None)
                labels["app.kubernetes.io/managed-by"] = "Helm"
            docs.append(doc)
    code, out = check(tmp_path, capsys, *docs)
    # nothing ties the four engines into deployments: none is paired (so none is cross-paired), all are reported
    assert code == 3 and not out["results"] and len(out["notChecked"]) == 4
