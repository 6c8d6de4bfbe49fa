"""Mamba cache mode ``align`` on a hybrid SSM decode that loads its KV over a connector: the v1 scheduler of
0.18.0-0.22.x asserts that no external tokens reach its block-aligned split (vllm#43508)."""

from __future__ import annotations

from pdd_operator.api.spec import SSMKind
from pdd_operator.compat.dynamo_engine_defaults import prefix_caching_default
from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.versions import fmt

#: ``Scheduler._mamba_block_aligned_split`` opens with ``assert num_external_computed_tokens == 0, "External KV
#: connector is not verified yet"`` in the 0.18.0, 0.19.1, 0.20.0, 0.21.0 and 0.22.0 sdists (v1/core/sched/
#: scheduler.py) and is gone from 0.23.0, which skips the split while the KV loads (``and not load_kv_async``).
ALIGN_ASSERT_SINCE = (0, 18, 0)
ALIGN_ASSERT_UNTIL = (0, 23, 0)
#: SSM kinds whose vLLM models implement ``SupportsMambaPrefixCaching`` in 0.18.0-0.22.0 (mamba, mamba2, jamba,
#: bamba, nemotron_h, zamba2, granitemoehybrid, falcon_h1; the Gated DeltaNet models do not): with prefix caching on
#: and no ``--mamba-cache-mode``, ``MambaModelConfig.verify_and_update_config`` picks ``all`` for them, ``align``
#: for the rest (model_executor/models/config.py, the same sdists).
PREFIX_CACHING_ALL_KINDS = (SSMKind.MAMBA1, SSMKind.MAMBA2)


def align_mode(pair: PDPair, r: RoleConfig) -> tuple[bool | None, str]:
    """``(aligned, how)``: whether ``r``'s engine runs mamba_cache_mode ``align`` (``None``: not known here) and how
    it comes to (for the message). Prefix caching is off by default for hybrid models before 0.26, so only a written
    ``--enable-prefix-caching`` turns it on in the releases this reads, or Dynamo's dynamo.vllm, which turns an unset
    one on (:func:`~pdd_operator.compat.dynamo_engine_defaults.prefix_caching_default`)."""
    if r.mamba_cache_mode == "align":
        return True, "--mamba-cache-mode align"
    launcher_on = prefix_caching_default(r.launcher, r.prefix_caching)
    if not (r.prefix_caching or launcher_on) or r.mamba_cache_mode not in (None, "none", "all"):
        return False, ""
    written = ("prefix caching (dynamo.vllm turns it on when neither --enable-prefix-caching nor "
               "--no-enable-prefix-caching is given)" if launcher_on else "--enable-prefix-caching")
    kind = pair.model.ssm_kind
    if kind is None:
        return None, written
    if kind in PREFIX_CACHING_ALL_KINDS:
        return False, ""
    return True, (f"{written} on a {kind} model (vLLM picks mamba cache mode align for models without "
                  "Mamba prefix caching support)")


@rule(
    id="hybrid-mamba-align-external-kv", family="hybrid-ssm", severity="error",
    fields=("spec.decode.extraArgs",),
    source=("vllm v1/core/sched/scheduler.py _mamba_block_aligned_split: assert num_external_computed_tokens == 0, "
            "'External KV connector is not verified yet', run for every waiting request when the model has Mamba "
            "layers and mamba_cache_mode == 'align' (need_mamba_block_aligned_split), also while the connector loads "
            "its KV (0.18.0-0.22.0 sdists; gone in 0.23.0); the default mode with prefix caching from "
            "model_executor/models/config.py MambaModelConfig; seen on 0.19.0, vllm#43508"),
    since=ALIGN_ASSERT_SINCE, until=ALIGN_ASSERT_UNTIL,
    needs=("--mamba-cache-mode", "--enable-prefix-caching", "--model"),
)
def check_mamba_align_external_kv(pair: PDPair) -> list[Violation]:
    """A hybrid SSM decode does not run mamba cache mode align while it loads KV over NIXL (0.18-0.22)."""
    if not pair.hybrid_ssm:
        return []
    aligned, how = align_mode(pair, pair.decode)
    if aligned is False:
        return []
    fix = fix_for(pair, "Remove --mamba-cache-mode align and --enable-prefix-caching from spec.decode.extraArgs "
                        "(or use vLLM >= 0.23).",
                  "Drop --mamba-cache-mode align (and --enable-prefix-caching) from the decode engine, or use vLLM "
                  ">= 0.23.")
    if aligned is None:
        return [(
            f"decode: {how} on a hybrid SSM model of unknown SSM kind on vLLM {fmt(pair.version)}: vLLM picks mamba "
            "cache mode align for models without Mamba prefix caching support, and in align mode its scheduler "
            "asserts that no KV arrives over a connector ('External KV connector is not verified yet'); whether this "
            "model gets align was not established.", fix, "warning")]
    return [(
        f"decode: {how} on vLLM {fmt(pair.version)}: in mamba cache mode align the scheduler's block-aligned split "
        "asserts that no tokens come from a KV connector ('External KV connector is not verified yet'), and every "
        "request the decode pulls from prefill over NIXL has them, so its engine core dies on the first P/D "
        "request.", fix)]
