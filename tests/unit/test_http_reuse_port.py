"""Port rules against the socket options vLLM sets (issue 9 item 1: no false refusals).

vLLM's HTTP socket sets SO_REUSEPORT on every launch through 0.24.x and, from 0.25.0, only when ``vllm serve``
starts more than one API server (:mod:`pdd_operator.vllm.http_socket`); Linux lets two sockets listen on one port only
when both set it. The NIXL side channel, the KV events publisher and P2pNccl's kv_port are ZeroMQ listeners, which
never set it. So HTTP against HTTP in one network namespace fails only where one socket lacks SO_REUSEPORT, and
everything against a ZeroMQ port fails as before.
"""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.cli import main
from pdd_operator.vllm.http_socket import api_server_count, http_reuse_port

KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
NCCL = '{"kv_connector":"P2pNcclConnector","kv_role":"%s","kv_port":"%d","kv_connector_extra_config":{}}'


def _check(tmp_path, capsys, docs) -> tuple[int, list[dict]]:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    return code, [f for r in out["results"] for f in r["findings"]]


def _found(findings, rule):
    return [f for f in findings if f["rule"] == rule]


def _engine(name, version, kv, port, side, extra=()):
    args = ["serve", "Qwen/Qwen3-8B", "--port", str(port), "--kv-transfer-config", kv, *extra]
    return {"name": name, "image": f"vllm/vllm-openai:v{version}", "command": ["vllm"], "args": args,
            "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(side)},
                    {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "localhost"}],
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}


def _pod(*containers):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pd", "namespace": "ns"},
            "spec": {"containers": list(containers)}}


def _host_pod(name, role, c, node="gpu-node-1"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": "pd", "llm-d.ai/role": role}},
            "spec": {"hostNetwork": True, "nodeName": node, "containers": [c]}}


# --- the table --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version, servers, expected", [
    ((0, 9, 0), 1, True), ((0, 20, 2), 1, True), ((0, 24, 0), 1, True),
    ((0, 25, 0), 1, False), ((0, 34, 0), 1, False), ((0, 25, 0), 2, True), ((0, 34, 0), 4, True),
    (None, 1, None), (None, 2, True), ((0, 28, 0), None, None)])
def test_http_reuse_port_per_release(version, servers, expected):
    assert http_reuse_port(version, servers) is expected


@pytest.mark.parametrize("serve, flags, dp, dp_local, env, expected", [
    (False, {}, 4, 4, {}, 1),                                              # python -m ...api_server
    (True, {}, 1, 1, {}, 1),
    (True, {}, 4, 4, {}, 4),                                               # internal LB: DP size
    (True, {"--api-server-count": "2"}, 4, 4, {}, 2),
    (True, {"--data-parallel-rank": "0"}, 4, 1, {}, 1),                    # external LB
    (True, {"--data-parallel-start-rank": "2"}, 4, 2, {}, 2),              # hybrid LB: local DP size
    (True, {}, 4, 4, {"VLLM_RUST_FRONTEND_PATH": "/x"}, 1),
    (True, {"--api-server-count": "<unknown:N>"}, 1, 1, {}, None)])
def test_api_server_count(serve, flags, dp, dp_local, env, expected):
    assert api_server_count(serve, flags, dp, dp_local, env) == expected


# --- HTTP against HTTP across roles ---------------------------------------------------------------------------


@pytest.mark.parametrize("version, severity", [("0.11.0", "warning"), ("0.20.2", "warning"), ("0.24.0", "warning"),
                                               ("0.25.0", "error"), ("0.28.0", "error"), ("0.34.0", "error")])
def test_prefill_and_decode_on_one_http_port_in_one_pod(tmp_path, capsys, version, severity):
    docs = [_pod(_engine("prefill", version, KV_P, 8000, 5600), _engine("decode", version, KV_D, 8000, 5700))]
    code, findings = _check(tmp_path, capsys, docs)
    found = _found(findings, "listener-port-conflict")
    assert [f["severity"] for f in found] == [severity], findings
    if severity == "warning":
        assert "SO_REUSEPORT" in found[0]["message"] and "prefill request reaches the decode" in found[0]["message"]
    else:
        assert "Address already in use" in found[0]["message"] and "one API server" in found[0]["message"]


@pytest.mark.parametrize("servers, severity", [("1", "error"), ("2", "warning")])
def test_more_than_one_api_server_sets_so_reuseport_from_0_25(tmp_path, capsys, servers, severity):
    extra = ("--api-server-count", servers)
    docs = [_pod(_engine("prefill", "0.28.0", KV_P, 8000, 5600, extra),
                 _engine("decode", "0.28.0", KV_D, 8000, 5700, extra))]
    found = _found(_check(tmp_path, capsys, docs)[1], "listener-port-conflict")
    assert [f["severity"] for f in found] == [severity]


@pytest.mark.parametrize("version, severity", [("0.20.2", "warning"), ("0.26.0", "error")])
def test_hostnetwork_pods_bound_to_one_node_on_one_http_port(tmp_path, capsys, version, severity):
    docs = [_host_pod("p", "prefill", _engine("vllm", version, KV_P, 8000, 5600)),
            _host_pod("d", "decode", _engine("vllm", version, KV_D, 8000, 5700))]
    found = _found(_check(tmp_path, capsys, docs)[1], "listener-port-conflict")
    assert [f["severity"] for f in found] == [severity]


