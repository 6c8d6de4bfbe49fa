"""UCX told to leave the RDMA device a pod holds unused (issue 9): ``ucx-tls-no-rdma-transport`` and
``ucx-net-devices-no-rdma`` (compat/rules/ucx_tls.py), warnings.

A pod handed an InfiniBand/RoCE device (``rdma/*``, ``nvidia.com/hostdev``, an SR-IOV VF, a DRA NIC claim, a
``hostPath`` of ``/dev/infiniband``) whose engine sets ``UCX_TLS`` to a list without rc/ud/dc/ib
(``cuda_copy,cuda_ipc,tcp``: GPU transports but no RDMA one) or ``UCX_NET_DEVICES`` to network interfaces only
(``eth0``, ``lo``) moves its KV across nodes over TCP (UCX docs/source/faq.md): slow, not a failure of vLLM's code, so
a warning naming the variable and the fix, never an error. Variants: Deployment pairs, a PDDeployment
(spec.network), a DynamoGraphDeployment; controls that must stay silent.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat import evaluate
from pdd_operator.compat.rules.ucx_tls import ethernet_only_devices, no_rdma_transport
from tests.helpers import make_spec
from tests.unit.test_leftovers_32 import RUNTIME
from tests.unit.test_turn2_variants import check, rules

TLS = "ucx-tls-no-rdma-transport"
DEVICES = "ucx-net-devices-no-rdma"
POD_IP = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def _deployment(role: str, env: dict[str, str], resources: dict[str, object], infiniband: bool) -> dict:
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.20.0", "command": ["vllm", "serve"],
                 "args": ["Qwen/Qwen3-8B", "--kv-transfer-config", KV],
                 "env": [POD_IP, *({"name": k, "value": v} for k, v in env.items())],
                 "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
                 "resources": {"limits": {"nvidia.com/gpu": 1, **resources}}}
    pod: dict = {"containers": [container]}
    if infiniband:
        container["volumeMounts"] = [{"name": "ib", "mountPath": "/dev/infiniband"}]
        pod["volumes"] = [{"name": "ib", "hostPath": {"path": "/dev/infiniband"}}]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"qwen-{role}"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": role}},
                     "template": {"metadata": {"labels": {"app": role}}, "spec": pod}}}


def _pair(env: dict[str, str], resources: dict[str, object] | None = None, infiniband: bool = False,
          decode_only: bool = False) -> list[dict]:
    resources = {"rdma/roce_gdr": 1} if resources is None else resources
    return [_deployment("prefill", {} if decode_only else env, resources, infiniband),
            _deployment("decode", env, resources, infiniband)]


def _run(tmp_path, capsys, docs: list[dict] | dict) -> tuple[int, dict]:
    return check(tmp_path, capsys, *docs) if isinstance(docs, list) else check(tmp_path, capsys, docs)


@pytest.mark.parametrize("tls", ["cuda_copy,cuda_ipc,tcp", "sm,cuda_ipc,cuda_copy,tcp", "cuda,tcp", "^ib",
                                 "^rc,ud,dc", "cuda_copy,cuda_ipc,tcp:aux"])
@pytest.mark.parametrize(("resources", "infiniband"), [
    ({"rdma/roce_gdr": 2}, False), ({"nvidia.com/hostdev": 1}, False), ({"openshift.io/mlnx_sriov_rdma": 1}, False),
    ({}, True),
])
def test_no_rdma_transport_on_an_rdma_pod_warns(tmp_path, capsys, tls, resources, infiniband):
    code, out = _run(tmp_path, capsys, _pair({"UCX_TLS": tls}, resources, infiniband))
    assert code == 0 and TLS in rules(out, "warning") and TLS not in rules(out, "error"), out
    said = [f for r in out["results"] for f in r["findings"] if f["rule"] == TLS]
    assert {f["message"].split(":", 1)[0] for f in said} == {"prefill", "decode"}, out
    assert all(f"UCX_TLS={tls}" in f["message"] and "UCX_TLS on the" in f["fix"] and "remove UCX_TLS" in f["fix"]
               for f in said), out


def test_only_the_role_that_sets_it_is_named(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, _pair({"UCX_TLS": "cuda_copy,cuda_ipc,tcp"}, decode_only=True))
    said = [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == TLS]
    assert code == 0 and len(said) == 1 and said[0].startswith("decode: the pod requests an RDMA device"), out


@pytest.mark.parametrize(("env", "resources"), [
    ({"UCX_TLS": "rc,cuda_copy,cuda_ipc"}, None), ({"UCX_TLS": "all"}, None), ({"UCX_TLS": "^cuda_ipc"}, None),
    ({"UCX_TLS": "^rc"}, None), ({"UCX_TLS": "rc_x,cuda"}, None), ({"UCX_TLS": "dc_mlx5,cuda_copy"}, None), ({}, None),
    ({"UCX_TLS": "cuda_copy,cuda_ipc,tcp"}, {}),                          # no RDMA device: TCP is all there is
    ({"UCX_TLS": "cuda_copy,cuda_ipc,tcp"}, {"vpc.amazonaws.com/efa": 4}),  # EFA: the EFA rules judge it
    ({"UCX_TLS": "cuda_copy,mystery_tl"}, None),                          # a transport not known here: not judged
])
def test_controls_say_nothing(tmp_path, capsys, env, resources):
    code, out = _run(tmp_path, capsys, _pair(env, resources))
    assert TLS not in rules(out) and DEVICES not in rules(out), out


def test_host_only_transports_stay_the_cuda_rule(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, _pair({"UCX_TLS": "tcp,sm"}))
    assert "ucx-tls-no-cuda-transport" in rules(out, "warning") and TLS not in rules(out), out


@pytest.mark.parametrize("devices", ["eth0", "lo", "eth0,lo", "net1"])
def test_ethernet_only_devices_on_an_rdma_pod_warn(tmp_path, capsys, devices):
    code, out = _run(tmp_path, capsys, _pair({"UCX_NET_DEVICES": devices}))
    assert code == 0 and DEVICES in rules(out, "warning") and not rules(out, "error"), out
    said = next(f for r in out["results"] for f in r["findings"] if f["rule"] == DEVICES)
    assert f"UCX_NET_DEVICES={devices}" in said["message"] and "UCX_NET_DEVICES on the" in said["fix"], out


@pytest.mark.parametrize(("env", "resources"), [
    ({"UCX_NET_DEVICES": "mlx5_0:1"}, None), ({"UCX_NET_DEVICES": "eth0,mlx5_0:1"}, None),
    ({"UCX_NET_DEVICES": "eth0"}, {}),
    ({"UCX_NET_DEVICES": "eth0", "VLLM_NIC_SELECTION_VARS": "UCX_NET_DEVICES:1",
      "VLLM_GPU_NIC_PCIE_MAPPING": "0000:18:00.0=0000:17:00.0"}, None),  # vLLM 0.23+ puts the GPU's NIC in front
])
def test_device_controls_say_nothing(tmp_path, capsys, env, resources):
    code, out = _run(tmp_path, capsys, _pair(env, resources))
    assert DEVICES not in rules(out), out


def test_pddeployment_spec_network():
    def found(ucx: dict) -> dict[str, str]:
        spec = make_spec(network={"rdma": {"resourceName": "rdma/rdma_shared_device_a", "count": 1}, "ucx": ucx})
        return {f.rule: f.fix for f in evaluate(spec).findings if f.severity == "warning"}
    bad = found({"transports": "cuda_copy,cuda_ipc,tcp", "netDevices": "eth0"})
    assert TLS in bad and "spec.network.ucx.transports" in bad[TLS], bad
    assert DEVICES in bad and "spec.network.ucx.netDevices" in bad[DEVICES], bad
    assert not {TLS, DEVICES} & set(found({"transports": "rc,cuda_copy,cuda_ipc", "netDevices": "mlx5_0:1"}))


def _graph(env: dict[str, str]) -> dict:
    def component(name: str) -> dict:
        return {"name": name, "type": name, "podTemplate": {"spec": {"containers": [
            {"name": "main", "image": f"{RUNTIME}1.1.0", "command": ["python3"],
             "env": [POD_IP, *({"name": k, "value": v} for k, v in env.items())],
             "args": ["-m", "dynamo.vllm", "--model", "Qwen/Qwen3-8B", "--disaggregation-mode", name,
                      "--kv-transfer-config", KV],
             "resources": {"limits": {"nvidia.com/gpu": "1", "rdma/ib": "1"}}}]}}}
    return {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"components": [component("prefill"), component("decode")]}}


def test_dynamo_graph(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, _graph({"UCX_TLS": "cuda_copy,cuda_ipc,tcp", "UCX_NET_DEVICES": "eth0"}))
    assert {TLS, DEVICES} <= rules(out, "warning") and not ({TLS, DEVICES} & rules(out, "error")), out
    code, out = _run(tmp_path, capsys, _graph({"UCX_TLS": "rc,cuda_copy,cuda_ipc"}))
    assert not {TLS, DEVICES} & rules(out), out


@pytest.mark.parametrize(("value", "expected"), [
    ("cuda_copy,cuda_ipc,tcp", ["cuda_copy", "cuda_ipc", "tcp"]), ("^ib", ["all but ib"]), ("rc,cuda", None),
    ("^rc", None), ("^rc_x,rc_v,ud,dc", ["all but rc_x,rc_v,ud,dc"]), ("all", None), (None, None), ("", None),
    ("tcp,<unknown:TLS>", None),
])
def test_no_rdma_transport(value, expected):
    assert no_rdma_transport(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("eth0", ["eth0"]), ("eth0,lo", ["eth0", "lo"]),
    ("eth0, lo", None),  # fixT: UCX does not trim (strtok_r), so " lo" names no device: ucx-name-unrecognised
    ("mlx5_0:1", None), ("all", None), (None, None),
])
def test_ethernet_only_devices(value, expected):
    assert ethernet_only_devices(value) == expected
