"""Whether a vLLM release can import a ``--middleware`` its OpenAI server is given.

The server imports each ``--middleware`` (``module.object``) at startup and stops on an import error: 0.9.0
``vllm/entrypoints/openai/api_server.py`` l.1128-1130 (``module_path, object_name = middleware.rsplit(".", 1)``;
``importlib.import_module(module_path)``), the same in 0.10.0 (l.1537-1539) and 0.20.0 (l.301-303), and from the
``serve`` package on in ``vllm/entrypoints/serve/middleware/register.py`` (0.34.0 l.65-67). ``entrypoint_modules.json``
(``dev/gen_vllm_entrypoint_modules.py``, the sdists 0.9.0-0.34.0, 40 releases) lists the modules under
``vllm.entrypoints`` each release ships; a path there that a release lacks fails that release's server with
``ModuleNotFoundError`` before it serves. OME's published vLLM runtimes pass
``--middleware vllm.entrypoints.openai.middleware.log_opc_header``, which no release read ships (OME's own vLLM image
adds it). Paths outside ``vllm.entrypoints`` (the user's own package, other ``vllm`` packages) are not judged.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from pdd_operator.vllm.versions import Version, parse_version

#: The package whose modules the table lists.
PACKAGE = "vllm.entrypoints."


@cache
def _table() -> tuple[tuple[Version, ...], dict[str, frozenset[int]]]:
    """``(releases read, oldest first; {module: indices of the releases that ship it})``."""
    data = json.loads((Path(__file__).parent / "entrypoint_modules.json").read_text())
    releases = tuple(parse_version(v) for v in data["releases"])
    modules: dict[str, frozenset[int]] = {}
    for name, spans in data["modules"].items():
        found: set[int] = set()
        for span in spans.split(","):
            first, _, last = span.partition("-")
            found.update(range(int(first), int(last) + 1))
        modules[name] = frozenset(found)
    return releases, modules


def shipped_in(middleware: str) -> tuple[Version, ...] | None:
    """The releases read whose ``vllm.entrypoints`` holds the module of ``middleware`` (``pkg.module.object``), oldest
    first (empty: none does); ``None`` for a path outside :data:`PACKAGE`, which is not judged."""
    module = middleware.rsplit(".", 1)[0]
    if not module.startswith(PACKAGE):
        return None
    releases, modules = _table()
    return tuple(releases[i] for i in sorted(modules.get(module, ())))


def import_fails(middleware: str, version: Version | None) -> bool | None:
    """Whether vLLM ``version``'s server stops at startup importing ``middleware``: ``True`` where the release (or both
    releases read around it; for ``None``, every release read) lacks its module, ``False`` where it (or both around
    it) ships it, ``None`` where the table cannot say (a path outside :data:`PACKAGE`, a version outside the releases
    read, releases around it that disagree, or an unknown version where some release ships it)."""
    shipped = shipped_in(middleware)
    if shipped is None:
        return None
    releases, _ = _table()
    if version is None:
        return True if not shipped else None
    if version < releases[0] or version > releases[-1]:
        return None
    around = [version] if version in releases else [max(r for r in releases if r < version),
                                                     min(r for r in releases if r > version)]
    hits = {r in shipped for r in around}
    return None if len(hits) > 1 else not hits.pop()
