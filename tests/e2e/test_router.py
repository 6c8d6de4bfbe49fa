"""The router's Kubernetes discovery against the real API server of the local control plane.

Engine pods are created directly (kwok runs them: Running, Ready, a fake pod IP that is never dialled);
the discovery must follow them as they come and go, without a restart, keep only this PDDeployment's
engine pods, and pair by compat hash.
"""

from __future__ import annotations

import asyncio

import pytest
from kubernetes import client

from pdd_operator.api.constants import LABEL_COMPAT_HASH, LABEL_COMPONENT, LABEL_INSTANCE, LABEL_MANAGED_BY
from pdd_operator.router.discovery import KubeDiscovery
from pdd_operator.router.endpoints import Registry
from tests.e2e.conftest import ROOT, wait_for

pytestmark = pytest.mark.cluster


def engine_pod(name: str, role: str, chash: str, instance: str = "demo") -> dict:
    return {
        "metadata": {"name": name, "labels": {LABEL_INSTANCE: instance, LABEL_MANAGED_BY: "pdd-operator",
                                              LABEL_COMPONENT: role, LABEL_COMPAT_HASH: chash}},
        "spec": {"containers": [{"name": "vllm", "image": "example.invalid/vllm:never",
                                 "ports": [{"name": "http", "containerPort": 8000},
                                           {"name": "nixl", "containerPort": 5600}]}],
                 "terminationGracePeriodSeconds": 0},
    }


def test_discovery_follows_engine_pods_without_restart(cluster, namespace):
    async def go():
        registry = Registry()
        changed = asyncio.Event()
        discovery = KubeDiscovery(registry, "demo", namespace, asyncio.get_running_loop(),
                                  on_change=changed.set, api_client=cluster.api)

        async def until(predicate, what, timeout=60.0):
            async def loop():
                while not predicate():
                    changed.clear()
                    await changed.wait()
            try:
                await asyncio.wait_for(loop(), timeout)
            except TimeoutError:
                pytest.fail(f"timed out waiting for {what}: prefill {registry.endpoints('prefill')}, "
                            f"decode {registry.endpoints('decode')}")

        def create(body):
            return asyncio.to_thread(cluster.core.create_namespaced_pod, namespace, body)

        def urls(role):
            return sorted(e.name for e in registry.endpoints(role))

        discovery.start()
        try:
            await asyncio.to_thread(discovery.synced.wait, 30)
            assert registry.pairs() == 0
            await create(engine_pod("p1", "prefill", "h1"))
            await create(engine_pod("d1", "decode", "h1"))
            await create(engine_pod("other-p", "prefill", "h1", instance="other"))  # another PDDeployment
            await create(engine_pod("demo-router", "router", "h1"))  # not an engine
            await until(lambda: registry.pairs() == 1, "p1/d1 paired")
            assert urls("prefill") == ["p1"] and urls("decode") == ["d1"]
            ep = registry.endpoints("prefill")[0]
            assert ep.url.startswith("http://") and ep.url.endswith(":8000") and ep.compat_hash == "h1"

            # A new revision's pods arrive: they pair only among themselves.
            await create(engine_pod("d2", "decode", "h2"))
            await until(lambda: len(registry.endpoints("decode")) == 2, "d2 discovered")
            assert registry.pairs() == 1
            await create(engine_pod("p2", "prefill", "h2"))
            await until(lambda: registry.pairs() == 2, "p2/d2 paired")
            assert registry.pick_decode("h2").name == "d2"

            # The old revision goes away.
            await asyncio.to_thread(cluster.core.delete_namespaced_pod, "p1", namespace)
            await until(lambda: urls("prefill") == ["p2"], "p1 removed")
            assert {registry.pick_prefill().name for _ in range(10)} == {"p2"}
        finally:
            discovery.stop()

    asyncio.run(go())


def _allowed(cluster, user: str, namespace: str, verb: str, resource: str, group: str = "") -> bool:
    """The API server's own RBAC answer (SubjectAccessReview) for a ServiceAccount user."""
    sa_ns = user.split(":")[2]
    review = client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
        user=user, groups=["system:serviceaccounts", f"system:serviceaccounts:{sa_ns}", "system:authenticated"],
        resource_attributes=client.V1ResourceAttributes(namespace=namespace, verb=verb, resource=resource,
                                                        group=group)))
    return client.AuthorizationV1Api(cluster.api).create_subject_access_review(review).status.allowed


def test_router_runs_as_its_own_service_account_that_may_only_read_pods(cluster, operator, namespace):
    cluster.kubectl("apply", "-n", namespace, "-f", str(ROOT / "examples" / "nemotron-nano-pd.yaml"))
    name = "nemotron-nano-router"
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    wait_for(lambda: rbac.read_namespaced_role_binding(name, namespace), 60, what="the router's RoleBinding")
    dep = wait_for(lambda: cluster.apps.read_namespaced_deployment(name, namespace), 60, what="router Deployment")
    assert dep.spec.template.spec.service_account_name == name
    for obj in (cluster.core.read_namespaced_service_account(name, namespace),
                rbac.read_namespaced_role(name, namespace), rbac.read_namespaced_role_binding(name, namespace)):
        assert obj.metadata.owner_references[0].name == "nemotron-nano"  # garbage-collected with the PDDeployment

    user = f"system:serviceaccount:{namespace}:{name}"
    for verb in ("get", "list", "watch"):
        assert _allowed(cluster, user, namespace, verb, "pods"), verb
    assert not _allowed(cluster, user, "default", "list", "pods")  # only its own namespace
    for verb, resource, group in (("create", "pods", ""), ("delete", "pods", ""), ("get", "secrets", ""),
                                  ("list", "pddeployments", "pdd-operator.dev"), ("patch", "deployments", "apps")):
        assert not _allowed(cluster, user, namespace, verb, resource, group), (verb, resource)
    # The namespace's default ServiceAccount could not discover anything: without these objects the
    # router would serve 503s.
    assert not _allowed(cluster, f"system:serviceaccount:{namespace}:default", namespace, "list", "pods")

    # The router's own discovery, authenticated as that ServiceAccount (a real token from the
    # TokenRequest API), finds the PDDeployment's Ready engine pods.
    token = cluster.core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 600}}).status.token
    cfg = client.Configuration()
    cfg.host, cfg.ssl_ca_cert = cluster.api.configuration.host, cluster.api.configuration.ssl_ca_cert
    cfg.api_key = {"authorization": f"Bearer {token}"}

    async def go():
        registry = Registry()
        changed = asyncio.Event()
        discovery = KubeDiscovery(registry, "nemotron-nano", namespace, asyncio.get_running_loop(),
                                  on_change=changed.set, api_client=client.ApiClient(cfg))
        discovery.start()
        try:
            async def paired():
                while registry.pairs() < 1:
                    changed.clear()
                    await changed.wait()
            await asyncio.wait_for(paired(), 120)
        finally:
            discovery.stop()
        return registry

    registry = asyncio.run(go())
    assert [e.name for e in registry.endpoints("prefill")] and [e.name for e in registry.endpoints("decode")]
