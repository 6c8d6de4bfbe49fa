"""Drift owned by other field managers is tolerated or reverted explicitly, never a write loop; the
router's ServiceAccount, Role and RoleBinding are watched like the other children."""

from __future__ import annotations

import time

import pytest
import yaml

from tests.e2e.conftest import ROOT, OperatorProcess, audit_writes, condition, pdd_status, wait_for

pytestmark = pytest.mark.cluster

LLAMA = (ROOT / "examples" / "llama-dense-pd.yaml").read_text()


def _ready(cluster, ns, name="llama-8b"):
    return lambda: condition(pdd_status(cluster, ns, name), "Ready").get("status") == "True"


def test_env_var_added_by_another_manager_causes_no_write_loop(cluster, operator, namespace):
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=LLAMA)
    wait_for(_ready(cluster, namespace), 120, what="Ready")
    injected = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llama-8b-decode"},
                "spec": {"template": {"spec": {"containers": [
                    {"name": "vllm", "env": [{"name": "INJECTED_BY_OTHERS", "value": "1"}]}]}}}}
    cluster.kubectl("apply", "--server-side", "--field-manager=sidecar-injector", "-n", namespace, "-f", "-",
                    input=yaml.safe_dump(injected))
    since = time.time()
    operator.wait_quiet()  # two resync rounds without a write
    operator.wait_quiet()
    writes = [e for e in audit_writes(cluster, namespace, since)
              if e["objectRef"]["resource"] == "deployments"
              and "sidecar-injector" not in e.get("requestURI", "")]
    assert writes == [], [e["requestURI"] for e in writes]
    env = cluster.apps.read_namespaced_deployment("llama-8b-decode", namespace).spec.template.spec.containers[0].env
    assert "INJECTED_BY_OTHERS" in {e.name for e in env}  # tolerated, not fought over


def test_service_port_edited_by_hand_is_reverted(cluster, operator, namespace):
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=LLAMA)
    wait_for(_ready(cluster, namespace), 120, what="Ready")
    svc = cluster.core.read_namespaced_service("llama-8b-prefill", namespace)
    http = next(p for p in svc.spec.ports if p.name == "http")
    cluster.kubectl("patch", "-n", namespace, "service/llama-8b-prefill", "--type=json", "-p",
                    f'[{{"op": "replace", "path": "/spec/ports/{svc.spec.ports.index(http)}/port", "value": 8001}}]')

    def reverted():
        ports = {(p.name, p.port) for p in cluster.core.read_namespaced_service("llama-8b-prefill", namespace).spec.ports}
        return ports == {("http", http.port), ("nixl", next(p.port for p in svc.spec.ports if p.name == "nixl"))}
    wait_for(reverted, 60, what="the hand-edited Service port reverted")
    operator.wait_quiet()
    assert condition(pdd_status(cluster, namespace, "llama-8b"), "Degraded")["status"] == "False"


def test_router_rbac_is_restored_by_the_watch(cluster, namespace, tmp_path):
    """With a resync an hour away only the watch on ServiceAccounts, Roles and RoleBindings can bring
    them back within 30 s. This proves it when run alone (`pytest tests/e2e/test_drift.py -k rbac`):
    in a session where the shared operator fixture (2 s resync) is already running, it restores them too."""
    op = OperatorProcess(cluster, tmp_path / "operator.log", resync_seconds=3600)
    op.start()
    try:
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=LLAMA)
        wait_for(_ready(cluster, namespace), 120, what="Ready")
        for kind in ("serviceaccount", "role", "rolebinding"):
            _wait_idle(op)  # no event in flight that would reconcile anyway
            cluster.kubectl("delete", "-n", namespace, f"{kind}/llama-8b-router")
            wait_for(lambda k=kind: cluster.kubectl("get", "-n", namespace, f"{k}/llama-8b-router", check=False)
                     .returncode == 0, 15, what=f"{kind} llama-8b-router restored")
    finally:
        op.stop()


def _wait_idle(op: OperatorProcess, window: float = 3.0) -> None:
    """Wait until the operator has not reconciled anything for ``window`` seconds (pods settled)."""
    def idle() -> bool:
        seen = op.reconciles()
        time.sleep(window)  # the observation window itself
        return op.reconciles() == seen
    wait_for(idle, 120, interval=0, what="an operator with no events to handle")
