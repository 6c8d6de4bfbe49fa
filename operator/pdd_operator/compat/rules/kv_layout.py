"""KV cache layout: equal on both roles (or the permute path), named as the vLLM version knows it."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.vllm.must_match import fields_of

#: Layouts whose last three strides are (H, N, C): ``KVCacheLayout.is_block_contiguous`` (vllm 0.29+).
BLOCK_CONTIGUOUS = ("LBHNC", "BLHNC")

@rule(
    id="kv-layout-mismatch", family="kv-layout-mismatch", severity="error",
    fields=fields_of("kv_cache_layout"),
    source="seed 000 section 4; vllm nixl worker layout check (0.11.1+ permute)",
)
def check_kv_layout_match(pair: PDPair) -> list[Violation]:
    """KV cache layouts match, or the permute path applies."""
    if pair.mla:
        return []
    p = pair.prefill.kv_layout or "LBHNC"
    d = pair.decode.kv_layout or "LBHNC"
    if p == d:
        return []
    permute = bool(pair.decode.kv_transfer.get("enable_permute_local_kv"))
    if p == "LBHNC" and d == "LBNHC" and permute and not pair.hma_required:
        return []
    fix = ("Use the same VLLM_KV_CACHE_LAYOUT on both roles, or (non-hybrid models, prefill LBHNC/HND, decode "
           "LBNHC/NHD) set spec.kvTransfer.enablePermuteLocalKv.")
    return [(f"KV cache layouts differ: prefill {p}, decode {d}.", fix)]


@rule(
    id="kv-layout-version", family="kv-layout-mismatch", severity="error",
    fields=("spec.kvCache.layout", "spec.engine.env"),
    source="vllm envs.py VLLM_KV_CACHE_LAYOUT choices (NHD/HND before 0.29.0)",
    until=(0, 29, 0),
)
def check_layout_version(pair: PDPair) -> list[Violation]:
    """The KV layout name exists in the vLLM version."""
    out = []
    for r in pair.roles:
        raw = r.env.get("VLLM_KV_CACHE_LAYOUT")
        if raw and raw not in ("NHD", "HND"):
            out.append((f"{r.role}: VLLM_KV_CACHE_LAYOUT={raw} does not exist before vLLM 0.29 (choices NHD, HND).",
                        "Use HND (= LBHNC) or NHD (= LBNHC), or vLLM >= 0.29 for the other layouts."))
    return out


@rule(
    id="hetero-tp-kv-layout", family="hetero-tp", severity="error",
    fields=("spec.kvCache.layout",),
    source="seed 000 section 4; nixl worker head-splitting check (0.20-0.33)",
)
def check_hetero_tp_layout(pair: PDPair) -> list[Violation]:
    """Heterogeneous TP uses a block-contiguous layout on prefill."""
    layout = pair.prefill.kv_layout
    if not pair.hetero_tp or pair.mla or layout is None or layout in BLOCK_CONTIGUOUS:
        return []
    return [(
        f"Heterogeneous TP splits KV heads, which needs a block-contiguous KV layout on prefill; {layout} is not.",
        "Leave the KV layout unset (NIXL prefers LBHNC/HND) or set it to LBHNC.",
    )]
