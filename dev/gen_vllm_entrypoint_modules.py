"""Generate operator/pdd_operator/vllm/entrypoint_modules.json and kv_transfer_modules.json: the Python modules under
``vllm.entrypoints`` and under ``vllm.distributed.kv_transfer`` each vLLM release ships.

Usage: ``python -m dev.gen_vllm_entrypoint_modules <folder of unpacked sdists> [out.json] [package]``, where the folder
holds one ``<version>/vllm/`` tree per release (``/work/vllm-src/0.9.0`` ... ``0.34.0`` here, the sdists from PyPI;
:data:`dev.vllm_sdists.CACHE` is such a folder) and
``package`` is the folder under ``vllm/`` to list (``entrypoints``, the default, or ``distributed/kv_transfer``, whose
table goes to kv_transfer_modules.json by default).

A module is a ``.py`` file under ``vllm/entrypoints/`` (``pkg/__init__.py`` is ``pkg``). The OpenAI server imports
each ``--middleware`` by its dotted path at startup (``importlib.import_module``: 0.9.0
``vllm/entrypoints/openai/api_server.py`` l.1128-1130, 0.34.0 ``vllm/entrypoints/serve/middleware/register.py``
l.65-67), so a path under ``vllm.entrypoints`` that a release does not ship stops its server with
``ModuleNotFoundError``. The KV connector factory imports a ``kv_connector_module_path`` the same way
(``importlib.import_module``: 0.26.0, 0.31.0 and 0.34.0 ``vllm/distributed/kv_transfer/kv_connector/factory.py``
l.106-108) when each engine builds its connector. Deterministic: the same trees give the same bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dev.vllm_sdists import index_ranges, releases_under

DEFAULT_OUT = Path(__file__).parent.parent / "operator/pdd_operator/vllm/entrypoint_modules.json"
#: package folder under ``vllm/`` -> the table written when no output file is given.
OUTPUTS = {"entrypoints": DEFAULT_OUT,
           "distributed/kv_transfer": DEFAULT_OUT.with_name("kv_transfer_modules.json")}


def modules_in(tree: Path, package: str = "entrypoints") -> set[str]:
    """The dotted names of the modules under ``tree / package`` (``tree``: a release's ``vllm/`` package)."""
    out: set[str] = set()
    for path in sorted((tree / package).rglob("*.py")):
        parts = ("vllm",) + path.relative_to(tree).with_suffix("").parts
        out.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def build(root: Path, package: str = "entrypoints") -> dict:
    """``{"releases": [...], "modules": {name: "i-j,k-l"}}`` over the releases under ``root`` (folders ``X.Y.Z`` or
    ``X.Y.Z.W`` holding ``vllm/<package>``, 0.9.0 on), oldest first."""
    dirs = [(v, tree) for v, tree in releases_under(root, package, since=(0, 9, 0)) if (tree / package).is_dir()]
    releases = [v for v, _ in dirs]
    seen: dict[str, list[int]] = {}
    for i, (_, tree) in enumerate(dirs):
        for name in modules_in(tree, package):
            seen.setdefault(name, []).append(i)
    return {"source": f"the .py files under vllm/{package}/ of each release's sdist (PyPI); "
                      "dev/gen_vllm_entrypoint_modules.py",
            "releases": releases, "modules": {n: index_ranges(seen[n]) for n in sorted(seen)}}


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    package = argv[2] if len(argv) > 2 else "entrypoints"
    out = Path(argv[1]) if len(argv) > 1 and argv[1] else OUTPUTS[package]
    out.write_text(json.dumps(build(root, package), indent=0, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
