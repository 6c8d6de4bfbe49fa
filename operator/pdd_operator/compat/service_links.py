"""The kubelet's service variables a container gets, where the files checked are the whole deployment.

The kubelet adds to every container, before its own ``env``, variables for each Service of the pod's namespace that
has a cluster IP (pkg/kubelet/kubelet_pods.go ``getServiceEnvVarMap``, pkg/kubelet/envvars/envvars.go
``FromServices``): with ``P`` the Service's name upper-cased and ``-`` written ``_`` (``makeEnvVariableName``),
``P_SERVICE_HOST``, ``P_SERVICE_PORT``, ``P_SERVICE_PORT_<PORT NAME>`` per named port, and the Docker link variables
``P_PORT`` (first port, ``tcp://<cluster IP>:<port>``) and ``P_PORT_<port>_<PROTO>`` with ``_PROTO``, ``_PORT`` and
``_ADDR`` per port (``makeLinkVariables``). A Service without a cluster IP (``clusterIP: None``, headless; an
``ExternalName`` Service) gives none (``IsServiceIPSet``). With ``enableServiceLinks: false`` on the pod only the
``kubernetes`` Service of the ``default`` namespace is added (``KUBERNETES_*``).

So a launch script's ``${DYN_VLLM_KV_EVENT_PORT:-20081}`` (Dynamo's disagg_flexkv.sh) is not certainly its default in
a pod: a Service named ``dyn-vllm-kv-event`` would set ``DYN_VLLM_KV_EVENT_PORT=tcp://<ip>:<port>``. The decision
kept here (issue 9, fixF): the files given to ``pdd check`` are read as the whole deployment, so for a pod template of
a workload whose Services are the user's own (:data:`PLAIN_WORKLOADS`), the service variables its containers get are
those of the Services among the files in its namespace (none with ``enableServiceLinks: false``), and a name of the
service-variable form that none of them produces is unset: its default is what the shell expands. A Service of that
name among the files keeps the value unknown (not checked), and so does an ``envFrom`` source that may set it
(:meth:`~pdd_operator.vllm.expansion.ContainerEnv.may_define`), which is read before. Pods of other kinds (a Dynamo
graph, a KServe service: their operators create Services of their own, with cluster IPs, whose names are not in the
files) keep every such name possible, as do namespaces where a Service's name is not a literal (a template).
"""

from __future__ import annotations

import copy
from typing import Any

from pdd_operator.vllm.expansion import SERVICE_LINKS_KEY

#: Kinds whose pods get only the Services the user writes (their controllers create none with a cluster IP;
#: LeaderWorkerSet's own Service is headless, which gives no variables).
PLAIN_WORKLOADS = frozenset({"Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController",
                             "Job", "CronJob", "LeaderWorkerSet"})


def _env_name(text: str) -> str:
    """envvars.go ``makeEnvVariableName``: upper case, ``-`` as ``_``."""
    return text.replace("-", "_").upper()


def service_link_names(service: dict) -> frozenset[str]:
    """The names of the variables the kubelet makes of the Service ``service`` (a manifest) for the containers of its
    namespace (envvars.go ``FromServices``, see the module docstring); none for a Service without a cluster IP."""
    spec = service.get("spec") if isinstance(service.get("spec"), dict) else {}
    meta = service.get("metadata") if isinstance(service.get("metadata"), dict) else {}
    ports = [p for p in spec.get("ports") or [] if isinstance(p, dict)]
    if str(spec.get("clusterIP", "")) == "None" or spec.get("type") == "ExternalName" or not ports:
        return frozenset()
    prefix = _env_name(str(meta.get("name", "")))
    names = {f"{prefix}_SERVICE_HOST", f"{prefix}_SERVICE_PORT", f"{prefix}_PORT"}
    for port in ports:
        if port.get("name"):
            names.add(f"{prefix}_SERVICE_PORT_{_env_name(str(port['name']))}")
        each = f"{prefix}_PORT_{port.get('port')}_{str(port.get('protocol') or 'TCP').upper()}"
        names |= {each, f"{each}_PROTO", f"{each}_PORT", f"{each}_ADDR"}
    return frozenset(names)


def service_links_of(docs: list[dict]) -> dict[str, frozenset[str] | None]:
    """namespace -> the service variable names of the Services among ``docs`` there (:func:`service_link_names`);
    ``None`` for a namespace where a Service's name is not a literal DNS label (a template), whose variables are
    not known. A namespace with no Service among ``docs`` is absent (no variables)."""
    out: dict[str, frozenset[str] | None] = {}
    for doc in docs:
        if not (isinstance(doc, dict) and doc.get("kind") == "Service" and str(doc.get("apiVersion", "v1")) == "v1"):
            continue
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        namespace, name = str(meta.get("namespace") or "default"), meta.get("name")
        known = out.get(namespace, frozenset())
        if known is None or not isinstance(name, str) or not name.replace("-", "").isalnum():
            out[namespace] = None
            continue
        out[namespace] = known | service_link_names(doc)
    return out


def with_service_links(doc: dict, links: dict[str, frozenset[str] | None]) -> dict:
    """``doc`` (not changed) with :data:`~pdd_operator.vllm.expansion.SERVICE_LINKS_KEY` set on each container and
    init container of each pod spec in it, where ``doc`` is of :data:`PLAIN_WORKLOADS` and the Services of its
    namespace are known (``links``, :func:`service_links_of`): their variable names, or none where the pod spec sets
    ``enableServiceLinks: false``. Returns a deep copy where anything was set, else ``doc``."""
    if not isinstance(doc.get("kind"), str) or doc["kind"] not in PLAIN_WORKLOADS:  # any kind the API may carry
        return doc
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    known = links.get(str(meta.get("namespace") or "default"), frozenset())
    out = copy.deepcopy(doc)
    return out if _mark(out, known) else doc


def _mark(node: Any, known: frozenset[str] | None) -> bool:
    changed = False
    if isinstance(node, dict):
        if isinstance(node.get("containers"), list):
            names = [] if node.get("enableServiceLinks") is False else None if known is None else sorted(known)
            if names is not None:
                for container in [*node["containers"], *(node.get("initContainers") or [])]:
                    if isinstance(container, dict):
                        container[SERVICE_LINKS_KEY] = names
                        changed = True
        for value in node.values():
            changed |= _mark(value, known)
    elif isinstance(node, list):
        for item in node:
            changed |= _mark(item, known)
    return changed
