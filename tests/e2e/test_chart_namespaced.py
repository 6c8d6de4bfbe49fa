"""End to end: the chart's namespaced install (``watchNamespaces``): Roles in the listed namespace and
no cluster-wide grant for PDDeployments; the operator, run as the chart's ServiceAccount with the
chart's flags, serves that namespace without a single 403 (its resync lists per namespace, kopf scans
nothing cluster-wide), and may not even list PDDeployments elsewhere."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import (
    ROOT,
    OperatorProcess,
    _free_port,
    audit_denied,
    audit_events,
    condition,
    pdd_status,
    wait_for,
)
from tests.e2e.test_chart import CHART, helm_bin

pytestmark = pytest.mark.cluster

NAMESPACE = "pdd-chart-e2e-ns"   # the audit policy logs every request of its ServiceAccounts
WATCHED = "pdd-chart-e2e-team"
RELEASE = "pdd-ns"
FULLNAME = f"{RELEASE}-pdd-operator"
USER = f"system:serviceaccount:{NAMESPACE}:{FULLNAME}"


class NamespacedOperator(OperatorProcess):
    def start(self) -> None:
        real = self.cluster
        self.cluster = type("C", (), {"env": {**real.env, "KUBECONFIG": str(self.kubeconfig)}})()
        try:
            super().start()
        finally:
            self.cluster = real


@pytest.fixture(scope="module")
def namespaced(cluster, tmp_path_factory) -> Iterator[NamespacedOperator]:
    helm = helm_bin()
    base = tmp_path_factory.mktemp("chart-ns")
    for ns in (NAMESPACE, WATCHED):
        cluster.kubectl("create", "namespace", ns, check=False)
    run = [helm, "--namespace", NAMESPACE]
    subprocess.run([*run, "uninstall", RELEASE, "--wait"], capture_output=True, env=cluster.env, timeout=300)
    proc = subprocess.run([*run, "install", RELEASE, str(CHART), "--set", f"watchNamespaces={{{WATCHED}}}",
                           "--set", "crds.install=false", "--set", "webhook.enabled=false"],
                          capture_output=True, text=True, env=cluster.env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    token = cluster.kubectl("create", "token", FULLNAME, "-n", NAMESPACE, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    kubeconfig = base / "sa.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "c", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}],
    }))
    op = NamespacedOperator(cluster, base / "operator.log", [
        "--namespace", WATCHED, "--operator-namespace", NAMESPACE, "--leader-election-lease", FULLNAME,
        "--leader-election-identity", f"e2e-ns-{_free_port()}",
    ])
    op.kubeconfig = kubeconfig
    op.started_at = time.time()
    try:
        op.start()
        yield op
    finally:
        op.stop()
        subprocess.run([*run, "uninstall", RELEASE, "--wait"], capture_output=True, env=cluster.env, timeout=300)
        cluster.kubectl("delete", "pdd", "--all", "-n", WATCHED, "--wait=false", check=False)
        for ns in (NAMESPACE, WATCHED):
            cluster.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false")


def test_no_cluster_role_for_pddeployments(cluster, namespaced):
    for verb, where, allowed in [("list", ["-n", WATCHED], "yes"), ("list", ["--all-namespaces"], "no"),
                                 ("list", ["-n", "default"], "no"), ("watch", ["-n", WATCHED], "yes")]:
        proc = cluster.kubectl("auth", "can-i", verb, "pddeployments.pdd-operator.dev", *where, f"--as={USER}", check=False)
        assert proc.stdout.strip() == allowed, (verb, where, proc.stdout)
    roles = cluster.kubectl("get", "clusterrole", FULLNAME, check=False)
    assert roles.returncode != 0  # no webhook: no cluster-scoped rule at all, so no ClusterRole


def test_serves_its_namespace_without_a_403(cluster, namespaced):
    doc = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())
    doc["metadata"] = {"name": "team-llama"}
    cluster.kubectl("apply", "-n", WATCHED, "-f", "-", input=yaml.safe_dump(doc))
    wait_for(lambda: condition(pdd_status(cluster, WATCHED, "team-llama"), "Ready").get("status") == "True",
             180, what="Ready in the watched namespace")
    wait_for(lambda: namespaced.reconciles() >= 3, 30, what="resync rounds")
    requests = audit_events(cluster, namespaced.started_at - 5, USER)
    assert requests and audit_denied(requests) == []
