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

A mounted *Python* launcher is followed where it hands its own arguments on to one fixed command: Dynamo's Motif-3
recipe (ai-dynamo/dynamo recipes/motif-3/vllm/disagg-b200-chat) starts each worker as ``python3
/motif-runtime/launch_motif_disagg.py <engine args>`` from a ConfigMap whose script ends in ``os.execv(sys.executable,
[sys.executable, "-m", "dynamo.vllm", *sys.argv[1:]])``. ``os.execv`` replaces the process with that argument list
(Python's ``os`` module: the new program gets ``args`` as its argv), and ``sys.argv[1:]`` are the words after the
script's path on the interpreter's command line (``sys.argv[0]`` is the script), so the container runs ``python3 -m
dynamo.vllm <engine args>``: it is read as that command (:func:`python_launcher_target`). What the launcher does
before (the recipe patches two NIXL source files of the image's vLLM) is not read, as a shell script's other commands
are not; a launcher with no such call, or more than one, is not followed.
"""

from __future__ import annotations

import ast
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


#: An interpreter that runs a Python file given as its first word: ``python``, ``python3``, ``python3.12`` (by path too).
_PYTHON = re.compile(r"(?:^|/)python(?:3(?:\.\d+)?)?$")
#: The calls that run an argument list as a process: ``module.function`` -> the position of the list. ``os.exec*``
#: replace the launcher with it; ``subprocess`` runs it as the launcher's child, which stays the container's engine.
_RUN_CALLS: dict[tuple[str, str], int] = {
    ("os", "execv"): 1, ("os", "execvp"): 1, ("os", "execve"): 1, ("os", "execvpe"): 1,
    ("subprocess", "run"): 0, ("subprocess", "call"): 0, ("subprocess", "check_call"): 0, ("subprocess", "Popen"): 0,
}


def python_launcher_target(source: str) -> list[str] | None:
    """The fixed words of the one command the Python launcher ``source`` runs with its own arguments appended: the
    list literal of an ``os.exec*`` / ``subprocess`` call (:data:`_RUN_CALLS`) made of string literals and
    ``sys.executable`` (read as ``python3``), ending in ``*sys.argv[1:]`` -- ``["python3", "-m", "dynamo.vllm"]`` for
    ``os.execv(sys.executable, [sys.executable, "-m", "dynamo.vllm", *sys.argv[1:]])``. ``None`` where the file does
    not parse, has no such call or more than one (which runs is then not known)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)):
            continue
        position = _RUN_CALLS.get((node.func.value.id, node.func.attr))
        if position is not None and len(node.args) > position and (words := _own_args_list(node.args[position])):
            found.append(words)
    return found[0] if len(found) == 1 else None


def _is_name(node: ast.AST, module: str, attribute: str) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == attribute and isinstance(node.value, ast.Name)
            and node.value.id == module)


def _own_args_list(node: ast.AST) -> list[str] | None:
    """The literal words before a final ``*sys.argv[1:]`` of the list ``node``, or ``None``."""
    if not isinstance(node, ast.List) or len(node.elts) < 2:
        return None
    *head, last = node.elts
    tail = last.value if isinstance(last, ast.Starred) else None
    if not (isinstance(tail, ast.Subscript) and _is_name(tail.value, "sys", "argv") and isinstance(tail.slice, ast.Slice)
            and isinstance(tail.slice.lower, ast.Constant) and tail.slice.lower.value == 1
            and tail.slice.upper is None and tail.slice.step is None):
        return None
    words = []
    for e in head:
        if isinstance(e, ast.Constant) and isinstance(e.value, str):
            words.append(e.value)
        elif _is_name(e, "sys", "executable"):
            words.append("python3")
        else:
            return None
    return words


def _python_launch(words: list[str], files: dict[str, str], working_dir: str) -> list[str] | None:
    """The command a container whose ``words`` are ``python3 <mounted .py> <args>`` runs (:func:`python_launcher_target`
    and the args), or ``None``."""
    if len(words) < 2 or not _PYTHON.search(words[0]):
        return None
    path = words[1] if words[1].startswith("/") or not working_dir else f"{working_dir.rstrip('/')}/{words[1]}"
    target = python_launcher_target(files[path]) if path in files else None
    return None if target is None else [*target, *words[2:]]


def _inline_container(container: dict, volumes: dict[str, dict[str, str]]) -> bool:
    files = mounted_files(container, volumes)
    if not files:
        return False
    words = [str(x) for x in (container.get("command") or []) + (container.get("args") or [])]
    if (launched := _python_launch(words, files, str(container.get("workingDir") or ""))) is not None:
        container["command"] = launched
        container.pop("args", None)
        return True
    text = " ".join(words)
    started = [path for path in files if _runs(text, path, str(container.get("workingDir") or ""))]
    if len(started) != 1:
        return False
    container["command"] = ["/bin/bash", "-c", files[started[0]]]
    container.pop("args", None)
    return True
