"""Environment variables whose values come from a ConfigMap or a Secret that is among the files checked.

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

Secrets the same way (``valueFrom.secretKeyRef``, ``envFrom.secretRef``; issue 9, session 26): a Secret's ``data``
values are base64 (k8s.io/api core/v1 ``Secret.data``: "base64 encoded string"), its ``stringData`` plain and merged
over ``data`` on write ("stringData ... overwrites data"); a value that does not decode to UTF-8 text is left out (the
reference is then kept, as for a Secret not in the files). A Secret that is not in the files keeps its references: the
variables it may set are unknown, and the rules they feed say "not checked"
(:class:`~pdd_operator.vllm.expansion.ContainerEnv`).
"""

from __future__ import annotations

import base64
import binascii
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


def secrets_of(docs: list[dict]) -> dict[tuple[str, str], dict[str, Any]]:
    """The Secrets among ``docs``: ``(namespace, name) -> {key: text}``, ``data`` base64-decoded and ``stringData``
    over it (see the module docstring); keys whose value is not base64 of UTF-8 text are left out."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for doc in docs:
        if not (isinstance(doc, dict) and doc.get("kind") == "Secret" and str(doc.get("apiVersion", "v1")) == "v1"):
            continue
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        values: dict[str, Any] = {}
        for key, raw in (doc.get("data") if isinstance(doc.get("data"), dict) else {}).items():
            try:
                values[str(key)] = base64.b64decode(str(raw), validate=True).decode()
            except (binascii.Error, ValueError):
                continue
        plain = doc.get("stringData") if isinstance(doc.get("stringData"), dict) else {}
        values.update({str(k): v for k, v in plain.items() if v is not None})
        out[(str(meta.get("namespace") or "default"), str(meta.get("name")))] = values
    return out


def inline_config_map_refs(doc: dict, config_maps: ConfigMaps, secrets: ConfigMaps | None = None) -> dict:
    """``doc`` (not changed) with every environment variable that a ConfigMap of ``config_maps`` defines written as a
    literal ``value``.

    Resolved: ``valueFrom.configMapKeyRef`` entries whose ConfigMap (in ``doc``'s namespace) has the key, and
    ``envFrom`` ``configMapRef`` entries whose ConfigMap is known (their keys become ``env`` entries placed before the
    container's own, ``prefix`` prepended, invalid names skipped); ``secretKeyRef`` / ``secretRef`` the same way from
    ``secrets`` (:func:`secrets_of`). Everything else is kept as written. Returns a deep copy where anything changed,
    else ``doc`` itself.
    """
    if not config_maps and not secrets:
        return doc
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    namespace = str(meta.get("namespace") or "default")
    out = copy.deepcopy(doc)
    return out if _inline(out, namespace, {"configMap": config_maps, "secret": secrets or {}}) else doc


#: ``kind`` -> its objects: ``configMap`` (ConfigMaps' ``data``) and ``secret`` (Secrets' decoded values).
_Sources = Mapping[str, ConfigMaps]


def _inline(node: Any, namespace: str, config_maps: _Sources) -> bool:
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


def _inline_env_list(env: list, namespace: str, config_maps: _Sources) -> bool:
    changed = False
    for i, var in enumerate(env):
        if not isinstance(var, dict) or "value" in var or not isinstance(var.get("valueFrom"), dict):
            continue
        kind, ref = next(((k, var["valueFrom"][f"{k}KeyRef"]) for k in ("configMap", "secret")
                          if isinstance(var["valueFrom"].get(f"{k}KeyRef"), dict)), ("", None))
        if not isinstance(ref, dict):
            continue
        data = config_maps[kind].get((namespace, str(ref.get("name"))))
        if data is not None and ref.get("key") in data and data[ref["key"]] is not None:
            env[i] = {"name": var.get("name"), "value": str(data[ref["key"]])}
            changed = True
    return changed


def _imported_env(env_from: Any, namespace: str,
                  config_maps: _Sources) -> tuple[list, list[dict]] | None:
    """``(envFrom entries kept, env entries from the known ConfigMaps and Secrets)``, or ``None`` when no entry is
    resolved."""
    if not isinstance(env_from, list):
        return None
    kept: list = []
    imported: list[dict] = []
    for source in env_from:
        kind, ref = next(((k, source[f"{k}Ref"]) for k in ("configMap", "secret")
                          if isinstance(source, dict) and isinstance(source.get(f"{k}Ref"), dict)), ("", None))
        data = config_maps[kind].get((namespace, str(ref.get("name")))) if isinstance(ref, dict) else None
        if data is None:
            kept.append(source)
            continue
        prefix = str(source.get("prefix") or "")
        imported.extend({"name": prefix + str(k), "value": str(v)} for k, v in data.items()
                        if v is not None and _ENV_NAME.match(prefix + str(k)))
    return None if len(kept) == len(env_from) else (kept, imported)
