"""A container that cannot run is told in status with its pod, container and reason, and a fix
recovers with no operator restart: a PDDeployment whose Hugging Face token Secret does not exist yet
(the kubelet's CreateContainerConfigError, here from the dev node agent, which runs the pods'
processes and refuses what a kubelet would) reads ``Degraded=True`` ``ContainersFailing`` naming the
Secret, with a Warning Event; once the Secret exists the pods start and it is Ready, ``Recovered``."""

from __future__ import annotations

import yaml
from kubernetes import client

from tests.e2e.conftest import condition, pdd_status, wait_for
from tests.e2e.load import fake_engines_doc
from tests.e2e.node_agent import node_agent  # noqa: F401 (fixture)


def test_a_missing_secret_is_degraded_with_its_name_then_recovers(
        cluster, operator, namespace, node_agent, tmp_path):  # noqa: F811
    doc = fake_engines_doc(tmp_path, prefill=1, decode=1, routers=0)
    doc["spec"]["model"]["hfTokenSecretRef"] = {"name": "hf-token", "key": "token"}
    name = doc["metadata"]["name"]
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))

    def failing():
        c = condition(pdd_status(cluster, namespace, name), "Degraded")
        return c if c.get("reason") == "ContainersFailing" else None

    c = wait_for(failing, 120, interval=0.5, what=f"pdd/{name} Degraded ContainersFailing")
    assert c["status"] == "True"
    assert "CreateContainerConfigError" in c["message"] and "'hf-token'" in c["message"], c["message"]
    assert condition(pdd_status(cluster, namespace, name), "Ready")["status"] == "False"

    def reasons():
        return {e.reason: e.type for e in cluster.core.list_namespaced_event(namespace).items
                if e.involved_object.name == name}

    wait_for(lambda: reasons().get("ContainersFailing") == "Warning", 30, what="a ContainersFailing Warning Event")

    cluster.core.create_namespaced_secret(namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name="hf-token"), string_data={"token": "hf_test"}))
    wait_for(lambda: condition(pdd_status(cluster, namespace, name), "Ready").get("status") == "True", 120,
             interval=0.5, what=f"pdd/{name} Ready once the Secret exists")
    assert condition(pdd_status(cluster, namespace, name), "Degraded")["reason"] == "AsExpected"
    wait_for(lambda: reasons().get("Recovered") == "Normal", 30, what="a Recovered Event")
