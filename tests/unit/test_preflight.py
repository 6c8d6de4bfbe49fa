"""The KV transport preflight: its decision table, fake sysfs trees and limits, and a real NIXL UCX
agent on host memory (nixl-cu12 from PyPI, installed by scripts/bootstrap.sh)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pdd_operator.controller.status import kv_transport_condition, preflight_results
from pdd_operator.preflight import (
    MEMLOCK_TOO_LOW,
    NIXL_UNAVAILABLE,
    NO_RDMA_DEVICE,
    RDMA_READY,
    TCP_FALLBACK,
    PortState,
    decide,
    nixl_ucx_check,
    rdma_ports,
    ucx_allows_rdma,
)
from pdd_operator.render.workloads import Owner, deployment
from tests.helpers import ROOT, make_spec

GIB = 1 << 30
ACTIVE = [PortState("mlx5_0:1", "ACTIVE", "InfiniBand")]
NIXL_OK = (True, "ok", True)
NO_GPU = (None, "no GPU")


def fake_sysfs(root: Path, ports: dict[str, str]) -> Path:
    for name, state in ports.items():
        dev, port = name.split(":")
        d = root / dev / "ports" / port
        d.mkdir(parents=True)
        (d / "state").write_text(state + "\n")
        (d / "link_layer").write_text("Ethernet\n")
    return root


def test_sysfs_ports(tmp_path):
    root = fake_sysfs(tmp_path / "ib", {"mlx5_0:1": "4: ACTIVE", "mlx5_1:1": "1: DOWN"})
    assert [(p.name, p.state, p.link_layer) for p in rdma_ports(root)] == [
        ("mlx5_0:1", "ACTIVE", "Ethernet"), ("mlx5_1:1", "DOWN", "Ethernet")]
    assert rdma_ports(tmp_path / "missing") == []


@pytest.mark.parametrize(
    "ports, memlock, nixl, tls, reason",
    [
        (ACTIVE, None, NIXL_OK, True, RDMA_READY),
        (ACTIVE, 8 * GIB, NIXL_OK, True, RDMA_READY),
        ([], None, NIXL_OK, True, NO_RDMA_DEVICE),
        (ACTIVE, 64 * 1024, NIXL_OK, True, MEMLOCK_TOO_LOW),
        ([PortState("mlx5_0:1", "DOWN")], None, NIXL_OK, True, TCP_FALLBACK),
        (ACTIVE, None, (True, "ok", False), True, TCP_FALLBACK),
        (ACTIVE, None, NIXL_OK, False, TCP_FALLBACK),
        (ACTIVE, None, (False, "no nixl", False), True, NIXL_UNAVAILABLE),
    ],
)
def test_decision_table(ports, memlock, nixl, tls, reason):
    result = decide(ports, memlock, GIB, nixl, tls, NO_GPU)
    assert result.reason == reason
    assert result.ready is (reason == RDMA_READY)
    assert result.transport == ("rdma" if reason == RDMA_READY else ("none" if reason == NIXL_UNAVAILABLE else "tcp"))


@pytest.mark.parametrize("tls, ok", [("", True), ("all", True), ("rc,cuda_copy", True), ("tcp,cuda_copy", False),
                                     ("^rc,dc,ud,ib,rc_mlx5,dc_mlx5,ud_mlx5,rc_verbs,ud_verbs", False), ("^cuda_ipc", True)])
def test_ucx_tls(tls, ok):
    assert ucx_allows_rdma({"UCX_TLS": tls} if tls else {}) is ok


def test_real_nixl_ucx_agent_on_host_memory():
    ok, detail, _ = nixl_ucx_check()
    assert ok, detail


def test_entrypoint_reports_no_rdma_here_and_writes_the_termination_message(tmp_path):
    log = tmp_path / "termination-log"
    proc = subprocess.run(
        [sys.executable, "-m", "pdd_operator.preflight", "--policy", "fail", "--sys-root", str(tmp_path / "none"),
         "--termination-log", str(log)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    verdict = json.loads(log.read_text())
    assert verdict["reason"] == NO_RDMA_DEVICE and verdict["transport"] == "tcp" and proc.returncode == 1
    assert "NIXL UCX agent created" in verdict["checks"]["nixl"]
    warn = subprocess.run(
        [sys.executable, "-m", "pdd_operator.preflight", "--sys-root", str(tmp_path / "none"),
         "--termination-log", str(log)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert warn.returncode == 0


def test_init_container_mirrors_the_engine():
    dep = deployment(Owner("demo", "ns", "u", 1), "decode", make_spec(network={"preflight": {"policy": "Fail"}}))
    pod = dep["spec"]["template"]["spec"]
    init, engine = pod["initContainers"][0], pod["containers"][0]
    assert init["name"] == "preflight" and init["command"][:4] == ["python3", "-m", "pdd_operator.preflight", "--policy"]
    assert init["resources"] == engine["resources"] and init["env"] == engine["env"]
    assert init["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    warn = deployment(Owner("demo", "ns", "u", 1), "decode", make_spec())["spec"]["template"]["spec"]["initContainers"][0]
    assert warn["command"][:2] == ["sh", "-c"] and "PreflightUnavailable" in warn["command"][2]
    off = deployment(Owner("demo"), "decode", make_spec(network={"preflight": {"policy": "Disabled"}}))
    assert "initContainers" not in off["spec"]["template"]["spec"]


def _pod(name: str, verdict: dict | None) -> dict:
    term = {"terminated": {"exitCode": 0, "message": json.dumps(verdict)}} if verdict else {"running": {}}
    return {"metadata": {"name": name}, "status": {"initContainerStatuses": [{"name": "preflight", "state": term}]}}


def test_kv_transport_condition_folds_the_worst_pod():
    ready = {"reason": RDMA_READY, "ready": True, "transport": "rdma", "message": "ok"}
    tcp = {"reason": TCP_FALLBACK, "ready": False, "transport": "tcp", "message": "port DOWN"}
    none = {"reason": NO_RDMA_DEVICE, "ready": False, "transport": "tcp", "message": "no device"}
    now = "2026-11-29T10:00:00Z"
    assert kv_transport_condition(preflight_results([_pod("a", ready)]), 1, now).reason == "RDMAReady"
    c = kv_transport_condition(preflight_results([_pod("a", ready), _pod("b", tcp), _pod("c", none)]), 1, now)
    assert (c.status, c.reason) == ("False", NO_RDMA_DEVICE) and c.message.startswith("c:")
    assert kv_transport_condition(preflight_results([_pod("a", None)]), 1, now).status == "Unknown"
