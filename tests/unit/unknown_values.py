"""Make one value of a manifest unknown, the way real manifests do it, for the property tests of issue 9 ("no false
refusals"): a valid pair with one engine flag or env value replaced by a value that is not in the files must never be
refused, since the value it had is one of the values the unknown may take.

A site is one place a value is written in an engine container:

- a flag's value in a container's ``command``/``args`` list (``--block-size 16``, ``--block-size=16``, the model
  after ``serve``): replaced by ``$(PDD_UNKNOWN)``, which the kubelet expands from a Secret variable the container
  gains (``<unknown:PDD_UNKNOWN>``, :mod:`pdd_operator.vllm.expansion`);
- the same in an ``sh -c`` / ``bash -c`` script: replaced by ``"${PDD_UNKNOWN}"``, which the shell expands from it;
- a boolean flag (``--enforce-eager``, ``--no-enable-prefix-caching``): written ``--flag=$(PDD_UNKNOWN)``, the form
  a script's unknown branch leaves (:func:`pdd_operator.vllm.script._merged_launch`);
- an ``env`` entry's literal ``value``: replaced by a ``valueFrom.secretKeyRef``.

A Docker Compose service (``services.<name>`` of a Compose document) takes the same sites in Compose's own form:
Compose interpolates ``${PDD_UNKNOWN}`` in every value from the shell that runs ``docker compose`` (Compose
specification ``12-interpolation.md``), which is not in the files, so the value is unknown without a Secret; the
kubelet's ``$(PDD_UNKNOWN)`` means nothing to Compose and a service has no ``env`` key. Its ``environment`` values
(a map, or ``NAME=value`` items) are sites too.

Sites are enumerated in a fixed order, so a failure names its case and site.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pdd_operator.vllm.flags import _BOOL_FLAGS

VAR = "PDD_UNKNOWN"
SECRET_VAR = {"name": VAR, "valueFrom": {"secretKeyRef": {"name": "pdd-unknown", "key": "value"}}}

#: A flag and its value in a script: ``--flag value``, ``--flag=value``, the value one quoted or unquoted word (a
#: continuation ``\`` + newline may sit between them). Group 1 the flag, 3 the value.
_SCRIPT_FLAG = re.compile(r"(?<![\w$-])(--[A-Za-z][\w-]*)(=|[ \t]+(?:\\\n[ \t]*)?)"
                          r"('[^'\n]*'|\"[^\"\n]*\"|[^\s'\"\\;&|()<>]+)(?=[\s;&|)]|$)")
_SCRIPT_BOOL = re.compile(r"(?<![\w$-])--(no-)?(" + "|".join(re.escape(f[2:]) for f in sorted(_BOOL_FLAGS))
                          + r")(?=[\s\\;&|]|$)")
#: The model after ``vllm serve`` (not an unquoted ``$VAR``, which may expand to several words or none).
_SCRIPT_MODEL = re.compile(r"(?<![\w-])(vllm\s+serve[ \t]+)([^\s\\;&|$-][^\s\\;&|]*)")


@dataclass(frozen=True)
class Site:
    """One value that :meth:`apply` makes unknown. ``what`` says which (for a failure's message)."""

    what: str
    mutate: Callable[[list], None]

    def apply(self, docs: list) -> list:
        """A deep copy of ``docs`` with this value unknown."""
        out = copy.deepcopy(docs)
        self.mutate(out)
        return out


def _containers(node, path=()) -> Iterator[tuple[tuple, dict]]:
    """``(path, container)`` for every dict holding a ``command`` or ``args`` list of strings."""
    if isinstance(node, dict):
        if any(isinstance(node.get(k), list) and node.get(k) and all(isinstance(x, str) for x in node[k])
               for k in ("command", "args")):
            yield path, node
        for key, value in node.items():
            yield from _containers(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _containers(value, (*path, i))


def _at(docs: list, path: tuple) -> dict:
    node = docs
    for key in path:
        node = node[key]
    return node


def _with_secret(container: dict) -> None:
    env = container.setdefault("env", [])
    if not any(isinstance(e, dict) and e.get("name") == VAR for e in env):
        env.insert(0, dict(SECRET_VAR))


def _runs_shell(container: dict) -> tuple[str, int] | None:
    """``(key, index)`` of the script of an ``sh -c`` container, else ``None``."""
    words = [*(container.get("command") or []), *(container.get("args") or [])]
    n_command = len(container.get("command") or [])
    for i, word in enumerate(words[:-1]):
        if word.rsplit("/", 1)[-1] in ("sh", "bash") and words[i + 1].startswith("-") and "c" in words[i + 1]:
            at = i + 2
            return ("command", at) if at < n_command else ("args", at - n_command)
    return None


def _script_sites(path: tuple, key: str, index: int, script: str, compose: bool) -> Iterator[Site]:
    def edit(start: int, end: int, text: str) -> Callable[[list], None]:
        def mutate(docs: list) -> None:
            c = _at(docs, path)
            c[key][index] = c[key][index][:start] + text + c[key][index][end:]
            if not compose:  # in a Compose file the shell running compose sets (or not) ${VAR}: no Secret
                _with_secret(c)
        return mutate

    bools = {m.start(): m for m in _SCRIPT_BOOL.finditer(script)}
    for m in _SCRIPT_FLAG.finditer(script):
        if m.group(3).startswith("-") or m.start() in bools:
            continue
        yield Site(f"script {m.group(1)} {m.group(3)[:40]!r}", edit(m.start(3), m.end(3), f'"${{{VAR}}}"'))
    for m in bools.values():
        yield Site(f"script boolean {m.group(0)}", edit(m.start(), m.end(), f'--{m.group(2)}="${{{VAR}}}"'))
    for m in _SCRIPT_MODEL.finditer(script):
        yield Site(f"script model {m.group(2)[:40]!r}", edit(m.start(2), m.end(2), f'"${{{VAR}}}"'))


def _list_sites(path: tuple, container: dict, compose: bool) -> Iterator[Site]:
    ref = f"${{{VAR}}}" if compose else f"$({VAR})"

    def edit(key: str, index: int, text: str) -> Callable[[list], None]:
        def mutate(docs: list) -> None:
            c = _at(docs, path)
            c[key][index] = text
            if not compose:
                _with_secret(c)
        return mutate

    words = [(k, i, w) for k in ("command", "args") for i, w in enumerate(container.get(k) or [])]
    for j, (key, index, word) in enumerate(words):
        nxt = words[j + 1] if j + 1 < len(words) else None
        name, eq, _ = word.partition("=")
        if word == "serve" and nxt and not nxt[2].startswith("-"):
            yield Site(f"model {nxt[2]!r}", edit(nxt[0], nxt[1], ref))
        if not name.startswith("--"):
            continue
        base = "--" + name[5:] if name.startswith("--no-") else name
        if base in _BOOL_FLAGS and not eq:
            yield Site(f"boolean {word}", edit(key, index, f"{base}={ref}"))
        elif eq:
            yield Site(f"{name}={word[len(name) + 1:][:40]!r}", edit(key, index, f"{name}={ref}"))
        elif nxt and not nxt[2].startswith("-"):
            yield Site(f"{name} {nxt[2][:40]!r}", edit(nxt[0], nxt[1], ref))


def _env_sites(path: tuple, container: dict) -> Iterator[Site]:
    for i, var in enumerate(container.get("env") or []):
        if not isinstance(var, dict) or var.get("value") is None or not var.get("name"):
            continue

        def mutate(docs: list, i=i) -> None:
            env = _at(docs, path)["env"]
            env[i] = {"name": env[i]["name"], "valueFrom": {"secretKeyRef": {"name": "pdd-unknown", "key": "v"}}}

        yield Site(f"env {var['name']}={str(var['value'])[:40]!r}", mutate)


def _compose_env_sites(path: tuple, service: dict) -> Iterator[Site]:
    """The literal ``environment`` values of a Compose service (a map, or ``NAME=value`` items), each made
    ``${PDD_UNKNOWN}``."""
    env = service.get("environment")
    items = env.items() if isinstance(env, dict) else enumerate(env) if isinstance(env, list) else ()
    for key, item in items:
        if isinstance(env, dict):
            if item is None or "$" in str(item):
                continue
            name, value = key, item
        else:
            name, eq, value = str(item).partition("=")
            if not eq or "$" in value:
                continue

        def mutate(docs: list, key=key, name=name) -> None:
            e = _at(docs, path)["environment"]
            e[key] = f"${{{VAR}}}" if isinstance(e, dict) else f"{name}=${{{VAR}}}"

        yield Site(f"environment {name}={str(value)[:40]!r}", mutate)


def _is_compose_service(doc: object, path: tuple) -> bool:
    """``path`` (from the document's index) is ``(d, "services", name)`` of a Docker Compose document (a top-level
    ``services`` map, no Kubernetes ``apiVersion``/``kind``)."""
    return (isinstance(doc, dict) and isinstance(doc.get("services"), dict) and "apiVersion" not in doc
            and "kind" not in doc and len(path) == 3 and path[1] == "services")


def sites(docs: list) -> list[Site]:
    """Every value of ``docs`` (parsed YAML documents) that can be made unknown, in document order: in
    Kubernetes' form (``$(PDD_UNKNOWN)`` from a Secret variable), or in Compose's (``${PDD_UNKNOWN}`` from the shell)
    for a Compose service."""
    out: list[Site] = []
    for d, doc in enumerate(docs):
        for path, container in _containers(doc, (d,)):
            compose = _is_compose_service(doc, path)
            script = _runs_shell(container)
            if script:
                key, index = script
                if index < len(container.get(key) or []):
                    out += _script_sites(path, key, index, container[key][index], compose)
            else:
                out += _list_sites(path, container, compose)
            out += _compose_env_sites(path, container) if compose else _env_sites(path, container)
    return out

