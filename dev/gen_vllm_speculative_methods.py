"""Generate operator/pdd_operator/vllm/speculative_methods.json: the ``--speculative-config`` ``method`` values each
vLLM release accepts.

Usage: ``python -m dev.gen_vllm_speculative_methods operator/pdd_operator/vllm/speculative_methods.json
[<release>=<vllm dir>...]`` (the releases as for :func:`dev.vllm_sdists.release_dirs`; none: the sdists 0.18.0-0.34.0,
downloaded to its cache).

``SpeculativeConfig.method`` is typed ``SpeculativeMethod | None`` (vllm/config/speculative.py: 0.18.0 line 76, 0.26.0
line 94, 0.33.0 line 419), a pydantic Literal, so another value fails the config's validation when
``EngineArgs.create_speculative_config`` builds it; from 0.34.0 the hint is ``SpeculativeMethod | str | None`` and
``_validate_method`` (0.34.0 lines 1623-1634) raises ``ValueError("Unknown speculative method ...")`` for a value that
is neither in the Literal nor registered by ``register_speculative_method`` (v1/worker/gpu/spec_decode/
speculator_config.py, which nothing in-tree calls). The values are read statically from ``SpeculativeMethod`` and the
``Literal`` aliases it nests (``EagleModelTypes``, ``MTPModelTypes``, ...), all defined in that file.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from dev.vllm_sdists import holding, read_member, walk, write_table


def read(vllm_dir: Path) -> tuple[set[str], bool]:
    """``(values of SpeculativeMethod, whether the hint also admits str)`` of the release at ``vllm_dir``."""
    tree = ast.parse(read_member(vllm_dir, "config/speculative.py"))
    aliases = {n.targets[0].id: n.value for n in tree.body
               if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}

    def values(node: ast.AST) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.Name) and node.id in aliases:
            return values(aliases[node.id])
        if isinstance(node, ast.Subscript):  # Literal[...]
            inner = node.slice
            return set().union(*(values(e) for e in (inner.elts if isinstance(inner, ast.Tuple) else [inner])))
        return set()

    admits_str = False
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SpeculativeConfig"):
        for item in cls.body:
            if isinstance(item, ast.AnnAssign) and getattr(item.target, "id", "") == "method":
                admits_str = "str" in ast.unparse(item.annotation).replace("SpeculativeMethod", "")
    return values(aliases["SpeculativeMethod"]), admits_str


def main(argv: list[str]) -> None:
    out, per = Path(argv[0]), walk(argv[1:], read)
    releases = list(per)
    write_table(out, "SpeculativeMethod of vllm/config/speculative.py in each release's sdist (PyPI); "
                     "dev/gen_vllm_speculative_methods.py", releases, admits_str=[v for v in releases if per[v][1]],
                method=holding({v: per[v][0] for v in releases}, releases))


if __name__ == "__main__":
    main(sys.argv[1:])
