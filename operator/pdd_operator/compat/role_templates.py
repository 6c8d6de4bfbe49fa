"""Pod templates that a workload builds from a shared template and a per-role patch.

A RoleBasedGroup (sgl-project/rbg, ``workloads.x-k8s.io``) may define ``spec.roleTemplates`` (each a ``name`` and a
pod ``template``) and let a role's pattern name one: ``templateRef: {name, patch}`` (the v1alpha2 samples,
``examples/inference/ecosystem/*``), or ``templateRef: {name}`` beside a ``templatePatch``. The controller builds the
role's pod template as the named template with the patch applied by Kubernetes Strategic Merge Patch (rbg KEP-8,
"Reduce YAML Duplication via RoleTemplates"). Read from the patch alone, a role's engine container lacks what the
template gives it (the image, the env), so the checker must read the merged template.

:func:`strategic_merge` implements the part of Strategic Merge Patch that pod templates use: maps merge key by key
(a ``null`` value deletes the key), lists of a pod spec with a patch merge key (``containers`` by ``name``, ``env``
by ``name``, ``volumeMounts`` by ``mountPath``, ``ports`` by ``containerPort``, ... as in k8s.io/api core/v1
``patchMergeKey``) merge item by item, every other list and scalar is replaced by the patch's. The ``$patch``
directives are not read (the patch's value is taken as written).
"""

from __future__ import annotations

import copy
from typing import Any

#: The pod-spec lists Strategic Merge Patch merges by a key (k8s.io/api core/v1 types.go ``patchMergeKey``):
#: list field name -> merge key.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "resourceClaims": "name",
    "hostAliases": "ip",
}


def strategic_merge(base: Any, patch: Any, field: str | None = None) -> Any:
    """``base`` with ``patch`` applied by Strategic Merge Patch (see the module docstring); neither is modified.

    ``field``: the name under which both values sit (it selects the merge key of a list). A list merges by key only
    when every item of both lists is a map holding that key; otherwise the patch's list replaces the base's."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)
            elif key in out:
                out[key] = strategic_merge(out[key], value, str(key))
            else:
                out[key] = copy.deepcopy(value)
        return out
    merge_key = MERGE_KEYS.get(field or "")
    if (merge_key and isinstance(base, list) and isinstance(patch, list)
            and all(isinstance(x, dict) and merge_key in x for x in base + patch)):
        out_list = [copy.deepcopy(x) for x in base]
        where = {x[merge_key]: i for i, x in enumerate(out_list)}
        for item in patch:
            if item[merge_key] in where:
                i = where[item[merge_key]]
                out_list[i] = strategic_merge(out_list[i], item)
            else:
                where[item[merge_key]] = len(out_list)
                out_list.append(copy.deepcopy(item))
        return out_list
    return copy.deepcopy(patch)


def _role_templates(spec: dict) -> dict[str, dict]:
    """``spec.roleTemplates`` as name -> pod template (entries without a name or a map template are left out)."""
    out = {}
    for entry in spec.get("roleTemplates") or []:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("template"), dict):
            out[entry["name"]] = entry["template"]
    return out


def _resolve(node: Any, templates: dict[str, dict]) -> None:
    if isinstance(node, list):
        for item in node:
            _resolve(item, templates)
        return
    if not isinstance(node, dict):
        return
    ref = node.get("templateRef")
    if isinstance(ref, dict) and ref.get("name") in templates and "template" not in node:
        merged = templates[ref["name"]]
        for patch in (ref.get("patch"), node.get("templatePatch")):
            if isinstance(patch, dict):
                merged = strategic_merge(merged, patch)
        node["template"] = copy.deepcopy(merged)
        del node["templateRef"]
        node.pop("templatePatch", None)
    for key, value in node.items():
        if key != "template":
            _resolve(value, templates)


def resolve_role_templates(doc: dict) -> None:
    """Give every role of a RoleBasedGroup-shaped ``doc`` (one with ``spec.roleTemplates``) whose pattern names a
    template (``templateRef``) the pod ``template`` its controller builds, in place: the named template with
    ``templateRef.patch`` and then a sibling ``templatePatch`` strategic-merged onto it (sgl-project/rbg KEP-8); the
    ``templateRef`` and ``templatePatch`` keys are removed, so the patch's partial containers are not read as engines.

    In place so that the pod specs the engines found there point at live as long as the document (an engine's
    ``pod_id`` is the ``id()`` of its pod spec). A name that no ``roleTemplates`` entry defines is left as written.
    Documents without ``spec.roleTemplates`` are not touched."""
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return
    templates = _role_templates(spec)
    if templates:
        _resolve(spec.get("roles"), templates)
