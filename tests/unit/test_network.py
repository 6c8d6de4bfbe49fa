"""Network and placement rendering for a few cluster flavours, and the network rules."""

from __future__ import annotations

import json

from pdd_operator.compat import evaluate
from pdd_operator.render.workloads import Owner, deployment, service
from tests.helpers import make_spec

OWNER = Owner(name="demo", namespace="serving", uid="u", generation=1)


def pod(spec, role="prefill"):
    return deployment(OWNER, role, spec)["spec"]["template"]


def env(template) -> dict:
    return {e["name"]: e for e in template["spec"]["containers"][0]["env"]}


def rules(spec, severity=None):
    return {f.rule for f in evaluate(spec).findings if severity is None or f.severity == severity}


def test_extended_resources_with_multus_and_ucx():
    spec = make_spec(network={"rdma": {"resourceName": "rdma/rdma_shared_device_a", "count": 2},
                              "networks": ["rdma-net-a", "infra/rdma-net-b"],
                              "ucx": {"transports": "rc,cuda_copy,cuda_ipc", "netDevices": "mlx5_0:1,mlx5_1:1",
                                      "gidIndex": 3}})
    t = pod(spec)
    assert t["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "rdma-net-a,infra/rdma-net-b"
    limits = t["spec"]["containers"][0]["resources"]["limits"]
    assert limits["rdma/rdma_shared_device_a"] == 2 and limits["nvidia.com/gpu"] == 1
    e = env(t)
    assert (e["UCX_TLS"]["value"], e["UCX_NET_DEVICES"]["value"], e["UCX_IB_GID_INDEX"]["value"]) == (
        "rc,cuda_copy,cuda_ipc", "mlx5_0:1,mlx5_1:1", "3")
    assert evaluate(spec).findings == []


def test_dra_claims_replace_extended_resources():
    spec = make_spec(network={"rdma": None, "dra": {"gpuClaimTemplate": "h200-x1", "nicClaimTemplate": "cx7"}})
    t = pod(spec)
    c = t["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in json.dumps(c["resources"].get("limits", {}))
    assert c["resources"]["claims"] == [{"name": "gpus"}, {"name": "nics"}]
    assert t["spec"]["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "h200-x1"},
                                           {"name": "nics", "resourceClaimTemplateName": "cx7"}]
    assert "rdma-missing" not in rules(spec)


def test_efa_needs_libfabric():
    efa = {"rdma": {"resourceName": "vpc.amazonaws.com/efa", "count": 32}}
    assert "nixl-backend-fabric-mismatch" in rules(make_spec(network=efa), "error")
    fixed = make_spec(network=efa, kvTransfer={"backends": ["LIBFABRIC"]})
    assert "nixl-backend-fabric-mismatch" not in rules(fixed)
    kv = json.loads(pod(fixed)["spec"]["containers"][0]["args"][-1])
    assert kv["kv_connector_extra_config"]["backends"] == ["LIBFABRIC"]


def test_host_network_uses_node_ip_distinct_ports_and_one_pod_per_node():
    spec = make_spec(network={"hostNetwork": True, "ucx": {"netDevices": "mlx5_0:1"}})
    p, d = pod(spec, "prefill"), pod(spec, "decode")
    assert p["spec"]["hostNetwork"] is True and p["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert env(p)["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    assert (env(p)["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"], env(d)["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"]) == ("5600", "5601")
    dargs = d["spec"]["containers"][0]["args"]
    assert dargs[dargs.index("--port") + 1] == "8001"
    assert {x["port"] for x in service(OWNER, "decode", spec)["spec"]["ports"]} == {8001, 5601}
    anti = p["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert anti["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == "prefill"
    assert evaluate(spec).compatible and "ucx-net-devices-unscoped" not in rules(spec)
    assert "ucx-net-devices-unscoped" in rules(make_spec(network={"hostNetwork": True}), "warning")


def test_placement_keeps_the_pair_in_one_domain_and_spreads_replicas():
    spec = make_spec(placement={"topologyKey": "network.topology.kubernetes.io/block", "gpuProduct": "NVIDIA-H200"},
                     prefill={"replicas": 3})
    t = pod(spec)["spec"]
    term = t["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["topologyKey"] == "network.topology.kubernetes.io/block"
    assert term["labelSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "demo"
    assert t["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-H200"
    assert t["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    preferred = make_spec(placement={"topologyKey": "rack", "topologyPolicy": "Preferred"})
    assert "preferredDuringSchedulingIgnoredDuringExecution" in pod(preferred)["spec"]["affinity"]["podAffinity"]


def test_scaling_a_role_leaves_its_pod_template_as_it_is():
    # A template that changed with the replica count would replace the running engines on a scale.
    one, two = (pod(make_spec(decode={"replicas": n}), "decode") for n in (1, 2))
    assert one == two
    assert one["spec"]["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "ScheduleAnyway"


def test_side_channel_port_may_not_collide_with_http_or_kv_events():
    assert "side-channel-listener-conflict" in rules(make_spec(port=5600), "error")
    events = make_spec(kvTransfer={"sideChannelPort": 5557},
                       decode={"extraArgs": ["--kv-events-config", '{"enable_kv_cache_events":true,"publisher":"zmq"}']})
    assert "side-channel-listener-conflict" in rules(events, "error")


def test_flavour_examples_render_what_their_clusters_need():
    import yaml

    from pdd_operator.api.spec import PDDeploymentSpec
    from tests.helpers import ROOT

    flavours = {p.stem: yaml.safe_load(p.read_text()) for p in (ROOT / "examples" / "flavours").glob("*.yaml")}
    assert set(flavours) == {"multus-rdma", "dra", "efa", "host-network"}
    specs = {k: PDDeploymentSpec.model_validate(v["spec"]) for k, v in flavours.items()}
    for name, spec in specs.items():
        assert evaluate(spec).findings == [], name
    roce = pod(specs["multus-rdma"])
    assert roce["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "roce-net-a"
    assert roce["spec"]["affinity"]["podAffinity"]
    assert "resourceClaims" in pod(specs["dra"])["spec"]
    efa = pod(specs["efa"])["spec"]["containers"][0]
    assert efa["resources"]["limits"]["vpc.amazonaws.com/efa"] == 32 and "LIBFABRIC" in efa["args"][-1]
    assert pod(specs["host-network"])["spec"]["hostNetwork"] is True
