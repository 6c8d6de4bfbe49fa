"""End to end with the OwnerReferencesPermissionEnforcement admission plugin on (as OpenShift runs
it): a child whose ownerReference sets ``blockOwnerDeletion`` may be created only by who may update
the owner's ``finalizers``. Shown: the plugin refuses such a child to a ServiceAccount without the
``pddeployments/finalizers`` grant and allows it once granted (so the plugin is on, and that grant is
what it checks), and the operator, run as the Helm chart's ServiceAccount, creates every child of a
PDDeployment (each with ``blockOwnerDeletion``) and brings it to Ready without a single 403.

The module restarts the session's apiserver with the plugin (``PDD_APISERVER_ADMISSION_PLUGINS``,
dev/cluster/cluster.sh; etcd data kept) and restores the previous plugins afterwards.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest
import yaml
from kubernetes import client

from tests.e2e import test_chart
from tests.e2e.conftest import (
    CLUSTER_SH,
    ROOT,
    audit_denied,
    audit_events,
    condition,
    other_operators_stopped,
    pdd_status,
    wait_for,
    wait_no_namespace_terminating,
)

pytestmark = pytest.mark.cluster

PLUGIN = "OwnerReferencesPermissionEnforcement"
REFUSAL = "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on"

#: The chart installed and its operator running as the chart's ServiceAccount (tests/e2e/test_chart.py).
installed = test_chart.installed


def _up(plugins: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PDD_APISERVER_ADMISSION_PLUGINS"}
    if plugins:
        env["PDD_APISERVER_ADMISSION_PLUGINS"] = plugins
    subprocess.run(["bash", str(CLUSTER_SH), "up"], check=True, timeout=900, env=env, stdout=subprocess.DEVNULL)


@pytest.fixture(scope="module", autouse=True)
def plugin_on(cluster) -> Iterator[None]:
    """The apiserver with the plugin enabled, for this module (autouse: before the chart installs), and
    no other operator running meanwhile: the session's operator has every right, so it would create the
    children the chart's ServiceAccount is refused."""
    with other_operators_stopped():
        _up(PLUGIN)
        wait_for(lambda: cluster.core.list_namespace(limit=1) is not None, 60, what="the restarted apiserver")
        # Earlier modules' namespaces may still be terminating; the chart's operator (all namespaces)
        # would reconcile their PDDeployments into the apiserver's 403 for a terminating namespace.
        wait_no_namespace_terminating(cluster)
        try:
            yield
        finally:
            _up(os.environ.get("PDD_APISERVER_ADMISSION_PLUGINS"))


def _child(name: str, owner: dict) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "ownerReferences": [{
            "apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]},
    })


def test_block_owner_deletion_needs_the_finalizers_grant(cluster, namespace):
    """The negative control: the same child, refused without ``pddeployments/finalizers`` update and
    allowed with it."""
    doc = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())
    doc["metadata"] = {"name": "owner"}
    doc["spec"]["prefill"]["replicas"] = doc["spec"]["decode"]["replicas"] = 0  # nothing to run: an owner only
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    owner = cluster.custom.get_namespaced_custom_object("pdd-operator.dev", "v1alpha1", namespace, "pddeployments",
                                                        "owner")
    user = f"system:serviceaccount:{namespace}:writer"
    cluster.kubectl("create", "serviceaccount", "writer", "-n", namespace)
    cluster.kubectl("create", "role", "writer", "-n", namespace, "--verb=create,get", "--resource=configmaps")
    cluster.kubectl("create", "rolebinding", "writer", "-n", namespace, "--role=writer",
                    f"--serviceaccount={namespace}:writer")
    refused = cluster.kubectl("create", "-n", namespace, f"--as={user}", "-f", "-", input=_child("without", owner),
                              check=False)
    assert refused.returncode != 0 and REFUSAL in refused.stderr, refused.stderr
    cluster.kubectl("create", "role", "finalizers", "-n", namespace, "--verb=update",
                    "--resource=pddeployments.pdd-operator.dev/finalizers")
    cluster.kubectl("create", "rolebinding", "finalizers", "-n", namespace, "--role=finalizers",
                    f"--serviceaccount={namespace}:writer")

    def allowed() -> bool:  # RBAC changes reach the authorizer through its informers: not instantly
        return cluster.kubectl("create", "-n", namespace, f"--as={user}", "-f", "-", input=_child("with", owner),
                               check=False).returncode == 0
    wait_for(allowed, 30, what="the child allowed once finalizers may be updated")
    assert cluster.core.read_namespaced_config_map("with", namespace).metadata.owner_references[0].block_owner_deletion
    # Gone before the chart's operator starts (next test): it would otherwise reconcile this owner while
    # the namespace terminates, and the apiserver's 403 for a terminating namespace would count as denied.
    cluster.kubectl("delete", "pdd", "owner", "-n", namespace, "--wait=true", "--timeout=60s")


