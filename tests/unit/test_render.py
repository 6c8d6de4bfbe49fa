"""Spec -> child objects: arguments, environment, resources, security, probes, labels."""

from __future__ import annotations

import json

import pytest

from pdd_operator.api.constants import LABEL_COMPAT_HASH, LABEL_ROLE
from pdd_operator.render.engine import compat_hash, engine_env, vllm_args
from pdd_operator.render.workloads import Owner, deployment, render_children, service
from tests.helpers import hybrid, load_example, make_spec, spec_of

OWNER = Owner(name="demo", namespace="serving", uid="1234", generation=3)


def _flag(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def _container(dep: dict) -> dict:
    return dep["spec"]["template"]["spec"]["containers"][0]


def _env(env: list[dict]) -> dict[str, dict]:
    return {e["name"]: e for e in env}


# Table over the examples: what each role's pod must carry.
CASES = [
    ("nemotron-nano-pd", "prefill", {"tp": "2", "block": "128", "gpus": 2, "hybrid": True, "kv_role": "kv_producer"}),
    ("nemotron-nano-pd", "decode", {"tp": "2", "block": "128", "gpus": 2, "hybrid": True, "kv_role": "kv_consumer"}),
    ("llama-dense-pd", "prefill", {"tp": "1", "block": "16", "gpus": 1, "hybrid": False, "kv_role": "kv_producer"}),
    ("llama-dense-pd", "decode", {"tp": "2", "block": "16", "gpus": 2, "hybrid": False, "kv_role": "kv_consumer"}),
]


@pytest.mark.parametrize("example, role, want", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_example_pods(example, role, want):
    doc = load_example(example)
    spec = spec_of(doc)
    dep = deployment(OWNER, role, spec)
    c = _container(dep)
    args = c["args"]
    assert c["command"] == ["vllm", "serve"] and args[0] == doc["spec"]["model"]["name"]
    assert _flag(args, "--tensor-parallel-size") == want["tp"]
    assert _flag(args, "--block-size") == want["block"]
    kv = json.loads(_flag(args, "--kv-transfer-config"))
    assert kv["kv_connector"] == "NixlConnector" and kv["kv_role"] == want["kv_role"]
    assert kv["kv_buffer_device"] == "cuda" and kv["kv_connector_extra_config"]["backends"] == ["UCX"]
    assert ("--no-disable-hybrid-kv-cache-manager" in args) is want["hybrid"]
    env = _env(c["env"])
    assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == {
        "name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}
    }
    assert env["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"] == "5600"
    assert ("VLLM_SSM_CONV_STATE_LAYOUT" in env) is want["hybrid"]
    res = c["resources"]
    assert res["limits"]["nvidia.com/gpu"] == want["gpus"] == res["requests"]["nvidia.com/gpu"]
    assert res["limits"]["rdma/ib"] == 1
    assert dep["spec"]["replicas"] == doc["spec"][role]["replicas"]


def test_nemotron_example_carries_the_seed_settings():
    args = vllm_args(spec_of(load_example("nemotron-nano-pd")), "decode")
    assert _flag(args, "--gpu-memory-utilization") == "0.85"
    assert _flag(args, "--max-model-len") == "8192"
    assert "--trust-remote-code" in args
    env = _env(engine_env(spec_of(load_example("nemotron-nano-pd")), "decode"))
    assert env["VLLM_SSM_CONV_STATE_LAYOUT"]["value"] == "DS"


def test_gpus_per_pod_are_tp_times_pp():
    spec = make_spec(kvTransfer={"connector": "NixlPushConnector"}, engine={"image": "vllm/vllm-openai:v0.31.0"},
                     prefill={"tensorParallelSize": 4, "pipelineParallelSize": 2})
    c = _container(deployment(OWNER, "prefill", spec))
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert _flag(c["args"], "--pipeline-parallel-size") == "2"


def test_cpu_engine_requests_no_gpu():
    spec = make_spec(engine={"gpuResourceName": ""}, kvTransfer={"bufferDevice": "cpu"})
    c = _container(deployment(OWNER, "decode", spec))
    assert "nvidia.com/gpu" not in json.dumps(c["resources"])
    assert json.loads(_flag(c["args"], "--kv-transfer-config"))["kv_buffer_device"] == "cpu"


def test_pod_security_shm_and_probes():
    dep = deployment(OWNER, "prefill", make_spec())
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    sc = c["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["add"] == ["IPC_LOCK"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in pod["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/health", "port": "http"}


def test_services_are_headless_with_http_and_nixl_ports():
    svc = service(OWNER, "decode", make_spec(port=8080, kvTransfer={"sideChannelPort": 5700}))
    assert svc["spec"]["clusterIP"] == "None"
    assert {(p["name"], p["port"]) for p in svc["spec"]["ports"]} == {("http", 8080), ("nixl", 5700)}
    assert svc["spec"]["selector"]["app.kubernetes.io/component"] == "decode"


def test_children_are_owned_labelled_and_deterministic():
    spec = make_spec()
    children = render_children(OWNER, spec)
    assert [(c["kind"], c["metadata"]["name"]) for c in children] == [
        ("Service", "demo-prefill"), ("Deployment", "demo-prefill"),
        ("Service", "demo-decode"), ("Deployment", "demo-decode"),
        ("ServiceAccount", "demo-router"), ("Role", "demo-router"), ("RoleBinding", "demo-router"),
        ("Service", "demo-router"), ("Deployment", "demo-router"),
    ]
    for child in children:
        meta = child["metadata"]
        assert meta["namespace"] == "serving"
        assert meta["ownerReferences"] == [{
            "apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "name": "demo", "uid": "1234",
            "controller": True, "blockOwnerDeletion": True,
        }]
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "pdd-operator"
        assert meta["labels"]["app.kubernetes.io/instance"] == "demo"
        assert meta["labels"][LABEL_ROLE] in ("prefill", "decode", "router")
    assert children == render_children(OWNER, make_spec())
    assert "ownerReferences" not in render_children(Owner("demo"), spec)[0]["metadata"]


def test_compat_hash_follows_must_match_settings_only():
    base = compat_hash(make_spec())
    assert compat_hash(make_spec(decode={"replicas": 5, "tensorParallelSize": 2})) == base
    assert compat_hash(make_spec(kvCache={"dtype": "fp8"})) != base
    assert compat_hash(make_spec(engine={"image": "vllm/vllm-openai:v0.20.1"})) != base
    p = deployment(OWNER, "prefill", make_spec())["spec"]["template"]["metadata"]["labels"][LABEL_COMPAT_HASH]
    d = deployment(OWNER, "decode", make_spec())["spec"]["template"]["metadata"]["labels"][LABEL_COMPAT_HASH]
    assert p == d == base


def test_user_env_wins_and_shared_settings_reach_both_roles():
    spec = make_spec(
        engine={"env": [{"name": "UCX_TLS", "value": "rc,cuda_copy"}]},
        decode={"env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": "5700"}], "extraArgs": ["--enable-prefix-caching"]},
        kvCache={"dtype": "fp8", "layout": "LBHNC"},
        model={"revision": "abc123", "servedModelName": "llama"},
        speculative={"method": "eagle3", "draftModel": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"},
        prefill={"numSpeculativeTokens": 3},
    )
    p_env, d_env = _env(engine_env(spec, "prefill")), _env(engine_env(spec, "decode"))
    assert p_env["UCX_TLS"]["value"] == d_env["UCX_TLS"]["value"] == "rc,cuda_copy"
    assert p_env["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"] == "5600"
    assert d_env["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"] == "5700"
    assert p_env["VLLM_KV_CACHE_LAYOUT"]["value"] == "HND"  # the 0.20 name of LBHNC
    p_args, d_args = vllm_args(spec, "prefill"), vllm_args(spec, "decode")
    for args in (p_args, d_args):
        assert _flag(args, "--kv-cache-dtype") == "fp8" and _flag(args, "--revision") == "abc123"
        assert _flag(args, "--served-model-name") == "llama"
    assert d_args[-1] == "--enable-prefix-caching" and "--enable-prefix-caching" not in p_args
    assert json.loads(_flag(p_args, "--speculative-config")) == {
        "method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3,
    }


def test_hybrid_conv_layout_and_hf_token_secret_reference():
    spec = hybrid(model={"hfTokenSecretRef": {"name": "hf", "key": "token"}})
    env = _env(engine_env(spec, "prefill"))
    assert env["HF_TOKEN"] == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    assert "value" not in env["HF_TOKEN"]


def test_extra_config_is_merged_into_the_connector_config():
    spec = make_spec(kvTransfer={"extraConfig": {"num_threads": 8}, "backends": ["LIBFABRIC"]})
    kv = json.loads(_flag(vllm_args(spec, "decode"), "--kv-transfer-config"))
    assert kv["kv_connector_extra_config"] == {"backends": ["LIBFABRIC"], "num_threads": 8}


def test_push_prefill_pods_carry_what_the_router_tells_decode():
    spec = make_spec(kvTransfer={"connector": "NixlPushConnector"}, engine={"image": "vllm/vllm-openai:v0.28.0"},
                     prefill={"tensorParallelSize": 2})
    template = deployment(OWNER, "prefill", spec)["spec"]["template"]
    c = template["spec"]["containers"][0]
    kv = json.loads(_flag(c["args"], "--kv-transfer-config"))
    # no fixed engine id: each prefill process draws its own (a restarted one is a new engine to
    # decode); the router learns it from prefill's answers
    assert "engine_id" not in kv and "POD_NAME" not in _env(c["env"])
    ann = template["metadata"]["annotations"]
    assert "pdd-operator.dev/engine-id" not in ann
    assert ann["pdd-operator.dev/tensor-parallel-size"] == "2"
    assert ann["pdd-operator.dev/side-channel-port"] == "5600"
    decode = deployment(OWNER, "decode", spec)["spec"]["template"]
    assert "engine_id" not in json.loads(_flag(decode["spec"]["containers"][0]["args"], "--kv-transfer-config"))
    pull = deployment(OWNER, "prefill", make_spec())["spec"]["template"]
    assert "engine_id" not in json.loads(_flag(pull["spec"]["containers"][0]["args"], "--kv-transfer-config"))


def test_gpu_and_rdma_taints_are_tolerated_by_default_and_only_where_requested():
    def tolerations(spec, role="prefill"):
        return deployment(OWNER, role, spec)["spec"]["template"]["spec"].get("tolerations", [])

    assert tolerations(make_spec()) == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "rdma/ib", "operator": "Exists", "effect": "NoSchedule"},
    ]
    # a toleration of the user's that already covers the GPU key is kept and not doubled
    own = {"key": "nvidia.com/gpu", "operator": "Exists"}
    assert tolerations(make_spec(prefill={"tolerations": [own]})) == [
        own, {"key": "rdma/ib", "operator": "Exists", "effect": "NoSchedule"}]
    # one with a value only tolerates that value: the default is still added
    equal = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "h200", "effect": "NoSchedule"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations(
        make_spec(decode={"tolerations": [equal]}), "decode")
    # CPU engines request no extended resource: nothing to tolerate
    assert tolerations(make_spec(engine={"gpuResourceName": ""}, network={"rdma": None})) == []


