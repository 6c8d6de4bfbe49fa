"""A KServe ``LLMInferenceService`` merged over the ``LLMInferenceServiceConfig`` documents its ``baseRefs`` name,
as KServe's controller merges them, where those configs are among the files checked.

KServe builds the spec a service runs from the well-known configs (``kserve-config-llm-template``,
``kserve-config-llm-prefill-template``, ... chosen from the topology), then each ``baseRefs`` entry in order, then the
service itself, each a strategic merge over the previous one (containers, env and volumes by ``name``, volume mounts
by ``mountPath``, ports by ``containerPort``; ``command`` and ``args`` replaced whole), and renders the result as a Go
template (``{{ .Spec.Model.Name }}``, ``{{ .ObjectMeta.Name }}``, ``{{ ChildName .ObjectMeta.Name `-suffix` }}``).
Source: kserve v0.16.0 pkg/controller/v1alpha1/llmisvc/config_merge.go (combineBaseRefsConfig l.87-204: the
well-known refs l.113-158, then ``llmSvc.Spec.BaseRefs`` l.161, then the service; MergeSpecs/mergeSpecs
l.296-352, strategicpatch.StrategicMergePatch over LLMInferenceServiceSpec; ReplaceVariables l.244-277), the same
order in v0.20.0 pkg/controller/v1alpha2/llmisvc/config_merge.go.

A config a service names is read as that service's base, not as a workload of its own (KServe never runs a config
alone); the well-known configs themselves are not in a user's files, so a container left without ``command`` after
the merge still takes its engine line from them (:func:`~pdd_operator.compat.manifests._kserve_templated`).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from pdd_operator.compat.templated import TEMPLATE_MODEL_PATH
from pdd_operator.vllm.known_models import derived_config, known_config
from pdd_operator.vllm.versions import Version, fmt, parse_version

#: The KServe kinds merged here.
SERVICE_KIND = "LLMInferenceService"
CONFIG_KIND = "LLMInferenceServiceConfig"

#: List fields merged element by element on a key (the patchMergeKey of the Kubernetes types KServe's spec embeds:
#: PodSpec.containers/initContainers/volumes/imagePullSecrets and Container.env by ``name``, Container.volumeMounts
#: by ``mountPath``, Container.ports by ``containerPort``); every other list is replaced whole.
MERGE_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name", "volumes": "name",
              "imagePullSecrets": "name", "env": "name", "volumeMounts": "mountPath", "ports": "containerPort"}

#: The Kubernetes name length ``ChildName`` keeps a child name within (knative pkg/kmeta ChildName: longer names are
#: shortened with a hash, which is not rebuilt here: such a field stays unrendered).
_NAME_MAX = 63


def merge_spec(base: Any, override: Any, key: str | None = None) -> Any:
    """``override`` strategically merged over ``base`` (a new value; neither argument is changed): mappings merged
    key by key (an explicit ``null`` deletes the key), the lists of :data:`MERGE_KEYS` merged element by element on
    their key (base order kept, new elements appended), any other value replaced by the override's. ``key``: the
    field name of the values, which decides how lists merge."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = copy.deepcopy(base)
        for k, v in override.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = merge_spec(out[k], v, str(k)) if k in out else copy.deepcopy(v)
        return out
    merge_key = MERGE_KEYS.get(key or "")
    if (merge_key and isinstance(base, list) and isinstance(override, list)
            and all(isinstance(x, dict) and merge_key in x for x in (*base, *override))):
        out = [copy.deepcopy(x) for x in base]
        at = {x[merge_key]: i for i, x in enumerate(out)}
        for item in override:
            if item[merge_key] in at:
                out[at[item[merge_key]]] = merge_spec(out[at[item[merge_key]]], item)
            else:
                at[item[merge_key]] = len(out)
                out.append(copy.deepcopy(item))
        return out
    return copy.deepcopy(override)


def _go_fields(name: str, namespace: str | None, model_name: str | None) -> list[tuple[re.Pattern[str], str]]:
    """The Go template actions :func:`render` replaces, each with its value (those whose value is unknown are left)."""
    fields = [(r"\.ObjectMeta\.Name|\.Name", name)]
    if namespace:
        fields.append((r"\.ObjectMeta\.Namespace|\.Namespace", namespace))
    if model_name:
        fields.append((r"\.Spec\.Model\.Name", model_name))
    return [(re.compile(r"\{\{-?\s*(?:" + pattern + r")\s*-?\}\}"), value) for pattern, value in fields]


