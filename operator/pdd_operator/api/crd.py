"""Generate the PDDeployment CustomResourceDefinition from the pydantic models.

The models in ``api.spec`` and ``api.status`` are the single source of truth; ``crds/`` holds the
output of :func:`build_crd`, and a test fails when the committed file drifts from it.

pydantic emits JSON Schema (``$defs``/``$ref``, ``anyOf`` with ``null``, ``title``); Kubernetes needs a
*structural* OpenAPI v3 schema: every node typed, no references, ``nullable`` instead of null unions,
and only the keywords the apiserver accepts. :func:`structural` does that translation.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from pdd_operator.api.constants import GROUP, KIND, PLURAL, SHORT_NAME, SINGULAR, VERSION
from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.api.status import PDDeploymentStatus

_KEEP = {
    "type", "description", "default", "enum", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "minLength", "maxLength", "pattern", "minItems", "maxItems", "format",
    "nullable", "required", "items", "properties", "additionalProperties",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string", "x-kubernetes-validations",
    "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
}


def _resolve(node: Any, defs: dict[str, Any]) -> Any:
    """Inline every ``$ref`` of ``node`` from ``defs`` (pydantic's ``$defs``)."""
    if isinstance(node, dict):
        if "$ref" in node:
            target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
            extra = {k: v for k, v in node.items() if k != "$ref"}
            target.update(extra)
            return _resolve(target, defs)
        return {k: _resolve(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve(v, defs) for v in node]
    return node


def structural(node: dict[str, Any]) -> dict[str, Any]:
    """Turn one resolved pydantic JSON Schema node into a structural OpenAPI v3 schema node.

    ``anyOf: [X, {type: null}]`` becomes X (optional fields are simply absent); ``anyOf`` of integer
    and string becomes ``x-kubernetes-int-or-string``; ``exclusiveMinimum: N`` (JSON Schema 2020)
    becomes ``minimum: N, exclusiveMinimum: true`` (OpenAPI 3.0). Raises ``ValueError`` on a node that
    has no structural form, so a model change that Kubernetes cannot express fails generation.
    """
    node = dict(node)
    if "anyOf" in node:
        variants = [v for v in node.pop("anyOf") if v.get("type") != "null"]
        types = sorted(v.get("type", "") for v in variants)
        if len(variants) == 1:
            merged = dict(variants[0])
            merged.update(node)
            node = merged
        elif types == ["integer", "string"]:
            node["x-kubernetes-int-or-string"] = True
        else:
            raise ValueError(f"no structural form for anyOf {variants!r}")
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if "exclusiveMinimum" in node and not isinstance(node["exclusiveMinimum"], bool):
        node["minimum"], node["exclusiveMinimum"] = node["exclusiveMinimum"], True
    if "exclusiveMaximum" in node and not isinstance(node["exclusiveMaximum"], bool):
        node["maximum"], node["exclusiveMaximum"] = node["exclusiveMaximum"], True
    if node.get("x-kubernetes-int-or-string"):
        node.pop("type", None)
    elif "type" not in node:
        if "enum" in node:
            node["type"] = "string"
        elif "properties" in node:
            node["type"] = "object"
    if node.get("default") is None:
        node.pop("default", None)
    if node.get("type") == "object" and node.get("additionalProperties") is False:
        node.pop("additionalProperties")
    if node.get("additionalProperties") is True:
        node.pop("additionalProperties")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in _KEEP:
            continue
        if key == "properties":
            out[key] = {name: structural(sub) for name, sub in value.items()}
        elif key == "items" or (key == "additionalProperties" and isinstance(value, dict)):
            out[key] = structural(value)
        else:
            out[key] = value
    if "type" not in out and not out.get("x-kubernetes-int-or-string") and not out.get(
        "x-kubernetes-preserve-unknown-fields"
    ):
        raise ValueError(f"schema node without a type: {node!r}")
    if out.get("x-kubernetes-preserve-unknown-fields") and "type" not in out:
        out["type"] = "object"
    return out


def model_schema(model: type) -> dict[str, Any]:
    """Return the structural OpenAPI v3 schema of a pydantic model, in its camelCase wire form."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    return structural(_resolve(raw, defs))


PRINTER_COLUMNS = [
    {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
    {"name": "Prefill", "type": "string", "jsonPath": ".status.prefill.ready",
     "description": "Ready/desired prefill pods"},
    {"name": "Decode", "type": "string", "jsonPath": ".status.decode.ready",
     "description": "Ready/desired decode pods"},
    {"name": "Compatible", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Compatible")].status'},
    {"name": "vLLM", "type": "string", "jsonPath": ".status.vllmVersion", "priority": 1},
    {"name": "Model", "type": "string", "jsonPath": ".spec.model.name", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def build_crd() -> dict[str, Any]:
    """Return the PDDeployment CRD (``apiextensions.k8s.io/v1``) as a dict."""
    spec = model_schema(PDDeploymentSpec)
    status = model_schema(PDDeploymentStatus)
    spec["description"] = PDDeploymentSpec.__doc__.strip().splitlines()[0]
    status["description"] = PDDeploymentStatus.__doc__.strip().splitlines()[0]
    schema = {
        "type": "object",
        "description": "PDDeployment is one disaggregated prefill/decode vLLM deployment whose KV cache "
        "moves from prefill to decode through NIXL.",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": "API version of this object."},
            "kind": {"type": "string", "description": "Kind of this object."},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{PLURAL}.{GROUP}",
            "labels": {"app.kubernetes.io/name": "pdd-operator", "app.kubernetes.io/part-of": "pdd-operator"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": [SHORT_NAME],
                "categories": ["all"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                }
            ],
        },
    }


def crd_yaml() -> str:
    """Return :func:`build_crd` as the YAML text committed under ``crds/``."""
    header = "# Generated by `pdd crd` from operator/pdd_operator/api; do not edit by hand.\n"
    return header + yaml.safe_dump(build_crd(), sort_keys=False, width=100)
