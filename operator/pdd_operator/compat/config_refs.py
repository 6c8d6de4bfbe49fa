"""Environment variables whose values come from a ConfigMap that is among the files checked.

A container's ``env`` entry may take its value from a ConfigMap key (``valueFrom.configMapKeyRef``), and its
``envFrom`` may import every key of a ConfigMap (``configMapRef``, with an optional ``prefix``); the kubelet
resolves both when it starts the container (k8s.io/api core/v1 ``EnvVarSource``, ``EnvFromSource``). Recipes keep
engine settings there: Dynamo's A.X-K2 recipe (recipes/ax-k2/vllm/disagg-b200-chat) passes each worker's
``--kv-transfer-config="${KV_TRANSFER_CONFIG}"`` and ``--speculative-config`` from one ConfigMap. Where that ConfigMap
is in the files ``pdd check`` reads, its value is known, so the reference is replaced by the literal value before the
engines are read; a ConfigMap or key that is not there keeps the reference (it may exist in the cluster, and the
checker then says the value is not in these files).

The kubelet's rules kept here: a ConfigMap is looked up in the pod's own namespace; in ``envFrom`` a key that is not
a valid environment variable name is skipped, and an explicit ``env`` entry wins over an imported one (it is listed
after them, and the later definition of a name is the one the container sees).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

#: (namespace, name) -> the ConfigMap's ``data``.
ConfigMaps = Mapping[tuple[str, str], Mapping[str, Any]]

#: The keys of a workload's containers' environment lists: Kubernetes' ``env`` and Dynamo's service-level ``envs``
#: (ai-dynamo/dynamo DynamoComponentDeploymentSharedSpec ``envs``, copied into the main container).
_ENV_KEYS = ("env", "envs")

#: What the kubelet accepts as a variable name from ``envFrom`` (Kubernetes ``IsEnvVarName``: letters, digits,
#: ``_``, ``-`` and ``.``, not starting with a digit).
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


def config_maps_of(docs: list[dict]) -> dict[tuple[str, str], dict[str, Any]]:
    """The ConfigMaps among ``docs``: ``(namespace, name) -> data`` (namespace ``default`` when unset)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap" and str(doc.get("apiVersion", "v1")) == "v1":
            meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
            data = doc.get("data") if isinstance(doc.get("data"), dict) else {}
            out[(str(meta.get("namespace") or "default"), str(meta.get("name")))] = data
    return out


def inline_config_map_refs(doc: dict, config_maps: ConfigMaps) -> dict:
    """``doc`` (not changed) with every environment variable that a ConfigMap of ``config_maps`` defines written as a
    literal ``value``.

    Resolved: ``valueFrom.configMapKeyRef`` entries whose ConfigMap (in ``doc``'s namespace) has the key, and
    ``envFrom`` ``configMapRef`` entries whose ConfigMap is known (their keys become ``env`` entries placed before the
    container's own, ``prefix`` prepended, invalid names skipped). Everything else is kept as written. Returns a deep
    copy where anything changed, else ``doc`` itself.
    """
    if not config_maps:
        return doc
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    namespace = str(meta.get("namespace") or "default")
    out = copy.deepcopy(doc)
    return out if _inline(out, namespace, config_maps) else doc


def _inline(node: Any, namespace: str, config_maps: ConfigMaps) -> bool:
    changed = False
    if isinstance(node, dict):
        imported = _imported_env(node.get("envFrom"), namespace, config_maps)
        if imported is not None:
            own = node.get("env") if isinstance(node.get("env"), list) else []
            node["env"] = [*imported[1], *own]
            if imported[0]:
                node["envFrom"] = imported[0]
            else:
                del node["envFrom"]
            changed = True
        for key in _ENV_KEYS:
            if isinstance(node.get(key), list):
                changed |= _inline_env_list(node[key], namespace, config_maps)
        for key, value in node.items():
            if key not in _ENV_KEYS and key != "envFrom":
                changed |= _inline(value, namespace, config_maps)
    elif isinstance(node, list):
        for item in node:
            changed |= _inline(item, namespace, config_maps)
    return changed


def _inline_env_list(env: list, namespace: str, config_maps: ConfigMaps) -> bool:
    changed = False
    for i, var in enumerate(env):
        if not isinstance(var, dict) or "value" in var:
            continue
        ref = (var.get("valueFrom") or {}).get("configMapKeyRef") if isinstance(var.get("valueFrom"), dict) else None
        if not isinstance(ref, dict):
            continue
        data = config_maps.get((namespace, str(ref.get("name"))))
        if data is not None and ref.get("key") in data and data[ref["key"]] is not None:
            env[i] = {"name": var.get("name"), "value": str(data[ref["key"]])}
            changed = True
    return changed


def _imported_env(env_from: Any, namespace: str,
                  config_maps: ConfigMaps) -> tuple[list, list[dict]] | None:
    """``(envFrom entries kept, env entries from the known ConfigMaps)``, or ``None`` when no entry is resolved."""
    if not isinstance(env_from, list):
        return None
    kept: list = []
    imported: list[dict] = []
    for source in env_from:
        ref = source.get("configMapRef") if isinstance(source, dict) else None
        data = config_maps.get((namespace, str(ref.get("name")))) if isinstance(ref, dict) else None
        if data is None:
            kept.append(source)
            continue
        prefix = str(source.get("prefix") or "")
        imported.extend({"name": prefix + str(k), "value": str(v)} for k, v in data.items()
                        if v is not None and _ENV_NAME.match(prefix + str(k)))
    return None if len(kept) == len(env_from) else (kept, imported)