_CHILD_NAME = re.compile(r"\{\{-?\s*ChildName\s+\.ObjectMeta\.Name\s+[`\"]([^`\"]*)[`\"]\s*-?\}\}")


def render(value: Any, name: str, namespace: str | None, model_name: str | None) -> Any:
    """``value`` with the Go template fields KServe's ReplaceVariables fills that are known from the service
    rendered in every string: ``{{ .ObjectMeta.Name }}`` / ``{{ .Name }}`` (the service's name),
    ``{{ .ObjectMeta.Namespace }}`` / ``{{ .Namespace }}``, ``{{ .Spec.Model.Name }}`` (the merged
    ``spec.model.name``) and ``{{ ChildName .ObjectMeta.Name `-suffix` }}`` (name + suffix up to 63 characters).
    Any other action (conditionals, ``.Spec.Parallelism``, ``.GlobalConfig``) stays as written."""
    if isinstance(value, dict):
        return {k: render(v, name, namespace, model_name) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, name, namespace, model_name) for v in value]
    if not isinstance(value, str) or "{{" not in value:
        return value
    out = _CHILD_NAME.sub(lambda m: name + m.group(1) if len(name + m.group(1)) <= _NAME_MAX else m.group(0), value)
    for pattern, text in _go_fields(name, namespace, model_name):
        out = pattern.sub(lambda _m, t=text: t, out)
    return out


def _name_ns(doc: dict) -> tuple[str, str | None]:
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    return str(meta.get("name") or ""), (str(meta["namespace"]) if meta.get("namespace") else None)


def merged_service(service: dict, configs: list[dict]) -> dict:
    """``service`` merged over ``configs`` (its ``baseRefs`` found in the files, in their order) and rendered
    (:func:`render`), a new document: ``spec.baseRefs`` keeps only the refs not among ``configs`` (the well-known
    configs and any other not in the files)."""
    spec: dict = {}
    for config in configs:
        base = config.get("spec") if isinstance(config.get("spec"), dict) else {}
        spec = merge_spec(spec, {k: v for k, v in base.items() if k != "baseRefs"})
    own = service.get("spec") if isinstance(service.get("spec"), dict) else {}
    spec = merge_spec(spec, own)
    found = {_name_ns(c)[0] for c in configs}
    refs = [r for r in own.get("baseRefs") or [] if not (isinstance(r, dict) and r.get("name") in found)]
    if refs:
        spec["baseRefs"] = refs
    else:
        spec.pop("baseRefs", None)
    name, namespace = _name_ns(service)
    model = spec.get("model") if isinstance(spec.get("model"), dict) else {}
    model_name = str(model["name"]) if isinstance(model.get("name"), str) and "{{" not in model["name"] else None
    if model_name is None and isinstance(model.get("name"), str):  # a config's "{{ .Name }}-model"
        model_name = render(model["name"], name, namespace, None)
        model_name = None if "{{" in model_name else model_name
    spec = render(spec, name, namespace, model_name or name)  # KServe defaults spec.model.name to the service name
    return {**service, "spec": spec}


def merge_base_refs(all_docs: dict[str, list]) -> dict[str, list]:
    """``all_docs`` (file -> documents) with every LLMInferenceService whose ``baseRefs`` name
    LLMInferenceServiceConfigs among the documents replaced by :func:`merged_service`, and those configs taken out
    (they are read as the services' bases). A ref matches a config of its name in the service's namespace, or
    either without a namespace (a file applied to the current namespace). Services without such refs, and configs
    no service names, stay as they are."""
    docs = [d for ds in all_docs.values() for d in ds if isinstance(d, dict)]
    configs = [d for d in docs if d.get("kind") == CONFIG_KIND]
    if not configs:
        return all_docs
    used: set[int] = set()
    replaced: dict[int, dict] = {}
    for service in (d for d in docs if d.get("kind") == SERVICE_KIND):
        spec = service.get("spec") if isinstance(service.get("spec"), dict) else {}
        refs = spec.get("baseRefs")
        if not isinstance(refs, list):
            continue
        _, namespace = _name_ns(service)
        bases = []
        for ref in refs:
            name = ref.get("name") if isinstance(ref, dict) else None
            match = [c for c in configs if _name_ns(c)[0] == name
                     and (namespace is None or _name_ns(c)[1] in (None, namespace))]
            if match:
                bases.append(match[0])
                used.add(id(match[0]))
        if bases:
            replaced[id(service)] = merged_service(service, bases)
    if not replaced:
        return all_docs
    return {path: [replaced.get(id(d), d) for d in ds if id(d) not in used] for path, ds in all_docs.items()}


