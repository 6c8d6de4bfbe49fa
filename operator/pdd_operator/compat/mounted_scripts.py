"""Launch scripts that a container runs from a ConfigMap volume among the files checked.

Orchestrator examples keep the engine's command line in a ConfigMap key mounted as a file and start it from the
container's command: volcano-sh/kthena's DeepSeek-V4-Flash ModelServing (examples/models/deepseek-v4-flash) mounts
``prefill.sh`` with ``subPath`` at ``/workspace/prefill.sh`` and runs ``bash -c 'cd /workspace && ./prefill.sh'``. The
kubelet projects each key of a ``configMap`` volume as a file named by the key (or by ``items[].path``) under the
mount path, or, with ``subPath``, that one key's file at the mount path itself (k8s.io/api core/v1 ``VolumeMount``,
``ConfigMapVolumeSource``). Where the ConfigMap is in the files, the script's text is known; the container is then
read as ``/bin/bash -c <script>``, so its ``vllm serve`` line and ``export``\\ s are seen like an inline script's.

Only an unambiguous start is followed: the command line runs exactly one mounted file (at a command's start or as the
operand of ``bash``/``sh``/``exec``/``source``), by its absolute path, or as ``./name`` after a ``cd`` to its directory
or with ``workingDir`` set to it; a mounted file that is only named (a config file) is not a start. Anything else
keeps the container as written (its engine, if any, stays unseen).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from pdd_operator.compat.config_refs import ConfigMaps


def inline_mounted_scripts(doc: dict, config_maps: ConfigMaps) -> dict:
    """``doc`` (not changed) with each container that runs a script mounted from a ConfigMap of ``config_maps``
    (``(namespace, name) -> data``, :func:`~pdd_operator.compat.config_refs.config_maps_of`) rewritten to
    ``command: [/bin/bash, -c, <script>]`` without ``args``. Returns a deep copy where anything changed, else ``doc``."""
    return rewrite_mounting_containers(doc, config_maps, _inline_container)


def rewrite_mounting_containers(doc: dict, config_maps: ConfigMaps,
                                rewrite: Callable[[dict, dict[str, dict[str, str]]], bool]) -> dict:
    """``doc`` (not changed) with ``rewrite(container, volumes)`` applied to every container of every pod spec in it
    (any depth: a Deployment's template, an LWS's leader and worker templates, a Dynamo graph's services) whose
    ``volumes`` mount a ConfigMap of ``config_maps``; ``volumes`` is :func:`config_map_volumes` of that pod spec.
    ``rewrite`` changes the container in place and says whether it did. Returns a deep copy where anything changed,
    else ``doc``. The one walk behind the mounted scripts here and the ``--config`` files of
    :mod:`pdd_operator.compat.config_files`."""
    if not config_maps:
        return doc
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    namespace = str(meta.get("namespace") or "default")
    out = copy.deepcopy(doc)
    return out if _walk(out, namespace, config_maps, rewrite) else doc


def _walk(node: Any, namespace: str, config_maps: ConfigMaps,
          rewrite: Callable[[dict, dict[str, dict[str, str]]], bool]) -> bool:
    changed = False
    if isinstance(node, dict):
        if isinstance(node.get("containers"), list) and isinstance(node.get("volumes"), list):
            volumes = config_map_volumes(node["volumes"], namespace, config_maps)
            for container in node["containers"]:
                if isinstance(container, dict) and volumes:
                    changed |= rewrite(container, volumes)
        for value in node.values():
            changed |= _walk(value, namespace, config_maps, rewrite)
    elif isinstance(node, list):
        for item in node:
            changed |= _walk(item, namespace, config_maps, rewrite)
    return changed


def config_map_volumes(volumes: list, namespace: str, config_maps: ConfigMaps) -> dict[str, dict[str, str]]:
    """volume name -> {file name under the mount: its text} for the ``configMap`` volumes of ``volumes`` (a pod
    spec's) whose ConfigMap is among ``config_maps`` (in ``namespace``): its keys, or ``items[].path`` -> key."""
    out: dict[str, dict[str, str]] = {}
    for v in volumes:
        source = v.get("configMap") if isinstance(v, dict) else None
        if not isinstance(source, dict) or (namespace, str(source.get("name"))) not in config_maps:
            continue
        data = config_maps[(namespace, str(source.get("name")))]
        items = source.get("items") if isinstance(source.get("items"), list) else None
        files = ({str(i.get("path")): data[i.get("key")] for i in items
                  if isinstance(i, dict) and isinstance(data.get(i.get("key")), str)} if items is not None
                 else {str(k): val for k, val in data.items() if isinstance(val, str)})
        out[str(v.get("name"))] = files
    return out


def mounted_files(container: dict, volumes: dict[str, dict[str, str]]) -> dict[str, str]:
    """Absolute path in ``container`` -> file text, for its mounts of ``volumes`` (:func:`config_map_volumes`):
    each file under ``mountPath``, or with ``subPath`` that one key's file at ``mountPath`` itself."""
    out: dict[str, str] = {}
    for m in container.get("volumeMounts") or []:
        if not isinstance(m, dict) or str(m.get("name")) not in volumes or not m.get("mountPath"):
            continue
        files, mount = volumes[str(m["name"])], str(m["mountPath"]).rstrip("/")
        if m.get("subPath"):
            if str(m["subPath"]) in files:
                out[mount] = files[str(m["subPath"])]
        else:
            out.update({f"{mount}/{name}": text for name, text in files.items()})
    return out


#: Where a shell runs a file: at the start of a command (the line's start, after ``;``, ``&&``, ``||``, ``|`` or ``(``),
#: or as the operand of ``bash``, ``sh``, ``exec``, ``source``, ``.`` or a shell's ``-c``; a path elsewhere (a flag's value, an
#: ``X=/config/file`` assignment) is a file read, not a script started.
_AT_COMMAND = r"(?:^|[;&|(]\s*|(?:^|[\s;&|(])(?:bash|sh|exec|source|\.|-c)\s+)"


def _runs(text: str, path: str, working_dir: str) -> bool:
    """Whether the command line ``text`` starts the file at ``path`` (see the module docstring)."""
    directory, _, name = path.rpartition("/")
    if re.search(_AT_COMMAND + re.escape(path) + r"(?![\w.-])", text):
        return True
    relative = re.search(_AT_COMMAND + re.escape("./" + name) + r"(?![\w.-])", text)
    in_dir = working_dir.rstrip("/") == directory or re.search(rf"\bcd\s+{re.escape(directory)}/?(?=$|[\s;&|)])", text)
    return bool(relative and in_dir)


def _inline_container(container: dict, volumes: dict[str, dict[str, str]]) -> bool:
    files = mounted_files(container, volumes)
    if not files:
        return False
    words = [str(x) for x in (container.get("command") or []) + (container.get("args") or [])]
    text = " ".join(words)
    started = [path for path in files if _runs(text, path, str(container.get("workingDir") or ""))]
    if len(started) != 1:
        return False
    container["command"] = ["/bin/bash", "-c", files[started[0]]]
    container.pop("args", None)
    return True