def test_a_script_of_unknown_release_on_one_http_port_is_a_warning(tmp_path, capsys):
    script = (f"VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve Qwen/Qwen3-8B --kv-transfer-config '{KV_P}' &\n"
              f"VLLM_NIXL_SIDE_CHANNEL_PORT=5700 vllm serve Qwen/Qwen3-8B --kv-transfer-config '{KV_D}' &\nwait\n")
    path = tmp_path / "run.sh"
    path.write_text(script)
    main(["check", str(path), "-o", "json"])
    findings = [f for r in json.loads(capsys.readouterr().out)["results"] for f in r["findings"]]
    found = _found(findings, "listener-port-conflict")
    assert [f["severity"] for f in found] == ["warning"] and "0.25.0" in found[0]["message"], findings


# --- HTTP against a ZeroMQ listener, ZeroMQ against ZeroMQ: still errors on every release ---------------------


@pytest.mark.parametrize("version", ["0.20.2", "0.28.0"])
def test_http_against_the_side_channel_still_fails(tmp_path, capsys, version):
    docs = [_pod(_engine("prefill", version, KV_P, 8000, 5600), _engine("decode", version, KV_D, 5600, 5700))]
    found = _found(_check(tmp_path, capsys, docs)[1], "listener-port-conflict")
    assert [f["severity"] for f in found] == ["error"] and "ZeroMQ" in found[0]["message"]


@pytest.mark.parametrize("version", ["0.20.2", "0.28.0"])
def test_side_channel_against_side_channel_still_fails(tmp_path, capsys, version):
    docs = [_pod(_engine("prefill", version, KV_P, 8100, 5600), _engine("decode", version, KV_D, 8200, 5600))]
    findings = _check(tmp_path, capsys, docs)[1]
    assert [f["severity"] for f in _found(findings, "side-channel-port-conflict")] == ["error"]
    assert not _found(findings, "listener-port-conflict")


def test_p2p_nccl_kv_port_against_kv_port_still_fails(tmp_path, capsys):
    def nccl(name, role, port, kv_port):
        c = _engine(name, "0.20.2", NCCL % (role, kv_port), port, 5600)
        c["env"] = []
        return c
    docs = [_pod(nccl("prefill", "kv_producer", 8100, 21001), nccl("decode", "kv_consumer", 8200, 21001))]
    findings = _check(tmp_path, capsys, docs)[1]
    assert "error" in {f["severity"] for f in findings if "kv-port" in f["rule"]}, findings


# --- HTTP against HTTP within one role ------------------------------------------------------------------------


@pytest.mark.parametrize("version, severity", [("0.20.2", "warning"), ("0.30.0", "error")])
def test_two_prefills_of_one_pod_on_one_http_port(tmp_path, capsys, version, severity):
    docs = [_pod(_engine("prefill-a", version, KV_P, 8100, 5600), _engine("prefill-b", version, KV_P, 8100, 5610),
                 _engine("decode", version, KV_D, 8200, 5700))]
    found = _found(_check(tmp_path, capsys, docs)[1], "same-role-port-conflict")
    assert found and {f["severity"] for f in found} == {severity}, found
    if severity == "warning":
        assert "load-balanced" in found[0]["message"]


@pytest.mark.parametrize("version, severity", [("0.20.2", "error"), ("0.30.0", "error")])
def test_two_prefills_on_one_side_channel_port_still_fail(tmp_path, capsys, version, severity):
    docs = [_pod(_engine("prefill-a", version, KV_P, 8100, 5600), _engine("prefill-b", version, KV_P, 8110, 5600),
                 _engine("decode", version, KV_D, 8200, 5700))]
    found = _found(_check(tmp_path, capsys, docs)[1], "same-role-port-conflict")
    assert found and {f["severity"] for f in found} == {severity}, found


@pytest.mark.parametrize("uds, severity", [(False, "error"), (True, None)])
def test_an_engine_serving_http_on_a_unix_socket_binds_no_tcp_port(tmp_path, capsys, uds, severity):
    extra = ("--uds", "/tmp/decode.sock") if uds else ()
    docs = [_pod(_engine("prefill", "0.28.0", KV_P, 8000, 5600), _engine("decode", "0.28.0", KV_D, 8000, 5700, extra))]
    found = _found(_check(tmp_path, capsys, docs)[1], "listener-port-conflict")
    assert [f["severity"] for f in found] == ([severity] if severity else [])


@pytest.mark.parametrize("users, severity", [((None, None), "warning"), ((1000, 1000), "warning"),
                                             ((1000, 2000), "error"), ((0, 1000), "error")])
def test_so_reuseport_needs_one_user(tmp_path, capsys, users, severity):
    p, d = _engine("prefill", "0.20.2", KV_P, 8000, 5600), _engine("decode", "0.20.2", KV_D, 8000, 5700)
    for c, uid in zip((p, d), users, strict=True):
        if uid is not None:
            c["securityContext"] = {"runAsUser": uid}
    found = _found(_check(tmp_path, capsys, [_pod(p, d)])[1], "listener-port-conflict")
    assert [f["severity"] for f in found] == [severity]
    if severity == "error":
        assert "runAsUser" in found[0]["message"]
