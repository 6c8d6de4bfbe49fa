"""A GQA draft model's KV under an MLA target: which TP and DCP shapes the 0.33+ NIXL handshake moves it between.

An MLA target's latent cache is replicated on every TP rank, while a non-MLA (GQA) draft's KV is sharded by head.
From 0.33.0 the NIXL worker tells the draft's regions apart (``_resolve_head_sharded_draft_kv_heads``: the model is
MLA without Mamba layers and not CSA-linear, the speculative config has a draft model config, and that draft is not
MLA; nixl/base_worker.py 0.33.0 line 389, 0.34.0 line 395) and maps them with their own TP mapping, which supports
only some shapes. Whether the draft is MLA is its own config.json's business: a draft of the target's own
architecture (MTP methods, a smaller model of the MLA family) is not head-sharded; EAGLE heads and plain draft
models of another family are.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.compat.rules.packed_kv import initiator
from pdd_operator.vllm.architectures import traits
from pdd_operator.vllm.versions import fmt

#: The first release whose NIXL worker maps a head-sharded draft under an MLA target on its own (absent from the
#: 0.32.0 sdist: its handshake treats the draft's regions like the target's replicated ones).
HEAD_SHARDED_DRAFT_SINCE = (0, 33, 0)
#: Speculative methods whose draft is the target's own architecture: every ``*_mtp`` method and ``mtp``
#: (``MTPModelTypes``, vllm/config/speculative.py 0.34.0) and ``dspark`` (DSparkDeepseekV4ForCausalLM, a DeepSeek-V4
#: draft): MLA under an MLA target.
SAME_ARCHITECTURE_METHODS = ("dspark",)
#: Methods without a draft model's KV (engine_args.DRAFT_FREE_METHODS, and ``extract_hidden_states``).
DRAFT_FREE = ("ngram", "ngram_gpu", "suffix", "extract_hidden_states")
#: Model-id fragments of MLA families, which make a name-derived non-MLA family of a draft uncertain (an EAGLE head
#: named after its DeepSeek target).
_MLA_NAMES = ("deepseek", "kimi", "glm-4.7-flash", "glm-5")


def draft_is_gqa(r: RoleConfig) -> bool | None:
    """Whether the role's speculative draft is a non-MLA model: ``True`` where its name reads as a dense, MoE or
    multimodal family and names no MLA family, ``False`` where it has no draft, is the target's MTP or reads as an
    MLA family, ``None`` where its family is not known."""
    spec = r.speculative or {}
    method = str(spec.get("method") or "")
    model = spec.get("model")
    if method in DRAFT_FREE or method in SAME_ARCHITECTURE_METHODS or method.endswith("mtp") or not model:
        return False
    name = str(model)
    family = traits(None, None, None, name).architecture
    if family in ("mla", "sparse-mla"):
        return False
    if family in ("dense", "moe", "multimodal") and not any(m in name.lower() for m in _MLA_NAMES):
        return True
    return None


@rule(
    id="draft-kv-mla-target-tp", family="hetero-tp", severity="error",
    fields=("spec.speculative", "spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize",
            "spec.kvTransfer.connector", "spec.model.architecture"),
    source=("vllm nixl/base_worker.py add_remote_agent: NotImplementedError 'NIXL head-sharded draft KV under an MLA "
            "target requires local TP >= remote TP and no DCP' (tp_ratio < 0 or either DCP > 1; 0.33.0 line 2743, "
            "0.34.0 line 2801); nixl/push_worker.py: 'NIXL push mode does not support a head-sharded draft's KV "
            "under an MLA target with heterogeneous TP' (0.33.0, 0.34.0); base_worker.py RuntimeError 'Head-sharded "
            "draft KV under an MLA target needs the same block-contiguous kv_cache_layout (e.g. LBHNC)' where the "
            "draft's heads per rank differ (0.33.0, 0.34.0 line 2919)"),
    since=HEAD_SHARDED_DRAFT_SINCE,
    example=("DeepSeek-V3 target, --speculative-config {method: eagle3, model: a Llama EAGLE head}, prefill TP 8, "
             "decode TP 4, NixlConnector"),
    needs=("--speculative-config", "VLLM_KV_CACHE_LAYOUT"),
)
def check_draft_kv_mla_target(pair: PDPair) -> list[Violation]:
    """A non-MLA draft under an MLA target moves only from a TP no larger than the handshake opener's, without DCP.

    ``(opener TP, peer TP, DCP sizes, draft family)``: the engine that opens the handshake (decode for pull, prefill
    for push) needs a TP at least its peer's, push needs equal TP, and neither side may run decode context
    parallelism; where the draft's heads per rank differ, both sides need the same block-contiguous layout (LBHNC or
    BLHNC), which an MLA model does not get by default. Error where the draft's name reads as a non-MLA family;
    warning where its family is not known.
    """
    if not pair.mla or pair.hybrid_ssm or pair.tps is None:
        return []
    local, remote = initiator(pair)
    gqa = draft_is_gqa(local)
    if gqa is False:
        return []
    draft = (local.speculative or {}).get("model")
    severity = "error" if gqa else "warning"
    unsure = "" if gqa else f" (where the draft {draft} is not MLA: its family is not known here)"
    lt, rt = local.tp or 1, remote.tp or 1
    dcps = (local.dcp or 1, remote.dcp or 1)
    mode = "push" if local.push else "pull"
    fix = fix_for(pair, "Give the roles tensor parallel sizes the draft's KV can move between (pull: decode TP >= "
                        "prefill TP; push: equal TP) and no decode context parallelism, or use the target's MTP "
                        "as the draft.",
                  "Set --tensor-parallel-size so the draft's KV can move (pull: decode's >= prefill's; push: equal), "
                  "drop --decode-context-parallel-size, or use the target's MTP as the draft in --speculative-config.")
    head = (f"{local.role} (which opens the NIXL handshake for {mode}) runs the draft {draft} under an MLA target"
            f"{unsure}")
    if lt < rt or max(dcps) > 1:
        why = (f"its TP {lt} is below the {remote.role}'s {rt}" if lt < rt else
               f"decode context parallelism is on (DCP {dcps[0]} / {dcps[1]})")
        return [(f"The {head}; {why}: vLLM {fmt(pair.version)} raises 'NIXL head-sharded draft KV under an MLA target "
                 "requires local TP >= remote TP and no DCP' at the handshake; every request fails.", fix, severity)]
    if mode == "push" and lt != rt:
        return [(f"The {head} with prefill TP {lt} and decode TP {rt}: vLLM {fmt(pair.version)}'s push worker raises "
                 "'NIXL push mode does not support a head-sharded draft's KV under an MLA target with heterogeneous "
                 "TP'; every request fails.", fix, severity)]
    if lt != rt:
        layouts = (local.kv_layout, remote.kv_layout)
        if layouts[0] == layouts[1] and layouts[0] in ("LBHNC", "BLHNC"):
            return []
        written = " and ".join(f"{r.role} {r.kv_layout or 'unset'}" for r in (local, remote))
        return [(f"The {head} with TP {lt} against {rt}: where the draft's KV heads per rank differ, vLLM "
                 f"{fmt(pair.version)} needs the same block-contiguous VLLM_KV_CACHE_LAYOUT (LBHNC or BLHNC) on both "
                 f"sides ('Head-sharded draft KV under an MLA target needs the same block-contiguous kv_cache_layout'); "
                 f"the layouts are {written} (an MLA model's default follows its attention backends).",
                 fix_for(pair, "Set spec.kvCache.layout LBHNC for both roles.",
                         "Set VLLM_KV_CACHE_LAYOUT=LBHNC on the prefill and decode containers."), "warning")]
    return []
