"""Child objects of a PDDeployment: one Deployment and one headless Service per role, and the router
(a Deployment and a ClusterIP Service).

Each builder returns a whole object from the spec (no cluster reads), so ``pdd render``, the
operator and the tests see exactly the same thing.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from pdd_operator.api.constants import (
    ANNOTATION_GENERATION,
    API_VERSION,
    HTTP_PORT_NAME,
    KIND,
    LABEL_COMPAT_HASH,
    LABEL_COMPONENT,
    LABEL_INSTANCE,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    LABEL_PART_OF,
    LABEL_ROLE,
    LABEL_SLOT,
    LABEL_VERSION,
    NIXL_PORT_NAME,
    ROLES,
)
from pdd_operator.api.names import child_name, deployment_name, label_value
from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.render.drain import pre_stop, termination_grace_seconds
from pdd_operator.render.engine import (
    compat_hash,
    engine_env,
    role_ports,
    router_pod_annotations,
    uses_push,
    vllm_args,
)
from pdd_operator.vllm.versions import fmt, resolve_version

ENGINE_CONTAINER = "vllm"


@dataclass(frozen=True)
class Owner:
    """The PDDeployment that owns the children: its name, namespace and (in a cluster) uid/generation."""

    name: str
    namespace: str = "default"
    uid: str | None = None
    generation: int | None = None

    def reference(self) -> dict:
        """Return the controller ownerReference (garbage collection deletes children with the owner)."""
        return {
            "apiVersion": API_VERSION, "kind": KIND, "name": self.name, "uid": self.uid,
            "controller": True, "blockOwnerDeletion": True,
        }


def selector_labels(owner: str, role: str) -> dict[str, str]:
    """Labels that select one role's pods (stable across spec changes: a Deployment selector is immutable).

    The instance label is :func:`~pdd_operator.api.names.label_value` of the PDDeployment name."""
    return {LABEL_NAME: "vllm", LABEL_INSTANCE: label_value(owner), LABEL_COMPONENT: role}


def slot_selector_labels(owner: str, role: str, slot: str) -> dict[str, str]:
    """The selector of a role's Deployment in revision ``slot``. Slot ``a`` keeps
    :func:`selector_labels` (a Deployment's selector is immutable, and releases before the slots
    created it so); slot ``b`` adds the :data:`~pdd_operator.api.constants.LABEL_SLOT` label. Slot
    ``a``'s selector also matches slot ``b``'s pods; that is safe because each ReplicaSet selects by
    its ``pod-template-hash`` too and a Deployment adopts only ReplicaSets no controller owns."""
    base = selector_labels(owner, role)
    return base if slot == "a" else {**base, LABEL_SLOT: slot}


def labels(owner: str, role: str, spec: PDDeploymentSpec, slot: str | None = None,
           compat: str | None = None) -> dict[str, str]:
    """All labels of a role's objects and pods (with ``slot``: those of that revision slot's Deployment
    and pods, which carry :data:`~pdd_operator.api.constants.LABEL_SLOT`). ``compat``: ``compat_hash(spec)``
    when the caller has it already (:func:`render_children` computes it once for its 6 label sets)."""
    version, _ = resolve_version(spec.engine.vllm_version, spec.engine.image)
    out = {
        **selector_labels(owner, role),
        LABEL_PART_OF: label_value(owner),
        LABEL_MANAGED_BY: "pdd-operator",
        LABEL_ROLE: role,
        LABEL_COMPAT_HASH: compat if compat is not None else compat_hash(spec),
    }
    if version is not None:
        out[LABEL_VERSION] = fmt(version)
    if slot is not None:
        out[LABEL_SLOT] = slot
    return out


def _metadata(owner: Owner, name: str, obj_labels: dict[str, str]) -> dict:
    """A child's metadata. The spec it came from is not copied onto it: the PDDeployment keeps the last
    applied spec once (``status.appliedSpec``), so a child's size does not grow with the spec."""
    meta: dict = {"name": name, "namespace": owner.namespace, "labels": obj_labels}
    if owner.generation is not None:
        meta["annotations"] = {ANNOTATION_GENERATION: str(owner.generation)}
    if owner.uid:
        meta["ownerReferences"] = [owner.reference()]
    return meta


