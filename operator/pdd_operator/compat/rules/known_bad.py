"""Known-bad versions: engines that load a vLLM or NIXL release with a known P/D fault (the table is
:data:`pdd_operator.vllm.known_bad.KNOWN_BAD`)."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.async_scheduling import async_scheduling
from pdd_operator.vllm.known_bad import KNOWN_BAD, known_bad, uniform_type_model
from pdd_operator.vllm.versions import fmt


def _mixed_hardware(pair: PDPair) -> bool:
    p, d = pair.prefill, pair.decode
    accelerators = [tuple(sorted(k for k in r.resources if k.endswith("/gpu"))) for r in (p, d)]
    images = [r.image.split("@", 1)[0].rsplit(":", 1)[0] for r in (p, d)]
    return accelerators[0] != accelerators[1] or (bool(images[0]) and images[0] != images[1])


@rule(
    id="nixl-version-known-bad", family="known-bad-version", severity="error",
    fields=("spec.engine.image",),
    source="pdd_operator/vllm/known_bad.py KNOWN_BAD: " + "; ".join(k.source for k in KNOWN_BAD),
)
def check_nixl_known_bad(pair: PDPair) -> list[Violation]:
    """No engine loads a NIXL release with a known P/D fault (a warning where only other setups showed it)."""
    out = []
    mixed = _mixed_hardware(pair)
    for r in pair.roles:
        for bad in known_bad("nixl", r.nixl_version, r.version, tuple(r.backends)):
            certain = bad.severity == "error" and (mixed or not bad.mixed_hardware)
            seen = "" if not bad.mixed_hardware else (
                " (seen with prefill and decode on different hardware, as here)" if mixed else
                " (seen with prefill and decode on different hardware; this pair looks alike, so not certain here)")
            out.append((
                f"{r.role}: loads NIXL {fmt(r.nixl_version)} ({r.nixl_from}), a release with a known P/D fault{seen}: "
                f"{bad.what}. Where: {bad.where}. Source: {bad.source}.",
                fix_for(pair, f"Use an engine image with NIXL >= {bad.fixed_in} (spec.engine.image).",
                        f"Use NIXL >= {bad.fixed_in} in the {r.role} container's image (or pip install "
                        f"nixl=={bad.fixed_in}), on both roles."),
                "error" if certain else "warning",
            ))
    return out


@rule(
    id="vllm-version-known-bad", family="known-bad-version", severity="error",
    fields=("spec.engine.image",),
    source="pdd_operator/vllm/known_bad.py KNOWN_BAD (vllm rows): " + "; ".join(
        k.source for k in KNOWN_BAD if k.component == "vllm"),
)
def check_vllm_known_bad(pair: PDPair) -> list[Violation]:
    """No engine runs a vLLM release with a known P/D fault for its connector setup (a warning where the
    fault needs more than the manifest shows: a row's ``uniform_type_only`` for a model not known to group its KV
    cache as UniformTypeKVCacheSpecs, :func:`~pdd_operator.vllm.known_bad.uniform_type_model`)."""
    out = []
    for r in pair.roles:
        for bad in known_bad("vllm", r.version):
            if not bad.stacked_with(r.wrapper) or (bad.pull_only and (not r.nixl or r.push)):
                continue
            if (bad.hybrid_ssm_only and not pair.hybrid_ssm) or (bad.consumer_only and r.role != "decode"):
                continue
            if bad.async_scheduling_only and not async_scheduling(r.async_scheduling, r.speculative, r.executor):
                continue
            workaround = f", or {bad.workaround}" if bad.workaround else ""
            uncertain = bad.uniform_type_only and not uniform_type_model(pair.model)
            out.append((
                f"{r.role}: runs vLLM {fmt(r.version)}, a release with a known P/D fault for this connector setup "
                f"({r.wrapper or r.connector}): {bad.what}. Where: {bad.where}. Source: {bad.source}."
                + (" It needs a model whose layers vLLM groups as UniformTypeKVCacheSpecs (one attention type, pages "
                   "of different sizes, as a sparse MLA model's indexer caches beside its MLA layers), which this "
                   "model is not known to be, so this is a warning." if uncertain else ""),
                fix_for(pair, f"Use vLLM >= {bad.fixed_in} (spec.engine.image){workaround}.",
                        f"Use vLLM >= {bad.fixed_in} in the {r.role} container's image{workaround}"),
                "warning" if uncertain else bad.severity,
            ))
    return out
