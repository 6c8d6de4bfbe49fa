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

from pdd_operator.vllm import shipped_modules
from pdd_operator.vllm.versions import Version

#: The package whose modules the table lists.
PACKAGE = "vllm.entrypoints."


def shipped_in(middleware: str) -> tuple[Version, ...] | None:
    """The releases read whose ``vllm.entrypoints`` holds the module of ``middleware`` (``pkg.module.object``), oldest
    first (empty: none does); ``None`` for a path outside :data:`PACKAGE`, which is not judged."""
    module = middleware.rsplit(".", 1)[0]
    return shipped_modules.releases_shipping(module) if module.startswith(PACKAGE) else None


def import_fails(middleware: str, version: Version | None) -> bool | None:
    """Whether vLLM ``version``'s server stops at startup importing ``middleware``: ``True`` where the release (or both
    releases read around it; for ``None``, every release read) lacks its module, ``False`` where it (or both around
    it) ships it, ``None`` where the table cannot say (a path outside :data:`PACKAGE`, a version outside the releases
    read, releases around it that disagree, or an unknown version where some release ships it;
    :func:`pdd_operator.vllm.shipped_modules.import_fails`)."""
    module = middleware.rsplit(".", 1)[0]
    return shipped_modules.import_fails(module, version) if module.startswith(PACKAGE) else None