def template_variant(part: dict) -> str:
    """``-worker-data-parallel``, ``-worker-pipeline-parallel`` or ``-template``: the well-known config variant KServe
    picks for one workload part (``spec`` or ``spec.prefill``) of a service (v0.16.0 config_merge.go l.121-158: a
    ``worker`` with ``parallelism.data`` or ``dataLocal`` > 0, then ``pipeline`` > 0; types_func.go IsDataParallel,
    IsPipelineParallel l.55-67)."""
    if not isinstance(part.get("worker"), dict):
        return "-template"
    par = part.get("parallelism") if isinstance(part.get("parallelism"), dict) else {}
    number = lambda key: par.get(key) if isinstance(par.get(key), int) else 0  # noqa: E731
    if number("data") > 0 or number("dataLocal") > 0:
        return "-worker-data-parallel"
    return "-worker-pipeline-parallel" if number("pipeline") > 0 else "-template"


def well_known_configs(spec: dict, role: str) -> list[str]:
    """The LLMInferenceServiceConfigs an engine of ``role`` (``prefill``, ``decode``, or anything else for a
    service without ``spec.prefill``) of the service ``spec`` takes its line from when its ``main`` container has no
    command: the well-known config KServe picks for that part (``kserve-config-llm-prefill-template``,
    ``kserve-config-llm-decode-worker-data-parallel``, ``kserve-config-llm-template``, ...; v0.16.0 config_merge.go
    l.121-158), then the ``baseRefs`` still named (those not merged from the files, :func:`merged_service`)."""
    prefill = spec.get("prefill")
    if role == "prefill" and isinstance(prefill, dict):
        names = ["kserve-config-llm-prefill" + template_variant(prefill)]
    elif isinstance(prefill, dict):
        names = ["kserve-config-llm-decode" + template_variant(spec)]
    else:
        variant = template_variant(spec)
        names = ["kserve-config-llm-template" if variant == "-template" else "kserve-config-llm" + variant]
    refs = spec.get("baseRefs") if isinstance(spec.get("baseRefs"), list) else []
    return names + [str(r["name"]) for r in refs if isinstance(r, dict) and r.get("name") and r["name"] not in names]


#: ``hf://owner/model[:revision]``, as KServe's storage initializer reads it (python/storage/kserve_storage/
#: kserve_storage.py ``_download_hf``, v0.17.0 l.538-548: exactly two path parts, a ``:revision`` on the model).
_HF_URI = re.compile(r"^hf://([^/\s:]+/[^/\s:]+)(?::[^/\s]+)?/?$")


def model_source(spec: dict) -> tuple[str | None, str]:
    """The Hugging Face id whose checkpoint an LLMInferenceService ``spec`` (merged over its configs) puts in
    ``/mnt/models`` (:data:`~pdd_operator.compat.templated.TEMPLATE_MODEL_PATH`: KServe's storage initializer, or a
    ``pvc://`` volume, mounts there: kserve v0.16.0 pkg/constants/constants.go ``DefaultModelLocalMountPath`` l.411,
    pkg/controller/v1alpha1/llmisvc/workload_storage.go l.126, l.246-249), and a note saying how it was read (or
    why none could be). ``spec.model.uri`` ``hf://owner/model[:revision]`` gives ``owner/model``; any other uri
    (``pvc://``, ``oci://``, ``s3://``, ...) names no model, and then ``spec.model.name`` (the name KServe's
    templates serve it as, ``--served-model-name``) is taken where it is a checkpoint the table knows
    (:func:`~pdd_operator.vllm.known_models.known_config`, :func:`~pdd_operator.vllm.known_models.derived_config`).
    ``(None, "")`` where ``spec.model`` gives no uri."""
    model = spec.get("model") if isinstance(spec.get("model"), dict) else {}
    uri = str(model.get("uri") or "").strip()
    if not uri:
        return None, ""
    if (m := _HF_URI.match(uri)) is not None:
        return m.group(1), (f"KServe's storage initializer puts spec.model.uri {uri} in {TEMPLATE_MODEL_PATH}: read as "
                            f"{m.group(1)}")
    name = str(model.get("name") or "").strip()
    scheme = uri.split("://", 1)[0] + "://" if "://" in uri else uri
    if name and "{{" not in name and (known_config(name) is not None or derived_config(name) is not None):
        return name, (f"{TEMPLATE_MODEL_PATH} holds spec.model.uri {uri}, a {scheme} uri that names no model; read as "
                      f"spec.model.name {name}, the known checkpoint KServe serves it as")
    return None, (f"{TEMPLATE_MODEL_PATH} holds spec.model.uri {uri}, a {scheme} uri that names no model"
                  + (f", and spec.model.name {name} is no checkpoint this checker knows" if name else ""))


