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


def _parallel(part: dict) -> str:
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
        names = ["kserve-config-llm-prefill" + _parallel(prefill)]
    elif isinstance(prefill, dict):
        names = ["kserve-config-llm-decode" + _parallel(spec)]
    else:
        variant = _parallel(spec)
        names = ["kserve-config-llm-template" if variant == "-template" else "kserve-config-llm" + variant]
    refs = spec.get("baseRefs") if isinstance(spec.get("baseRefs"), list) else []
    return names + [str(r["name"]) for r in refs if isinstance(r, dict) and r.get("name") and r["name"] not in names]