def test_engine_pods_get_no_kubernetes_api_token_and_the_router_does():
    children = {(c["kind"], c["metadata"]["name"]): c for c in render_children(OWNER, make_spec())}
    for role in ("prefill", "decode"):
        assert children[("Deployment", f"demo-{role}")]["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    router = children[("Deployment", "demo-router")]["spec"]["template"]["spec"]
    assert router.get("automountServiceAccountToken", True) is True  # its discovery lists pods


def test_router_placement_comes_from_spec_router():
    def router_pod(**router):
        children = {(c["kind"], c["metadata"]["name"]): c for c in render_children(OWNER, make_spec(router=router))}
        return children[("Deployment", "demo-router")]["spec"]["template"]["spec"]

    assert "nodeSelector" not in router_pod() and "tolerations" not in router_pod()
    pod = router_pod(nodeSelector={"node-role.example/cpu": "true"},
                     tolerations=[{"key": "dedicated", "operator": "Equal", "value": "cpu", "effect": "NoSchedule"}])
    assert pod["nodeSelector"] == {"node-role.example/cpu": "true"}
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "cpu", "effect": "NoSchedule"}]


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.20.2", "vllm/vllm-openai:v0.22.0", "vllm/vllm-openai:v0.26.0",
                                   "vllm/vllm-openai:v0.27.0", "vllm/vllm-openai:v0.33.0", "vllm/vllm-openai:latest"])