#: The key :func:`with_kserve_release` adds to each LLMInferenceService(Config) document: the KServe release the files
#: show (``"0.17.0"``), read back by :func:`release_of`. Not a Kubernetes field: the checker's own note on the document.
RELEASE_KEY = "x-pdd-kserve-release"

#: The image of KServe's LLMInferenceService controller (config/llmisvc/manager.yaml, the release manifests'
#: ``kserve/llmisvc-controller:vX.Y.Z``; charts/kserve-llmisvc-resources values ``kserve.llmisvc.controller.image``).
_CONTROLLER_IMAGE = re.compile(r"(?:^|/)llmisvc-controller:v?(\d+\.\d+\.\d+)(?:$|[^\d.])")
#: The Helm chart label of KServe's charts (``helm.sh/chart: kserve-llmisvc-resources-v0.17.0``).
_CHART_LABEL = re.compile(r"^kserve(?:-[a-z]+)*-v?(\d+\.\d+\.\d+)$")


def _images(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["image"]] if isinstance(node.get("image"), str) else []
        return own + [i for v in node.values() for i in _images(v)]
    if isinstance(node, list):
        return [i for v in node for i in _images(v)]
    return []


def kserve_release(docs: list[dict]) -> Version | None:
    """The KServe release the documents ``docs`` show, or ``None`` where none or several do: the tag of the
    llmisvc controller's image in any document (``kserve/llmisvc-controller:v0.17.0``), the ``helm.sh/chart`` label
    of a KServe chart (``kserve-llmisvc-resources-v0.17.0``), or the ``app.kubernetes.io/version`` label of one of
    KServe's well-known LLMInferenceServiceConfigs (``kserve-config-llm-*``, as a cluster dump holds them)."""
    found: set[Version] = set()
    for doc in docs:
        for image in _images(doc):
            if (m := _CONTROLLER_IMAGE.search(image)) and (v := parse_version(m.group(1))):
                found.add(v)
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
        if (m := _CHART_LABEL.match(str(labels.get("helm.sh/chart") or ""))) and (v := parse_version(m.group(1))):
            found.add(v)
        if (doc.get("kind") == CONFIG_KIND and str(meta.get("name") or "").startswith("kserve-config-llm")
                and (v := parse_version(str(labels.get("app.kubernetes.io/version") or "")))):
            found.add(v)
    return found.pop() if len(found) == 1 else None


def with_kserve_release(all_docs: dict[str, list]) -> dict[str, list]:
    """``all_docs`` (file -> documents) with the KServe release of :func:`kserve_release` noted under
    :data:`RELEASE_KEY` on every LLMInferenceService and LLMInferenceServiceConfig (new documents); unchanged where
    the files show no single release."""
    release = kserve_release([d for ds in all_docs.values() for d in ds if isinstance(d, dict)])
    if release is None:
        return all_docs
    note = lambda d: {**d, RELEASE_KEY: fmt(release)} if isinstance(d, dict) and d.get("kind") in (  # noqa: E731
        SERVICE_KIND, CONFIG_KIND) else d
    return {path: [note(d) for d in ds] for path, ds in all_docs.items()}


def release_of(doc: dict) -> Version | None:
    """The KServe release :func:`with_kserve_release` noted on ``doc``, or ``None``."""
    return parse_version(str(doc.get(RELEASE_KEY) or ""))