def _resources(spec: PDDeploymentSpec, role: str) -> dict:
    r = spec.role(role)
    requests = {k: v for k, v in r.resources.requests.items()}
    limits = {k: v for k, v in r.resources.limits.items()}
    dra = spec.network.dra
    gpu = spec.engine.gpu_resource_name
    if gpu and not (dra and dra.gpu_claim_template):
        limits[gpu] = r.gpus_per_pod
        requests[gpu] = r.gpus_per_pod
    rdma = spec.network.rdma
    if rdma is not None and not (dra and dra.nic_claim_template):
        limits[rdma.resource_name] = rdma.count
        requests[rdma.resource_name] = rdma.count
    out: dict = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    claims = [{"name": name} for name, _ in _claims(spec)]
    if claims:
        out["claims"] = claims
    return out


def _tolerations(given: list, resources: dict) -> list[dict]:
    """``spec.<role>.tolerations`` plus, for each extended resource the engine requests (the GPU, RDMA
    devices), ``{key: <resource name>, operator: Exists, effect: NoSchedule}`` unless a given toleration
    already covers that key. GPU nodes are commonly tainted so that only pods asking for GPUs land
    there (GKE: ``nvidia.com/gpu=present:NoSchedule``); this is what Kubernetes' ExtendedResourceToleration
    admission plugin adds where it is enabled, so the pods schedule the same way where it is not."""
    out = [t.wire() for t in given]
    requested = {*resources.get("requests", {}), *resources.get("limits", {})}
    extended = sorted(n for n in requested if "/" in n and not n.split("/")[0].endswith("kubernetes.io")
                      and not n.startswith("hugepages-"))
    for name in extended:
        if not any(t.key in (None, name) and (t.operator == "Exists" or t.key is None)
                   and t.effect in (None, "NoSchedule") for t in given):
            out.append({"key": name, "operator": "Exists", "effect": "NoSchedule"})
    return out


def _claims(spec: PDDeploymentSpec) -> list[tuple[str, str]]:
    """``(claim name, ResourceClaimTemplate)`` pairs of a pod (DRA)."""
    dra = spec.network.dra
    if dra is None:
        return []
    return [(name, tpl) for name, tpl in (("gpus", dra.gpu_claim_template), ("nics", dra.nic_claim_template)) if tpl]


def _affinity(owner: Owner, role: str, spec: PDDeploymentSpec) -> dict:
    """Keep all pods of the deployment in one topology domain; with the host network, never two pods
    of one role on a node (their ports would clash)."""
    affinity: dict = {}
    pl = spec.placement
    if pl.topology_key:
        term = {"labelSelector": {"matchLabels": {LABEL_INSTANCE: label_value(owner.name), LABEL_MANAGED_BY: "pdd-operator"}},
                "topologyKey": pl.topology_key}
        if pl.topology_policy == "Required":
            affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        else:
            affinity["podAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": term}]}
    if spec.network.host_network:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": selector_labels(owner.name, role)},
             "topologyKey": "kubernetes.io/hostname"}]}
    return affinity


