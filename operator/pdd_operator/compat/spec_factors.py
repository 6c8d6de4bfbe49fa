"""The speculative factors of the NIXL compatibility hash beyond the method and draft model: ``parallel_drafting``
and the draft's KV cache dtype, for two engines whose EAGLE-family method and draft model already agree.

vLLM's ``_get_speculative_compatibility_factors`` (vllm/distributed/kv_transfer/kv_connector/v1/nixl/metadata.py)
hashes, for a speculator that reads the target's hidden states (``use_eagle()``: eagle, eagle3, mtp, dflash, dspark
in 0.28.0-0.33.0; ``uses_target_hidden_states`` in 0.34.0), the method, draft model, revision, code revision,
``parallel_drafting`` (0.28.0-0.33.0 sdists; gone from the 0.34.0 sdist's factors) and the effective draft KV
dtype ``speculative_config.kv_cache_dtype or cache_config.cache_dtype`` (0.28.0-0.34.0 sdists). A difference makes
the handshake raise ``RuntimeError("NIXL compatibility hash mismatch")`` (base_worker.py), as
``spec-decode-mismatch`` says of the method and model.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.vllm.versions import Version, fmt

#: The releases whose hash holds ``parallel_drafting``: [since, until) (0.28.0-0.33.0 sdists read).
PARALLEL_DRAFTING_HASHED: tuple[Version, Version] = ((0, 28, 0), (0, 34, 0))
#: The first release whose hash holds the effective draft KV cache dtype (0.28.0 sdist; still in 0.34.0).
DRAFT_KV_DTYPE_HASHED_SINCE: Version = (0, 28, 0)


def parallel_drafting(r: RoleConfig) -> bool:
    """``parallel_drafting`` of the ``--speculative-config`` (vLLM's default ``False``; config/speculative.py)."""
    return bool((r.speculative or {}).get("parallel_drafting", False))


def draft_kv_dtype(r: RoleConfig) -> str:
    """The draft's effective KV cache dtype: its ``kv_cache_dtype``, else the engine's ``--kv-cache-dtype``, else
    ``auto`` (metadata.py resolves it the same way before hashing)."""
    return str((r.speculative or {}).get("kv_cache_dtype") or r.kv_cache_dtype or "auto")


def hashed_factor_differences(pair: PDPair) -> list[tuple]:
    """Violations ``(message, fix[, severity])`` for the two factors above, for a pair whose EAGLE-family settings
    are equal: errors on the releases that hash the factor, warnings on an unknown release, nothing where the
    factor is not hashed (``parallel_drafting`` only changes the draft's query slots there)."""
    version = pair.version
    p, d = pair.prefill, pair.decode
    fix = "Give the same parallel_drafting and draft kv_cache_dtype in both roles' --speculative-config."
    out: list[tuple] = []
    if parallel_drafting(p) != parallel_drafting(d):
        since, until = PARALLEL_DRAFTING_HASHED
        what = (f"parallel_drafting differs in --speculative-config: prefill {parallel_drafting(p)}, decode "
                f"{parallel_drafting(d)}")
        if version is None:
            out.append((f"{what}. vLLM {fmt(since)}-0.33 hash it (the handshake refuses the pair), {fmt(until)} does "
                        "not; the release is not known.", fix, "warning"))
        elif since <= version < until:
            out.append((f"{what}. vLLM {fmt(version)} hashes parallel_drafting among the speculative factors "
                        "(nixl/metadata.py), so the handshake refuses the pair.", fix))
    explicit = any((r.speculative or {}).get("kv_cache_dtype") for r in (p, d))
    # Neither draft names its dtype: both follow --kv-cache-dtype, which kv-cache-dtype-mismatch compares.
    if explicit and draft_kv_dtype(p) != draft_kv_dtype(d):
        what = (f"The draft model's KV cache dtype differs: prefill {draft_kv_dtype(p)}, decode {draft_kv_dtype(d)} "
                "(--speculative-config kv_cache_dtype, else --kv-cache-dtype)")
        if version is not None and version >= DRAFT_KV_DTYPE_HASHED_SINCE:
            out.append((f"{what}. vLLM {fmt(version)} hashes the draft's effective KV dtype (nixl/metadata.py), so "
                        "the handshake refuses the pair.", fix))
        else:
            out.append((f"{what}. vLLM {fmt(DRAFT_KV_DTYPE_HASHED_SINCE)} and later hash it (the handshake refuses "
                        "the pair); this release was not read, and draft KV of two dtypes does not transfer as is.",
                        fix, "warning"))
    return out
