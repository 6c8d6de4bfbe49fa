"""llm-d-modelservice Helm values read as the prefill/decode engines the chart renders from them.

The chart (llm-d-incubation/llm-d-modelservice, charts/llm-d-modelservice; also vendored by the llm-d guides as
``ms-*/values.yaml``) builds one Deployment per role (templates/decode-deployment.yaml, prefill-deployment.yaml; a
LeaderWorkerSet per role with ``multinode: true``) whose containers come from ``<role>.containers[]``. What the
templates add, as read in templates/_helpers.tpl of the chart releases named (tag ``llm-d-modelservice-<version>``):

- the command (``llm-d-modelservice.command``, since 0.0.7, #19): ``modelCommand`` ``vllmServe`` gives
  ``command: [vllm, serve]`` and args ``<model> --port <vllmPort> [--tensor-parallel-size TP]
  [--data-parallel-size DP] [--data-parallel-size-local DPL] --served-model-name <modelArtifacts.name>`` then the
  container's ``args``; ``imageDefault`` the same args with ``--model`` before the model and no command (the image's
  entrypoint runs them); ``custom`` (the default) the container's own ``command`` and ``args``;
- the model (``argsByProtocol``): ``hf://<id>`` -> ``<id>``; ``pvc://<claim>/<path>`` -> ``<mountPath>/<path>``;
  ``pvc+hf://.../<ns>/<model>`` -> ``<ns>/<model>``; ``oci://`` fails to render;
- the engine port (``vllmPort``): ``routing.servicePort`` on prefill, and on decode too when
  ``routing.proxy.enabled`` is false; else ``routing.proxy.targetPort`` (chart default 8200);
- the routing proxy (``routingProxy``): on decode pods, an init container with ``restartPolicy: Always`` (a native
  sidecar, sharing the pod's network) listening on ``routing.servicePort`` (default 8000) and forwarding to
  ``--vllm-port`` = ``targetPort``;
- env (``parallelismEnv``, ``hfEnv``, ``acceleratorEnv``): ``DP_SIZE``, ``TP_SIZE``, ``DP_SIZE_LOCAL`` after the
  container's own ``env``, ``HF_HOME`` (the mount path) for an ``hf://`` model with ``mountModelVolume``, then
  ``accelerator.env[<type>]`` (values.yaml gives intel-i915 and intel-xe some);
- resources (``resources``): without DRA, the accelerator resource (``accelerator.resources[<type>]``,
  ``nvidia.com/gpu`` by default) set to TP x DPL in limits and requests unless the container names it.

Tensor parallelism is rendered the same way in every release. Data parallelism is not: v0.3.6 (#159, 5bdf71f) began
passing ``--data-parallel-size``/``--data-parallel-size-local`` and deriving them from ``workers``; earlier releases
pass neither. The values do not say the chart release, so a role with data parallelism is "not checked", as is a
multinode (LeaderWorkerSet) values file, a decode served by the requester ReplicaSet, a container whose fields hold
Go template text, ``imageDefault`` with an image whose entrypoint is not vLLM's, and a role whose ``accelerator.type``
names a device-plugin resource only some chart releases define (:data:`RENAMED_ACCELERATOR_TYPES`).

Findings on these engines name the values keys (``decode.parallelism.tensor``, ``prefill.containers[0].args``):
:func:`values_fields`.
"""

from __future__ import annotations

import copy
import re
from dataclasses import replace

#: The workload kind (:attr:`~pdd_operator.compat.pair.RoleConfig.workload_kind`) of engines read from these values.
LLMD_VALUES_KIND = "llm-d-modelservice values"

#: Chart defaults (charts/llm-d-modelservice/values.yaml): routing.servicePort, routing.proxy.targetPort,
#: modelArtifacts.mountPath, accelerator.resources.
SERVICE_PORT = 8000
TARGET_PORT = 8200
MOUNT_PATH = "/model-cache"
ACCELERATOR_RESOURCES = {"nvidia": "nvidia.com/gpu", "intel-i915": "gpu.intel.com/i915", "intel-xe": "gpu.intel.com/xe",
                         "intel-gaudi": "habana.ai/gaudi", "amd": "amd.com/gpu", "google": "google.com/tpu",
                         "rebellions-atom": "rebellions.ai/ATOM"}
