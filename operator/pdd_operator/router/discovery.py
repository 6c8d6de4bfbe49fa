"""Where the router's endpoints come from: a static list, or the Kubernetes API.

Kubernetes discovery lists and watches the PDDeployment's engine pods (labels
``app.kubernetes.io/instance=<name>``, ``app.kubernetes.io/managed-by=pdd-operator``,
``app.kubernetes.io/component in (prefill, decode)``), keeps those that are Running, Ready and not
terminating, and replaces the registry's endpoints on every change: pods that come and go need no
restart. Pods rather than EndpointSlices, because the pairing key (the ``pdd-operator.dev/compat-hash``
label) and the push-mode metadata live on the pods. The router's service account needs
``get``/``list``/``watch`` on ``pods`` in its namespace.

What the router reads from each pod:

- ``status.podIP`` and the engine container's port named ``http`` -> the endpoint URL;
- label ``pdd-operator.dev/compat-hash`` -> pairing;
- push mode, prefill pods (see :func:`pdd_operator.render.engine.router_pod_annotations`): the
  side-channel host (``status.podIP``, the NIXL side channel binds the pod IP) and port (container
  port named ``nixl``, or annotation ``pdd-operator.dev/side-channel-port``), annotations
  ``pdd-operator.dev/tensor-parallel-size`` and ``pdd-operator.dev/pipeline-parallel-size``
  (default 1). Not the engine id: each engine process draws its own, and the router learns it from
  the engine (:attr:`pdd_operator.router.endpoints.Endpoint.engine_id`);
- ``metadata.uid`` and the engine container's ``restartCount`` -> ``Endpoint.instance``: a
  restarted container is a new engine process, whose engine id the router must learn again.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from pdd_operator.api.constants import (  # the operator-router contract: what the operator renders
    ANNOTATION_PP,
    ANNOTATION_SIDE_CHANNEL_PORT,
    ANNOTATION_TP,
    HTTP_PORT_NAME,
    LABEL_COMPAT_HASH,
    LABEL_COMPONENT,
    LABEL_INSTANCE,
    LABEL_MANAGED_BY,
    NIXL_PORT_NAME,
)
from pdd_operator.api.names import label_value
from pdd_operator.router.endpoints import ROLES, Endpoint, Registry

log = logging.getLogger("pdd_operator.router.discovery")



def pod_selector(name: str) -> str:
    """Label selector of PDDeployment ``name``'s engine pods (its instance label value:
    :func:`~pdd_operator.api.names.label_value`)."""
    return (f"{LABEL_INSTANCE}={label_value(name)},{LABEL_MANAGED_BY}=pdd-operator,"
            f"{LABEL_COMPONENT} in ({','.join(ROLES)})")


def _ready(pod: dict) -> bool:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    if meta.get("deletionTimestamp") or status.get("phase") != "Running" or not status.get("podIP"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def _container_with_port(pod: dict, name: str) -> tuple[dict, int] | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == name:
                return container, int(port["containerPort"])
    return None


def _port(pod: dict, name: str) -> int | None:
    found = _container_with_port(pod, name)
    return found[1] if found else None


def instance_of_pod(pod: dict) -> str:
    """``<metadata.uid>/<restartCount>`` of the pod's engine container (the one with the ``http``
    port): which engine process serves the pod now. The kubelet counts every restart of the container,
    so a killed engine that came back reads differently even if the router saw no failure."""
    found = _container_with_port(pod, HTTP_PORT_NAME)
    name = found[0].get("name") if found else None
    restarts = next((s.get("restartCount", 0) for s in (pod.get("status") or {}).get("containerStatuses") or []
                     if s.get("name") == name), 0)
    return f"{(pod.get('metadata') or {}).get('uid', '')}/{restarts}"


def _int(value, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def endpoint_of_pod(pod: dict) -> Endpoint | None:
    """The endpoint a pod (API JSON, camelCase) serves, or ``None`` if it is not a ready engine."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    role = labels.get(LABEL_COMPONENT)
    if role not in ROLES or not _ready(pod):
        return None
    http = _port(pod, HTTP_PORT_NAME)
    if http is None:
        return None
    ann = meta.get("annotations") or {}
    ip = pod["status"]["podIP"]
    host = f"[{ip}]" if ":" in ip else ip
    kv_port = _int(ann.get(ANNOTATION_SIDE_CHANNEL_PORT), 0) or _port(pod, NIXL_PORT_NAME)
    return Endpoint(
        url=f"http://{host}:{http}", role=role, compat_hash=labels.get(LABEL_COMPAT_HASH, ""),
        name=meta.get("name", ip), instance=instance_of_pod(pod), kv_host=ip,
        kv_port=kv_port, tp_size=_int(ann.get(ANNOTATION_TP), 1), pp_size=_int(ann.get(ANNOTATION_PP), 1),
    )


