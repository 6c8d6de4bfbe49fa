"""A KServe ``LLMInferenceService`` read with the ``LLMInferenceServiceConfig`` objects its ``baseRefs`` name, as
KServe's llmisvc controller builds the service it runs from them.

KServe (pkg/controller/v1alpha1/llmisvc/config_merge.go of v0.16.0: ``combineBaseRefsConfig`` lines 87-173,
``MergeSpecs`` line 296, ``ReplaceVariables`` line 246; pkg/controller/v1alpha2/llmisvc/config_merge.go of the
current tree: ``combineBaseRefsConfig`` line 269, ``MergeSpecs`` line 842, ``ReplaceVariables`` line 689):

* the well-known configs, then the ``baseRefs`` in their order, then the service's own ``spec`` are merged with a
  Kubernetes strategic merge patch (later wins; a pod template's ``containers`` merge by ``name``, other lists and
  scalars are replaced);
* the merged object is executed as a Go ``text/template`` whose data is the LLMInferenceService itself
  (``{{ .Spec.Model.Name }}``, ``{{ .ObjectMeta.Name }}``, ``{{ .Name }}``, ``{{ .Namespace }}``; ``missingkey=error``)
  and KServe's global config (``{{ .GlobalConfig.* }}``) and template functions (``ChildName``, ``kvTransferConfig``).

A config that a service's ``baseRefs`` names and that is among the files is therefore a part of that service, not a
deployment of its own: :func:`with_base_refs` folds it in. A template action whose value the files hold (a field of
the service) is substituted as KServe substitutes it; any other action (the global config, a template function, a
field the service does not set) leaves the service "not checked", naming the field and the action. The well-known
configs are not in the files; where the service and its ``baseRefs`` leave the engine's ``command`` to them, the
container keeps no ``command`` and is read as today (:func:`~pdd_operator.compat.manifests._kserve_templated`).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

#: The kinds read here (``serving.kserve.io`` v1alpha1 and v1alpha2).
SERVICE_KIND = "LLMInferenceService"
CONFIG_KIND = "LLMInferenceServiceConfig"

#: A Go template action: ``{{ ... }}`` with optional ``-`` trim markers.
_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}")
#: A plain field chain of the template data (``.Spec.Model.Name``); anything else is no field.
_FIELD_CHAIN = re.compile(r"^\.(?:[A-Z]\w*)(?:\.[A-Z]\w*)*$")
#: Go field names of KServe's types whose JSON key is not the field name with its first letter lowered.
_JSON_KEYS = {"ObjectMeta": "metadata", "TypeMeta": "", "URI": "uri"}
#: Fields Go promotes from the embedded ``ObjectMeta`` to the object itself (``{{ .Name }}``).
_PROMOTED = {"Name", "Namespace", "Labels", "Annotations", "UID", "Generation"}


@dataclass(frozen=True)
class Unresolved:
    """A template action KServe fills from outside the files: ``field`` the path of the object's field that holds it
    (``spec.template.containers[main].command[2]``), ``action`` the action's text (``.GlobalConfig.SystemNamespace``)."""

    field: str
    action: str


def _ns(doc: dict) -> str:
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    return str(meta.get("namespace") or "default")


def _name(doc: dict) -> str:
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    return str(meta.get("name") or "")


def strategic_merge(base: Any, override: Any) -> Any:
    """``override`` merged over ``base`` (neither changed) as a Kubernetes strategic merge patch merges two
    LLMInferenceService specs: mappings key by key, lists of mappings that all carry a ``name`` (containers, env,
    volumes, volumeMounts, ports: their patch merge key) item by item on that name (the override's order first),
    anything else replaced by the override. ``None`` in the override keeps the base (an unset field)."""
    if override is None:
        return copy.deepcopy(base)
    if isinstance(base, dict) and isinstance(override, dict):
        out = copy.deepcopy(base)
        for key, value in override.items():
            out[key] = strategic_merge(base.get(key), value) if key in base else copy.deepcopy(value)
        return out
    if (isinstance(base, list) and isinstance(override, list) and base and override
            and all(isinstance(i, dict) and "name" in i for i in base + override)):
        by_name = {i["name"]: i for i in base}
        merged = [strategic_merge(by_name.get(i["name"]), i) if i["name"] in by_name else copy.deepcopy(i)
                  for i in override]
        seen = {i["name"] for i in override}
        return merged + [copy.deepcopy(i) for i in base if i["name"] not in seen]
    return copy.deepcopy(override)


