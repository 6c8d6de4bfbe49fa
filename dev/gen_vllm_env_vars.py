"""Generate operator/pdd_operator/vllm/env_vars.json: the ``VLLM_*`` names each vLLM release's source mentions.

Usage: ``python -m dev.gen_vllm_env_vars <folder of unpacked sdists> [out.json]``, where the folder holds one
``<version>/vllm/`` tree per release (the sdists from PyPI, unpacked: ``/work/vllm-src/0.9.0`` ... ``0.34.0`` here;
:data:`dev.vllm_sdists.CACHE` is such a folder, :func:`dev.vllm_sdists.fetch` fills it).

For each release, every word ``VLLM_<A-Z0-9_>`` in a ``.py`` file of its ``vllm/`` package: the keys of
``vllm/envs.py``'s ``environment_variables`` (what ``envs.<NAME>`` reads, and from 0.17.0 what ``validate_environ``
accepts without "Unknown vLLM environment variable detected") and any name other code reads with ``os.environ`` or
``os.getenv`` directly. A name absent from all of them is read by no code of that release. No source builds a
``VLLM_`` name from parts (no ``f"VLLM_{...}"`` or ``"VLLM_" +`` in 0.9.0, 0.20.0 or 0.34.0), so the word scan is
complete. Deterministic: the same trees give the same bytes.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

from dev.vllm_sdists import index_ranges, read_member, releases_under

_WORD = re.compile(r"\bVLLM_[A-Z0-9_]*[A-Z0-9]\b")
DEFAULT_OUT = Path(__file__).parent.parent / "operator/pdd_operator/vllm/env_vars.json"


def names_in(tree: Path) -> set[str]:
    """Every ``VLLM_*`` word in the ``.py`` files under ``tree`` (a release's ``vllm/`` package)."""
    out: set[str] = set()
    for path in sorted(tree.rglob("*.py")):
        out.update(_WORD.findall(path.read_text(errors="replace")))
    return out


#: ``Platform.validate_environ``'s check of one variable's value (0.34.0 vllm/platforms/interface.py l.1481-1486):
#: ``if env == "NAME": if value != "V": raise ValueError``.
_MUST_EQUAL = re.compile(r'if env == "(VLLM_[A-Z0-9_]+)":\s*if value != "([^"]*)":\s*raise ValueError')


def refusals_in(tree: Path) -> dict[str, str | None]:
    """The ``VLLM_*`` variables the release under ``tree`` refuses at startup, ``{NAME: the one value it accepts, or
    None where any value is refused}``: the keys of ``vllm/envs.py``'s ``removed_environment_variables`` (0.34.0
    l.654-660; "NAME has been removed") and each variable ``validate_environ`` accepts with one value only
    (:data:`_MUST_EQUAL`), read where ``validate_environ`` is defined (``vllm/envs.py`` 0.17.0-0.30.0,
    ``vllm/platforms/interface.py`` from 0.31.0). Both raise in ``validate_environ``, which
    ``EngineArgs.create_engine_config`` calls on every engine (0.34.0 vllm/engine/arg_utils.py l.2294)."""
    out: dict[str, str | None] = {}
    for node in ast.walk(ast.parse(read_member(tree, "envs.py", errors="replace"))):
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "removed_environment_variables" and node.value is not None:
            out.update(dict.fromkeys(ast.literal_eval(node.value)))
    for member in ("envs.py", "platforms/interface.py"):
        if (tree / member).is_file():
            out.update(_MUST_EQUAL.findall(read_member(tree, member, errors="replace")))
    return out


def build(root: Path) -> dict:
    """The table: ``{"releases": [...], "names": {NAME: "i-j,k-l"}, "refused": [{"name", "allowed", "releases"}]}``
    (:func:`refusals_in`) over the releases under ``root`` (folders
    named ``X.Y.Z`` or ``X.Y.Z.W`` holding ``vllm/envs.py``), oldest first."""
    dirs = releases_under(root, "envs.py")
    releases = [v for v, _ in dirs]
    seen: dict[str, list[int]] = {}
    refused: dict[tuple[str, str | None], list[int]] = {}
    for i, (_, tree) in enumerate(dirs):
        for name in names_in(tree):
            seen.setdefault(name, []).append(i)
        for name, allowed in refusals_in(tree).items():
            refused.setdefault((name, allowed), []).append(i)
    return {"source": "VLLM_* words in the .py files of each release's vllm/ package (sdists from PyPI); "
                      "dev/gen_vllm_env_vars.py",
            "releases": releases, "names": {n: index_ranges(seen[n]) for n in sorted(seen)},
            "refused": [{"name": n, "allowed": a, "releases": index_ranges(refused[n, a])}
                        for n, a in sorted(refused, key=lambda k: (k[0], k[1] or ""))]}


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    out = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT
    out.write_text(json.dumps(build(root), indent=0, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
