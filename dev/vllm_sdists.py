"""The walk the ``dev/gen_vllm_*.py`` generators share: the ``vllm/`` folder of each release's sdist, a file read out of
it, and which releases hold a name.

Each generator reads one or a few files of every release's ``vllm/`` package statically (nothing of vLLM is imported)
and writes a table under ``operator/pdd_operator/vllm/``. The releases come from the command line in one of three forms
(:func:`release_dirs`): ``<release>=<vllm dir>`` pairs, bare ``vllm/`` folders (the release read from the ``PKG-INFO``
beside an sdist's package or a wheel's ``_version.py``), or one folder holding a ``<release>/vllm/`` tree per release.
With none of them a generator reads :data:`RELEASES` from the download cache :data:`CACHE`, fetching what is missing
with :func:`fetch`.

``pip download vllm==X --no-deps --no-binary :all:`` fetches the sdist but then fails preparing its metadata (setup.py
imports torch), and pip keeps no file; with ``--no-clean`` the unpacked tree stays in pip's ``pip-download-*`` temp
folder, which :func:`fetch` points at a temp dir of its own (``TMPDIR``) and moves into the cache.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

#: Where :func:`fetch` keeps one ``<release>/vllm/`` tree (and its ``PKG-INFO``) per release.
CACHE = Path(os.environ.get("PDD_VLLM_SDISTS", Path.home() / ".cache/pdd-operator/vllm-sdists"))

#: The releases the per-release tables of the model registry, the parsers, the speculative methods and the attention
#: backends read, oldest first (the ``releases`` of those JSON files).
RELEASES = ("0.18.0", "0.19.1", "0.20.0", "0.20.1", "0.20.2", "0.21.0", "0.22.0", "0.23.0", "0.24.0", "0.25.0",
            "0.26.0", "0.27.0", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")

_RELEASE = re.compile(r"\d+(\.\d+){2,3}")


def key(version: str) -> tuple[int, ...]:
    """``"0.20.1"`` -> ``(0, 20, 1)``: the sort key of a release (every dotted number counts)."""
    return tuple(int(p) for p in version.split("."))


def fetch(version: str, cache: Path = CACHE) -> Path:
    """The ``vllm/`` folder of ``version``'s sdist under ``cache``, downloaded with pip first where it is not there.

    Raises ``RuntimeError`` when pip leaves no unpacked tree (no network, no such release)."""
    target = cache / version
    if (target / "vllm").is_dir():
        return target / "vllm"
    with tempfile.TemporaryDirectory(prefix="pdd-sdist-") as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", f"vllm=={version}", "--no-deps", "--no-binary",
                        ":all:", "--no-build-isolation", "--no-clean", "-d", tmp], env={**os.environ, "TMPDIR": tmp},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        trees = [p.parent for p in Path(tmp).glob("pip-download-*/*/PKG-INFO") if (p.parent / "vllm").is_dir()]
        if len(trees) != 1:
            raise RuntimeError(f"pip left no unpacked sdist of vllm=={version}")
        target.mkdir(parents=True, exist_ok=True)
        shutil.move(trees[0] / "PKG-INFO", target / "PKG-INFO")
        shutil.move(trees[0] / "vllm", target / "vllm")
    return target / "vllm"


def version_of(vllm_dir: Path) -> str:
    """The release of a wheel's (``_version.py``) or an sdist's (``PKG-INFO`` beside the package) ``vllm/`` folder."""
    for path, pattern in ((vllm_dir.parent / "PKG-INFO", r"^Version:\s*(\S+)"),
                          (vllm_dir / "_version.py", r"__version__\s*=\s*version\s*=\s*['\"]([^'\"]+)")):
        found = re.search(pattern, path.read_text(), re.M) if path.exists() else None
        if found:
            return found.group(1)
    raise SystemExit(f"no version found for {vllm_dir}")


def releases_under(root: Path, member: str = "", since: tuple[int, ...] = ()) -> list[tuple[str, Path]]:
    """``[(release, vllm dir)]`` of the folders ``root/X.Y.Z[.W]`` whose ``vllm/`` holds ``member`` (a file or
    folder path under ``vllm/``; any tree when empty) and whose release is ``since`` or later, oldest first."""
    found = [(p.name, p / "vllm") for p in root.iterdir()
             if _RELEASE.fullmatch(p.name) and (p / "vllm" / member).exists() and key(p.name) >= since]
    return sorted(found, key=lambda r: key(r[0]))


def release_dirs(args: Iterable[str], default: Iterable[str] = RELEASES) -> list[tuple[str, Path]]:
    """``[(release, vllm dir)]`` from a generator's arguments.

    ``<release>=<dir>`` pairs keep their order; bare ``vllm/`` folders are dated by :func:`version_of`, and one folder
    of ``<release>/vllm/`` trees by its subfolders' names, both sorted oldest first; no argument reads ``default``
    through :func:`fetch`."""
    args = list(args)
    if not args:
        return [(v, fetch(v)) for v in default]
    if all("=" in a for a in args):
        return [(v, Path(d)) for v, d in (a.split("=", 1) for a in args)]
    if len(args) == 1 and not (Path(args[0]) / "__init__.py").exists():
        return releases_under(Path(args[0]))
    return sorted(((version_of(Path(d).resolve()), Path(d).resolve()) for d in args), key=lambda r: key(r[0]))


def walk(args: Iterable[str], read: Callable[[Path], T]) -> dict[str, T]:
    """``{release: read(its vllm dir)}`` over the releases of ``args`` (:func:`release_dirs`), in their order."""
    return {version: read(vllm_dir) for version, vllm_dir in release_dirs(args)}


def read_member(vllm_dir: Path, member: str, errors: str = "strict") -> str:
    """The text of ``vllm/<member>`` of the release at ``vllm_dir`` (``errors`` as for ``bytes.decode``)."""
    return (vllm_dir / member).read_text(errors=errors)


def holding(per: dict[str, Iterable[str]], releases: Iterable[str]) -> dict[str, list[str]]:
    """``{name: [releases whose set holds it]}`` for every name of ``per`` (release -> names), names sorted, each
    list in the order of ``releases``."""
    releases = list(releases)
    sets = {v: set(per[v]) for v in releases}
    return {n: [v for v in releases if n in sets[v]] for n in sorted(set().union(*sets.values()))}


def write_table(out: Path, source: str, releases: list[str], **tables: object) -> None:
    """Write ``{"source", "releases", **tables}`` to ``out`` as the per-release name tables keep it (indented by one,
    fields in this order)."""
    out.write_text(json.dumps({"source": source, "releases": releases, **tables}, indent=1) + "\n")


def index_ranges(indices: list[int]) -> str:
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


def release_spans(releases: list[str], held: Iterable[str]) -> list[str]:
    """The releases of ``held`` as unbroken spans of ``releases``: ``["0.18.0-0.26.0", "0.32.0-0.34.0"]``."""
    held = set(held)
    idx = [i for i, v in enumerate(releases) if v in held]
    return [f"{releases[int(a)]}-{releases[int(b)]}" for a, b in
            (span.split("-") for span in index_ranges(idx).split(","))] if idx else []