#: values.yaml ``accelerator.env``: variables ``acceleratorEnv`` appends to the engine's env per accelerator type.
ACCELERATOR_ENV = {"intel-i915": {"VLLM_USE_V1": "1", "TORCH_LLM_ALLREDUCE": "1", "VLLM_WORKER_MULTIPROC_METHOD": "spawn"},
                   "intel-xe": {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}}
#: Chart release from which data parallelism reaches the command line (#159).
DP_FLAGS_SINCE = "v0.3.6"
#: ``accelerator.type`` values whose device-plugin resource depends on the chart release: ``intel`` is the key of
#: ``accelerator.resources`` for ``gpu.intel.com/i915`` in llm-d-modelservice-v0.2.8 to v0.2.11 only (added by 4f3faaf;
#: #125, fdedddd "Enable intel xe drivers", first in v0.2.12, renamed it ``intel-i915``); in every other release
#: ``intel`` is no key and the chart's ``acceleratorResource`` (templates/_helpers.tpl, v0.2.11 and v0.2.12 lines
#: 145-155) falls back to ``nvidia.com/gpu``. Type -> (its resource, first release with it, first release without it).
RENAMED_ACCELERATOR_TYPES = {"intel": ("gpu.intel.com/i915", "v0.2.8", "v0.2.12")}

_ROLES = ("prefill", "decode")
_NAME_TEMPLATE = re.compile(r"\{\{-?\s*\.Values\.modelArtifacts\.name\s*-?\}\}")


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def is_llmd_values(doc: dict) -> bool:
    """``doc`` is a values file of llm-d-modelservice: no ``kind``, a ``prefill`` or ``decode`` map holding
    ``containers``, and one of the chart's top-level keys ``modelArtifacts``, ``routing`` or ``multinode``."""
    if doc.get("kind") or not any(k in doc for k in ("modelArtifacts", "routing", "multinode")):
        return False
    return any(isinstance(_dict(doc.get(r)).get("containers"), list) for r in _ROLES)


def _int(value, default: int = 1) -> int | None:
    """A parallelism value as the template's ``int`` reads it; ``None`` for text that is no number."""
    if value in (None, "", 0, False):
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _model_arg(values: dict) -> str | None:
    """The model argument ``argsByProtocol`` renders from ``modelArtifacts.uri``, or ``None`` (no or unread uri)."""
    art = _dict(values.get("modelArtifacts"))
    # values.yaml's default uri since modelArtifacts.name came in (#74, d6ac006): a file naming it is of those releases
    uri = str(art.get("uri") or ("hf://{{ .Values.modelArtifacts.name }}" if art.get("name") else ""))
    name = str(art.get("name") or "")
    uri = _NAME_TEMPLATE.sub(name, uri)
    protocol, _, other = uri.partition("://")
    other = other.strip('"')
    if not other or "{{" in other:
        return None
    if protocol == "hf":
        return other
    if protocol == "pvc":
        return f"{art.get('mountPath') or MOUNT_PATH}/{other.split('/', 1)[-1]}"
    if protocol == "pvc+hf":
        parts = other.split("/")
        return "/".join(parts[-2:])
    return None


def _role_accelerator(values: dict, role: str, key: str, default):
    own = _dict(_dict(values.get(role)).get("accelerator"))
    return own[key] if key in own else (_dict(values.get("accelerator")).get(key) or default)


def _resources(values: dict, role: str, container: dict, gpus: int) -> dict:
    resources = copy.deepcopy(_dict(container.get("resources")))
    if _role_accelerator(values, role, "dra", False):
        return resources
    kind = str(_role_accelerator(values, role, "type", "nvidia"))
    table = {**ACCELERATOR_RESOURCES, **_dict(_dict(values.get("accelerator")).get("resources"))}
    name = "" if kind == "cpu" or "llm-d-inference-sim" in str(container.get("image") or "") else str(
        table.get(kind, "nvidia.com/gpu"))
    if name and gpus >= 1:
        for part in ("limits", "requests"):
            section = dict(_dict(resources.get(part)))
            section.setdefault(name, str(gpus))
            resources[part] = section
    return resources


