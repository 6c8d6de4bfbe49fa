"""The held-back variants of issue 11 (tests/robustness_variants.py) applied with the real kubectl to
the real apiserver, the webhook off (this module: the session operator) and on
(test_robustness_variants_webhook.py). Each must be refused naming the field, or run with a truthful
status for its generation, with the operator alive and not writing in a loop (its own write counters).
Hand edits of the operator's Services by other field managers are reverted and then left quiet."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import OperatorProcess, condition, pdd_status, wait_for
from tests.e2e.test_robustness import settled
from tests.robustness_variants import LLAMA, VARIANTS, Variant, document

pytestmark = pytest.mark.cluster

#: Error conditions that mean the operator could not do its part (an apply refused, a reconcile crashed).
FAILED_REASONS = ("ApplyFailed", "ReconcileError")


def _named_in_status(status: dict, field: str) -> bool:
    fields = [fld for f in status.get("compatibility") or [] if f.get("severity") == "error" for fld in f["fields"]]
    return any(fld.startswith(field) for fld in fields) or field in condition(status, "Degraded").get("message", "")


def check_variant(cluster, op: OperatorProcess, ns: str, v: Variant, webhook: bool) -> None:
    """Apply ``v`` (after its ConfigMaps) and assert its verdict (see the module docstring)."""
    for cm in v.config_maps:
        cluster.kubectl("apply", "--server-side", "-n", ns, "-f", "-",
                        input=json.dumps({"apiVersion": "v1", "kind": "ConfigMap", **cm}))
    # Server-side: a client-side apply would also write the whole object into an annotation (256 KiB).
    proc = cluster.kubectl("apply", "--server-side", "-n", ns, "-f", "-", input=v.body, check=False)
    if proc.returncode != 0:
        assert v.verdict != "run", f"{v.id} refused: {proc.stderr}"
        assert (v.field or "Invalid value") in proc.stderr, proc.stderr
        assert webhook or "denied the request" not in proc.stderr
        return
    assert not (webhook and v.verdict == "refuse"), f"the webhook admitted {v.id}"
    status = wait_for(settled(cluster, ns, v.name), 90, what=f"status of {v.id}")
    if v.verdict == "refuse":
        assert condition(status, "Compatible")["status"] == "False", status["conditions"]
        assert _named_in_status(status, v.field), status
    else:
        degraded = condition(status, "Degraded")
        assert degraded.get("reason") not in FAILED_REASONS, degraded
        assert condition(status, "Compatible")["status"] == "True", status.get("compatibility")
        for role in ("prefill", "decode"):
            wait_for(lambda r=role: cluster.apps.list_namespaced_deployment(
                ns, label_selector=f"pdd-operator.dev/role={r}").items, 60, what=f"{v.id}: a {role} Deployment")
    op.wait_quiet(120)
    assert op.proc.poll() is None


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.id for v in VARIANTS])
def test_variant_without_webhook(cluster, operator, namespace, variant):
    check_variant(cluster, operator, namespace, variant, webhook=False)


#: Hand edits of the prefill Service (JSON patches by another field manager, kubectl's).
SERVICE_EDITS = {
    "selector-changed": [{"op": "replace", "path": "/spec/selector/app.kubernetes.io~1component", "value": "decode"}],
    "selector-key-added": [{"op": "add", "path": "/spec/selector/extra", "value": "x"}],
    "port-renamed": [{"op": "replace", "path": "/spec/ports/0/name", "value": "renamed"}],
    "port-added": [{"op": "add", "path": "/spec/ports/-", "value": {"name": "extra", "port": 9999}}],
    "target-port-changed": [{"op": "replace", "path": "/spec/ports/0/targetPort", "value": 1234}],
    "not-ready-addresses": [{"op": "add", "path": "/spec/publishNotReadyAddresses", "value": False}],
}
ROUTER_EDITS = {
    "router-type-node-port": [{"op": "replace", "path": "/spec/type", "value": "NodePort"}],
    "router-type-load-balancer": [{"op": "replace", "path": "/spec/type", "value": "LoadBalancer"}],
    "router-session-affinity": [{"op": "add", "path": "/spec/sessionAffinity", "value": "ClientIP"}],
}


def _service_spec(cluster, ns, name) -> dict:
    """What the operator renders of a Service's spec (other fields, such as sessionAffinity, are left
    to whoever sets them)."""
    spec = cluster.api.sanitize_for_serialization(cluster.core.read_namespaced_service(name, ns))["spec"]
    return {k: spec.get(k) for k in ("selector", "ports", "type")}


@pytest.mark.parametrize("edit", [*SERVICE_EDITS, *ROUTER_EDITS])
def test_hand_edited_service_is_reverted_then_quiet(cluster, operator, namespace, edit):
    name = "svc-edit"
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(document(name)))
    wait_for(lambda: condition(pdd_status(cluster, namespace, name), "Ready").get("status") == "True", 120,
             what="Ready")
    service = f"{name}-router" if edit in ROUTER_EDITS else f"{name}-prefill"
    before = _service_spec(cluster, namespace, service)
    patch = {**SERVICE_EDITS, **ROUTER_EDITS}[edit]
    cluster.kubectl("patch", "-n", namespace, f"service/{service}", "--type=json", "-p", json.dumps(patch))
    wait_for(lambda: _service_spec(cluster, namespace, service) == before, 60,
             what=f"{service} back as rendered after {edit}")
    operator.wait_quiet(120)
    assert _service_spec(cluster, namespace, service) == before
    status = pdd_status(cluster, namespace, name)
    assert condition(status, "Degraded")["status"] == "False", status["conditions"]
    assert LLAMA["spec"]["prefill"]["replicas"] == (status.get("prefill") or {}).get("replicas")