def pod_template(owner: Owner, role: str, spec: PDDeploymentSpec, model_config: dict | None = None,
                 slot: str = "a", compat: str | None = None) -> dict:
    """Pod template of a role in revision ``slot``: the vLLM engine with GPUs, RDMA, IPC_LOCK, /dev/shm,
    /health probes and the drain before it stops (:mod:`pdd_operator.render.drain`). ``compat``: as
    for :func:`labels`."""
    r = spec.role(role)
    container = {
        "name": ENGINE_CONTAINER,
        "image": spec.engine.image,
        "imagePullPolicy": spec.engine.image_pull_policy,
        "command": ["vllm", "serve"],
        "args": vllm_args(spec, role, model_config),
        "env": engine_env(spec, role, model_config),
        "ports": [
            {"name": HTTP_PORT_NAME, "containerPort": role_ports(spec, role)[0], "protocol": "TCP"},
            {"name": NIXL_PORT_NAME, "containerPort": role_ports(spec, role)[1], "protocol": "TCP"},
        ],
        "resources": _resources(spec, role),
        "securityContext": {
            "privileged": False,
            "allowPrivilegeEscalation": False,
            # Pinning (registering) KV memory with the RDMA NIC needs IPC_LOCK, nothing more.
            "capabilities": {"add": ["IPC_LOCK"]},
        },
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        # Model loading can take many minutes; the startup probe allows up to 30 minutes.
        "startupProbe": {
            "httpGet": {"path": "/health", "port": HTTP_PORT_NAME},
            "periodSeconds": 10, "failureThreshold": 180, "timeoutSeconds": 5,
        },
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": HTTP_PORT_NAME},
            "periodSeconds": 5, "failureThreshold": 3, "timeoutSeconds": 5,
        },
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": HTTP_PORT_NAME},
            "periodSeconds": 15, "failureThreshold": 8, "timeoutSeconds": 10,
        },
    }
    hook = pre_stop(spec, role, role_ports(spec, role)[0])
    if hook is not None:
        container["lifecycle"] = {"preStop": hook}
    pod_spec: dict = {
        "containers": [container],
        **({"initContainers": [preflight_container(spec, container)]}
           if spec.network.preflight.policy != "Disabled" else {}),
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
        # vLLM and the preflight never call the Kubernetes API; no token for model code
        # (trustRemoteCode) to find.
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": termination_grace_seconds(spec, role),
        "enableServiceLinks": False,
    }
    node_selector = dict(r.node_selector)
    if spec.placement.gpu_product:
        node_selector.setdefault("nvidia.com/gpu.product", spec.placement.gpu_product)
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    affinity = _affinity(owner, role, spec)
    if affinity:
        pod_spec["affinity"] = affinity
    # Whatever the replica count: a pod template that changed with it would replace the running pods
    # (restart their engines) on every scale between 1 and 2. With one replica the constraint is a no-op.
    if spec.placement.spread_replicas:
        pod_spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector_labels(owner.name, role)},
        }]
    if spec.network.host_network:
        pod_spec["hostNetwork"] = True
        pod_spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    claims = _claims(spec)
    if claims:
        pod_spec["resourceClaims"] = [{"name": n, "resourceClaimTemplateName": t} for n, t in claims]
    tolerations = _tolerations(r.tolerations, container["resources"])
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if spec.engine.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": n} for n in spec.engine.image_pull_secrets]
    metadata: dict = {"labels": labels(owner.name, role, spec, slot, compat)}
    annotations = dict(router_pod_annotations(spec, role))
    if spec.network.networks:
        annotations["k8s.v1.cni.cncf.io/networks"] = ",".join(spec.network.networks)
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": pod_spec}


PREFLIGHT_CONTAINER = "preflight"


def preflight_container(spec: PDDeploymentSpec, engine: dict) -> dict:
    """The KV transport preflight init container (``python -m pdd_operator.preflight``).

    Same image, resources, environment and security context as the engine, so it sees the same RDMA
    devices, memlock limit and UCX settings. Its verdict is its termination message (JSON). With the
    Warn policy a missing preflight module (an engine image without it) is reported, not fatal.
    """
    pf = spec.network.preflight
    cmd = ["python3", "-m", "pdd_operator.preflight", "--policy", pf.policy.lower(),
           "--min-memlock", str(pf.min_memlock_mib * 1024 * 1024)]
    if pf.policy == "Warn":
        unavailable = ('{"reason":"PreflightUnavailable","ready":false,"transport":"unknown",'
                       '"message":"the engine image has no pdd_operator.preflight module"}')
        command = ["sh", "-c", " ".join(cmd) + f" || echo '{unavailable}' > /dev/termination-log"]
    else:
        command = cmd
    return {
        "name": PREFLIGHT_CONTAINER,
        "image": engine["image"],
        "imagePullPolicy": engine["imagePullPolicy"],
        "command": command,
        "env": engine["env"],
        "resources": engine["resources"],
        "securityContext": engine["securityContext"],
        "terminationMessagePolicy": "File",
    }


