"""The shape of the Kubernetes fields ``pdd check`` reads from manifests in other formats.

Manifests from the field (Deployments, StatefulSets, LeaderWorkerSets, Dynamo graphs, KServe
services) reach :mod:`pdd_operator.compat.manifests` unvalidated. The apiserver would refuse a
container whose ``args`` is one string, an ``env`` value that is a number, or ``labels`` that are a
list (their Go types are ``[]string``, ``string`` and ``map[string]string``), so such a document is
not a deployment anyone runs: :func:`shape_problems` names each such field and what it must be, and
nothing is guessed at.

Only the fields the reader uses are checked, with the types of the Kubernetes API (core/v1
``Container``, ``EnvVar``, ``PodSpec``, meta/v1 ``ObjectMeta``; Dynamo's ``extraPodSpec.mainContainer``
is a core/v1 ``Container`` and its ``envs`` a list of ``EnvVar``; a Kthena ModelBooster's ``spec.backend``): anything
else in the document is left alone. The checks are JSON Schemas run by :mod:`jsonschema`.

``pdd check`` reports them as the ``manifest-field-type-invalid`` error of the object (never as an input error). Where
each is a boolean or a number that the API wants as a string (``prometheus.io/scrape: true``, ``value: 8``), the fix is
to quote it and :func:`quoted_scalars` gives the document as quoting would make it, which is then judged as usual; a
list or mapping error (``args`` as one string) leaves the object unread.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from pdd_operator.api.status import Finding
from pdd_operator.compat.rules.records import FIELD_TYPE_SOURCE, MANIFEST_FIELD_TYPE_INVALID

_STRINGS = {"type": "array", "items": {"type": "string"}}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
#: A resource quantity: a string or a number (``nvidia.com/gpu: 1``), as the apiserver accepts it.
_QUANTITY_MAP = {"type": "object", "additionalProperties": {"type": ["string", "number"]}}
_ENV = {"type": "array", "items": {
    "type": "object",
    "properties": {"name": {"type": "string"}, "value": {"type": ["string", "null"]},
                   "valueFrom": {"type": "object", "properties": {
                       "fieldRef": {"type": "object", "properties": {"fieldPath": {"type": "string"}}}}}},
}}
_SECURITY_CONTEXT = {"type": "object", "properties": {
    "runAsUser": {"type": "integer"}, "runAsNonRoot": {"type": "boolean"},
    "capabilities": {"type": "object", "properties": {"add": _STRINGS, "drop": _STRINGS}},
}}
CONTAINER = {"type": "object", "properties": {
    "name": {"type": "string"}, "image": {"type": "string"},
    "command": _STRINGS, "args": _STRINGS, "env": _ENV,
    "resources": {"type": "object", "properties": {
        "requests": _QUANTITY_MAP, "limits": _QUANTITY_MAP,
        "claims": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}},
    "securityContext": _SECURITY_CONTEXT,
}}
#: A metav1 LabelSelector (its semantics: :mod:`pdd_operator.api.selectors`).
_LABEL_SELECTOR = {"type": "object", "properties": {
    "matchLabels": _STRING_MAP,
    "matchExpressions": {"type": "array", "items": {"type": "object", "required": ["key", "operator"], "properties": {
        "key": {"type": "string"}, "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
        "values": _STRINGS}}},
}}
POD_SPEC = {"type": "object", "properties": {
    "containers": {"type": "array", "items": CONTAINER},
    "initContainers": {"type": "array", "items": CONTAINER},
    "hostNetwork": {"type": "boolean"},
    "nodeSelector": _STRING_MAP,
    "securityContext": _SECURITY_CONTEXT,
    "affinity": {"type": "object", "properties": {"podAntiAffinity": {"type": "object", "properties": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"type": "array", "items": {
            "type": "object", "properties": {
                "topologyKey": {"type": "string"},
                "labelSelector": _LABEL_SELECTOR, "namespaceSelector": _LABEL_SELECTOR,
                "namespaces": _STRINGS, "matchLabelKeys": _STRINGS, "mismatchLabelKeys": _STRINGS}}}}}}},
}}
OBJECT_META = {"type": "object", "properties": {
    "name": {"type": "string"}, "namespace": {"type": "string"},
    "labels": _STRING_MAP, "annotations": _STRING_MAP,
    "ownerReferences": {"type": "array", "items": {"type": "object", "properties": {
        "kind": {"type": "string"}, "name": {"type": "string"}}}},
}}

#: A Kthena ModelBooster ``spec.backend`` (volcano-sh/kthena pkg/apis/workload/v1alpha1/model_booster_types.go:
#: ``ModelURI string``, ``Env []corev1.EnvVar``, ``Workers []ModelWorker`` with ``Type``/``Image string``,
#: ``Resources corev1.ResourceRequirements`` and ``Config apiextensionsv1.JSON``, a JSON object of flags).
MODEL_BOOSTER_BACKEND = {"type": "object", "properties": {
    "modelURI": {"type": "string"}, "env": _ENV,
    "workers": {"type": "array", "items": {"type": "object", "properties": {
        "type": {"type": "string"}, "image": {"type": "string"}, "config": {"type": "object"},
        "resources": CONTAINER["properties"]["resources"]}}},
}}

_VALIDATORS = {name: Draft202012Validator(schema) for name, schema in (
    ("PodSpec", POD_SPEC), ("PodTemplateSpec or PodSpec", {"type": "object"}), ("Container", CONTAINER),
    ("ObjectMeta", OBJECT_META), ("EnvVar list", _ENV), ("ModelBooster backend", MODEL_BOOSTER_BACKEND))}


def _where(path: list, extra) -> str:
    parts = [*path, *(str(p) for p in extra)]
    out = ""
    for p in parts:
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out or "(document)"


def _nodes(node: Any, path: list) -> Iterator[tuple[str, Any, list]]:
    """``(what it must be, value, path)`` for every place of ``node`` that the manifest reader reads."""
    if isinstance(node, dict):
        if "metadata" in node:
            yield "ObjectMeta", node["metadata"], [*path, "metadata"]
        if "containers" in node:
            yield "PodSpec", node, path
        if "template" in node:
            yield "PodTemplateSpec or PodSpec", node["template"], [*path, "template"]
        if "mainContainer" in node:
            yield "Container", node["mainContainer"], [*path, "mainContainer"]
        if "envs" in node and ("extraPodSpec" in node or "mainContainer" in node):
            yield "EnvVar list", node["envs"], [*path, "envs"]
        if node.get("kind") == "ModelBooster" and isinstance(node.get("spec"), dict) and "backend" in node["spec"]:
            yield "ModelBooster backend", node["spec"]["backend"], [*path, "spec", "backend"]
        for key, value in node.items():
            if key in ("metadata", "status"):
                continue
            yield from _nodes(value, [*path, key])
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _nodes(value, [*path, i])


def _type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


#: Kinds whose nulls carry a meaning of their own and are kept: a Flux HelmRelease's ``spec.values`` is Helm values,
#: where a null deletes the chart's default for that key (Helm docs, "Values Files": "deleting a default key").
_NULLS_KEPT = frozenset({"HelmRelease"})


def without_nulls(doc: dict) -> dict:
    """``doc`` (one parsed manifest document) with every mapping key whose value is null removed, at any depth, for
    a Kubernetes object (``apiVersion`` and ``kind`` set; not :data:`_NULLS_KEPT`); other documents as they are.

    The apiserver reads a null field as an absent one: its JSON decoder (sigs.k8s.io/json, Go's encoding/json
    semantics: "unmarshaling a JSON null into any other Go type has no effect", a null slice, map or pointer is nil)
    leaves the field unset, and a CRD's structural schema prunes nulls of fields that are not ``nullable``
    (apiextensions "Defaulting and Nullable"). So a rendered chart's ``env:`` with nothing under it (llm-d-modelservice
    examples/output-pd.yaml's routing-proxy init container) is a container without env, not a malformed one. Null
    list elements are kept: the decoder reads one as its type's zero value (``args: [null]`` is ``[""]``)."""
    if not isinstance(doc.get("apiVersion"), str) or not isinstance(doc.get("kind"), str) or doc["kind"] in _NULLS_KEPT:
        return doc
    return _drop_nulls(doc)


