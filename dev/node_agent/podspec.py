"""Pure functions of the node agent: what a pod asks for, turned into local processes' argv and env.

No Kubernetes API calls and no processes here; :mod:`dev.node_agent.agent` does those. Pods are the
API's JSON (camelCase dicts), as ``ApiClient.sanitize_for_serialization`` returns them.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
from dataclasses import dataclass, field

#: Volume types the agent can provide (see :func:`refusal`). Everything else is refused.
SUPPORTED_VOLUMES = ("emptyDir", "configMap", "secret", "projected", "downwardAPI")
#: Probe handlers the agent runs.
SUPPORTED_PROBES = ("httpGet", "tcpSocket", "exec")


class Refused(Exception):
    """The pod cannot be run faithfully by this agent. ``reason`` is a CamelCase word for the pod's
    container status (as the kubelet's ``ErrImagePull`` or ``CreateContainerConfigError``), the message
    says what and why."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class Runtime:
    """How the containers of one image run here: the image's filesystem stands for a local virtualenv.

    Attributes:
        images: fnmatch patterns of the images this runtime stands for (``ghcr.io/x/y:*``).
        venv: the virtualenv whose ``bin`` comes first in ``PATH`` (the image's Python and console scripts).
        commands: argv prefixes that replace a command's first word (``vllm`` -> ``[python, launcher.py]``),
            for image entrypoints that do not work as-is from the virtualenv.
        env: variables the image would set; never override the pod's. In a value, ``{cpus}`` becomes the
            container's CPU set (``0`` or ``0,1``) and ``{omp_bind}`` the value of vLLM's
            ``VLLM_CPU_OMP_THREADS_BIND`` that fits it (:func:`omp_bind`).
        description: one line for logs and refusals.
    """

    images: list[str]
    venv: str
    commands: dict[str, list[str]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    description: str = ""

    def matches(self, image: str) -> bool:
        return any(fnmatch.fnmatchcase(image, p) for p in self.images)


def runtime_for(image: str, runtimes: list[Runtime]) -> Runtime:
    """The runtime of ``image``. Raises :class:`Refused` (``ErrImagePull``) when none stands for it."""
    for rt in runtimes:
        if rt.matches(image):
            return rt
    known = ", ".join(p for rt in runtimes for p in rt.images) or "none"
    raise Refused("ErrImagePull", f"node agent: no local runtime stands for image {image!r} (known: {known})")


def _extended(resources: dict) -> list[str]:
    names = {*(resources.get("requests") or {}), *(resources.get("limits") or {})}
    return sorted(n for n in names if "/" in n and not n.split("/")[0].endswith("kubernetes.io")
                  and not n.startswith("hugepages-"))


def all_containers(pod: dict) -> list[dict]:
    spec = pod.get("spec") or {}
    return list(spec.get("initContainers") or []) + list(spec.get("containers") or [])


def refusal(pod: dict, runtimes: list[Runtime]) -> Refused | None:
    """Why this agent cannot run ``pod`` faithfully, or ``None``.

    Refused: images without a runtime; extended resources (GPUs, RDMA devices: ``nvidia.com/gpu``,
    ``rdma/ib``) and DRA resource claims; the host network; volumes other than
    :data:`SUPPORTED_VOLUMES` (and emptyDir with sizeLimit), ``subPath`` mounts; probes other than
    :data:`SUPPORTED_PROBES`; sidecar (restartPolicy Always) init containers; containers without a
    command (the image's entrypoint is unknown here).
    """
    spec = pod.get("spec") or {}
    try:
        for c in all_containers(pod):
            rt = runtime_for(c.get("image", ""), runtimes)
            if not c.get("command") and not rt.commands.get(""):
                raise Refused("CreateContainerConfigError", f"container {c['name']}: no command; the entrypoint of "
                              f"image {c.get('image')!r} is unknown to the node agent")
            extended = _extended(c.get("resources") or {})
            if extended:
                raise Refused("UnexpectedAdmissionError", f"container {c['name']} requests {', '.join(extended)}: the "
                              "node agent runs processes on this CPU and has no such devices")
            if (c.get("resources") or {}).get("claims"):
                raise Refused("UnexpectedAdmissionError", f"container {c['name']}: DRA resource claims are not supported")
            for m in c.get("volumeMounts") or []:
                if m.get("subPath") or m.get("subPathExpr"):
                    raise Refused("CreateContainerConfigError", f"container {c['name']}: volumeMount {m['name']} uses "
                                  "subPath, which the node agent does not support")
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                probe = c.get(kind)
                if probe and not any(h in probe for h in SUPPORTED_PROBES):
                    raise Refused("CreateContainerConfigError", f"container {c['name']}: {kind} handler "
                                  f"{sorted(probe)} is not supported (only {', '.join(SUPPORTED_PROBES)})")
        for c in spec.get("initContainers") or []:
            if c.get("restartPolicy") == "Always":
                raise Refused("CreateContainerConfigError", f"init container {c['name']}: sidecar containers "
                              "(restartPolicy Always) are not supported")
        if spec.get("hostNetwork"):
            raise Refused("CreateContainerConfigError", "hostNetwork pods are not supported: every pod gets its own "
                          "loopback address")
        if spec.get("resourceClaims"):
            raise Refused("UnexpectedAdmissionError", "DRA resourceClaims are not supported")
        for v in spec.get("volumes") or []:
            kind = next((k for k in v if k != "name"), None)
            if kind not in SUPPORTED_VOLUMES:
                raise Refused("CreateContainerConfigError", f"volume {v['name']}: {kind} volumes are not supported "
                              f"(only {', '.join(SUPPORTED_VOLUMES)})")
            if kind == "projected":
                for src in v["projected"].get("sources") or []:
                    skind = next(iter(src))
                    if skind not in ("serviceAccountToken", "configMap", "secret", "downwardAPI"):
                        raise Refused("CreateContainerConfigError", f"volume {v['name']}: projected {skind} is not "
                                      "supported")
    except Refused as exc:
        return exc
    return None


# ---------------------------------------------------------------------------------------------
# Environment and $(VAR) expansion, as the kubelet does them
# ---------------------------------------------------------------------------------------------

_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, env: dict[str, str]) -> str:
    """Expand ``$(VAR)`` as the kubelet does (k8s.io/kubernetes third_party/forked/golang/expansion):
    a defined variable is substituted, ``$$`` is a literal ``$``, an undefined reference stays as written."""
    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return _VAR_REF.sub(sub, text)


_LABEL_REF = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


def field_ref(pod: dict, path: str, pod_ip: str, host_ip: str) -> str:
    """The downward-API value of ``fieldPath`` for ``pod`` (``status.podIP`` is the agent-assigned
    address). Raises :class:`Refused` for a path the kubelet does not support either."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
    }
    if path in simple:
        return simple[path]
    m = _LABEL_REF.match(path)
    if m:
        return (meta.get(m.group(1)) or {}).get(m.group(2), "")
    raise Refused("CreateContainerConfigError", f"downward API fieldPath {path!r} is not supported")


_CPU = re.compile(r"^(\d+(?:\.\d+)?)(m?)$")


def cpu_millis(quantity: str | int | float | None) -> int:
    """A CPU quantity (``"1"``, ``"250m"``, ``2``) in millicores; 0 for none."""
    if quantity in (None, ""):
        return 0
    m = _CPU.match(str(quantity))
    if not m:
        raise ValueError(f"unsupported CPU quantity {quantity!r}")
    value = float(m.group(1))
    return int(value if m.group(2) else value * 1000)


def resource_field(container: dict, resource: str, divisor: str | None, cpus: int) -> str:
    """``resourceFieldRef`` value: limits fall back to the node's capacity as the kubelet does (CPU
    only: ``cpus`` is this node's core count)."""
    res = container.get("resources") or {}
    kind, _, name = resource.partition(".")
    value = (res.get(kind) or {}).get(name)
    if name == "cpu":
        millis = cpu_millis(value) if value is not None else cpus * 1000
        div = cpu_millis(divisor or "1")
        return str(max(1, -(-millis // div)))  # rounded up, at least 1
    if value is None:
        raise Refused("CreateContainerConfigError", f"resourceFieldRef {resource} without a value is not supported")
    return str(value)


def container_env(pod: dict, container: dict, pod_ip: str, host_ip: str, base: dict[str, str],
                  lookup, cpus: int) -> dict[str, str]:
    """The container's environment as the kubelet builds it: ``base`` (the service variables), then
    ``envFrom``, then ``env`` in order, each value ``$(VAR)``-expanded with what came before.

    ``lookup(kind, name, key)`` returns a ConfigMap's (``kind`` ``configMap``) or Secret's
    (``secret``) value, ``None`` when absent; ``key`` ``None`` returns the whole data dict.
    Raises :class:`Refused` for a missing non-optional reference.
    """
    env = dict(base)
    for src in container.get("envFrom") or []:
        kind = "configMap" if "configMapRef" in src else "secret"
        ref = src.get("configMapRef") or src.get("secretRef") or {}
        data = lookup(kind, ref.get("name"), None)
        if data is None:
            if ref.get("optional"):
                continue
            raise Refused("CreateContainerConfigError", f"{kind} {ref.get('name')!r} not found")
        prefix = src.get("prefix", "")
        for k, v in data.items():
            env[prefix + k] = v
    for var in container.get("env") or []:
        name = var["name"]
        if "valueFrom" not in var:
            env[name] = expand(var.get("value", ""), env)
            continue
        src = var["valueFrom"]
        if "fieldRef" in src:
            env[name] = field_ref(pod, src["fieldRef"]["fieldPath"], pod_ip, host_ip)
        elif "resourceFieldRef" in src:
            r = src["resourceFieldRef"]
            target = container
            if r.get("containerName"):
                target = next(c for c in all_containers(pod) if c["name"] == r["containerName"])
            env[name] = resource_field(target, r["resource"], r.get("divisor"), cpus)
        else:
            kind = "configMap" if "configMapKeyRef" in src else "secret"
            ref = src.get("configMapKeyRef") or src.get("secretKeyRef") or {}
            value = lookup(kind, ref.get("name"), ref.get("key"))
            if value is None:
                if ref.get("optional"):
                    continue
                raise Refused("CreateContainerConfigError", f"env {name}: {kind} {ref.get('name')!r} key "
                              f"{ref.get('key')!r} not found")
            env[name] = value
    return env


def container_argv(container: dict, env: dict[str, str], runtime: Runtime) -> list[str]:
    """``command + args`` with ``$(VAR)`` expanded; the first word mapped by ``runtime.commands``, or
    resolved in the runtime's virtualenv, or left to ``PATH``."""
    argv = [expand(a, env) for a in (container.get("command") or runtime.commands.get("", []))]
    argv += [expand(a, env) for a in container.get("args") or []]
    if not argv:
        raise Refused("CreateContainerConfigError", f"container {container['name']}: nothing to run")
    first = argv[0]
    if first in runtime.commands and first:
        return list(runtime.commands[first]) + argv[1:]
    if "/" not in first:
        candidate = os.path.join(runtime.venv, "bin", first)
        if os.access(candidate, os.X_OK):
            return [candidate] + argv[1:]
        found = shutil.which(first, path="/usr/local/bin:/usr/bin:/bin")
        if found:
            return [found] + argv[1:]
        raise Refused("RunContainerError", f"container {container['name']}: executable {first!r} not found in "
                      f"{runtime.venv}/bin or the system PATH")
    return argv


def omp_bind(cpus: str, exclusive: bool) -> str:
    """``VLLM_CPU_OMP_THREADS_BIND`` for a container whose CPU set is ``cpus`` (``"0,1"``): that set when
    the cores are the pod's alone (``exclusive``), else ``nobind`` (vLLM leaves its OpenMP threads
    unpinned: ``vllm/utils/ompmultiprocessing.py``, vLLM 0.32).

    Binding a shared set is what stalled the real-engine loads (issue 13): with ``OMP_PROC_BIND`` each
    engine's worker main thread (OpenMP thread 0) is pinned to the set's first core, so every engine of
    the shared pool ran its worker on the same core; prefill's worker busy-waits for the next step
    (``shm_broadcast`` ``SpinCondition``, ``sched_yield``) while its KV waits to be read, and decode's
    worker, runnable on that core, got almost no CPU time (1 tick in 22 s) until prefill's KV lease
    expired (30 s), so decode never started the NIXL read in time.
    """
    return cpus if exclusive else "nobind"


def runtime_env(runtime: Runtime, env: dict[str, str], cpus: str, exclusive: bool = True) -> dict[str, str]:
    """The process environment: the pod's ``env`` over the runtime's image variables and ``PATH``.
    ``cpus`` is the container's CPU set (``"0,1"``), ``exclusive`` whether those cores are the pod's alone;
    they fill ``{cpus}`` and ``{omp_bind}`` in the runtime's values (:class:`Runtime`)."""
    out = {"PATH": f"{runtime.venv}/bin:/usr/local/bin:/usr/bin:/bin", "VIRTUAL_ENV": runtime.venv}
    for k, v in runtime.env.items():
        out[k] = v.replace("{cpus}", cpus).replace("{omp_bind}", omp_bind(cpus, exclusive))
    out.update(env)
    return out


def port_number(container: dict, port) -> int:
    """A probe's ``port``: a number, or the name of one of the container's ports."""
    if isinstance(port, int) or (isinstance(port, str) and port.isdigit()):
        return int(port)
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return int(p["containerPort"])
    raise Refused("CreateContainerConfigError", f"container {container['name']}: probe port {port!r} is not a "
                  "named port of the container")
