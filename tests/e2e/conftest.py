"""Fixtures for end-to-end tests on the real local control plane (tests/cluster/cluster.sh).

The cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok with fake GPU
nodes) is started once per test session and left running for reuse; the operator runs as a real
``pdd run`` process; objects go in through the real ``kubectl``.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from datetime import datetime
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_SH = ROOT / "tests" / "cluster" / "cluster.sh"


def wait_for(predicate: Callable[[], Any], timeout: float = 60, interval: float = 0.25, what: str = "") -> Any:
    """Poll ``predicate`` until it returns a truthy value; return it. Fails the test on timeout."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001  (API not ready yet, object not there yet)
            last_exc = exc
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what or predicate}" + (f" (last error: {last_exc})" if last_exc else ""))


class Cluster:
    """The running local control plane: its kubeconfig, binaries, audit log and API clients."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.kubeconfig = env["KUBECONFIG"]
        self.audit_log = Path(env["PDD_AUDIT_LOG"])
        config.load_kube_config(self.kubeconfig)
        self.api = client.ApiClient()
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        """Run the real kubectl against the cluster; returns the completed process (text output)."""
        proc = subprocess.run(["kubectl", *args], input=input, capture_output=True, text=True,
                              env=self.env, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {shlex.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc


def _cluster_env() -> dict[str, str]:
    out = subprocess.run(["bash", str(CLUSTER_SH), "env"], capture_output=True, text=True, check=True).stdout
    env = dict(os.environ)
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("export "):
            key, _, value = line[len("export "):].partition("=")
            value = shlex.split(value)[0] if value else ""
            env[key] = value.replace("$PATH", os.environ.get("PATH", ""))
    return env


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    subprocess.run(["bash", str(CLUSTER_SH), "up"], check=True, timeout=3600)
    c = Cluster(_cluster_env())
    c.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds" / "pddeployment.yaml"))
    c.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/pddeployments.pdd-operator.dev")
    return c


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OperatorProcess:
    """A real ``pdd run`` process against the cluster, with its Prometheus metrics on loopback."""

    def __init__(self, cluster: Cluster, log_path: Path) -> None:
        self.cluster = cluster
        self.log_path = log_path
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = {**self.cluster.env, "PDD_RESYNC_SECONDS": "2"}
        log = self.log_path.open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pdd_operator.cli", "run", "--metrics-port", str(self.port),
             "--metrics-address", "127.0.0.1"],
            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
        )
        wait_for(lambda: self.metrics() is not None, 60, what="operator metrics endpoint")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def metrics(self) -> dict[str, float] | None:
        """Current counter values (``name{labels}`` -> value), or None when not reachable."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as resp:
                text = resp.read().decode()
        except OSError:
            return None
        values = {}
        for line in text.splitlines():
            if line.startswith("pdd_") and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                values[key] = float(value)
        return values

    def reconciles(self) -> float:
        m = self.metrics() or {}
        return sum(v for k, v in m.items() if k.startswith("pdd_reconcile_total"))


@pytest.fixture(scope="session")
def operator(cluster: Cluster, tmp_path_factory) -> Iterator[OperatorProcess]:
    op = OperatorProcess(cluster, tmp_path_factory.mktemp("operator") / "operator.log")
    op.start()
    yield op
    op.stop()


@pytest.fixture()
def namespace(cluster: Cluster) -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    cluster.core.create_namespace({"metadata": {"name": name}})
    yield name
    cluster.core.delete_namespace(name)


def pdd_status(cluster: Cluster, namespace: str, name: str) -> dict:
    obj = cluster.custom.get_namespaced_custom_object("pdd-operator.dev", "v1alpha1", namespace, "pddeployments", name)
    return obj.get("status") or {}


def condition(status: dict, type_: str) -> dict:
    return next((c for c in status.get("conditions", []) if c["type"] == type_), {})


def audit_writes(cluster: Cluster, namespace: str, since: float) -> list[dict]:
    """Write requests (create/update/patch/delete) to PDDeployments, Deployments and Services in
    ``namespace`` since ``since`` (epoch seconds) by non-system users (the operator, kubectl), from the
    apiserver's audit log."""
    out = []
    if not cluster.audit_log.exists():
        return out
    for line in cluster.audit_log.read_text().splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("stage") != "ResponseComplete" or ev.get("verb") not in ("create", "update", "patch", "delete"):
            continue
        ref = ev.get("objectRef") or {}
        if ref.get("namespace") != namespace or ref.get("resource") not in ("pddeployments", "deployments", "services"):
            continue
        if (ev.get("user") or {}).get("username", "").startswith("system:"):
            continue
        ts = ev.get("requestReceivedTimestamp", "")
        if ts and datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() < since:
            continue
        out.append(ev)
    return out