def _drop_nulls(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _drop_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_drop_nulls(v) for v in node]
    return node


@dataclass(frozen=True)
class ShapeError:
    """One field of a manifest document whose type the Kubernetes API refuses.

    Attributes:
        path: the keys and list indexes from the document's root to the field.
        where: ``path`` written as a field path (``spec.template.spec.containers[0].args``).
        want: what the API wants (``a string``, ``a list``, ``a mapping``).
        value: the value as parsed.
        what: the Kubernetes type that holds the field (``PodSpec``, ``ObjectMeta``).
    """

    path: tuple
    where: str
    want: str
    value: Any
    what: str

    @property
    def got(self) -> str:
        """What the value is (``a boolean``, ``a number``, ``a list``)."""
        return _type_name(self.value)

    @property
    def quotable(self) -> bool:
        """True for a boolean or a number where the API wants a string (Go ``string``): quoting the YAML value is the
        whole fix, and :func:`as_quoted` is the string it then holds."""
        return self.want == "a string" and isinstance(self.value, bool | int | float)

    def text(self) -> str:
        """``"<where>: must be <want>, not <got> (Kubernetes <what>)"``."""
        return f"{self.where}: must be {self.want}, not {self.got} (Kubernetes {self.what})"


def as_quoted(value: bool | int | float) -> str:
    """The string a YAML scalar holds once quoted: a YAML 1.1 boolean as ``true``/``false`` (PyYAML reads ``yes`` and
    ``on`` as ``True`` too, and their spelling is lost once parsed), a number as Python writes it (``9400``, ``0.9``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def shape_problems(doc: dict) -> list[ShapeError]:
    """Every field of ``doc`` (one manifest document, parsed YAML) that the manifest reader uses and whose type the
    Kubernetes API would refuse, in document order, each once (``[]`` when all are well-formed). Never raises for any
    parsed YAML value. A null field is not one: the apiserver reads it as absent (:func:`without_nulls`)."""
    out: dict[tuple, ShapeError] = {}
    for what, value, path in _nodes(doc, []):
        for error in sorted(_VALIDATORS[what].iter_errors(value), key=lambda e: [
                (not isinstance(p, int), p if isinstance(p, int) else 0, str(p)) for p in e.absolute_path]):
            if error.validator != "type" or error.instance is None:
                continue
            want = error.validator_value
            want_text = " or ".join(want) if isinstance(want, list) else want
            full = (*path, *error.absolute_path)
            out.setdefault(full, ShapeError(path=full, where=_where([], full), want=_ARTICLE.get(want_text, want_text),
                                            value=error.instance, what=what))
    return list(out.values())


def shape_errors(doc: dict) -> list[str]:
    """Every field of ``doc`` (one manifest document, parsed YAML) that the manifest reader uses and
    whose type the Kubernetes API would refuse, as ``"<path>: must be <type>, not <type> (<Go type>)"``
    messages (``[]`` when all are well-formed): :func:`shape_problems` as text. Never raises for any parsed
    YAML value."""
    return [p.text() for p in shape_problems(doc)]


def quoted_scalars(doc: dict, problems: list[ShapeError]) -> dict | None:
    """``doc`` with each of ``problems`` (its :func:`shape_problems`) quoted, as the user's fix makes it
    (:func:`as_quoted`), or ``None`` when one of them is not a scalar where a string is wanted (:attr:`ShapeError.quotable`:
    a string where a list is wanted has no reading the apiserver would take). ``doc`` is not changed."""
    if not all(p.quotable for p in problems):
        return None
    out = _copy(doc)
    for p in problems:
        node = out
        for key in p.path[:-1]:
            node = node[key]
        node[p.path[-1]] = as_quoted(p.value)
    return out


def field_type_finding(origin: str, problems: list[ShapeError]) -> Finding:
    """The ``manifest-field-type-invalid`` error of the object ``origin`` (``Kind/name``) for its ``problems``
    (:func:`shape_problems`, not empty): each field, what the apiserver wants there and the fix (the quoted value for
    a scalar, :func:`as_quoted`); the message says whether the rest of the object was judged as if quoted."""
    said = []
    fixes = []
    for p in problems:
        shown = f" ({as_quoted(p.value)})" if p.quotable else ""
        said.append(f"{p.where} is {p.got}{shown} where the Kubernetes {p.what} wants {p.want}")
        fixes.append(f'quote {p.where}: "{as_quoted(p.value)}"' if p.quotable else f"write {p.where} as {p.want}"
                     + (" (one item per word: [\"--port\", \"8000\"])" if p.want == "a list" and
                        isinstance(p.value, str) else ""))
    rest = ("The rest of the object is checked as if each were quoted." if all(p.quotable for p in problems) else
            "The rest of the object is not checked until they are fixed.")
    message = (f"The apiserver refuses {origin}: {'; '.join(said)} (its JSON decoder takes no other type into a Go "
               f"string, list or map), so the object is never created. {rest}")
    fix = "In the manifest, " + "; ".join(fixes) + "."
    return Finding(rule=MANIFEST_FIELD_TYPE_INVALID, severity="error", fields=[f"{origin} {p.where}" for p in problems],
                   message=message, fix=fix, source=FIELD_TYPE_SOURCE)


def _copy(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _copy(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_copy(v) for v in node]
    return node


_ARTICLE = {"string": "a string", "array": "a list", "object": "a mapping", "boolean": "a boolean",
            "integer": "an integer", "string or null": "a string", "string or number": "a string or a number"}
