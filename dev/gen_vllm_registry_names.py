"""Generate operator/pdd_operator/vllm/registry_names.json: the architecture names each vLLM release's model registry
holds.

Usage: ``python -m dev.gen_vllm_registry_names operator/pdd_operator/vllm/registry_names.json <release>=<vllm dir>...``
(each dir is the ``vllm/`` folder of an unpacked sdist, as for ``dev/gen_vllm_parser_names.py``; 0.18.0-0.34.0 read).

``ModelRegistry`` is built from ``_VLLM_MODELS`` (vllm/model_executor/models/registry.py: 0.26.0 lines 705-716 and
``ModelRegistry = _ModelRegistry({...})`` at its end), the union of the text-generation, embedding, reward,
classification, multimodal, speculative-decoding and Transformers-backend dicts; an architecture none of them holds
is not in ``self.models`` and ``inspect_model_cls`` can only reach it through the Transformers backend. The names are
read statically (the literal keys of the dicts ``_VLLM_MODELS`` unpacks and its own literal keys), with
``_PREVIOUSLY_SUPPORTED_MODELS`` (name -> the last release that had it) for messages. Nothing of vLLM is imported.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path


def read(vllm_dir: Path) -> tuple[set[str], dict[str, str]]:
    """``(names in _VLLM_MODELS, _PREVIOUSLY_SUPPORTED_MODELS)`` of the release whose ``vllm/`` folder is ``vllm_dir``."""
    tree = ast.parse((vllm_dir / "model_executor/models/registry.py").read_text())
    dicts: dict[str, ast.Dict] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and isinstance(getattr(node, "value", None), ast.Dict):
            dicts[target.id] = node.value  # type: ignore[assignment]
    names: set[str] = set()
    top = dicts["_VLLM_MODELS"]
    for key, value in zip(top.keys, top.values, strict=True):
        if key is None and isinstance(value, ast.Name):
            names |= {k.value for k in dicts[value.id].keys if isinstance(k, ast.Constant)}
        elif isinstance(key, ast.Constant):
            names.add(key.value)
    previous = dicts.get("_PREVIOUSLY_SUPPORTED_MODELS")
    gone = {k.value: v.value for k, v in zip(previous.keys, previous.values, strict=True)
            if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)} if previous else {}
    return names, gone


def main(argv: list[str]) -> None:
    out, pairs = Path(argv[0]), [a.split("=", 1) for a in argv[1:]]
    releases = [v for v, _ in pairs]
    per = {v: read(Path(d)) for v, d in pairs}
    names = sorted(set().union(*(per[v][0] for v in releases)))
    table = {}
    for name in names:
        idx = [i for i, v in enumerate(releases) if name in per[v][0]]
        spans, start = [], idx[0]
        for a, b in zip(idx, [*idx[1:], None], strict=True):
            if b != a + 1:
                spans.append(f"{releases[start]}-{releases[a]}")
                start = b
        table[name] = spans
    previous = {k: v for rel in releases for k, v in per[rel][1].items()}
    out.write_text(json.dumps({
        "source": "_VLLM_MODELS of vllm/model_executor/models/registry.py in each release's sdist (PyPI); "
                  "dev/gen_vllm_registry_names.py",
        "releases": releases, "names": table, "previously_supported": dict(sorted(previous.items()))},
        indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
