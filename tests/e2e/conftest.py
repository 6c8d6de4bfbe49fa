"""Fixtures for end-to-end tests on the real local control plane (dev/cluster/cluster.sh).

The cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok with fake GPU
nodes) is started once per test session and left running for reuse; the operator runs as a real
``pdd run`` process; objects go in through the real ``kubectl``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shlex
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from pdd_operator.controller.memory import ALLOCATOR_ENV

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_SH = ROOT / "dev" / "cluster" / "cluster.sh"


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
    last = f" (last error: {last_exc})" if last_exc else ""
    pytest.fail(f"timed out after {timeout}s waiting for {what or predicate}{last}")


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
        self.admission = client.AdmissionregistrationV1Api(self.api)

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
    # A webhook configuration left by a killed run (failurePolicy Fail, nobody serving) would refuse
    # every PDDeployment create/update; the webhook tests start their own operator that re-creates it.
    c.kubectl("delete", "validatingwebhookconfiguration", WEBHOOK_CONFIGURATION, "--ignore-not-found")
    subprocess.run(["bash", str(CLUSTER_SH), "crd"], env=c.env, check=True, timeout=180)  # applied, Established
    return c


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OperatorProcess:
    """A real ``pdd run`` process against the cluster, with its Prometheus metrics on loopback.

    :attr:`running` holds every started one, so a module that needs to be the only operator on the
    cluster (a permission test: another operator with more rights would create what it must not) can
    stop the others for its duration (:func:`other_operators_stopped`).
    """

    running: ClassVar[set[OperatorProcess]] = set()

    def __init__(self, cluster: Cluster, log_path: Path, extra_args: Sequence[str] = (),
                 resync_seconds: float = 2) -> None:
        self.cluster = cluster
        self.log_path = log_path
        self.port = _free_port()
        self.extra_args = list(extra_args)
        self.resync_seconds = resync_seconds
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        # the C allocator's settings the chart and the image start it with (controller/memory.py)
        env = {**self.cluster.env, **ALLOCATOR_ENV, "PDD_RESYNC_SECONDS": str(self.resync_seconds)}
        log = self.log_path.open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pdd_operator.cli", "run", "--metrics-port", str(self.port),
             "--metrics-address", "127.0.0.1", *self.extra_args],
            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
        )
        OperatorProcess.running.add(self)
        wait_for(lambda: self.metrics() is not None, 60, what="operator metrics endpoint")

    def stop(self) -> None:
        OperatorProcess.running.discard(self)
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

    def writes(self) -> float:
        m = self.metrics() or {}
        return m.get("pdd_status_writes_total", 0) + m.get("pdd_child_applies_total", 0)

    def wait_quiet(self, timeout: float = 60) -> None:
        """Wait until two full resync rounds pass without the operator writing anything."""
        def quiet() -> bool:
            writes, seen = self.writes(), self.reconciles()
            wait_for(lambda: self.reconciles() >= seen + 2, timeout, what="two reconciles")
            return self.writes() == writes
        wait_for(quiet, timeout, interval=0, what="an operator with nothing left to write")


@contextlib.contextmanager
def other_operators_stopped() -> Iterator[None]:
    """Stop every running :class:`OperatorProcess` (the session's ``operator`` fixture among them) for
    the ``with`` block and start them again after it."""
    stopped = list(OperatorProcess.running)
    for op in stopped:
        op.stop()
    try:
        yield
    finally:
        for op in stopped:
            op.start()


@pytest.fixture(scope="session")
def operator(cluster: Cluster, tmp_path_factory) -> Iterator[OperatorProcess]:
    op = OperatorProcess(cluster, tmp_path_factory.mktemp("operator") / "operator.log")
    op.start()
    yield op
    op.stop()


WEBHOOK_CONFIGURATION = "pdd-operator.dev"
WEBHOOK_NAME = "validate-pddeployment.pdd-operator.dev"
#: A spec that only the webhook refuses (a version-dependent rule, out of reach of the CRD's CEL
#: rules): the Nemotron example with the SD conv-state layout, which vLLM >= 0.20 asserts against.
WEBHOOK_PROBE_RULE = "ssm-conv-layout-ds"


def webhook_probe(name: str = "webhook-probe") -> str:
    """A PDDeployment manifest that only the webhook refuses, with ``[ssm-conv-layout-ds]``."""
    doc = yaml.safe_load((ROOT / "examples" / "nemotron-nano-pd.yaml").read_text())
    doc["metadata"] = {"name": name}
    doc["spec"]["kvCache"] = {"ssmConvStateLayout": "SD"}
    return yaml.safe_dump(doc)


class WebhookOperator(OperatorProcess):
    """``pdd run`` with the validating admission webhook on 127.0.0.1 (real TLS, certificates
    generated into ``cert_dir`` on the first start and reused on restarts)."""

    def __init__(self, cluster: Cluster, log_path: Path, cert_dir: Path) -> None:
        self.webhook_port = _free_port()
        self.cert_dir = cert_dir
        super().__init__(cluster, log_path, [
            "--webhook-port", str(self.webhook_port), "--webhook-host", "127.0.0.1",
            "--webhook-listen", "127.0.0.1", "--webhook-cert-dir", str(cert_dir),
        ])

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.webhook_port}/validate-pddeployment"

    def start(self) -> None:
        super().start()
        wait_for(self.refuses_probe, 60, what="the webhook refusing a bad object (server-side dry run)")

    def refuses_probe(self) -> bool:
        """True when a server-side dry run of :func:`webhook_probe` is refused by the webhook itself."""
        proc = self.cluster.kubectl("apply", "--dry-run=server", "-n", "default", "-f", "-",
                                    input=webhook_probe(), check=False)
        return proc.returncode != 0 and f"[{WEBHOOK_PROBE_RULE}]" in proc.stderr

    def configuration(self) -> dict | None:
        """The ValidatingWebhookConfiguration as JSON, or None when absent."""
        try:
            resp = self.cluster.admission.read_validating_webhook_configuration(
                WEBHOOK_CONFIGURATION, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return json.loads(resp.data)

    def peer_certificate(self) -> bytes:
        """DER certificate the webhook serves, over a TLS connection that trusts only ``ca.crt`` and
        checks the 127.0.0.1 SAN (raises ``ssl.SSLError`` otherwise)."""
        ctx = ssl.create_default_context(cafile=str(self.cert_dir / "ca.crt"))
        with socket.create_connection(("127.0.0.1", self.webhook_port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                return s.getpeercert(binary_form=True)

    def ca_bundle(self) -> bytes:
        conf = self.configuration() or {}
        hook = next(h for h in conf.get("webhooks", []) if h["name"] == WEBHOOK_NAME)
        return base64.b64decode(hook["clientConfig"]["caBundle"])

    def remove_configuration(self) -> None:
        self.cluster.kubectl("delete", "validatingwebhookconfiguration", WEBHOOK_CONFIGURATION, "--ignore-not-found")
        wait_for(lambda: self.configuration() is None, 30, what="webhook configuration gone")


@pytest.fixture(scope="module")
def webhook_operator(cluster: Cluster, tmp_path_factory) -> Iterator[WebhookOperator]:
    """An operator serving the webhook, for one test module.

    Module-scoped rather than session-scoped: while its configuration exists, the apiserver sends
    every PDDeployment create/update to it, and other modules (test_lifecycle.py) apply incompatible
    specs on purpose to see the operator refuse them. Teardown stops the process and deletes the
    configuration (it outlives the process by design: fail closed), so later applies do not fail
    against a webhook that is gone.
    """
    base = tmp_path_factory.mktemp("webhook-operator")
    op = WebhookOperator(cluster, base / "operator.log", base / "certs")
    try:
        op.start()
        yield op
    finally:
        op.stop()
        op.remove_configuration()


@pytest.fixture()
def namespace(cluster: Cluster) -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    cluster.core.create_namespace({"metadata": {"name": name}})
    # Until the controller-manager made the namespace's default ServiceAccount, the ServiceAccount admission
    # plugin refuses every pod there (403 "serviceaccount "default" not found": a pod created directly
    # fails, a ReplicaSet's reads as ReplicaFailure for a moment). 120 s: after an outage test the controller-manager
    # may still be re-acquiring its lease and relisting (a CI run on a loaded machine waited longer than 30 s).
    wait_for(lambda: cluster.core.read_namespaced_service_account("default", name), 120,
             what=f"the default ServiceAccount of {name}")
    yield name
    cluster.core.delete_namespace(name)


def pdd_status(cluster: Cluster, namespace: str, name: str) -> dict:
    obj = cluster.custom.get_namespaced_custom_object("pdd-operator.dev", "v1alpha1", namespace, "pddeployments", name)
    return obj.get("status") or {}


def condition(status: dict, type_: str) -> dict:
    return next((c for c in status.get("conditions", []) if c["type"] == type_), {})


#: What the operator writes: PDDeployments (status) and their children.
WRITTEN_RESOURCES = ("pddeployments", "deployments", "services", "serviceaccounts", "roles", "rolebindings")


def audit_events(cluster: Cluster, since: float | None = None, user: str | None = None) -> list[dict]:
    """The apiserver's audit log (dev/cluster/cluster.sh's policy: Metadata level, ResponseComplete
    stage): every event received at or after ``since`` (epoch seconds; None: all), of ``user`` only
    when given (e.g. ``system:serviceaccount:<ns>:<name>``). Lines that are not JSON (a line being
    written) are skipped; no log yet is an empty list."""
    out = []
    if not cluster.audit_log.exists():
        return out
    for line in cluster.audit_log.read_text().splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("stage") != "ResponseComplete":
            continue
        if user is not None and (ev.get("user") or {}).get("username") != user:
            continue
        ts = ev.get("requestReceivedTimestamp", "")
        if since is not None and ts and datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() < since:
            continue
        out.append(ev)
    return out


def wait_no_namespace_terminating(cluster: Cluster, timeout: float = 180) -> None:
    """Wait until no namespace is terminating: earlier tests' objects then no longer change (their
    children being removed, a 403 for a namespace going away) under a test that counts writes or denials."""
    wait_for(lambda: not [n for n in cluster.core.list_namespace().items if n.status.phase == "Terminating"],
             timeout, what="no namespace terminating")


def audit_denied(events: list[dict]) -> list[tuple[str, str]]:
    """``(verb, requestURI)`` of each request in ``events`` that the apiserver answered 403."""
    return [(ev["verb"], ev.get("requestURI", "")) for ev in events
            if (ev.get("responseStatus") or {}).get("code") == 403]


def audit_writes(cluster: Cluster, namespace: str, since: float) -> list[dict]:
    """Write requests (create/update/patch/delete) to PDDeployments and their children in
    ``namespace`` since ``since`` (epoch seconds) by non-system users (the operator, kubectl), from the
    apiserver's audit log (:func:`audit_events`)."""
    return [ev for ev in audit_events(cluster, since)
            if ev.get("verb") in ("create", "update", "patch", "delete")
            and (ev.get("objectRef") or {}).get("namespace") == namespace
            and (ev.get("objectRef") or {}).get("resource") in WRITTEN_RESOURCES
            and not (ev.get("user") or {}).get("username", "").startswith("system:")]