def _renamed_accelerator(values: dict, role: str, gpus: int) -> tuple[str, str] | None:
    """``(values key, why not checked)`` where ``role``'s pods get a device-plugin resource that depends on the chart
    release (:data:`RENAMED_ACCELERATOR_TYPES`: ``accelerator.type: intel`` asks for ``gpu.intel.com/i915`` in
    v0.2.8-v0.2.11, for ``nvidia.com/gpu`` in every other release, beside any Intel resource the container names), else
    ``None``.

    Not where the role uses DRA (no resource is added), has no accelerator count, or the values' own
    ``accelerator.resources`` names the type (Helm merges it over the chart's map in every release)."""
    kind = str(_role_accelerator(values, role, "type", "nvidia"))
    if kind not in RENAMED_ACCELERATOR_TYPES or _role_accelerator(values, role, "dra", False) or gpus < 1:
        return None
    if kind in _dict(_dict(values.get("accelerator")).get("resources")):
        return None
    old, first, since = RENAMED_ACCELERATOR_TYPES[kind]
    key = f"{role}.accelerator.type" if "type" in _dict(_dict(values.get(role)).get("accelerator")) else "accelerator.type"
    return key, (
        f"accelerator.type {kind!r} gives the {role} pods {old} in llm-d-modelservice {first} to the release before "
        f"{since} but nvidia.com/gpu in every other (#125 renamed the key in {since}; the chart falls back to "
        "nvidia.com/gpu, beside any "
        "accelerator the container names itself), so the platform vLLM runs on and whether the pods schedule depend "
        "on a chart release the values do not say; render the chart (helm template) and check the Deployments, or "
        f"set accelerator.type to the key your chart release defines ({kind}-i915 from {since})")


def _proxy(values: dict) -> dict:
    return _dict(_dict(values.get("routing")).get("proxy"))


def _service_port(values: dict):
    return _dict(values.get("routing")).get("servicePort") or SERVICE_PORT


def _engine_port(values: dict, role: str):
    proxy = _proxy(values)
    if role == "prefill" or proxy.get("enabled") is False:
        return _service_port(values)
    return proxy.get("targetPort") or TARGET_PORT


def _container(values: dict, role: str, container: dict, tp: int) -> dict | str:
    """The container the chart renders (name, image, command/args, env, ports, resources), or why it cannot be
    rendered here."""
    mode = str(container.get("modelCommand") or "custom")
    out = {k: copy.deepcopy(v) for k, v in _dict(container.get("extraConfig")).items()}
    out.update({"name": str(container.get("name") or "vllm"), "image": str(container.get("image") or "")})
    if mode in ("vllmServe", "imageDefault"):
        model = _model_arg(values)
        if model is None:
            return ("its modelArtifacts.uri is not an hf://, pvc:// or pvc+hf:// uri the chart renders to a model "
                    "argument (oci:// fails to render)")
        name = _dict(values.get("modelArtifacts")).get("name") or "random/model"  # values.yaml's default
        args = (["--model"] if mode == "imageDefault" else []) + [model, "--port", str(_engine_port(values, role))]
        if tp > 1:
            args += ["--tensor-parallel-size", str(tp)]
        args += ["--served-model-name", str(name)]
        args += [str(a) for a in container.get("args") or []]
        if mode == "vllmServe":
            out["command"] = ["vllm", "serve"]
        out["args"] = args
    elif mode == "custom":
        if not container.get("command"):
            return "its modelCommand is custom (the default) with no command, which the chart refuses to render"
        out["command"] = copy.deepcopy(container["command"])
        if container.get("args"):
            out["args"] = copy.deepcopy(container["args"])
    else:
        return f"its modelCommand {mode!r} is none of vllmServe, imageDefault, custom (the chart refuses to render it)"
    env = [e for e in container.get("env") or [] if isinstance(e, dict)]
    art = _dict(values.get("modelArtifacts"))
    if container.get("mountModelVolume") and str(art.get("uri") or "hf://").startswith("hf://"):  # hfEnv
        hf = [{"name": "HF_HOME", "value": str(art.get("mountPath") or MOUNT_PATH)}]
    else:
        hf = []
    kind = str(_role_accelerator(values, role, "type", "nvidia"))
    table = {k: [{"name": n, "value": v} for n, v in d.items()] for k, d in ACCELERATOR_ENV.items()}
    table.update(_dict(_dict(values.get("accelerator")).get("env")))  # Helm merges the user's map over the default
    added = [e for e in table.get(kind) or [] if isinstance(e, dict)]
    out["env"] = env + [{"name": "DP_SIZE", "value": "1"}, {"name": "TP_SIZE", "value": str(tp)},
                        {"name": "DP_SIZE_LOCAL", "value": "1"}] + hf + (
        [{"name": str(e.get("name")), "value": str(e.get("value"))} for e in added] if kind != "cpu" else [])
    if container.get("ports"):
        out["ports"] = copy.deepcopy(container["ports"])
    out["resources"] = _resources(values, role, container, tp)
    if "{{" in repr(out):
        return "its fields hold Go template text (common.tplvalues.render), whose value is set when the chart renders"
    return out


