"""A model architecture that the model registry of the engine's vLLM release does not hold.

vLLM resolves ``config.json``'s ``architectures`` through ``_ModelRegistry.inspect_model_cls`` when it builds the
model config, before any engine starts (vllm/model_executor/models/registry.py, the same branches in every release
read 0.18.0-0.34.0; line numbers of 0.26.0): with ``--model-impl vllm`` a name ``_VLLM_MODELS`` lacks goes straight to
``_raise_for_unsupported`` (lines 1077-1108: "Model architectures [...] are not supported for now", or "was
supported in vLLM until v..." for a dropped one), so the engine never starts; with ``--model-impl auto`` (the
default) vLLM first tries its Transformers backend (``_try_resolve_transformers``, lines 1122-1188: the class from the
installed ``transformers`` or from config.json's ``auto_map`` remote code, if ``is_backend_compatible()``), which the
manifest does not show, so that is a warning; with ``--model-impl transformers`` the registry is not asked. The
registries read are in :mod:`pdd_operator.vllm.model_registry`; the architecture comes from
``spec.model.hfArchitecture``, the config.json given, or the model name
(:func:`~pdd_operator.vllm.architectures.architecture_name`).
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.architectures import architecture_name
from pdd_operator.vllm.model_registry import (
    first_release_holding,
    known_name,
    previously_supported,
    registry_holds,
    releases_holding,
    releases_read,
)
from pdd_operator.vllm.versions import fmt

_RAISES = ("_raise_for_unsupported raises ValueError('Model architectures [...] are not supported for now') while the "
           "model config is built")


@rule(
    id="architecture-not-in-release", family="architecture", severity="error",
    fields=("spec.model.hfArchitecture", "spec.model.name", "spec.engine.vllmVersion"),
    source=("vllm/model_executor/models/registry.py _ModelRegistry.inspect_model_cls / resolve_model_cls (0.26.0 "
            "l.1218-1320): model_impl 'vllm' looks only in _VLLM_MODELS and calls _raise_for_unsupported (l.1077-1108) "
            "for a name it lacks; 'auto' (default) first tries the Transformers backend (_try_resolve_transformers "
            "l.1122-1188: transformers' class or config.json auto_map remote code, is_backend_compatible()); "
            "_normalize_arch swaps task suffixes (vllm/config/model.py _SUFFIX_TO_DEFAULTS l.1952-1969). "
            "_VLLM_MODELS of the sdists 0.18.0-0.34.0: pdd_operator/vllm/model_registry.json "
            "(KimiK3ForConditionalGeneration from 0.27.0, KimiK31ForConditionalGeneration from 0.34.0)"),
    example="vllm serve moonshotai/Kimi-K3 --model-impl vllm on vllm==0.26.0",
    without_connector=True, one_engine=True,
)
def check_architecture_in_release(pair: PDPair) -> list[Violation]:
    """The model's architecture is in the model registry of each engine's vLLM release.

    An error where the release was read, lacks the name and the engine runs ``--model-impl vllm`` (vLLM then raises
    at startup); a warning where it runs ``auto`` (the Transformers backend may take the model) or where the
    releases read do not settle the release (before 0.18.0 for a name 0.18.0 lacks or that the known model table says
    came later, a patch release not read between two that lack the name,
    one after 0.34.0 for a name 0.34.0 lacks). Nothing for ``--model-impl transformers``/``terratorch``, for an
    engine with ``--model-class-overrides`` or ``--hf-overrides`` naming ``architectures``, for an unknown version
    (the model's first release already bounds it: :attr:`~pdd_operator.vllm.architectures.ModelTraits.served_since`)
    and for a name no release read registers (``architecture-unknown`` and the Transformers backend's own checks).
    """
    out: list[Violation] = []
    for r in pair.roles:
        name = architecture_name(pair.hf_architecture, r.model or pair.prefill.model)
        if (not name or not known_name(name) or r.version is None or r.arch_overrides
                or (r.model_impl or "auto") not in ("auto", "vllm")):
            continue
        found = _missing(pair, r, name)
        if found is not None:
            out.append(found)
    return out


def _missing(pair: PDPair, r: RoleConfig, name: str) -> Violation | None:
    """The finding for role ``r`` (known version) whose registry may lack ``name``, else ``None``."""
    version = r.version
    assert version is not None
    holds = registry_holds(name, version)
    if holds:
        return None
    read = releases_read()
    where = releases_holding(name)
    first = first_release_holding(name, version)
    gone = previously_supported(name)
    fix = fix_for(pair, (f"Use spec.engine.vllmVersion {fmt(first)} or later (its registry has {name})" if first else
                         f"Use a vLLM release whose registry has {name}") + ", or serve a model this release supports.",
                  (f"Use a vLLM {fmt(first)} or later image or install for the {r.role} engine" if first else
                   f"Use a vLLM release whose registry has {name} for the {r.role} engine")
                  + ", or serve a model this release supports.")
    history = f"{name} is in the registries of {where}" + (f"; vLLM lists it as supported until {gone}" if gone else "")
    if holds is None:
        served = pair.model.served_since
        if version[:3] < read[0] and registry_holds(name, read[0]) and (served is None or served <= version[:3]):
            return None  # older than every release read, whose first has it: nothing read says the older one lacks it
        if not (version[:3] < read[0] or version[:3] > read[-1]):
            before = max(v for v in read if v < version[:3])
            after = min(v for v in read if v > version[:3])
            if registry_holds(name, before) or registry_holds(name, after):
                return None  # the releases read around it disagree: nothing to say
        return (f"{r.role}: vLLM {fmt(version)}'s model registry was not read ({history}; releases read: "
                f"{fmt(read[0])} to {fmt(read[-1])}). If it lacks {name}, "
                + ("" if r.model_impl == "vllm" else "and the Transformers backend cannot take the model, ")
                + f"{_RAISES} and the {r.role} engine does not start.", fix, "warning")
    if r.model_impl == "vllm":
        return (f"{r.role}: vLLM {fmt(version)}'s model registry has no {name} ({history}); with --model-impl vllm "
                f"inspect_model_cls asks only the registry, so {_RAISES} and the {r.role} engine never starts.", fix)
    return (f"{r.role}: vLLM {fmt(version)}'s model registry has no {name} ({history}). With --model-impl auto (the "
            "default) vLLM then tries its Transformers backend, which takes the model only if the image's transformers "
            f"defines {name} or config.json's auto_map names remote code for it (with --trust-remote-code) and that "
            f"class supports vLLM's attention interface (is_backend_compatible); otherwise {_RAISES} and the "
            f"{r.role} engine does not start. That depends on the image's transformers and the checkpoint's code, "
            "which the manifest does not show, so this is a warning; even where it starts, it runs the Transformers "
            "implementation, not vLLM's.", fix, "warning")