@pytest.mark.parametrize("tps", [(2, 2), (1, 2)])
def test_hybrid_decode_prefix_caching_is_off_where_nixl_cannot_keep_it(image, tps):
    """The operator's own hybrid pairs pass the prefix-caching rules on every release: decode runs without prefix
    caching before 0.27 (and on an unknown release) or with heterogeneous TP, and keeps it otherwise."""
    from pdd_operator.compat import evaluate

    spec = hybrid(engine={"image": image}, prefill={"tensorParallelSize": tps[0]},
                  decode={"tensorParallelSize": tps[1]}, model={"numKvHeads": 2})
    off = "--no-enable-prefix-caching" in vllm_args(spec, "decode")
    assert off == (tps[0] != tps[1] or image.endswith((":v0.20.2", ":v0.22.0", ":v0.26.0", ":latest")))
    assert "--no-enable-prefix-caching" not in vllm_args(spec, "prefill")
    found = {f.rule for f in evaluate(spec).findings}
    assert not found & {"hybrid-ssm-prefix-caching", "hybrid-prefix-caching"}, found


@pytest.mark.parametrize(("image", "want"), [
    ("vllm/vllm-openai:v0.12.0", None),  # no such field before 0.13.0
    ("vllm/vllm-openai:v0.13.0", "fail"),  # vLLM's default is "recompute" in 0.13-0.16: decode would recompute unseen
    ("vllm/vllm-openai:v0.16.0", "fail"),
    ("vllm/vllm-openai:v0.17.0", None),  # "fail" is vLLM's own default from 0.17.0: nothing rendered
    ("vllm/vllm-openai:v0.26.0", None),
    ("vllm/vllm-openai:v0.32.0", None),
    ("vllm/vllm-openai:latest", None),  # unknown release: the field may not exist
])
def test_decode_fails_a_request_whose_kv_load_failed_so_the_router_reruns_it_through_prefill(image, want):
    spec = make_spec(engine={"image": image})
    decode = json.loads(_flag(vllm_args(spec, "decode"), "--kv-transfer-config"))
    prefill = json.loads(_flag(vllm_args(spec, "prefill"), "--kv-transfer-config"))
    assert decode.get("kv_load_failure_policy") == want
    assert "kv_load_failure_policy" not in prefill  # prefill loads nothing


def test_compat_hash_survives_an_operator_upgrade_that_adds_a_must_match_entry():
    # Hashes an operator of bbeb7efa (before mamba_state_dtypes existed) rendered: an upgrade must not change the
    # pod template label of a spec that does not use a newer entry, or every running pair would roll.
    assert compat_hash(make_spec()) == "d0f2e5465b"
    assert compat_hash(make_spec(kvCache={"dtype": "fp8"})) == "cca1b69be2"
    # A newer entry enters the hash where the spec sets it.
    assert compat_hash(make_spec(prefill={"extraArgs": ["--mamba-ssm-cache-dtype", "float32"]})) != "d0f2e5465b"


def test_entries_hashed_when_unset_are_must_match_entries():
    from pdd_operator.vllm.must_match import HASHED_WHEN_UNSET, MUST_MATCH
    assert HASHED_WHEN_UNSET < {e.name for e in MUST_MATCH}