def render(values: dict, name: str = "llm-d-modelservice") -> tuple[list[tuple[str, dict, list[int]]], list[tuple[str, str]]]:
    """The Deployments the chart renders from ``values`` (module docstring), and what it cannot render here.

    Returns ``([(role, Deployment, [index in <role>.containers of each rendered container])], [(values key, why
    not checked)])``. A role with ``create: false`` renders nothing."""
    out: list[tuple[str, dict, list[int]]] = []
    cannot: list[tuple[str, str]] = []
    if values.get("multinode"):
        return [], [("multinode", (
            "multinode: true renders each role as a LeaderWorkerSet (prefill-lws.yaml, decode-lws.yaml) whose group "
            "size (parallelism.workers) and per-pod --data-parallel-size-local the chart derives differently before and "
            f"after {DP_FLAGS_SINCE} (#159), and the values do not say the chart release; render the chart (helm "
            "template) and check the LeaderWorkerSets"))]
    for role in _ROLES:
        spec = _dict(values.get(role))
        if not isinstance(spec.get("containers"), list) or spec.get("create") is False:
            continue
        if role == "decode" and _dict(values.get("requester")).get("enable"):
            cannot.append(("requester.enable", "with requester.enable the decode pods come from the requester "
                           "ReplicaSet template, which these rules do not read"))
            continue
        par = _dict(spec.get("parallelism"))
        tp = _int(par.get("tensor"))
        dp = [_int(par.get(k)) for k in ("data", "dataLocal", "workers")]
        if tp is None:
            cannot.append((f"{role}.parallelism.tensor", "it is not a number"))
            continue
        if (renamed := _renamed_accelerator(values, role, tp)) is not None:
            cannot.append(renamed)
            continue
        if any(d is None or d > 1 for d in dp):
            cannot.append((f"{role}.parallelism", (
                "it sets data parallelism (data, dataLocal or workers), which the chart passes to vLLM as "
                f"--data-parallel-size/--data-parallel-size-local only from {DP_FLAGS_SINCE} (#159), and the values "
                "do not say the chart release")))
            continue
        containers, indexes = [], []
        for i, c in enumerate(spec["containers"]):
            if not isinstance(c, dict):
                continue
            rendered = _container(values, role, c, tp)
            if isinstance(rendered, str):
                cannot.append((f"{role}.containers[{i}]", rendered))
                continue
            containers.append(rendered)
            indexes.append(i)
        if not containers:
            continue
        labels = {str(k): str(v) for k, v in _dict(_dict(values.get("modelArtifacts")).get("labels")).items()}
        labels["llm-d.ai/role"] = role
        pod = {k: copy.deepcopy(v) for k, v in _dict(spec.get("extraConfig")).items()}
        pod["containers"] = containers
        for key in ("nodeSelector", "tolerations", "volumes"):
            if spec.get(key):
                pod[key] = copy.deepcopy(spec[key])
        proxy = _proxy(values)
        init = [c for c in spec.get("initContainers") or [] if isinstance(c, dict)]
        if role == "decode" and proxy.get("enabled") is not False:
            init = [{"name": "routing-proxy", "image": str(proxy.get("image") or ""), "restartPolicy": "Always",
                     "args": [f"--port={_service_port(values)}", f"--vllm-port={proxy.get('targetPort') or TARGET_PORT}",
                              f"--connector={proxy.get('connector') or 'nixlv2'}"],
                     "ports": [{"containerPort": _service_port(values)}]}, *init]
        if init:
            pod["initContainers"] = init
        replicas = spec.get("replicas", 1 if role == "decode" else 0)  # values.yaml: decode 1, prefill 0
        doc = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": f"{name}-{role}", "labels": dict(labels)},
               "spec": {"replicas": replicas, "selector": {"matchLabels": dict(labels)},
                        "template": {"metadata": {"labels": labels}, "spec": pod}}}
        out.append((role, doc, indexes))
    return out, cannot


