"""Generate operator/pdd_operator/vllm/parser_names.json: the tool-call and reasoning parser names each vLLM release
registers.

Usage: ``python -m dev.gen_vllm_parser_names operator/pdd_operator/vllm/parser_names.json [<release>=<vllm dir>...]``
(the releases as for :func:`dev.vllm_sdists.release_dirs`: each dir is the ``vllm/`` folder of an unpacked sdist;
none: the sdists 0.18.0-0.34.0, downloaded to its cache).

``vllm serve`` checks ``--tool-call-parser`` (with ``--enable-auto-tool-choice``) and ``--reasoning-parser`` against
``ToolParserManager.list_registered()`` / ``ReasoningParserManager.list_registered()`` before it serves
(vllm/entrypoints/openai/api_server.py ``validate_api_server_args``: 0.18.0 lines 495-510, 0.26.0 lines 597-612,
0.28.0 lines 577-592), and ``list_registered`` returns the eagerly and the lazily registered names
(tool_parsers/abstract_tool_parser.py, reasoning/abs_reasoning_parsers.py). The names are read statically: the keys
of ``_TOOL_PARSERS_TO_REGISTER`` (vllm/tool_parsers/__init__.py) and ``_REASONING_PARSERS_TO_REGISTER``
(vllm/reasoning/__init__.py), the literal names of ``register_lazy_module(...)`` calls and of
``@...ParserManager.register_module(name)`` decorators anywhere under vllm/. Nothing of vLLM is imported.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from dev.vllm_sdists import holding, walk, write_table

_DICTS = {"_TOOL_PARSERS_TO_REGISTER": "tool", "_REASONING_PARSERS_TO_REGISTER": "reasoning"}
_MANAGERS = {"ToolParserManager": "tool", "ReasoningParserManager": "reasoning"}


def _strings(node: ast.AST | None) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.List | ast.Tuple):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def read(vllm_dir: Path) -> dict[str, set[str]]:
    """``{"tool": names, "reasoning": names}`` registered by the release whose ``vllm/`` folder is ``vllm_dir``."""
    found: dict[str, set[str]] = {"tool": set(), "reasoning": set()}
    for folder in ("tool_parsers", "reasoning", "entrypoints/openai/tool_parsers", "entrypoints/openai/reasoning"):
        for path in sorted((vllm_dir / folder).rglob("*.py")) if (vllm_dir / folder).is_dir() else []:
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign | ast.AnnAssign):
                    target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                    if isinstance(target, ast.Name) and target.id in _DICTS and isinstance(node.value, ast.Dict):
                        found[_DICTS[target.id]].update(k for key in node.value.keys for k in _strings(key))
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and isinstance(node.func.value, ast.Name) and node.func.value.id in _MANAGERS \
                        and node.func.attr in ("register_module", "register_lazy_module"):
                    kind = _MANAGERS[node.func.value.id]
                    names = [n for a in node.args[:1] for n in _strings(a)]
                    names += [n for k in node.keywords if k.arg in ("name", "names") for n in _strings(k.value)]
                    found[kind].update(names)
    return found


def main(argv: list[str]) -> None:
    out, per = Path(argv[0]), walk(argv[1:], read)
    releases = list(per)
    write_table(out, "vllm/tool_parsers and vllm/reasoning of each release's sdist (PyPI); dev/gen_vllm_parser_names.py",
                releases, **{kind: holding({v: per[v][kind] for v in releases}, releases) for kind in ("tool", "reasoning")})


if __name__ == "__main__":
    main(sys.argv[1:])
