"""Generate operator/pdd_operator/vllm/model_registry.json: the architectures each vLLM release's model registry holds,
with the evidence of their model files (read by :mod:`pdd_operator.vllm.model_registry`).

Usage: ``python -m dev.gen_vllm_model_registry [out.json] [<release>=<vllm dir>... | <vllm dir>... | <folder>]``
(the releases as for :func:`dev.vllm_sdists.release_dirs`; none: the sdists 0.18.0-0.34.0 of
:data:`dev.vllm_sdists.RELEASES`, downloaded to its cache; the default output is the table in the package).

Two readings of ``vllm/model_executor/models/registry.py`` per release, both static (nothing of vLLM is imported):

- the names: ``ModelRegistry`` is built from ``_VLLM_MODELS`` (0.26.0 lines 705-716 and ``ModelRegistry =
  _ModelRegistry({...})`` at its end), the union of the text-generation, embedding, reward, classification,
  multimodal, speculative-decoding and Transformers-backend dicts; an architecture none of them holds is not in
  ``self.models`` and ``inspect_model_cls`` can only reach it through the Transformers backend. Read are the literal
  keys of the dicts ``_VLLM_MODELS`` unpacks and its own literal keys, with ``_PREVIOUSLY_SUPPORTED_MODELS`` (name ->
  the last release that had it) for messages. Each name's ``releases`` are the spans of releases read holding it, so
  a name removed and re-added keeps both spans.
- the evidence, for each architecture of ``_TEXT_GENERATION_MODELS`` and ``_MULTIMODAL_MODELS``: the interface
  classes in the model class's base chain (``IsHybrid``, ``IsAttentionFree``, ``SupportsMultiModal``,
  ``SupportsTranscription``, ``MixtureOfExperts``) and the markers found in the source files of that chain (MLA
  layers, fused MoE, per-layer sliding-window or chunked local attention, the state-space layer kind), taken from the
  newest release whose section holds the name (``read_from``). The family is derived from the evidence by
  :func:`pdd_operator.vllm.model_registry.classify` (pure, unit-tested), so a regenerated table changes only where
  vLLM's files change.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

from dev.vllm_sdists import key, read_member, release_dirs, release_spans

DEFAULT_OUT = Path(__file__).parent.parent / "operator/pdd_operator/vllm/model_registry.json"
SOURCE = ("_VLLM_MODELS of vllm/model_executor/models/registry.py and the model files of each release's sdist (PyPI); "
          "dev/gen_vllm_model_registry.py")
_REGISTRY = "model_executor/models/registry.py"
_SECTIONS = ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS")
_INTERFACES = ("IsHybrid", "IsAttentionFree", "MixtureOfExperts", "SupportsMultiModal", "SupportsTranscription")

#: marker -> regex over a model file's text (vLLM 0.32.0 names; see model_registry.classify for their use).
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


def _literal_dicts(vllm_dir: Path) -> dict[str, ast.Dict]:
    """The module-level ``NAME = {...}`` (or annotated) dicts of the release's registry.py."""
    dicts: dict[str, ast.Dict] = {}
    for node in ast.parse(read_member(vllm_dir, _REGISTRY)).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and isinstance(getattr(node, "value", None), ast.Dict):
            dicts[target.id] = node.value  # type: ignore[assignment]
    return dicts


def names(vllm_dir: Path) -> tuple[set[str], dict[str, str]]:
    """``(names in _VLLM_MODELS, _PREVIOUSLY_SUPPORTED_MODELS)`` of the release whose ``vllm/`` folder is
    ``vllm_dir``."""
    dicts = _literal_dicts(vllm_dir)
    found: set[str] = set()
    top = dicts["_VLLM_MODELS"]
    for k, value in zip(top.keys, top.values, strict=True):
        if k is None and isinstance(value, ast.Name):
            found |= {c.value for c in dicts[value.id].keys if isinstance(c, ast.Constant)}
        elif isinstance(k, ast.Constant):
            found.add(k.value)
    previous = dicts.get("_PREVIOUSLY_SUPPORTED_MODELS")
    gone = {k.value: v.value for k, v in zip(previous.keys, previous.values, strict=True)
            if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)} if previous else {}
    return found, gone