def _finalizers_allowed(cluster) -> bool:
    """Whether the authorizer lets the chart's ServiceAccount update ``pddeployments/finalizers`` now
    (RBAC changes reach it through its informers, not at once)."""
    return cluster.kubectl("auth", "can-i", "update", "pddeployments.pdd-operator.dev/finalizers",
                           f"--as={test_chart.USER}", "-A", check=False).stdout.strip() == "yes"


def test_the_charts_service_account_creates_every_child_and_gets_ready(cluster, installed, namespace):
    _, op = installed
    doc = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())
    doc["metadata"] = {"name": "guarded"}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    wait_for(lambda: condition(pdd_status(cluster, namespace, "guarded"), "Ready").get("status") == "True",
             180, what="Ready with the plugin on")
    selector = "app.kubernetes.io/instance=guarded"
    children = {
        "Deployment": cluster.apps.list_namespaced_deployment(namespace, label_selector=selector).items,
        "Service": cluster.core.list_namespaced_service(namespace, label_selector=selector).items,
        "ServiceAccount": cluster.core.list_namespaced_service_account(namespace, label_selector=selector).items,
    }
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    children["Role"] = rbac.list_namespaced_role(namespace, label_selector=selector).items
    children["RoleBinding"] = rbac.list_namespaced_role_binding(namespace, label_selector=selector).items
    assert {k: len(v) for k, v in children.items()} == {"Deployment": 3, "Service": 3, "ServiceAccount": 1,
                                                        "Role": 1, "RoleBinding": 1}
    for kind, items in children.items():
        for obj in items:
            (ref,) = obj.metadata.owner_references
            assert (ref.kind, ref.name, ref.controller, ref.block_owner_deletion) == (
                "PDDeployment", "guarded", True, True), (kind, obj.metadata.name)
    requests = audit_events(cluster, op.started_at - 5, test_chart.USER)
    # This object's children, the chart's namespace and cluster scope: other tests' namespaces may be going away.
    mine = [r for r in requests if (r.get("objectRef") or {}).get("namespace") in (None, namespace, test_chart.NAMESPACE)]
    assert mine and audit_denied(mine) == []


def test_without_the_finalizers_grant_the_operator_is_refused(cluster, installed, namespace):
    """The negative control with the operator itself: the chart's ClusterRole less its
    ``pddeployments/finalizers`` rule, and the plugin refuses the children (Degraded=ApplyFailed with
    its message); with the rule back they are created."""
    role_name = test_chart.FULLNAME
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    original = rbac.read_cluster_role(role_name)
    kept = [r for r in original.rules if "pddeployments/finalizers" not in (r.resources or [])]
    assert len(kept) == len(original.rules) - 1
    rbac.patch_cluster_role(role_name, {"rules": [cluster.api.sanitize_for_serialization(r) for r in kept]})
    try:
        wait_for(lambda: not _finalizers_allowed(cluster), 30, what="the authorizer without the finalizers grant")
        doc = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())
        doc["metadata"] = {"name": "unguarded"}
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
        st = wait_for(lambda: (s := pdd_status(cluster, namespace, "unguarded"))
                      and condition(s, "Degraded").get("reason") == "ApplyFailed" and s, 90, what="Degraded=ApplyFailed")
        assert REFUSAL in condition(st, "Degraded")["message"]
        assert cluster.apps.list_namespaced_deployment(namespace).items == []
    finally:
        rbac.patch_cluster_role(role_name, {"rules": [cluster.api.sanitize_for_serialization(r)
                                                      for r in original.rules]})
    wait_for(lambda: condition(pdd_status(cluster, namespace, "unguarded"), "Ready").get("status") == "True",
             180, what="Ready once the grant is back")
