"""End to end: the Helm chart installed into the real local control plane (RBAC on), the operator run
as the chart's ServiceAccount (a TokenRequest token in a kubeconfig; the process runs locally, as no
container runtime exists here, and the chart's webhook points at it through ``webhook.url``).

Shown: the chart installs (adopting the CRD), the operator fills the chart's Secret and patches only
``caBundle``, becomes ready, brings the Nemotron example to Ready, the webhook refuses a bad spec, a
restart keeps the CA, the audit log has no 403 and no verb outside the role, ``kubectl auth can-i``
denies what the role leaves out, a missing permission stops ``pdd run`` at startup, and ``helm
uninstall`` leaves no fail-closed webhook behind (the CRD stays).

Runs with Helm 3 (v3.22.0); ``HELM_VERSION=v4.3.1`` runs the same with Helm 4 (server-side apply).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pdd_operator.controller import rbac
from pdd_operator.controller.webhook import WEBHOOK_NAME
from tests.e2e.conftest import (
    ROOT,
    WEBHOOK_PROBE_RULE,
    OperatorProcess,
    _free_port,
    audit_denied,
    audit_events,
    condition,
    pdd_status,
    wait_for,
    webhook_probe,
)

pytestmark = pytest.mark.cluster

#: Fixed: the cluster's audit policy logs every request of this namespace's ServiceAccounts.
NAMESPACE = "pdd-chart-e2e"
RELEASE = "pdd-e2e"
FULLNAME = f"{RELEASE}-pdd-operator"
SERVICE_ACCOUNT = FULLNAME
CONFIGURATION = f"{FULLNAME}.pdd-operator.dev"
SECRET = f"{FULLNAME}-webhook-certs"
USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
CRD = "pddeployments.pdd-operator.dev"
CHART = ROOT / "charts" / "pdd-operator"


def helm_bin() -> str:
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "install-helm.sh")], capture_output=True, text=True,
                          timeout=3600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


class Chart:
    def __init__(self, cluster, helm: str, webhook_port: int) -> None:
        self.cluster, self.helm, self.webhook_port = cluster, helm, webhook_port

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([self.helm, *args, "--namespace", NAMESPACE], capture_output=True, text=True,
                              env=self.cluster.env, timeout=300)
        if check:
            assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    def sets(self) -> list[str]:
        return ["--set", f"webhook.url=https://127.0.0.1:{self.webhook_port}/validate-pddeployment"]


def sa_kubeconfig(cluster, path: Path) -> Path:
    """A kubeconfig for the chart's ServiceAccount: the cluster's server and CA, a TokenRequest token."""
    token = cluster.kubectl("create", "token", SERVICE_ACCOUNT, "-n", NAMESPACE, "--duration=2h").stdout.strip()
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    cl = admin["clusters"][0]["cluster"]
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "c", "cluster": cl}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}],
    }))
    return path


class ChartOperator(OperatorProcess):
    """``pdd run`` with the flags the chart's Deployment passes, as the chart's ServiceAccount."""

    def __init__(self, cluster, log_path: Path, kubeconfig: Path, webhook_port: int, cert_dir: Path,
                 extra: list[str] | None = None) -> None:
        self.readiness_port = _free_port()
        super().__init__(cluster, log_path, [
            "--operator-namespace", NAMESPACE, "--readiness-port", str(self.readiness_port),
            "--readiness-address", "127.0.0.1",
            "--webhook-port", str(webhook_port), "--webhook-host", "127.0.0.1", "--webhook-listen", "127.0.0.1",
            "--webhook-configuration-name", CONFIGURATION, "--webhook-configuration-mode", "ca-bundle",
            "--webhook-cert-dir", str(cert_dir), "--webhook-cert-secret", SECRET,
            "--leader-election-lease", FULLNAME, "--leader-election-identity", f"e2e-{webhook_port}-{cert_dir.name}",
            *(extra or []),
        ])
        self.kubeconfig = kubeconfig

    def start(self) -> None:
        self.cluster = _WithKubeconfig(self.cluster, self.kubeconfig)
        super().start()

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.readiness_port}/readyz", timeout=3) as resp:
                return resp.status == 200
        except OSError:
            return False


class _WithKubeconfig:
    """The cluster with KUBECONFIG swapped, for the operator process only."""

    def __init__(self, cluster, kubeconfig: Path) -> None:
        self._cluster = cluster
        self.env = {**cluster.env, "KUBECONFIG": str(kubeconfig)}

    def __getattr__(self, name):
        return getattr(self._cluster, name)


def secret_data(cluster) -> dict[str, bytes]:
    s = cluster.core.read_namespaced_secret(SECRET, NAMESPACE)
    return {k: base64.b64decode(v) for k, v in (s.data or {}).items()}


def configuration(cluster) -> dict | None:
    try:
        return json.loads(cluster.admission.read_validating_webhook_configuration(CONFIGURATION, _preload_content=False).data)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def ca_bundle(cluster) -> bytes:
    hook = next(h for h in configuration(cluster)["webhooks"] if h["name"] == WEBHOOK_NAME)
    return base64.b64decode(hook["clientConfig"].get("caBundle", ""))


@pytest.fixture(scope="module")
def installed(cluster, tmp_path_factory) -> Iterator[tuple[Chart, ChartOperator]]:
    helm = helm_bin()
    base = tmp_path_factory.mktemp("chart")
    chart = Chart(cluster, helm, _free_port())
    # A run killed before its teardown leaves the release, and with it a fail-closed webhook
    # configuration pointing at a dead port: remove both first.
    chart.run("uninstall", RELEASE, "--wait", check=False)
    cluster.kubectl("delete", "validatingwebhookconfiguration", CONFIGURATION, "--ignore-not-found")
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    # The session applied the CRD already (conftest): let the release adopt it, as an upgrade from a
    # plain `kubectl apply` install would.
    cluster.kubectl("annotate", "--overwrite", "crd", CRD, f"meta.helm.sh/release-name={RELEASE}",
                    f"meta.helm.sh/release-namespace={NAMESPACE}")
    cluster.kubectl("label", "--overwrite", "crd", CRD, "app.kubernetes.io/managed-by=Helm")
    install = chart.run("install", RELEASE, str(CHART), *chart.sets())
    chart.notes = install.stdout
    op = ChartOperator(cluster, base / "operator.log", sa_kubeconfig(cluster, base / "sa.kubeconfig"),
                       chart.webhook_port, base / "certs")
    op.started_at = time.time()
    try:
        op.start()
        wait_for(op.ready, 60, what="the operator's /readyz")
        yield chart, op
    finally:
        op.stop()
        chart.run("uninstall", RELEASE, "--wait", check=False)
        cluster.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false")


def test_install_prints_next_steps(installed):
    chart, _ = installed
    assert f"rollout status deployment/{FULLNAME}" in chart.notes and "kubectl wait pdd/" in chart.notes


def test_operator_fills_the_secret_and_patches_only_ca_bundle(cluster, installed):
    data = secret_data(cluster)
    assert {"ca.crt", "ca.key", "tls.crt", "tls.key"} <= set(data)
    assert ca_bundle(cluster) == data["ca.crt"]
    conf = configuration(cluster)
    ours = [m for m in conf["metadata"]["managedFields"] if m["manager"] == "pdd-operator"]
    assert ours and all(m["operation"] == "Apply" for m in ours)
    owned = json.dumps(ours[0]["fieldsV1"])
    assert "caBundle" in owned and "failurePolicy" not in owned and "rules" not in owned


def test_nemotron_example_becomes_ready(cluster, installed):
    cluster.kubectl("apply", "-n", "default", "-f", str(ROOT / "examples" / "nemotron-nano-pd.yaml"))
    try:
        cluster.kubectl("wait", "-n", "default", "--for=condition=Ready", "--timeout=180s", "pdd/nemotron-nano")
        st = pdd_status(cluster, "default", "nemotron-nano")
        assert condition(st, "Compatible")["status"] == "True"
        # The Argo CD health check the chart ships agrees, on the live object.
        from tests.unit.test_argocd_health import CHECK_DIR, run_health

        obj = cluster.custom.get_namespaced_custom_object("pdd-operator.dev", "v1alpha1", "default", "pddeployments",
                                                          "nemotron-nano")
        assert run_health((CHECK_DIR / "health.lua").read_text(), obj)["status"] == "Healthy"
    finally:
        cluster.kubectl("delete", "-n", "default", "pdd/nemotron-nano", "--ignore-not-found", "--wait=true")


def test_bad_spec_is_refused_by_the_charts_webhook(cluster, installed):
    proc = cluster.kubectl("apply", "-n", "default", "-f", "-", input=webhook_probe("chart-probe"), check=False)
    assert proc.returncode != 0 and f'admission webhook "{WEBHOOK_NAME}" denied' in proc.stderr, proc.stderr
    assert f"[{WEBHOOK_PROBE_RULE}]" in proc.stderr


def test_restart_keeps_the_ca_and_the_secret(cluster, installed):
    _, op = installed
    before = cluster.core.read_namespaced_secret(SECRET, NAMESPACE).metadata.resource_version
    bundle = ca_bundle(cluster)
    op.stop()
    op.start()
    wait_for(op.ready, 60, what="ready after restart")
    assert cluster.core.read_namespaced_secret(SECRET, NAMESPACE).metadata.resource_version == before
    assert ca_bundle(cluster) == bundle


def test_helm_upgrade_keeps_ca_bundle_and_secret(cluster, installed):
    chart, op = installed
    data, bundle = secret_data(cluster), ca_bundle(cluster)
    chart.run("upgrade", RELEASE, str(CHART), *chart.sets(), "--set", "webhook.timeoutSeconds=12")
    conf = configuration(cluster)
    assert conf["webhooks"][0]["timeoutSeconds"] == 12
    assert ca_bundle(cluster) == bundle and secret_data(cluster) == data
    assert op.ready()


def test_audit_log_no_403_and_no_verb_outside_the_role(cluster, installed, namespace):
    _, op = installed
    # Work of every kind first (independent of the other tests): a deployment to create and report on,
    # and a Lease renewal.
    doc = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())
    doc["metadata"] = {"name": "audited"}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    wait_for(lambda: condition(pdd_status(cluster, namespace, "audited"), "Ready").get("status") == "True",
             120, what="Ready")
    coordination = client.CoordinationV1Api(cluster.api)
    renewed = coordination.read_namespaced_lease(FULLNAME, NAMESPACE).spec.renew_time
    wait_for(lambda: coordination.read_namespaced_lease(FULLNAME, NAMESPACE).spec.renew_time != renewed, 30,
             what="a Lease renewal")
    granted = set()
    options = rbac.Options(namespace=NAMESPACE, webhook_configuration=CONFIGURATION,
                           webhook_configuration_mode="ca-bundle", webhook_secret=SECRET, leader_election_lease=FULLNAME)
    for r in rbac.rules(options):
        for res in r.resources:
            granted |= {(r.api_group, res, v) for v in r.verbs}
    requests = audit_events(cluster, op.started_at - 5, USER)
    denied = audit_denied(requests)
    seen = {((ref := ev.get("objectRef") or {}).get("apiGroup", ""),
             ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else ""), ev["verb"])
            for ev in requests if (ev.get("objectRef") or {}).get("resource")}
    assert denied == []
    authz = {("authorization.k8s.io", "selfsubjectaccessreviews", "create")}  # allowed to every user
    assert seen, "no request of the operator's ServiceAccount in the audit log"
    assert seen - granted - authz == set()
    # It did use what the role grants for its core work (a server-side apply is audited as patch, even
    # when it creates the object and is authorized as create).
    assert {("pdd-operator.dev", "pddeployments/status", "patch"), ("apps", "deployments", "patch"),
            ("", "secrets", "update"), ("coordination.k8s.io", "leases", "update")} <= seen


@pytest.mark.parametrize("args, allowed", [
    (["delete", "deployments"], False),
    (["patch", "pddeployments"], False),
    (["get", "secrets"], False),
    (["get", f"secrets/{SECRET}", "-n", NAMESPACE], True),
    (["create", "validatingwebhookconfigurations"], False),
    (["get", "customresourcedefinitions"], False),
    (["list", "namespaces"], False),
    (["create", "events"], True),  # the operator's own Events, one per status transition (controller/events.py)
    (["patch", "events"], False),
    (["patch", "pddeployments", "--subresource=status"], True),
])
def test_auth_can_i(cluster, installed, args, allowed):
    proc = cluster.kubectl("auth", "can-i", *args, f"--as={USER}", check=False)
    assert proc.stdout.strip() == ("yes" if allowed else "no"), (args, proc.stdout, proc.stderr)


def test_missing_permission_stops_the_operator_at_startup(cluster, installed, tmp_path):
    _, op = installed
    proc = subprocess.run(
        [sys.executable, "-m", "pdd_operator.cli", "run", "--operator-namespace", NAMESPACE,
         "--webhook-port", str(_free_port()), "--webhook-configuration-name", "someone-elses.example.com",
         "--webhook-configuration-mode", "ca-bundle", "--webhook-cert-dir", str(tmp_path)],
        env={**cluster.env, "KUBECONFIG": str(op.kubeconfig)}, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "get validatingwebhookconfigurations.admissionregistration.k8s.io 'someone-elses.example.com'" in proc.stderr
    assert "pdd rbac" in proc.stderr


def lease_holder(cluster) -> str:
    lease = client.CoordinationV1Api(cluster.api).read_namespaced_lease(FULLNAME, NAMESPACE)
    return lease.spec.holder_identity or ""


def test_second_replica_takes_over_when_the_leader_stops_or_dies(cluster, installed, tmp_path, namespace):
    """replicas: 2 as the chart runs them: both serve the webhook, only the leader reconciles. A leader
    stopped cleanly (SIGTERM, as a rollout or a drain stops it) releases the Lease and the other takes
    over at its next retry (2 s); a leader killed (SIGKILL) is replaced once the lease (15 s) runs out."""
    _, first = installed

    def identity(op):
        return op.extra_args[op.extra_args.index("--leader-election-identity") + 1]

    wait_for(lambda: lease_holder(cluster) == identity(first), 30, what="the first replica leading")
    doc = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())
    doc["metadata"] = {"name": "failover"}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    wait_for(lambda: condition(pdd_status(cluster, namespace, "failover"), "Ready").get("status") == "True",
             120, what="Ready under the first leader")
    second = ChartOperator(cluster, tmp_path / "second.log", first.kubeconfig, _free_port(), tmp_path / "certs")
    second.start()
    try:
        wait_for(second.ready, 60, what="second replica ready (it serves the webhook too)")
        # Following: it sees every event (its resync round passes too) but reconciles nothing.
        wait_for(lambda: second.metrics() is not None, 10, what="second replica's metrics")
        assert lease_holder(cluster) == identity(first) and second.reconciles() == 0
        signalled = time.monotonic()
        first.stop()
        exited = time.monotonic()
        wait_for(lambda: lease_holder(cluster) == identity(second), 40, what="the second replica taking the Lease")
        took = time.monotonic()
        print(f"leader takeover after a clean stop: {took - signalled:.1f}s after SIGTERM, "
              f"{took - exited:.1f}s after the leader exited")
        assert took - exited <= 2 + 5, took - exited  # its retry period + slack for a loaded machine
        # It reconciles now: a deleted child comes back.
        deps = cluster.apps.list_namespaced_deployment(namespace, label_selector="app.kubernetes.io/instance=failover")
        victim = deps.items[0]
        cluster.apps.delete_namespaced_deployment(victim.metadata.name, namespace)

        def restored():
            dep = cluster.apps.read_namespaced_deployment(victim.metadata.name, namespace)
            return dep.metadata.uid != victim.metadata.uid

        wait_for(restored, 60, what="the deleted Deployment restored by the new leader")
        wait_for(lambda: second.reconciles() > 0, 30, what="the new leader's reconcile counted")
        # A leader that dies cannot release: the first replica (back, following) waits out the lease.
        first.start()
        wait_for(first.ready, 60, what="first replica ready again")
        assert lease_holder(cluster) == identity(second)
        second.proc.kill()
        second.proc.wait()
        killed = time.monotonic()
        wait_for(lambda: lease_holder(cluster) == identity(first), 40, what="the first replica taking the Lease back")
        crashed = time.monotonic() - killed
        print(f"leader takeover after SIGKILL: {crashed:.1f}s")
        assert took - exited < crashed <= 15 + 2 + 5, (took - exited, crashed)
    finally:
        second.stop()
        if first.proc is None or first.proc.poll() is not None:
            first.start()
        wait_for(first.ready, 60, what="first replica ready again")


def test_uninstall_leaves_no_webhook_and_keeps_the_crd(cluster, installed):
    """Last in the module: uninstall, then a PDDeployment create works with no operator running."""
    chart, op = installed
    op.stop()
    chart.run("uninstall", RELEASE, "--wait")
    assert configuration(cluster) is None
    crd = client.ApiextensionsV1Api(cluster.api).read_custom_resource_definition(CRD)
    assert crd.metadata.name == CRD
    doc = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())
    doc["metadata"] = {"name": "after-uninstall"}
    try:
        cluster.kubectl("apply", "-n", "default", "-f", "-", input=yaml.safe_dump(doc))
    finally:
        cluster.kubectl("delete", "-n", "default", "pdd/after-uninstall", "--ignore-not-found", "--wait=false")
