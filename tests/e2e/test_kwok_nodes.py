"""The local cluster's fake nodes behave like kubelets where the operator's status depends on it.

The node lifecycle controller marks every running pod of a node whose Lease expired Ready=False (an
etcd or apiserver outage longer than its grace period does that to every kwok node). A kubelet
reports its pods Ready again once it is back; kwok's own stages only ready Pending pods, so
dev/cluster/kwok-stages/pod-ready-again.yaml does it. Without it a PDDeployment on those nodes
stayed Ready=False for good after an outage (tests/e2e/test_outage.py failed that way in CI).
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import wait_for

pytestmark = pytest.mark.cluster


def _ready(cluster, namespace: str, name: str) -> str | None:
    pod = cluster.core.read_namespaced_pod(name, namespace)
    return next((c.status for c in pod.status.conditions or [] if c.type == "Ready"), None)


def test_a_running_pod_marked_not_ready_by_the_node_controller_is_ready_again(cluster, namespace):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"nodeSelector": {"kubernetes.io/hostname": "cpu-1"},
                    "containers": [{"name": "c", "image": "registry.invalid/none:1"}]}}
    cluster.core.create_namespaced_pod(namespace, pod)
    wait_for(lambda: _ready(cluster, namespace, "p") == "True", 60, what="the pod Ready on a kwok node")
    # What MarkPodsNotReady (pkg/controller/util/node) writes for a node gone Unknown: Ready=False only.
    patched = cluster.core.patch_namespaced_pod_status(
        "p", namespace, {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "NodeNotReady"}]}})
    assert next(c.status for c in patched.status.conditions if c.type == "Ready") == "False"
    assert patched.status.phase == "Running"
    wait_for(lambda: _ready(cluster, namespace, "p") == "True", 60, interval=0.5,
             what="the pod Ready again (kwok's pod-ready-again stage, as a kubelet would report it)")

