"""Whether a vLLM release ships a Python module under one of the packages whose modules were listed per release.

vLLM imports some modules by a dotted path the user writes, and stops when the import fails: the OpenAI server each
``--middleware`` (:mod:`pdd_operator.vllm.middleware`), the KV connector factory a ``kv_connector_module_path``
(``importlib.import_module``: ``vllm/distributed/kv_transfer/kv_connector/factory.py`` 0.26.0, 0.31.0 and 0.34.0
l.106-108, when each engine builds its connector). The tables (``dev/gen_vllm_entrypoint_modules.py``, the sdists
0.9.0-0.34.0, 40 releases) list the ``.py`` files under ``vllm/entrypoints`` (``entrypoint_modules.json``) and under
``vllm/distributed/kv_transfer`` (``kv_transfer_modules.json``) of each release; a path under those packages that a
release lacks fails that release with ``ModuleNotFoundError``. Paths outside them are not judged.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from pdd_operator.vllm.versions import Version, parse_version

#: Dotted package prefix -> the table listing its modules per release.
TABLES = {"vllm.entrypoints.": "entrypoint_modules.json", "vllm.distributed.kv_transfer.": "kv_transfer_modules.json"}


@cache
def _table(file: str) -> tuple[tuple[Version, ...], dict[str, frozenset[int]]]:
    """``(releases read, oldest first; {module: indices of the releases that ship it})`` of one table file."""
    data = json.loads((Path(__file__).parent / file).read_text())
    releases = tuple(parse_version(v) for v in data["releases"])
    modules: dict[str, frozenset[int]] = {}
    for name, spans in data["modules"].items():
        found: set[int] = set()
        for span in spans.split(","):
            first, _, last = span.partition("-")
            found.update(range(int(first), int(last) + 1))
        modules[name] = frozenset(found)
    return releases, modules


def _file(module: str) -> str | None:
    return next((f for prefix, f in TABLES.items() if module.startswith(prefix)), None)


def releases_shipping(module: str) -> tuple[Version, ...] | None:
    """The releases read that ship ``module`` (a dotted module name), oldest first (empty: none does); ``None`` for a
    module outside the packages of :data:`TABLES`, which is not judged."""
    file = _file(module)
    if file is None:
        return None
    releases, modules = _table(file)
    return tuple(releases[i] for i in sorted(modules.get(module, ())))


def import_fails(module: str, version: Version | None) -> bool | None:
    """Whether vLLM ``version`` fails to import ``module``: ``True`` where the release (or both releases read around
    it; for ``None``, every release read) lacks it, ``False`` where it (or both around it) ships it, ``None`` where the
    tables cannot say (a module outside :data:`TABLES`' packages, a version outside the releases read, releases around
    it that disagree, or an unknown version where some release ships it)."""
    shipped = releases_shipping(module)
    if shipped is None:
        return None
    releases, _ = _table(_file(module) or "")
    if version is None:
        return True if not shipped else None
    if version < releases[0] or version > releases[-1]:
        return None
    around = [version] if version in releases else [max(r for r in releases if r < version),
                                                     min(r for r in releases if r > version)]
    hits = {r in shipped for r in around}
    return None if len(hits) > 1 else not hits.pop()