def _lookup(service: dict, chain: str) -> Any:
    """The value of the field chain ``chain`` (``.Spec.Model.Name``) in ``service`` (its JSON form), or ``None``."""
    node: Any = service
    names = chain[1:].split(".")
    if names[0] in _PROMOTED:
        names = ["ObjectMeta", *names]
    for go in names:
        key = _JSON_KEYS.get(go, go[:1].lower() + go[1:])
        if key == "":
            continue
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def substitute(node: Any, service: dict, where: str = "spec") -> tuple[Any, list[Unresolved]]:
    """``node`` (a part of the merged spec; not changed) with each Go template action that names a field of
    ``service`` (the LLMInferenceService, as KServe's template data) replaced by that field's value (a scalar, as
    ``text/template`` prints it), and the actions left in it: those naming a field the service does not set, the
    global config or a template function (``where``: the path of ``node``, for :class:`Unresolved`)."""
    left: list[Unresolved] = []
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            out[k], more = substitute(v, service, f"{where}.{k}")
            left += more
        return out, left
    if isinstance(node, list):
        items = []
        for i, v in enumerate(node):
            label = v.get("name") if isinstance(v, dict) and isinstance(v.get("name"), str) else i
            item, more = substitute(v, service, f"{where}[{label}]")
            items.append(item)
            left += more
        return items, left
    if not isinstance(node, str) or "{{" not in node:
        return node, left

    def one(m: re.Match) -> str:
        action = m.group(1)
        value = _lookup(service, action) if _FIELD_CHAIN.match(action) else None
        if value is None or isinstance(value, (dict, list)):
            left.append(Unresolved(where, action))
            return m.group(0)
        return str(value).lower() if isinstance(value, bool) else str(value)

    return _ACTION.sub(one, node), left


def merged_service(service: dict, configs: list[dict]) -> tuple[dict, list[Unresolved]]:
    """``service`` (an LLMInferenceService; not changed) as KServe runs it over ``configs`` (the
    LLMInferenceServiceConfigs its ``baseRefs`` name, in that order): their specs and then the service's merged
    (:func:`strategic_merge`), ``baseRefs`` dropped, and the template actions substituted (:func:`substitute`).
    Returns the merged object and the actions left."""
    spec: Any = {}
    for config in configs:
        spec = strategic_merge(spec, config.get("spec") if isinstance(config.get("spec"), dict) else {})
    own = {k: v for k, v in (service.get("spec") or {}).items() if k != "baseRefs"}
    spec = strategic_merge(spec, own)
    data = copy.deepcopy(service)
    if isinstance(spec.get("model"), dict) and spec["model"].get("name") is not None:
        # KServe: a model name a baseRef sets is the service's own (combineBaseRefsConfig, before the templates run)
        data.setdefault("spec", {}).setdefault("model", {})["name"] = spec["model"]["name"]
    spec, left = substitute(spec, data)
    return {**{k: v for k, v in service.items() if k != "spec"}, "spec": spec}, left


def with_base_refs(all_docs: dict[str, list[dict]]) -> tuple[dict[str, list[dict]], list[dict]]:
    """The documents of every file (path -> documents; not changed) with each LLMInferenceService whose ``baseRefs``
    name LLMInferenceServiceConfigs among the files (in the service's namespace) replaced by the service KServe
    builds from them (:func:`merged_service`), and those configs left out (they are parts of the service, not
    engines of their own). A config no service of the files names stays as it is.

    Returns ``(documents, not checked records)``: a service whose merged engines keep a template action the files do
    not fill is left out too and reported as "not checked", naming the field and the action; a ``baseRefs`` name not
    among the files is no record (a well-known config or one in the cluster: what it adds is read as today)."""
    configs = {(_ns(d), _name(d)): d for docs in all_docs.values() for d in docs
               if isinstance(d, dict) and d.get("kind") == CONFIG_KIND}
    if not configs:
        return all_docs, []
    used: set[int] = set()
    merged: dict[int, dict | None] = {}
    records: list[dict] = []
    for docs in all_docs.values():
        for d in docs:
            if not (isinstance(d, dict) and d.get("kind") == SERVICE_KIND and isinstance(d.get("spec"), dict)):
                continue
            refs = d["spec"].get("baseRefs")
            names = [str(r.get("name")) for r in refs if isinstance(r, dict)] if isinstance(refs, list) else []
            found = [configs[(_ns(d), n)] for n in names if (_ns(d), n) in configs]
            if not found:
                continue
            used.update(id(c) for c in found)
            service, left = merged_service(d, found)
            engine_left = [u for u in left if re.search(r"containers\[", u.field)]
            if engine_left:
                shown = "; ".join(f"{u.field}: {{{{ {u.action} }}}}" for u in engine_left[:3])
                records.append({"object": f"{SERVICE_KIND}/{_name(d)} (with baseRefs {', '.join(names)})", "reason": (
                    "KServe fills Go template actions of its engines from outside these files (" + shown + "): the "
                    "field it names is not set in the service, or the action reads KServe's global config or a "
                    "template function, so the engine line it runs cannot be read. Write the value in the "
                    "LLMInferenceServiceConfig, or set the field in the service, to have it checked")})
                merged[id(d)] = None
            else:
                merged[id(d)] = service
    out: dict[str, list[dict]] = {}
    for path, docs in all_docs.items():
        kept: list[dict] = []
        for d in docs:
            if id(d) in used:
                continue
            if id(d) in merged:
                if merged[id(d)] is not None:
                    kept.append(merged[id(d)])
                continue
            kept.append(d)
        out[path] = kept
    return out, records
