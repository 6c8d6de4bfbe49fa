"""Whether a vLLM release's model registry holds an architecture name, and what vLLM does when it does not.

``registry_names.json`` (``dev/gen_vllm_registry_names.py``) lists, per architecture name, the releases read
(0.18.0-0.34.0, the sdists of :mod:`~pdd_operator.vllm.registry_architectures`) whose ``_VLLM_MODELS`` holds it
(vllm/model_executor/models/registry.py; ``ModelRegistry`` is built from it). For a name the registry lacks,
``_ModelRegistry.inspect_model_cls`` / ``resolve_model_cls`` (0.26.0 lines 1218-1268 and 1270-1320; the same
branches in every release read) go:

- ``model_impl == "transformers"``: only the Transformers backend (``_try_resolve_transformers``), whatever the
  registry holds;
- ``model_impl == "auto"`` (the default): the registry first, and for a name it lacks the Transformers backend,
  which takes the model when the installed ``transformers`` defines the class or config.json's ``auto_map`` names an
  ``AutoModel*`` class (remote code, ``--trust-remote-code``) and that class ``is_backend_compatible()``; else
  ``_raise_for_unsupported`` ("Model architectures [...] are not supported for now", lines 1077-1108);
- ``model_impl == "vllm"``: the registry only; a name it lacks goes straight to ``_raise_for_unsupported``.

So a missing name is certain to stop the engine only with ``--model-impl vllm``; with ``auto`` whether it starts
depends on the image's ``transformers`` and the checkpoint's remote code, which the manifest does not show.
``_normalize_arch`` also maps a name with a task suffix (``...ForSequenceClassification``) onto the base name the
registry holds (``_SUFFIX_TO_DEFAULTS``, vllm/config/model.py 0.26.0 lines 1952-1969): such a name is looked up
through every suffix here. ``--model-class-overrides`` (0.25.0 on) registers a class at run time and
``--hf-overrides`` may rewrite ``architectures``: the rule that reads this table does not judge such engines.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from pdd_operator.vllm.versions import Version, fmt, parse_version

_TABLE = Path(__file__).with_name("registry_names.json")

#: The architecture-name suffixes vLLM reads as a task and swaps for another to find a base architecture
#: (``_SUFFIX_TO_DEFAULTS``, vllm/config/model.py 0.26.0 lines 1952-1969; the same list in 0.34.0).
TASK_SUFFIXES = ("ForCausalLM", "ForConditionalGeneration", "ChatModel", "LMHeadModel", "ForTextEncoding",
                 "EmbeddingModel", "ForSequenceClassification", "ForTokenClassification", "ForAudioClassification",
                 "ForImageClassification", "ForVideoClassification", "ClassificationModel", "ForRewardModeling",
                 "RewardModel", "Model")


@cache
def _data() -> tuple[tuple[Version, ...], dict[str, tuple[tuple[Version, Version], ...]], dict[str, str]]:
    data = json.loads(_TABLE.read_text())
    spans = {name: tuple((parse_version(a), parse_version(b)) for a, b in (s.split("-") for s in found))
             for name, found in data["names"].items()}
    return (tuple(parse_version(v) for v in data["releases"]), spans,  # type: ignore[return-value]
            data["previously_supported"])


def releases_read() -> tuple[Version, ...]:
    """The releases whose registries were read, oldest first (0.18.0 ... 0.34.0)."""
    return _data()[0]


def _holds(name: str, release: Version) -> bool:
    return any(a <= release <= b for a, b in _data()[1].get(name, ()))


def _candidates(name: str) -> list[str]:
    """``name`` and the names ``_normalize_arch`` may turn it into (its task suffix swapped for another)."""
    out = [name]
    suffix = next((s for s in TASK_SUFFIXES if name.endswith(s)), None)
    if suffix:
        out += [name[: -len(suffix)] + s for s in TASK_SUFFIXES if s != suffix]
    return out


def known_name(name: str | None) -> bool:
    """Whether some release read registers ``name`` (or a name it normalizes to)."""
    return bool(name) and any(c in _data()[1] for c in _candidates(name or ""))


def registry_holds(name: str, version: Version) -> bool | None:
    """Whether vLLM ``version``'s ``ModelRegistry`` holds ``name`` (directly or through ``_normalize_arch``):
    ``True``/``False`` for a release read (same ``major.minor.patch``) and for a release after the newest read
    whose newest read release holds it (``True``); ``None`` where the releases read do not settle it (a release not
    read, one before the oldest read or after the newest that lacks it, a name no release read registers). Pure."""
    read = releases_read()
    same = [r for r in read if r[:3] == version[:3]]
    if same:
        return any(_holds(c, same[0]) for c in _candidates(name))
    if version[:3] > read[-1] and any(_holds(c, read[-1]) for c in _candidates(name)):
        return True
    return None


def releases_holding(name: str) -> str:
    """The releases read whose registry holds ``name``, in words ("0.27.0 to 0.34.0"; "no release read")."""
    spans = _data()[1].get(name)
    if not spans:
        return f"no release read ({fmt(releases_read()[0])} to {fmt(releases_read()[-1])})"
    return ", ".join(fmt(a) if a == b else f"{fmt(a)} to {fmt(b)}" for a, b in spans)


def first_release_holding(name: str, after: Version) -> Version | None:
    """The first release read after ``after`` whose registry holds ``name``, else ``None``."""
    return next((r for r in releases_read() if r > after[:3] and _holds(name, r)), None)


def previously_supported(name: str) -> str | None:
    """The last release that served ``name`` where a release read lists it in ``_PREVIOUSLY_SUPPORTED_MODELS``."""
    return _data()[2].get(name)
