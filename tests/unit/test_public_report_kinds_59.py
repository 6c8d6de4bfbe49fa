"""Variants of what the fifty-ninth public-report set (tests/unit/data/public_reports_59) taught, with negative
controls: P2pNcclConnector engines that share a host's network namespace bind disjoint ZMQ ports.

Each P2pNcclConnector worker binds a ZMQ ROUTER on ``tcp://get_ip():(kv_port + rank)`` when its connector starts
(``P2pNcclEngine.__init__``, p2p/p2p_nccl_engine.py lines 85 and 109-110 in 0.10.0, 91-123 in 0.11.1;
``port_offset=rank`` from p2p_nccl_connector.py). Two engines of one network namespace whose ranges meet (or one's
range meeting the other's HTTP ``--port``) fail the second bind. ``p2p-nccl-kv-port-conflict`` judged engines of one
pod or container only; two Compose services with ``network_mode: host`` on one host (vllm#21712's pair, one machine)
and two hostNetwork pods bound to one node share the host's ports as much. Where the scheduler decides (hostNetwork
pods not bound to one node, or both asking for the port as a host port) and where each engine has its own namespace
(Compose's default bridge network), nothing is said.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import check, rules, workload

MODEL = "Qwen/Qwen3-8B"


def _kv(role: str, kv_port: int, http_port: int) -> str:
    return json.dumps({"kv_connector": "P2pNcclConnector", "kv_role": role, "kv_buffer_size": "8e9",
                       "kv_port": str(kv_port),
                       "kv_connector_extra_config": {"proxy_ip": "10.0.0.1", "proxy_port": "30001",
                                                     "http_port": str(http_port), "send_type": "PUT_ASYNC"}})


def _args(role: str, port: int, kv_port: int, tp: int = 1) -> list[str]:
    return [MODEL, "--port", str(port), "--tensor-parallel-size", str(tp),
            "--kv-transfer-config", _kv(role, kv_port, port)]


def _compose(p_kv: int, d_kv: int, image: str = "vllm/vllm-openai:v0.10.0", host: bool = True, p_tp: int = 1,
             p_port: int = 20003) -> dict:
    services = {}
    for role, kv_role, port, kv, tp, gpus in (("prefill", "kv_producer", p_port, p_kv, p_tp, ["0", "1"][:p_tp]),
                                              ("decode", "kv_consumer", 20005, d_kv, 1, ["2"])):
        svc = {"image": image, "entrypoint": ["vllm", "serve"], "command": _args(kv_role, port, kv, tp),
               "deploy": {"resources": {"reservations": {"devices": [
                   {"driver": "nvidia", "device_ids": gpus, "capabilities": ["gpu"]}]}}}}
        if host:
            svc["network_mode"] = "host"
        else:
            svc["ports"] = [f"{port}:{port}"]
        services[role] = svc
    return {"name": "p2p", "services": services}


def _host_pods(p_kv: int, d_kv: int, nodes=("gpu-a", "gpu-a"), image="vllm/vllm-openai:v0.11.0",
               host_port: int | None = None) -> list[dict]:
    docs = []
    for (role, kv_role, port, kv), node in zip((("prefill", "kv_producer", 8100, p_kv),
                                                 ("decode", "kv_consumer", 8200, d_kv)), nodes, strict=True):
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"], "args": _args(kv_role, port, kv),
             "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        if host_port is not None:
            c["ports"] = [{"containerPort": host_port, "hostPort": host_port}]
        pod = {"hostNetwork": True, **({"nodeName": node} if node else {})}
        docs.append(workload(f"p2p-{role}", role, c, app="p2p", pod=pod))
    return docs


def _messages(out: dict, rule: str) -> list[str]:
    return [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule]


# --- Compose services on the host network ------------------------------------------------------------------------


def test_compose_host_network_with_the_kv_port_copied_is_refused(tmp_path, capsys):
    """vllm#21712's pair with the consumer's kv_port copied from the producer: both bind 21001 on one host."""
    code, out = check(tmp_path, capsys, _compose(21001, 21001))
    assert code == 1 and "p2p-nccl-kv-port-conflict" in rules(out, "error")
    [message] = _messages(out, "p2p-nccl-kv-port-conflict")
    assert "network_mode: host on one host" in message and "21001" in message


def test_compose_host_network_kv_port_inside_the_other_tp_range_is_refused(tmp_path, capsys):
    """A TP 2 producer binds kv_port and kv_port + 1: a consumer on kv_port + 1 meets its second worker (0.11.0)."""
    code, out = check(tmp_path, capsys, _compose(21001, 21002, image="vllm/vllm-openai:v0.11.0", p_tp=2))
    assert code == 1
    [message] = _messages(out, "p2p-nccl-kv-port-conflict")
    assert "21002" in message


def test_compose_host_network_kv_port_on_the_other_http_port_is_refused(tmp_path, capsys):
    """The consumer's kv_port is the producer's HTTP --port: the ZMQ bind meets the API server's socket."""
    code, out = check(tmp_path, capsys, _compose(21001, 20003))
    assert code == 1 and "p2p-nccl-kv-port-conflict" in rules(out, "error")


def test_compose_host_network_with_apart_ports_passes(tmp_path, capsys):
    """The pair as the maintainer ran it (21001 and 22001): no port meets another."""
    code, out = check(tmp_path, capsys, _compose(21001, 22001))
    assert "p2p-nccl-kv-port-conflict" not in rules(out) and code != 1


def test_compose_bridge_network_never_conflicts(tmp_path, capsys):
    """Without network_mode: host each service has its own network namespace: one kv_port in both is fine."""
    code, out = check(tmp_path, capsys, _compose(21001, 21001, host=False))
    assert "p2p-nccl-kv-port-conflict" not in rules(out) and code != 1


# --- Kubernetes hostNetwork pods ------------------------------------------------------------------------------


def test_host_network_pods_bound_to_one_node_are_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_host_pods(21001, 21001))
    assert code == 1
    [message] = _messages(out, "p2p-nccl-kv-port-conflict")
    assert "hostNetwork pods bound to one node" in message


@pytest.mark.parametrize("nodes", [("gpu-a", "gpu-b"), (None, None)], ids=["two-nodes", "scheduler-decides"])
def test_host_network_pods_not_bound_to_one_node_are_not_judged(tmp_path, capsys, nodes):
    code, out = check(tmp_path, capsys, *_host_pods(21001, 21001, nodes=nodes))
    assert "p2p-nccl-kv-port-conflict" not in rules(out) and code != 1


def test_a_host_port_both_pods_ask_for_keeps_them_apart(tmp_path, capsys):
    """Both ask for 21001 as a host port: the scheduler never places them on one node, so they never clash."""
    code, out = check(tmp_path, capsys, *_host_pods(21001, 21001, host_port=21001))
    assert "p2p-nccl-kv-port-conflict" not in rules(out)


def test_a_fork_image_on_the_host_network_is_not_judged(tmp_path, capsys):
    """A custom build may carry a P2pNcclConnector of its own: not judged, as for pods."""
    code, out = check(tmp_path, capsys, _compose(21001, 21001, image="registry.example.com/acme/vllm:0.10.0"))
    assert "p2p-nccl-kv-port-conflict" not in rules(out)
