"""Generate operator/pdd_operator/vllm/registry_architectures.json from an installed vLLM's model registry.

Usage: ``python -m dev.gen_vllm_architectures operator/pdd_operator/vllm/registry_architectures.json <vllm dir>...``
(each dir is the ``vllm/`` folder of a wheel or an unpacked sdist: ``pip download vllm==X --no-deps --no-binary :all:
--no-clean`` keeps it under its pip-download temp dir; 0.18.0-0.34.0 were read, 0.32.0 from the CPU engine's wheel).

For every architecture of ``_TEXT_GENERATION_MODELS`` and ``_MULTIMODAL_MODELS`` in
``vllm/model_executor/models/registry.py`` it records the *evidence* the model files give, not a verdict:
the interface classes in the model class's base chain (``IsHybrid``, ``IsAttentionFree``, ``SupportsMultiModal``,
``SupportsTranscription``) and the markers found in the source files of that chain (MLA layers, a sparse MLA indexer,
fused MoE, per-layer sliding-window or chunked local attention, the state-space layer kind). The family is derived from
the evidence by :func:`pdd_operator.vllm.registry_architectures.classify` (pure, unit-tested), so a regenerated table
changes only where vLLM's files change. Static reading only: nothing of vLLM is imported.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

_SECTIONS = ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS")
_INTERFACES = ("IsHybrid", "IsAttentionFree", "MixtureOfExperts", "SupportsMultiModal", "SupportsTranscription")

#: marker -> regex over a model file's text (vLLM 0.32.0 names; see registry_architectures.classify for their use).
_MARKERS: dict[str, re.Pattern[str]] = {
    "mla": re.compile(r"MultiHeadLatentAttention|MLAAttention\b|MLAModules"),
    "moe": re.compile(r"(Shared)?FusedMoE(Factory)?\("),
    "cross_attention": re.compile(r"AttentionType\.ENCODER_DECODER"),
    "sliding_window": re.compile(r"ChunkedLocalAttention|attention_chunk_size|sliding_window_size"),
    "mamba1": re.compile(r"mamba1_state_shape|\bMambaMixer\("),
    "mamba2": re.compile(r"mamba2_state_shape|\bMambaMixer2\("),
    "gdn": re.compile(r"gated_delta_net_state_shape|kda_state_shape|GatedDeltaNet"),
    "linear": re.compile(r"linear_attention_state_shape|short_conv_state_shape"),
}


def _registry(vllm_dir: Path) -> dict[str, tuple[str, str, str]]:
    """name -> (section, module, class) from registry.py's literal dicts."""
    tree = ast.parse((vllm_dir / "model_executor/models/registry.py").read_text())
    out: dict[str, tuple[str, str, str]] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if not (isinstance(target, ast.Name) and target.id in _SECTIONS and isinstance(node.value, ast.Dict)):
            continue
        for key, value in zip(node.value.keys, node.value.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(value, ast.Tuple) and len(value.elts) == 2:
                module, cls = (e.value for e in value.elts)  # type: ignore[attr-defined]
                out[key.value] = (target.id, module, cls)
    return out


def _class_index(vllm_dir: Path) -> dict[str, list[tuple[list[str], Path]]]:
    """class name -> [(base names, file)] over vLLM's model folders."""
    index: dict[str, list[tuple[list[str], Path]]] = {}
    for folder in (vllm_dir / "model_executor/models", vllm_dir / "models"):
        for path in folder.rglob("*.py"):
            try:
                tree = ast.parse(path.read_text())
            except (SyntaxError, UnicodeDecodeError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                    index.setdefault(node.name, []).append((bases, path))
    return index


def _module_files(vllm_dir: Path, module: str) -> list[Path]:
    if module.startswith("vllm."):
        base = vllm_dir.parent.joinpath(*module.split("."))
    else:
        base = vllm_dir / "model_executor/models" / module
    if base.is_dir():
        return sorted(p for p in base.rglob("*.py") if "/amd/" not in str(p))
    return [base.with_suffix(".py")] if base.with_suffix(".py").exists() else []


def _chain(cls: str, files: list[Path], index, seen: set[str]) -> tuple[set[str], set[Path]]:
    """Base class names and files of ``cls``'s chain (the definition in ``files`` first, else any)."""
    names, paths = set(), set()
    if cls in seen or cls not in index:
        return names, paths
    seen.add(cls)
    defs = [d for d in index[cls] if d[1] in files] or index[cls][:1]
    for bases, path in defs:
        paths.add(path)
        for base in bases:
            names.add(base)
            n, p = _chain(base, [path], index, seen)
            names |= n
            paths |= p
    return names, paths


def evidence(vllm_dir: Path) -> dict[str, dict]:
    index = _class_index(vllm_dir)
    table: dict[str, dict] = {}
    for name, (section, module, cls) in sorted(_registry(vllm_dir).items()):
        files = _module_files(vllm_dir, module)
        bases, paths = _chain(cls, files, index, set())
        text = "\n".join(p.read_text() for p in sorted(set(files) | paths))
        rel = sorted({str(p.relative_to(vllm_dir.parent)) for p in files})
        table[name] = {
            "section": section.strip("_").lower(),
            "files": rel,
            "interfaces": sorted(i for i in _INTERFACES if i in bases),
            "markers": sorted(m for m, rx in _MARKERS.items() if rx.search(text)),
        }
    return table


def _version_of(vllm_dir: Path) -> str:
    """The release of a wheel (``_version.py``) or an sdist (``PKG-INFO`` beside the package)."""
    for path, pattern in ((vllm_dir.parent / "PKG-INFO", r"^Version:\s*(\S+)"),
                          (vllm_dir / "_version.py", r"__version__\s*=\s*version\s*=\s*['\"]([^'\"]+)")):
        found = re.search(pattern, path.read_text(), re.M) if path.exists() else None
        if found:
            return found.group(1)
    raise SystemExit(f"no version found for {vllm_dir}")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:3])


def main(argv: list[str]) -> None:
    """``argv[1]``: the output JSON; ``argv[2:]``: the ``vllm/`` package dirs of every release read (any order).

    Each architecture's evidence comes from the newest release whose registry has it; ``since`` is the first release
    read that has it, ``until`` the first later release read that no longer has it (``None``: still there)."""
    out = Path(argv[1])
    dirs = sorted(((_version_of(Path(d).resolve()), Path(d).resolve()) for d in argv[2:]), key=lambda v: _key(v[0]))
    table: dict[str, dict] = {}
    for version, vllm_dir in dirs:
        found = evidence(vllm_dir)
        for name, entry in found.items():
            since = table.get(name, {}).get("since", version)
            table[name] = {**entry, "since": since, "until": None}
        for name, entry in table.items():
            if name not in found and entry["until"] is None:
                entry["until"] = version
    doc = {"vllm": [v for v, _ in dirs],
           "source": "vllm/model_executor/models/registry.py and the model files of each release "
                     "(dev/gen_vllm_architectures.py)",
           "architectures": table}
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"{len(table)} architectures of vLLM {doc['vllm'][0]}..{doc['vllm'][-1]} -> {out}")


if __name__ == "__main__":
    main(sys.argv)