def creates_both_roles(values: dict) -> bool:
    """The chart renders pods of both roles from ``values``: ``prefill`` and ``decode`` each with a ``containers``
    list, neither with ``create: false`` nor ``replicas: 0`` (templates/prefill-deployment.yaml,
    decode-deployment.yaml render a role unless ``create`` is false). Such values are a P/D topology whether or not
    any container names a KV connector: the decode pods' routing proxy sends each request to a prefill pod first, with
    ``kv_transfer_params``, and an engine without a connector recomputes the prompt (vLLM 0.23.0 v1/engine/core.py
    lines 364-370), so a pair of connector-less roles is ``kv-connector-missing``'s, not aggregated serving.
    aiconfigurator's generated llm-d values write both roles and no connector at all (its
    vllm/llm-d-values.yaml.j2 at 110ad77b; set 124)."""
    def created(role: str) -> bool:
        spec = _dict(values.get(role))
        return (isinstance(spec.get("containers"), list) and bool(spec["containers"])
                and spec.get("create") is not False and str(spec.get("replicas")).strip() != "0")
    return created("prefill") and created("decode")


def llmd_scan(values: dict, where: str = "llm-d-modelservice values", prefix: str = ""):
    """``(engines, unreadable)`` of an llm-d-modelservice values file, as :func:`~pdd_operator.compat.manifests.scan`
    returns them: the engines of the Deployments :func:`render` builds, each named by its values key
    (``decode.containers[0]``) and all of one object, and a "not checked" record for each part not rendered.
    ``where`` names the object and ``prefix`` the key holding the values in it, for values a GitOps wrapper carries
    (``HelmRelease/pd``, ``spec.values.``: :mod:`~pdd_operator.compat.llmd_wrappers`)."""
    from pdd_operator.compat.manifests import _PD_MARKER, UNKNOWN_ENTRYPOINT, Unreadable, scan

    if not _PD_MARKER.search(repr(values)) and not creates_both_roles(values):
        return [], []  # no KV connector or role anywhere, one role: an aggregated model service, nothing to check
    rendered, cannot = render(values)
    engines, unreadable = [], [Unreadable(f"{where} {prefix}{key}", f"not checked, because {why}") for key, why in cannot]
    for role, doc, indexes in rendered:
        found, missed = scan(doc)
        missed = [u for u in missed if not u.reason.startswith(UNKNOWN_ENTRYPOINT)]  # said below, with the chart's key
        names = [c["name"] for c in doc["spec"]["template"]["spec"]["containers"]]
        for e in found:
            at = next((i for n, i in zip(names, indexes, strict=True) if f"({n})" in e.where), indexes[0])
            key = f"{prefix}{role}.containers[{at}]"
            # one object (the values file) for both roles; its labels (modelArtifacts.labels) are shared by any
            # release of the chart, so they pair nothing across files
            engines.append(replace(e, where=f"{where} {key}", container=key, doc_id=id(values), stem="", group=(),
                                   config=replace(e.config, workload_kind=LLMD_VALUES_KIND)))
        unreadable += [replace(u, where=f"{where} {role}: {u.where}") for u in missed]
        kv = [i for c, i in zip(doc["spec"]["template"]["spec"]["containers"], indexes, strict=True)
              if re.search(r"kv[-_]transfer[-_]config", repr(c))]
        if not found and not missed and kv:
            unreadable.append(Unreadable(f"{where} {prefix}{role}.containers[{kv[0]}]", (
                "not checked, because its engine command could not be found in what the chart renders "
                "(modelCommand imageDefault runs the image's own entrypoint, which is not known for this image)")))
    return engines, unreadable