def _sections(vllm_dir: Path) -> dict[str, tuple[str, str, str]]:
    """name -> (section, module, class) from the text-generation and multimodal dicts."""
    out: dict[str, tuple[str, str, str]] = {}
    for section, node in _literal_dicts(vllm_dir).items():
        if section not in _SECTIONS:
            continue
        for k, value in zip(node.keys, node.values, strict=True):
            if isinstance(k, ast.Constant) and isinstance(value, ast.Tuple) and len(value.elts) == 2:
                module, cls = (e.value for e in value.elts)  # type: ignore[attr-defined]
                out[k.value] = (section, module, cls)
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
    found, paths = set(), set()
    if cls in seen or cls not in index:
        return found, paths
    seen.add(cls)
    defs = [d for d in index[cls] if d[1] in files] or index[cls][:1]
    for bases, path in defs:
        paths.add(path)
        for base in bases:
            found.add(base)
            n, p = _chain(base, [path], index, seen)
            found |= n
            paths |= p
    return found, paths


def evidence(vllm_dir: Path) -> dict[str, dict]:
    """name -> ``{"section", "files", "interfaces", "markers"}`` for the text-generation and multimodal architectures
    of the release at ``vllm_dir``."""
    index = _class_index(vllm_dir)
    table: dict[str, dict] = {}
    for name, (section, module, cls) in sorted(_sections(vllm_dir).items()):
        files = _module_files(vllm_dir, module)
        bases, paths = _chain(cls, files, index, set())
        text = "\n".join(p.read_text() for p in sorted(set(files) | paths))
        table[name] = {
            "section": section.strip("_").lower(),
            "files": sorted({str(p.relative_to(vllm_dir.parent)) for p in files}),
            "interfaces": sorted(i for i in _INTERFACES if i in bases),
            "markers": sorted(m for m, rx in _MARKERS.items() if rx.search(text)),
        }
    return table


def build(dirs: list[tuple[str, Path]]) -> dict:
    """The table over ``[(release, vllm dir)]``, read oldest first: ``{"source", "releases", "architectures": {name:
    {"releases": spans, "evidence"?: {..., "read_from": release}}}, "previously_supported": {name: release}}``."""
    dirs = sorted(dirs, key=lambda r: key(r[0]))
    releases = [v for v, _ in dirs]
    held: dict[str, list[str]] = {}
    found: dict[str, dict] = {}
    previous: dict[str, str] = {}
    for version, vllm_dir in dirs:
        present, gone = names(vllm_dir)
        for name in present:
            held.setdefault(name, []).append(version)
        previous.update(gone)
        for name, entry in evidence(vllm_dir).items():
            found[name] = {**entry, "read_from": version}
    table = {name: {"releases": release_spans(releases, held[name]), **({"evidence": found[name]}
                                                                        if name in found else {})}
             for name in sorted(held)}
    return {"source": SOURCE, "releases": releases, "architectures": table,
            "previously_supported": dict(sorted(previous.items()))}


def dump(doc: dict) -> str:
    """The file's text: deterministic (sorted keys), one architecture (one previously supported name) a line."""
    def one(value) -> str:
        return json.dumps(value, sort_keys=True)
    parts = []
    for field, value in sorted(doc.items()):
        if isinstance(value, dict):
            rows = ",\n".join(f"  {one(k)}: {one(v)}" for k, v in sorted(value.items()))
            parts.append(f" {one(field)}: {{\n{rows}\n }}")
        else:
            parts.append(f" {one(field)}: {one(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv and argv[0].endswith(".json") else DEFAULT_OUT
    doc = build(release_dirs(argv[1:] if argv and argv[0].endswith(".json") else argv))
    out.write_text(dump(doc))
    print(f"{len(doc['architectures'])} architectures of vLLM {doc['releases'][0]}..{doc['releases'][-1]} -> {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