def deployment(owner: Owner, role: str, spec: PDDeploymentSpec, model_config: dict | None = None,
               slot: str = "a", compat: str | None = None) -> dict:
    """The role's Deployment in revision ``slot`` (:func:`~pdd_operator.api.names.deployment_name`).
    Rolling updates surge one pod and keep every serving pod until it is replaced. ``compat``: as for
    :func:`labels`."""
    r = spec.role(role)
    compat = compat if compat is not None else compat_hash(spec)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(owner, deployment_name(owner.name, role, slot),
                              labels(owner.name, role, spec, slot, compat)),
        "spec": {
            "replicas": r.replicas,
            "selector": {"matchLabels": slot_selector_labels(owner.name, role, slot)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": pod_template(owner, role, spec, model_config, slot, compat),
        },
    }


def service(owner: Owner, role: str, spec: PDDeploymentSpec, compat: str | None = None) -> dict:
    """The role's headless Service: DNS records of ready pods for the HTTP and NIXL side-channel ports.
    ``compat``: as for :func:`labels`."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(owner, child_name(owner.name, role), labels(owner.name, role, spec, compat=compat)),
        "spec": {
            "clusterIP": "None",
            "selector": selector_labels(owner.name, role),
            "ports": [
                {"name": HTTP_PORT_NAME, "port": role_ports(spec, role)[0], "targetPort": HTTP_PORT_NAME,
                 "protocol": "TCP"},
                {"name": NIXL_PORT_NAME, "port": role_ports(spec, role)[1],
                 "targetPort": NIXL_PORT_NAME, "protocol": "TCP"},
            ],
        },
    }


ROUTER = "router"
ROUTER_CONTAINER = "router"
ROUTER_PORT_NAME = "http"
#: Router pod resources when ``spec.router.resources`` is empty.
ROUTER_DEFAULT_RESOURCES = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}


def router_selector_labels(owner: str) -> dict[str, str]:
    """Labels that select a PDDeployment's router pods (not matched by the engine selectors)."""
    return {LABEL_NAME: "pdd-router", LABEL_INSTANCE: label_value(owner), LABEL_COMPONENT: ROUTER}


def router_labels(owner: str) -> dict[str, str]:
    """All labels of the router's objects and pods. No compat hash: the router serves every revision."""
    return {**router_selector_labels(owner), LABEL_PART_OF: label_value(owner), LABEL_MANAGED_BY: "pdd-operator",
            LABEL_ROLE: ROUTER}


def router_endpoint(owner: Owner, spec: PDDeploymentSpec) -> str:
    """URL of the deployment's OpenAI-compatible endpoint: ``http://<name>-router.<ns>.svc:<port>``."""
    return f"http://{child_name(owner.name, ROUTER)}.{owner.namespace}.svc:{spec.router.port}"


#: What the router's discovery calls (:mod:`pdd_operator.router.discovery`): list and watch the engine
#: pods of its PDDeployment, in its namespace. Nothing else.
ROUTER_RULES = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]


def router_service_account(owner_name: str, spec: PDDeploymentSpec) -> str:
    """The router pods' ServiceAccount: ``spec.router.serviceAccountName``, else ``<name>-router``
    (rendered by :func:`router_rbac`)."""
    return spec.router.service_account_name or child_name(owner_name, ROUTER)


def router_rbac(owner: Owner, spec: PDDeploymentSpec) -> list[dict]:
    """ServiceAccount, Role and RoleBinding ``<name>-router``: the router's discovery may get, list and
    watch pods in the PDDeployment's namespace and do nothing else. Empty when
    ``spec.router.serviceAccountName`` names an account the user manages."""
    if spec.router.service_account_name:
        return []
    name = child_name(owner.name, ROUTER)
    labels = router_labels(owner.name)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(owner, name, labels)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _metadata(owner, name, labels),
         "rules": copy.deepcopy(ROUTER_RULES)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": _metadata(owner, name, labels),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": owner.namespace}]},
    ]