#: A container's values key (:func:`llmd_scan`): the wrapper's prefix, if any, and the role.
_CONTAINER_KEY = re.compile(r"^(.*?)(prefill|decode)\.containers\[\d+\]$")
#: PDDeployment fields whose value the chart writes from the values' ``<role>.parallelism`` (module docstring).
_PARALLELISM_FIELDS = {"tensorParallelSize": "tensor"}


def values_fields(rule_fields, fields: list[str], containers) -> list[str]:
    """``fields`` (a finding's places, :func:`~pdd_operator.compat.rules.base.manifest_fields`) with each
    ``spec.<role>.tensorParallelSize`` of ``rule_fields`` named as ``<role>.parallelism.tensor``, the values key the
    chart renders ``--tensor-parallel-size`` from; ``containers`` as :attr:`~pdd_operator.compat.pair.PDPair.
    containers` (``decode.containers[0]``, ``spec.values.decode.containers[0]`` in a wrapper, ...)."""
    keys = [m.groups() for c, _ in containers if (m := _CONTAINER_KEY.match(c))]  # (prefix, role)
    extra = []
    for field in rule_fields:
        parts = field.split(".")
        if len(parts) == 3 and parts[0] == "spec" and parts[2] in _PARALLELISM_FIELDS:
            extra += [f"{p}{r}.parallelism.{_PARALLELISM_FIELDS[parts[2]]}" for p, r in keys if r == parts[1]]
        elif len(parts) == 2 and parts[1] in _PARALLELISM_FIELDS:
            extra += [f"{p}{r}.parallelism.{_PARALLELISM_FIELDS[parts[1]]}" for p, r in keys]
    return [*dict.fromkeys(extra + list(fields))]


#: A hand-written manifest's wording of a fix (:func:`~pdd_operator.compat.rules.base.in_manifest_terms`) -> the
#: values keys the chart renders it from, longest first.
VALUES_TERMS: tuple[tuple[str, str], ...] = (
    ("an image tag that names the vLLM release (vllm/vllm-openai:v0.20.2) on both containers",
     "an image tag that names the vLLM release (vllm/vllm-openai:v0.20.2) in prefill.containers[].image and "
     "decode.containers[].image"),
    ("on the prefill and decode containers", "in prefill.containers[] and decode.containers[]"),
    ("on the prefill container", "in prefill.containers[]"),  # its args or env: the fix names which
    ("on the decode container", "in decode.containers[]"),
    ("in each container's env", "in each role's containers[].env"),
    ("on both containers", "in prefill.containers[] and decode.containers[]"),
)


def in_values_terms(text: str, containers=()) -> str:
    """``text`` (a fix in a hand-written manifest's terms) in the terms of llm-d-modelservice values
    (:data:`VALUES_TERMS`), each role's keys under the prefix its container's key has in ``containers``
    (:attr:`~pdd_operator.compat.pair.PDPair.containers`: ``spec.values.`` for ``spec.values.decode.containers[0]``
    in a Flux HelmRelease, ``spec.source.helm.valuesObject.`` in an Argo CD Application; none in a values file)."""
    prefixes = {role: prefix for c, _ in containers if (m := _CONTAINER_KEY.match(c)) for prefix, role in [m.groups()]}
    for manifest, values in VALUES_TERMS:
        if any(prefixes.values()):
            values = values.replace("each role's containers[].env",
                                    "prefill.containers[].env and decode.containers[].env")
            for role, prefix in prefixes.items():
                values = values.replace(f"{role}.containers[]", f"{prefix}{role}.containers[]")
        text = text.replace(manifest, values)
    return text


__all__ = ["LLMD_VALUES_KIND", "in_values_terms", "is_llmd_values", "llmd_scan", "render", "values_fields"]