def endpoints_of_pods(pods: list[dict]) -> dict[str, list[Endpoint]]:
    """Ready endpoints per role from a list of pods, sorted by URL."""
    out: dict[str, list[Endpoint]] = {r: [] for r in ROLES}
    for pod in pods:
        ep = endpoint_of_pod(pod)
        if ep is not None:
            out[ep.role].append(ep)
    for eps in out.values():
        eps.sort(key=lambda e: e.url)
    return out


def apply_pods(registry: Registry, pods: list[dict]) -> None:
    """Replace the registry's endpoints with those of ``pods``."""
    for role, eps in endpoints_of_pods(pods).items():
        registry.replace(role, eps)


class KubeDiscovery:
    """List+watch of a PDDeployment's pods in a thread; each change is applied on the event loop.

    Uses the ``kubernetes`` client (in-cluster config, else the kubeconfig). A watch that ends or
    fails is restarted from a fresh list (with a short backoff on errors), so the registry converges
    to the API's view whatever happens to the connection.
    """

    def __init__(self, registry: Registry, name: str, namespace: str, loop: asyncio.AbstractEventLoop,
                 on_change: Callable[[], None] | None = None, api_client=None) -> None:
        self.registry, self.name, self.namespace, self.loop = registry, name, namespace, loop
        self.on_change = on_change
        self.api_client = api_client  # a kubernetes.client.ApiClient; None: kubeclient.load_config() (timeouts)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pdd-router-discovery", daemon=True)
        self.synced = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _publish(self, pods: dict[str, dict]) -> None:
        snapshot = list(pods.values())

        def apply() -> None:
            apply_pods(self.registry, snapshot)
            if self.on_change:
                self.on_change()

        self.loop.call_soon_threadsafe(apply)
        self.synced.set()

    def _run(self) -> None:
        from kubernetes import client, watch
        from kubernetes.client.exceptions import ApiException

        from pdd_operator.kubeclient import load_config, watch_timeout

        api_client = self.api_client if self.api_client is not None else load_config()
        api = client.CoreV1Api(api_client)
        serialize = api_client.sanitize_for_serialization
        selector = pod_selector(self.name)
        backoff = 1.0
        while not self._stop.is_set():
            try:
                listing = api.list_namespaced_pod(self.namespace, label_selector=selector)
                pods = {p.metadata.name: serialize(p) for p in listing.items}
                self._publish(pods)
                w = watch.Watch()
                for event in w.stream(api.list_namespaced_pod, self.namespace, label_selector=selector,
                                      resource_version=listing.metadata.resource_version, **watch_timeout()):
                    if self._stop.is_set():
                        w.stop()
                        break
                    obj = serialize(event["object"])
                    name = (obj.get("metadata") or {}).get("name")
                    if event["type"] == "DELETED":
                        pods.pop(name, None)
                    elif event["type"] in ("ADDED", "MODIFIED"):
                        pods[name] = obj
                    else:
                        break  # ERROR (e.g. 410 Gone): list again
                    self._publish(pods)
                backoff = 1.0
            except ApiException as exc:
                log.warning("pod watch of %s/%s failed: %s %s", self.namespace, self.name, exc.status, exc.reason)
                time.sleep(backoff)
                backoff = min(backoff * 2, 30)
            except Exception as exc:  # noqa: BLE001 - keep discovering whatever the connection does
                log.warning("pod watch of %s/%s failed: %s", self.namespace, self.name, exc)
                time.sleep(backoff)
                backoff = min(backoff * 2, 30)
