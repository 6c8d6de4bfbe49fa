"""Generate operator/pdd_operator/vllm/env_vars.json: the ``VLLM_*`` names each vLLM release's source mentions.

Usage: ``python -m dev.gen_vllm_env_vars <folder of unpacked sdists> [out.json]``, where the folder holds one
``<version>/vllm/`` tree per release (the sdists from PyPI, unpacked: ``/work/vllm-src/0.9.0`` ... ``0.34.0`` here).

For each release, every word ``VLLM_<A-Z0-9_>`` in a ``.py`` file of its ``vllm/`` package: the keys of
``vllm/envs.py``'s ``environment_variables`` (what ``envs.<NAME>`` reads, and from 0.17.0 what ``validate_environ``
accepts without "Unknown vLLM environment variable detected") and any name other code reads with ``os.environ`` or
``os.getenv`` directly. A name absent from all of them is read by no code of that release. No source builds a
``VLLM_`` name from parts (no ``f"VLLM_{...}"`` or ``"VLLM_" +`` in 0.9.0, 0.20.0 or 0.34.0), so the word scan is
complete. Deterministic: the same trees give the same bytes.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

_WORD = re.compile(r"\bVLLM_[A-Z0-9_]*[A-Z0-9]\b")
DEFAULT_OUT = Path(__file__).parent.parent / "operator/pdd_operator/vllm/env_vars.json"


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def names_in(tree: Path) -> set[str]:
    """Every ``VLLM_*`` word in the ``.py`` files under ``tree`` (a release's ``vllm/`` package)."""
    out: set[str] = set()
    for path in sorted(tree.rglob("*.py")):
        out.update(_WORD.findall(path.read_text(errors="replace")))
    return out


def _ranges(indices: list[int]) -> str:
    """``[0, 1, 2, 5, 6]`` -> ``"0-2,5-6"`` (indices into the release list)."""
    parts: list[str] = []
    start = prev = indices[0]
    for i in indices[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ",".join(parts)


def build(root: Path) -> dict:
    """The table: ``{"releases": [...], "names": {NAME: "i-j,k-l"}}`` over the releases under ``root`` (folders
    named ``X.Y.Z`` or ``X.Y.Z.W`` holding ``vllm/envs.py``), oldest first."""
    releases = sorted((p.name for p in root.iterdir()
                       if re.fullmatch(r"\d+(\.\d+){2,3}", p.name) and (p / "vllm" / "envs.py").is_file()), key=_key)
    seen: dict[str, list[int]] = {}
    for i, version in enumerate(releases):
        for name in names_in(root / version / "vllm"):
            seen.setdefault(name, []).append(i)
    return {"source": "VLLM_* words in the .py files of each release's vllm/ package (sdists from PyPI); "
                      "dev/gen_vllm_env_vars.py",
            "releases": releases, "names": {n: _ranges(seen[n]) for n in sorted(seen)}}


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    out = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT
    out.write_text(json.dumps(build(root), indent=0, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
