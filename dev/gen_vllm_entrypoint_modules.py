"""Generate operator/pdd_operator/vllm/entrypoint_modules.json: the Python modules under ``vllm.entrypoints`` each vLLM
release ships.

Usage: ``python -m dev.gen_vllm_entrypoint_modules <folder of unpacked sdists> [out.json]``, where the folder holds one
``<version>/vllm/`` tree per release (``/work/vllm-src/0.9.0`` ... ``0.34.0`` here, the sdists from PyPI).

A module is a ``.py`` file under ``vllm/entrypoints/`` (``pkg/__init__.py`` is ``pkg``). The OpenAI server imports
each ``--middleware`` by its dotted path at startup (``importlib.import_module``: 0.9.0
``vllm/entrypoints/openai/api_server.py`` l.1128-1130, 0.34.0 ``vllm/entrypoints/serve/middleware/register.py``
l.65-67), so a path under ``vllm.entrypoints`` that a release does not ship stops its server with
``ModuleNotFoundError``. Deterministic: the same trees give the same bytes.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from dev.gen_vllm_env_vars import _key, _ranges

DEFAULT_OUT = Path(__file__).parent.parent / "operator/pdd_operator/vllm/entrypoint_modules.json"


def modules_in(tree: Path) -> set[str]:
    """The dotted names of the modules under ``tree / "entrypoints"`` (``tree``: a release's ``vllm/`` package)."""
    out: set[str] = set()
    for path in sorted((tree / "entrypoints").rglob("*.py")):
        parts = ("vllm",) + path.relative_to(tree).with_suffix("").parts
        out.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def build(root: Path) -> dict:
    """``{"releases": [...], "modules": {name: "i-j,k-l"}}`` over the releases under ``root`` (folders ``X.Y.Z`` or
    ``X.Y.Z.W`` holding ``vllm/entrypoints``, 0.9.0 on), oldest first."""
    releases = sorted((p.name for p in root.iterdir()
                       if re.fullmatch(r"\d+(\.\d+){2,3}", p.name) and (p / "vllm" / "entrypoints").is_dir()
                       and _key(p.name) >= (0, 9, 0)), key=_key)
    seen: dict[str, list[int]] = {}
    for i, version in enumerate(releases):
        for name in modules_in(root / version / "vllm"):
            seen.setdefault(name, []).append(i)
    return {"source": "the .py files under vllm/entrypoints/ of each release's sdist (PyPI); "
                      "dev/gen_vllm_entrypoint_modules.py",
            "releases": releases, "modules": {n: _ranges(seen[n]) for n in sorted(seen)}}


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    out = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT
    out.write_text(json.dumps(build(root), indent=0, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