def router_deployment(owner: Owner, spec: PDDeploymentSpec) -> dict:
    """The router Deployment: ``pdd router --pddeployment <name> --namespace <ns>`` from the operator image,
    non-root, read-only root filesystem, no capabilities, placed by ``spec.router.nodeSelector`` and
    ``tolerations``. It discovers the engine pods itself. ``spec.router.retries`` is always written out
    (``--retries N --retry-deadline S``), so the Deployment shows what the router does; only the router's
    pod template reads ``spec.router``, so a change of it rolls the router and no engine."""
    r = spec.router
    resources = ({k: v for k, v in r.resources.wire().items() if v}
                 if (r.resources.requests or r.resources.limits) else copy.deepcopy(ROUTER_DEFAULT_RESOURCES))
    mode = "push" if uses_push(spec) else "pull"
    container = {
        "name": ROUTER_CONTAINER,
        "image": r.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["pdd", "router", "--pddeployment", owner.name, "--namespace", owner.namespace,
                    "--port", str(r.port), "--kv-mode", mode, *([] if r.fallback else ["--no-fallback"]),
                    "--retries", str(r.retries.attempts), "--retry-deadline", str(r.retries.deadline_seconds)],
        "ports": [{"name": ROUTER_PORT_NAME, "containerPort": r.port, "protocol": "TCP"}],
        "resources": resources,
        "securityContext": {
            "runAsNonRoot": True, "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
        },
        # Ready only when it can route a request (pods listed, a compatible pair); alive while it serves.
        "readinessProbe": {"httpGet": {"path": "/ready", "port": ROUTER_PORT_NAME},
                           "periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 3},
        "livenessProbe": {"httpGet": {"path": "/health", "port": ROUTER_PORT_NAME},
                          "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 6},
    }
    pod_spec: dict = {
        "containers": [container],
        "enableServiceLinks": False,
        # Streams in flight get this long to finish after the pod leaves the Service.
        "terminationGracePeriodSeconds": 30,
    }
    pod_spec["serviceAccountName"] = router_service_account(owner.name, spec)
    if r.node_selector:
        pod_spec["nodeSelector"] = dict(r.node_selector)
    if r.tolerations:
        pod_spec["tolerations"] = [t.wire() for t in r.tolerations]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(owner, child_name(owner.name, ROUTER), router_labels(owner.name)),
        "spec": {
            "replicas": r.replicas,
            "selector": {"matchLabels": router_selector_labels(owner.name)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {"metadata": {"labels": router_labels(owner.name)}, "spec": pod_spec},
        },
    }


def router_service(owner: Owner, spec: PDDeploymentSpec) -> dict:
    """The router's ClusterIP Service: the deployment's endpoint (``status.endpoint``)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(owner, child_name(owner.name, ROUTER), router_labels(owner.name)),
        "spec": {
            "type": "ClusterIP",
            "selector": router_selector_labels(owner.name),
            "ports": [{"name": ROUTER_PORT_NAME, "port": spec.router.port, "targetPort": ROUTER_PORT_NAME,
                       "protocol": "TCP"}],
        },
    }


def render_children(owner: Owner, spec: PDDeploymentSpec, model_config: dict | None = None,
                    slot: str = "a") -> list[dict]:
    """Every child object of a PDDeployment, in apply order: per role a Service then the Deployment of
    revision ``slot``, then the router's ServiceAccount, Role and RoleBinding (:func:`router_rbac`),
    Service and Deployment. (The other slot's Deployments are the rollout planner's:
    :mod:`pdd_operator.controller.rollout`.)

    ``model_config`` is the model's config.json (from ``spec.model.configMapRef``), if any: it decides
    model-dependent flags such as the hybrid KV cache manager and the conv-state layout.
    """
    out: list[dict] = []
    compat = compat_hash(spec)
    for role in ROLES:
        out.append(service(owner, role, spec, compat))
        out.append(deployment(owner, role, spec, model_config, slot, compat))
    out.extend(router_rbac(owner, spec))
    out.append(router_service(owner, spec))
    out.append(router_deployment(owner, spec))
    return out
