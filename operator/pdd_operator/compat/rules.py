"""The compatibility rules: one :class:`Rule` record each, checked by a small pure function.

Each check takes a :class:`~pdd_operator.compat.pair.PDPair` (the prefill and decode engines as they
will be started) and returns its violations as ``(message, fix)`` pairs (empty when the rule holds).
A rule's ``since``/``until`` bound the vLLM versions it applies to (``until`` exclusive); ``source``
names the seed section or vLLM file. Rule ids are stable: users grep, document and discuss them;
``family`` groups rules that guard the same kind of fault.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pdd_operator.compat.matrix import Capability, Cell, cell, overridden
from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.vllm.args import HOST_IP, POD_IP
from pdd_operator.vllm.must_match import fields_of
from pdd_operator.vllm.versions import Version, fmt

Violation = tuple[str, str]
Check = Callable[[PDPair], list[Violation]]


@dataclass(frozen=True)
class Rule:
    """A compatibility rule.

    Attributes:
        id: stable kebab-case id.
        family: the kind of fault it guards against (several rules may share one).
        severity: ``error`` refuses the deployment; ``warning`` allows it and says why to look.
        summary: one line: what must hold.
        fields: PDDeployment fields the rule reads (dotted, camelCase).
        source: seed section, or vLLM file and versions.
        check: the pure check function.
        since: first vLLM version the rule applies to (inclusive); ``None``: all earlier ones too.
        until: first vLLM version it no longer applies to (exclusive); ``None``: all later ones.
        example: a spec fragment that breaks the rule (for docs/rules.md).
    """

    id: str
    family: str
    severity: Literal["error", "warning"]
    summary: str
    fields: tuple[str, ...]
    source: str
    check: Check
    since: Version | None = None
    until: Version | None = None
    example: str = ""

    @property
    def version_bounded(self) -> bool:
        return self.since is not None or self.until is not None

    def applies_to(self, version: Version | None) -> bool:
        """True when the rule applies to ``version`` (always for an unbounded rule)."""
        if not self.version_bounded:
            return True
        if version is None:
            return False
        return (self.since is None or version >= self.since) and (self.until is None or version < self.until)

    @property
    def versions(self) -> str:
        """Human form of the version bounds, e.g. ``>= 0.20.0`` or ``0.18.0 <= v < 0.20.0``."""
        if self.since and self.until:
            return f"{fmt(self.since)} <= v < {fmt(self.until)}"
        if self.since:
            return f">= {fmt(self.since)}"
        if self.until:
            return f"< {fmt(self.until)}"
        return "all"


def _both(pair: PDPair) -> tuple[RoleConfig, RoleConfig]:
    return pair.prefill, pair.decode


# --- engine arguments ---------------------------------------------------------------------------


def check_engine_args(pair: PDPair) -> list[Violation]:
    return [(f"{r.role}: {err}.", "Fix the engine arguments.") for r in pair.roles for err in r.errors]


def check_connector_present(pair: PDPair) -> list[Violation]:
    out = []
    for r in pair.roles:
        if r.connector not in ("NixlConnector", "NixlPullConnector", "NixlPushConnector"):
            out.append((
                f"{r.role}: kv_connector is {r.connector!r}, not a NIXL connector; these rules are for NixlConnector P/D.",
                "Set --kv-transfer-config with kv_connector NixlConnector (or NixlPushConnector) on both roles.",
            ))
    return out


# --- architecture x capability matrix ------------------------------------------------------------


def _capabilities_used(pair: PDPair) -> list[Capability]:
    used = [Capability.BASIC]
    if any(r.speculative for r in pair.roles):
        used.append(Capability.SPEC_DECODE)
    if pair.hetero_tp:
        used.append(Capability.HETERO_TP)
    if pair.model.sliding_window:
        used.append(Capability.SLIDING_WINDOW)
    if any(r.buffer_device == "cpu" for r in pair.roles) and any(r.resources.get("nvidia.com/gpu") for r in pair.roles):
        used.append(Capability.HOST_BUFFER)
    if _block_pair(pair) is not None:
        used.append(Capability.HETERO_BLOCK)
    if any(r.kv_layout and r.kv_layout.startswith("B") for r in pair.roles):
        used.append(Capability.CROSS_LAYER)
    return used


def _matrix_cells(pair: PDPair, wanted: set[Cell]) -> list[tuple[Capability, Cell]]:
    arch = pair.model.architecture
    if arch is None:
        return []
    return [
        (cap, cell(arch, cap)) for cap in _capabilities_used(pair)
        if cell(arch, cap) in wanted and not overridden(arch, cap, pair.version)
    ]


def check_matrix_unsupported(pair: PDPair) -> list[Violation]:
    return [
        (f"{pair.model.architecture} models do not support {cap} with NixlConnector (compatibility matrix: no).",
         "Serve this model without P/D disaggregation." if cap == Capability.BASIC else f"Do not use {cap} with this model.")
        for cap, _ in _matrix_cells(pair, {Cell.NO})
    ]


def check_matrix_unverified(pair: PDPair) -> list[Violation]:
    return [
        (f"{cap} for {pair.model.architecture} models is '{value}' in the compatibility matrix: not verified "
         "to work with NixlConnector.", "Test this combination before production traffic, or avoid the feature.")
        for cap, value in _matrix_cells(pair, {Cell.UNKNOWN, Cell.IN_PROGRESS})
    ]


def check_architecture_known(pair: PDPair) -> list[Violation]:
    if pair.model.architecture is not None:
        return []
    return [(
        f"The architecture of model {pair.prefill.model!r} is not known, so the architecture rules (heterogeneous "
        "TP, block size, pipeline parallel, hybrid SSM) were not all evaluated.",
        "Set spec.model.architecture (and ssmKind for hybrid SSM models) or spec.model.hfArchitecture.",
    )]


def check_hybrid_hetero_tp_matrix(pair: PDPair) -> list[Violation]:
    if not (pair.hybrid_ssm and pair.hetero_tp and pair.at_least((0, 20, 0))):
        return []
    if pair.at_least((0, 33, 0)):
        return []
    return [(
        f"The compatibility matrix of vLLM {fmt(pair.version)} still calls hybrid SSM heterogeneous TP 'in "
        "progress', but this version's code supports it (3-read conv transfer; Mamba2 from 0.20, GDN from 0.22, "
        "Mamba1 from 0.25). The check follows the code.",
        "No change needed; validate output quality once, as the upstream docs do not yet cover this.",
    )]


# --- must match between prefill and decode -------------------------------------------------------


def _differ(pair: PDPair, value: Callable[[RoleConfig], object], what: str, fix: str) -> list[Violation]:
    p, d = value(pair.prefill), value(pair.decode)
    if p == d:
        return []
    return [(f"{what} differs: prefill {p!r}, decode {d!r}.", fix)]


def check_version_match(pair: PDPair) -> list[Violation]:
    p, d = pair.prefill.version_text, pair.decode.version_text
    if p is None or d is None or p == d:
        return []
    return [(
        f"vLLM versions differ: prefill {p}, decode {d}. The NIXL handshake hashes the exact version string "
        "and refuses the pair (0.13+); older versions fail in less obvious ways.",
        "Run the same engine image on both roles.",
    )]


def check_model_match(pair: PDPair) -> list[Violation]:
    return _differ(pair, lambda r: r.model, "The --model string",
                   "Pass the identical --model string on both roles (the handshake hashes it as written).")


def check_dtype_match(pair: PDPair) -> list[Violation]:
    return _differ(pair, lambda r: r.dtype or "auto", "--dtype", "Use the same --dtype on both roles.")


def check_kv_cache_dtype_match(pair: PDPair) -> list[Violation]:
    return _differ(
        pair, lambda r: r.kv_cache_dtype or "auto", "--kv-cache-dtype (hashed as the raw string)",
        "Use the identical --kv-cache-dtype string on both roles (auto and bfloat16 do not pair).",
    )


def check_transfer_mode_match(pair: PDPair) -> list[Violation]:
    p, d = pair.prefill.push, pair.decode.push
    if p == d:
        return []
    caught = "the handshake refuses it" if pair.at_least((0, 28, 0)) else (
        "vLLM before 0.28 does not hash the transfer mode, so the handshake passes and transfers fail later")
    return [(
        f"Transfer modes differ: prefill {pair.prefill.connector}, decode {pair.decode.connector}; push and pull "
        f"never pair ({caught}).",
        "Use NixlConnector on both roles, or NixlPushConnector on both.",
    )]


def check_hma_flag_match(pair: PDPair) -> list[Violation]:
    p, d = bool(pair.prefill.hma), bool(pair.decode.hma)
    if p == d:
        return []
    return [(
        "--no-disable-hybrid-kv-cache-manager is given on one role only; up to vLLM 0.21 a kv-transfer-config "
        "turns HMA off unless it is given, and the HMA flag is part of the handshake hash.",
        "Pass --no-disable-hybrid-kv-cache-manager on both roles or on neither.",
    )]


_EAGLE = {"eagle", "eagle3", "mtp", "dflash", "dspark"}


def _eagle_settings(r: RoleConfig) -> tuple | None:
    spec = r.speculative or {}
    if spec.get("method") not in _EAGLE:
        return None
    return spec.get("method"), spec.get("model"), spec.get("revision")


def check_spec_decode_match(pair: PDPair) -> list[Violation]:
    p, d = _eagle_settings(pair.prefill), _eagle_settings(pair.decode)
    if p == d:
        return []
    caught = "the handshake refuses it" if pair.at_least((0, 28, 0)) else (
        "vLLM before 0.28 does not check this: long prompts crash decode with illegal memory accesses")
    return [(
        f"EAGLE-family speculative settings differ: prefill {p}, decode {d}; the draft model's KV must match ({caught}).",
        "Use the same speculative method and draft model on both roles (ngram and suffix may differ).",
    )]


def check_hybrid_spec_tokens(pair: PDPair) -> list[Violation]:
    if not pair.hybrid_ssm or not any(r.speculative for r in pair.roles):
        return []
    p, d = pair.prefill.num_spec_tokens, pair.decode.num_spec_tokens
    if p == d:
        return []
    return [(
        f"num_speculative_tokens differ (prefill {p}, decode {d}); for hybrid SSM models it changes the conv-state "
        "shape (conv_kernel - 1 + num_spec rows), which NIXL assumes equal on both sides.",
        "Use the same numSpeculativeTokens on prefill and decode.",
    )]


def check_speculative_complete(pair: PDPair) -> list[Violation]:
    out = []
    for r in pair.roles:
        spec = r.speculative
        if not spec:
            continue
        if spec.get("method") in ("eagle", "eagle3", "draft_model", "dflash", "dspark") and not spec.get("model"):
            out.append((f"{r.role}: speculative method {spec.get('method')} needs a draft model.",
                        "Set spec.speculative.draftModel."))
        if spec.get("num_speculative_tokens") is None:
            out.append((f"{r.role}: speculative decoding without num_speculative_tokens.",
                        f"Set spec.{r.role}.numSpeculativeTokens."))
    return out


def check_kv_layout_match(pair: PDPair) -> list[Violation]:
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


def check_handshake_compat(pair: PDPair) -> list[Violation]:
    for r in pair.roles:
        value = r.extra.get("enforce_handshake_compat", True)
        if value is False or str(value).lower() == "false":
            return [(
                "enforce_handshake_compat is false: prefill and decode pair even when their compatibility hashes "
                "differ, and mismatches show up as wrong output or crashes instead of a handshake error.",
                "Remove enforce_handshake_compat from the kv_connector_extra_config.",
            )]
    return []


# --- connector availability ------------------------------------------------------------------------


def check_nixl_available(pair: PDPair) -> list[Violation]:
    return [(f"vLLM {fmt(pair.version)} has no NixlConnector (first in 0.9.0).", "Use a vLLM >= 0.20 engine image.")]


def check_push_available(pair: PDPair) -> list[Violation]:
    if not any(r.push for r in pair.roles):
        return []
    return [(f"NixlPushConnector does not exist in vLLM {fmt(pair.version)} (first in 0.24.0).",
             "Use NixlConnector (pull), or a vLLM >= 0.24 engine image.")]


# --- tensor parallel --------------------------------------------------------------------------------


def check_tp_divisible(pair: PDPair) -> list[Violation]:
    if pair.tps is None:
        return []
    p, d = pair.tps
    if max(p, d) % min(p, d) == 0:
        return []
    return [(
        f"Prefill TP {p} and decode TP {d}: neither divides the other, so decode cannot map its ranks onto "
        "prefill's (TransferTopology.tp_ratio asserts at the first request).",
        "Choose tensor parallel sizes where one is a multiple of the other, e.g. 1/2, 2/4, 4/4, 8/2.",
    )]


def check_tp_kv_heads(pair: PDPair) -> list[Violation]:
    if pair.tps is None or pair.mla or pair.hybrid_ssm or pair.num_kv_heads is None:
        return []
    p, d = pair.tps
    if p <= d or p <= pair.num_kv_heads:
        return []
    return [(
        f"Prefill TP {p} > decode TP {d} needs prefill TP <= the model's {pair.num_kv_heads} KV heads; beyond that "
        "prefill replicates KV heads and decode cannot read them (assert at the first request).",
        f"Use prefill TP <= {pair.num_kv_heads}, or decode TP >= prefill TP.",
    )]


def check_tp_kv_heads_unknown(pair: PDPair) -> list[Violation]:
    if pair.tps is None or pair.mla or pair.hybrid_ssm or pair.num_kv_heads is not None:
        return []
    if pair.model.architecture is None or pair.tps[0] <= pair.tps[1]:
        return []
    return [(
        f"Prefill TP {pair.tps[0]} > decode TP {pair.tps[1]} is valid only while prefill TP <= the model's KV heads, "
        "which are not given.",
        "Set spec.model.numKvHeads (config.json num_key_value_heads) so this can be checked.",
    )]


def check_p_gt_d_version(pair: PDPair) -> list[Violation]:
    if pair.tps is None or pair.tps[0] <= pair.tps[1]:
        return []
    return [(
        f"Prefill TP {pair.tps[0]} > decode TP {pair.tps[1]} is not supported by vLLM {fmt(pair.version)}: "
        "KV transfer crashes (support landed after 0.11.0).",
        "Use decode TP >= prefill TP, or a vLLM >= 0.20 engine image.",
    )]


#: Layouts whose last three strides are (H, N, C): ``KVCacheLayout.is_block_contiguous`` (vllm 0.29+).
BLOCK_CONTIGUOUS = ("LBHNC", "BLHNC")


def check_hetero_tp_layout(pair: PDPair) -> list[Violation]:
    layout = pair.prefill.kv_layout
    if not pair.hetero_tp or pair.mla or layout is None or layout in BLOCK_CONTIGUOUS:
        return []
    return [(
        f"Heterogeneous TP splits KV heads, which needs a block-contiguous KV layout on prefill; {layout} is not.",
        "Leave the KV layout unset (NIXL prefers LBHNC/HND) or set it to LBHNC.",
    )]


# --- hybrid SSM -------------------------------------------------------------------------------------


def check_hybrid_before_hma(pair: PDPair) -> list[Violation]:
    if not pair.hybrid_ssm:
        return []
    return [(f"NixlConnector supports hybrid SSM (Mamba) models only from vLLM 0.18.0; this runs {fmt(pair.version)}.",
             "Use a vLLM >= 0.20 engine image.")]


def check_hybrid_hetero_tp_old(pair: PDPair) -> list[Violation]:
    if not (pair.hybrid_ssm and pair.hetero_tp):
        return []
    p, d = pair.tps
    return [(
        f"vLLM {fmt(pair.version)} refuses heterogeneous TP for hybrid SSM models (prefill TP {p}, decode TP {d}): "
        "'Mamba does not support heterogeneous TP yet'.",
        "Use equal prefill and decode TP, or vLLM >= 0.20 (Mamba2), 0.22 (GDN), 0.25 (Mamba1).",
    )]


_SSM_SINCE: dict[str, Version] = {"Mamba2": (0, 20, 0), "GDN": (0, 22, 0), "Mamba1": (0, 25, 0)}


def check_ssm_kind_supported(pair: PDPair) -> list[Violation]:
    kind = pair.model.ssm_kind
    if not pair.hybrid_ssm or kind is None or pair.at_least(_SSM_SINCE[kind]):
        return []
    since = _SSM_SINCE[kind]
    return [(
        f"vLLM {fmt(pair.version)}'s NIXL conv-state transfer does not support {kind} layers "
        f"(derive_mamba_conv_split; {kind} from {fmt(since)}): the engine fails at startup.",
        f"Use a vLLM >= {fmt(since)} engine image.",
    )]


def check_ssm_kind_known(pair: PDPair) -> list[Violation]:
    if not pair.hybrid_ssm or pair.model.ssm_kind is not None:
        return []
    return [(
        f"Hybrid SSM model without a known SSM kind: vLLM {fmt(pair.version)} supports only some kinds "
        "(Mamba2 from 0.20, GDN from 0.22, Mamba1 from 0.25).",
        "Set spec.model.ssmKind to Mamba1, Mamba2 or GDN.",
    )]


def check_conv_layout_ds(pair: PDPair) -> list[Violation]:
    if not pair.hybrid_ssm:
        return []
    out = []
    for r in pair.roles:
        layout = r.env.get("VLLM_SSM_CONV_STATE_LAYOUT")
        if layout != "DS":
            shown = "unset (vLLM's default SD)" if layout is None else repr(layout)
            out.append((
                f"{r.role}: VLLM_SSM_CONV_STATE_LAYOUT is {shown}, but vLLM >= 0.20 asserts DS at startup for every "
                "NIXL deployment of a model with Mamba layers, equal TP or not.",
                "Set VLLM_SSM_CONV_STATE_LAYOUT=DS on both roles: leave spec.kvCache.ssmConvStateLayout unset or DS, "
                "and drop any env override.",
            ))
    return out


def check_hybrid_hma(pair: PDPair) -> list[Violation]:
    if not pair.hybrid_ssm:
        return []
    return [(
        f"{r.role}: hybrid SSM models need the hybrid KV cache manager, which a kv-transfer-config turns off in "
        "vLLM <= 0.21 unless --no-disable-hybrid-kv-cache-manager is given (startup assert).",
        "Pass --no-disable-hybrid-kv-cache-manager on both roles.",
    ) for r in pair.roles if r.hma is not True]


def check_hybrid_hma_disabled(pair: PDPair) -> list[Violation]:
    if not pair.hybrid_ssm:
        return []
    return [(
        f"{r.role}: --disable-hybrid-kv-cache-manager is set, but NIXL asserts HMA is on for models with Mamba layers.",
        "Remove --disable-hybrid-kv-cache-manager.",
    ) for r in pair.roles if r.hma is False]


def check_mamba_n_groups(pair: PDPair) -> list[Violation]:
    if not (pair.hybrid_ssm and pair.hetero_tp and pair.n_groups) or pair.model.ssm_kind not in (None, "Mamba2"):
        return []
    bad = [tp for tp in pair.tps if pair.n_groups % tp]
    if not bad:
        return []
    return [(
        f"Mamba2 n_groups {pair.n_groups} is not divisible by TP {bad[0]}: with heterogeneous TP the conv state is "
        "corrupted (vLLM issue #55208; fix not released).",
        f"Use equal prefill and decode TP, or TP sizes that divide n_groups ({pair.n_groups}).",
    )]


def check_mamba_n_groups_unknown(pair: PDPair) -> list[Violation]:
    if not (pair.hybrid_ssm and pair.hetero_tp) or pair.n_groups or pair.model.ssm_kind not in (None, "Mamba2"):
        return []
    return [(
        "Mamba2 heterogeneous TP corrupts the conv state when n_groups is not divisible by both TP sizes "
        "(vLLM issue #55208, e.g. Falcon-H1 with n_groups 1), and n_groups is not known here.",
        "Set spec.model.mambaNGroups or spec.model.configMapRef (config.json) so this can be checked, or use equal TP.",
    )]


def check_hybrid_prefix_caching(pair: PDPair) -> list[Violation]:
    if not (pair.hybrid_ssm and pair.hetero_tp) or pair.decode.prefix_caching is False:
        return []
    return [(
        "Hybrid SSM with heterogeneous TP usually gives prefill and decode different physical-per-logical block "
        "ratios, and vLLM refuses prefix caching on decode then ('Prefix caching with heterogeneous "
        "physical_blocks_per_logical is not supported for Mamba hybrid models').",
        "Disable prefix caching on decode (--no-enable-prefix-caching); the operator does this unless extraArgs override it.",
    )]


# --- pipeline parallel -------------------------------------------------------------------------------


def check_pp_decode(pair: PDPair) -> list[Violation]:
    if (pair.decode.pp or 1) == 1:
        return []
    return [(f"Decode pipeline parallel size {pair.decode.pp}: only the prefill side may be pipeline-split.",
             "Set decode pipelineParallelSize to 1 (use tensor parallel on decode).")]


def check_pp_pull(pair: PDPair) -> list[Violation]:
    if (pair.prefill.pp or 1) == 1 or pair.push:
        return []
    why = ("the model needs the hybrid KV cache manager, which pull refuses with PP" if pair.hma_required
           else "the pull connector does not support PP-disaggregated transfer")
    return [(
        f"Prefill pipeline parallel size {pair.prefill.pp} with the pull NixlConnector: {why}.",
        "Use prefill pipelineParallelSize 1, or NixlPushConnector (vLLM >= 0.26; non-hybrid models).",
    )]


def check_pp_version(pair: PDPair) -> list[Violation]:
    if (pair.prefill.pp or 1) == 1:
        return []
    return [(f"vLLM {fmt(pair.version)} has no pipeline-parallel handling in the NIXL connector (first in 0.26.0).",
             "Use pipelineParallelSize 1, or vLLM >= 0.26 with NixlPushConnector.")]


def check_pp_push_hma_version(pair: PDPair) -> list[Violation]:
    if (pair.prefill.pp or 1) == 1 or not pair.push or not pair.hma_required:
        return []
    return [(f"NixlPushConnector in vLLM {fmt(pair.version)} does not support pipeline_parallel_size > 1 with "
             "hybrid KV cache layouts (startup error; allowed from 0.31.0).",
             "Use prefill pipelineParallelSize 1, or vLLM >= 0.31.")]


def check_pp_hybrid_ssm(pair: PDPair) -> list[Violation]:
    if (pair.prefill.pp or 1) == 1 or not pair.hybrid_ssm or not pair.push:
        return []
    return [("NixlPushConnector does not support pipeline_parallel_size > 1 with Mamba/SSM hybrid KV cache "
             "layouts (startup error).", "Use prefill pipelineParallelSize 1 for hybrid SSM models.")]


# --- block size -----------------------------------------------------------------------------------------


def _block_pair(pair: PDPair) -> tuple[int, int] | None:
    p, d = pair.prefill.block_size, pair.decode.block_size
    if p is None or d is None or p == d:
        return None
    return p, d


def check_block_partial(pair: PDPair) -> list[Violation]:
    p, d = pair.prefill.block_size, pair.decode.block_size
    if (p is None) == (d is None):
        return []
    return [(f"--block-size is set on one role only (prefill {p}, decode {d}); vLLM picks the other's itself, "
             "which may not pair with it.", "Set blockSize on both roles, equal unless you need them to differ.")]


def check_block_pull_direction(pair: PDPair) -> list[Violation]:
    bp = _block_pair(pair)
    if bp is None or pair.push or bp[1] % bp[0] == 0:
        return []
    return [(f"Pull mode needs the decode block size to be a multiple of the prefill one (prefill {bp[0]}, decode "
             f"{bp[1]}); otherwise every request fails at the first KV read.",
             f"Use equal block sizes, or a decode block size that is a multiple of {bp[0]}.")]


def check_block_push_equal(pair: PDPair) -> list[Violation]:
    bp = _block_pair(pair)
    if bp is None or not pair.push:
        return []
    return [(f"NixlPushConnector needs equal block sizes (prefill {bp[0]}, decode {bp[1]}).",
             "Use the same blockSize on both roles.")]


def check_block_tp_shrink(pair: PDPair) -> list[Violation]:
    bp = _block_pair(pair)
    if bp is None or pair.tps is None or pair.tps[0] <= pair.tps[1] or pair.mla:
        return []
    return [(f"Prefill TP {pair.tps[0]} > decode TP {pair.tps[1]} needs equal block sizes (prefill {bp[0]}, decode {bp[1]}).",
             "Use the same blockSize on both roles.")]


def check_block_hma_old(pair: PDPair) -> list[Violation]:
    bp = _block_pair(pair)
    if bp is None or not pair.hma_required:
        return []
    return [(f"vLLM {fmt(pair.version)} does not support different block sizes with the hybrid KV cache manager "
             f"(prefill {bp[0]}, decode {bp[1]}): 'HMA does not support different remote block size yet'.",
             "Use the same blockSize on both roles, or vLLM >= 0.27.")]


def check_block_host_buffer(pair: PDPair) -> list[Violation]:
    bp = _block_pair(pair)
    if bp is None or not any(r.buffer_device == "cpu" for r in pair.roles):
        return []
    return [(f"Different block sizes (prefill {bp[0]}, decode {bp[1]}) are not supported with a host buffer "
             "(kv_buffer_device cpu).", "Use the same blockSize on both roles.")]


def check_layout_version(pair: PDPair) -> list[Violation]:
    out = []
    for r in pair.roles:
        raw = r.env.get("VLLM_KV_CACHE_LAYOUT")
        if raw and raw not in ("NHD", "HND"):
            out.append((f"{r.role}: VLLM_KV_CACHE_LAYOUT={raw} does not exist before vLLM 0.29 (choices NHD, HND).",
                        "Use HND (= LBHNC) or NHD (= LBNHC), or vLLM >= 0.29 for the other layouts."))
    return out


_MANAGED_FLAGS = {
    "--tensor-parallel-size": "tensorParallelSize", "-tp": "tensorParallelSize",
    "--pipeline-parallel-size": "pipelineParallelSize", "-pp": "pipelineParallelSize",
    "--block-size": "blockSize", "--gpu-memory-utilization": "gpuMemoryUtilization",
    "--kv-transfer-config": "spec.kvTransfer", "--kv-cache-dtype": "spec.kvCache.dtype",
    "--dtype": "spec.model.dtype", "--model": "spec.model.name", "--max-model-len": "spec.model.maxModelLen",
    "--revision": "spec.model.revision", "--served-model-name": "spec.model.servedModelName",
    "--trust-remote-code": "spec.model.trustRemoteCode", "--speculative-config": "spec.speculative",
    "--port": "spec.port", "--host": "(the operator's)",
    "--disable-hybrid-kv-cache-manager": "(set by the operator for the model)",
    "--no-disable-hybrid-kv-cache-manager": "(set by the operator for the model)",
}


def check_extra_args(pair: PDPair) -> list[Violation]:
    if not pair.managed:
        return []
    out = []
    for r in pair.roles:
        for arg in r.extra_args:
            flag = arg.split("=", 1)[0]
            if flag in _MANAGED_FLAGS:
                out.append((
                    f"{r.role}: extraArgs sets {flag}, which the operator renders from the spec; a second value "
                    "overrides it on one role only and can break what must match between prefill and decode.",
                    f"Remove {flag} from extraArgs and set {_MANAGED_FLAGS[flag]} instead.",
                ))
    return out


def check_rdma_present(pair: PDPair) -> list[Violation]:
    if not pair.managed:
        return []
    roles = [r for r in pair.roles if any(k.endswith("/gpu") for k in r.resources) or r.dra_claims]
    if not roles or any(_has_rdma(r) or r.networks for r in roles) or any(r.buffer_device == "cpu" for r in roles):
        return []
    return [(
        "No RDMA device is requested (spec.network.rdma is unset): unless prefill and decode share NVLink on one node, "
        "UCX falls back to TCP and time to first token grows 10-40x.",
        "Set spec.network.rdma.resourceName to the cluster's RDMA resource (e.g. rdma/ib, rdma/rdma_shared_device_a).",
    )]


# --- pods, networking, memory -----------------------------------------------------------------------------

_UNROUTABLE = {"0.0.0.0", "::", "localhost", "127.0.0.1", "::1", ""}


def check_side_channel_host(pair: PDPair) -> list[Violation]:
    out = []
    for r in pair.roles:
        host = r.env.get("VLLM_NIXL_SIDE_CHANNEL_HOST")
        if host == POD_IP or (host == HOST_IP and r.host_network):
            continue
        if host is None:
            what = "is unset (vLLM's default localhost)"
        elif host in _UNROUTABLE or host.startswith("127."):
            what = f"is {host!r}"
        elif host == HOST_IP:
            what = "is the node IP but the pod does not use the host network"
        else:
            continue  # a literal address: may be right (static setups); not judged
        out.append((
            f"{r.role}: VLLM_NIXL_SIDE_CHANNEL_HOST {what}. It is both the bind address and the address advertised "
            "to the peer, so the peer dials the wrong host and the first request fails.",
            "Set it from the downward API: valueFrom.fieldRef.fieldPath status.podIP (status.hostIP with hostNetwork).",
        ))
    return out


def _ports(r: RoleConfig) -> set[int]:
    raw = r.env.get("VLLM_NIXL_SIDE_CHANNEL_PORT")
    base = int(raw) if raw and raw.isdigit() else (5600 if r.version is None or r.version >= (0, 11, 1) else 5557)
    dp = r.dp or 1
    if r.version is not None and r.version < (0, 11, 1):
        return set(range(base, base + dp * (r.tp or 1)))
    return set(range(base, base + dp))


def check_side_channel_ports(pair: PDPair) -> list[Violation]:
    shared = pair.shared_network or (pair.prefill.host_network and pair.decode.host_network)
    if not shared:
        return []
    clash = sorted(_ports(pair.prefill) & _ports(pair.decode))
    if not clash:
        return []
    return [(
        f"Prefill and decode share a network namespace and their NIXL side-channel ports overlap ({clash[0]}...): "
        "the second engine fails with 'Address already in use'.",
        "Give each role its own VLLM_NIXL_SIDE_CHANNEL_PORT range (base + data parallel size must not overlap).",
    )]


def check_side_channel_vs_listeners(pair: PDPair) -> list[Violation]:
    out = []
    for r in pair.roles:
        clash = sorted(_ports(r) & set(r.other_ports))
        if clash:
            out.append((
                f"{r.role}: the NIXL side-channel port {clash[0]} is also used by another listener of the engine "
                "(HTTP or KV events).",
                "Choose a side-channel port (spec.kvTransfer.sideChannelPort) that no other listener uses.",
            ))
    return out


def check_ucx_net_devices(pair: PDPair) -> list[Violation]:
    out = []
    for r in pair.roles:
        devices = r.env.get("UCX_NET_DEVICES")
        if r.host_network and _has_rdma(r) and devices in (None, "all"):
            out.append((
                f"{r.role}: the engine uses the host network, so UCX sees every NIC of the node and UCX_NET_DEVICES is "
                f"{'unset' if devices is None else 'all'}: it may pick a NIC far from the GPU, or an Ethernet port.",
                "Set spec.network.ucx.netDevices to the GPU-local RDMA devices, e.g. mlx5_0:1.",
            ))
    return out


def check_expandable_segments(pair: PDPair) -> list[Violation]:
    out = []
    for r in pair.roles:
        conf = r.env.get("PYTORCH_CUDA_ALLOC_CONF", "").replace(" ", "").lower()
        if "expandable_segments:true" in conf:
            out.append((
                f"{r.role}: PYTORCH_CUDA_ALLOC_CONF enables expandable_segments; memory NIXL registered for RDMA is "
                "later remapped, and transfers fail with remote access errors (vLLM 0.33 refuses it at startup).",
                "Remove expandable_segments:True from PYTORCH_CUDA_ALLOC_CONF.",
            ))
    return out


_EFA = "vpc.amazonaws.com/efa"


def check_efa_backend(pair: PDPair) -> list[Violation]:
    out = []
    for r in pair.roles:
        if _EFA in r.resources and "LIBFABRIC" not in r.backends:
            out.append((
                f"{r.role}: the pod gets AWS EFA devices but NIXL uses backends {r.backends}; UCX cannot drive EFA's SRD "
                "transport and stalls or falls back to software emulation.",
                "Set spec.kvTransfer.backends to [LIBFABRIC] (kv_connector_extra_config.backends).",
            ))
    return out


def _has_rdma(r: RoleConfig) -> bool:
    return (any(k.startswith("rdma/") or k == _EFA or "sriov" in k or "hca" in k for k in r.resources)
            or any("nic" in c or "rdma" in c for c in r.dra_claims))


def check_memlock(pair: PDPair) -> list[Violation]:
    out = []
    for r in pair.roles:
        if "IPC_LOCK" in r.capabilities and r.run_as_non_root:
            out.append((
                f"{r.role}: the engine runs as non-root with IPC_LOCK; the capability only lifts the memlock limit for "
                "root, so NIXL may fail to register KV memory.",
                "Run the engine as root (the default for vLLM images) or raise LimitMEMLOCK on the nodes' container runtime.",
            ))
        elif "IPC_LOCK" not in r.capabilities and r.connector and not pair.managed and _has_rdma(r):
            out.append((
                f"{r.role}: the engine container lacks the IPC_LOCK capability; NIXL pins KV memory for RDMA and may hit "
                "the memlock limit.",
                "Add securityContext.capabilities.add: [IPC_LOCK] (no privileged mode needed).",
            ))
    return out


_SEED = "seed 000 section 1 (architecture x capability matrix)"
_V020 = (0, 20, 0)

#: Every rule, in evaluation order.
RULES: tuple[Rule, ...] = (
    Rule("engine-args-invalid", "engine-args", "error", "The engine arguments can be read.",
         ("spec.prefill.extraArgs", "spec.decode.extraArgs"), "vLLM argument parser", check_engine_args),
    Rule("kv-connector-missing", "connector", "error", "Both roles use a NIXL KV connector.",
         ("spec.kvTransfer.connector",), "seed 000 (NixlConnector P/D)", check_connector_present),
    Rule("nixl-connector-unavailable", "connector", "error", "The vLLM version ships a NixlConnector.",
         ("spec.engine",), "vllm-nixl-facts.md section 7: NixlConnector first in 0.9.0", check_nixl_available,
         until=(0, 9, 0)),
    Rule("push-connector-unavailable", "connector", "error", "NixlPushConnector exists in the vLLM version.",
         ("spec.kvTransfer.connector", "spec.engine"), "vllm kv_connector/factory.py (NixlPushConnector from 0.24.0)",
         check_push_available, until=(0, 24, 0), example="kvTransfer: {connector: NixlPushConnector} on v0.20.2"),
    # must match
    Rule("vllm-version-mismatch", "vllm-version-mismatch", "error", "Prefill and decode run the same vLLM version.",
         fields_of("vllm_version"), "seed 000 section 2; vllm nixl metadata.py hash (0.13+)",
         check_version_match),
    Rule("model-mismatch", "model-mismatch", "error", "Prefill and decode serve the identical --model string.",
         fields_of("model"), "seed 000 section 2; vllm nixl metadata.py hash", check_model_match),
    Rule("dtype-mismatch", "model-mismatch", "error", "Prefill and decode use the same --dtype.",
         fields_of("dtype"), "seed 000 section 2; vllm nixl metadata.py hash", check_dtype_match),
    Rule("kv-cache-dtype-mismatch", "kv-cache-dtype-mismatch", "error", "Prefill and decode use the same --kv-cache-dtype.",
         fields_of("cache_dtype"), "seed 000 sections 2 and 6; vllm nixl metadata.py hash (raw string)",
         check_kv_cache_dtype_match),
    Rule("transfer-mode-mismatch", "transfer-mode-mismatch", "error", "Push and pull connectors never pair.",
         fields_of("transfer_mode"), "seed 000 section 2; transfer_mode hashed from vLLM 0.28.0",
         check_transfer_mode_match),
    Rule("hma-flag-mismatch", "hma-flag-mismatch", "error", "Both roles agree on the hybrid KV cache manager flag.",
         fields_of("is_hma_enabled"), "vllm/config/vllm.py (HMA off with a kv-transfer-config, <= 0.21)",
         check_hma_flag_match, until=(0, 22, 0)),
    Rule("spec-decode-mismatch", "spec-decode-mismatch", "error", "EAGLE-family speculative settings are equal on P and D.",
         fields_of("speculative_config")[:1], "seed 000 footnote (a); vllm nixl metadata.py speculative factors (0.28+)",
         check_spec_decode_match),
    Rule("hybrid-spec-tokens-mismatch", "spec-decode-mismatch", "error", "Hybrid SSM P and D use equal numSpeculativeTokens.",
         ("spec.prefill.numSpeculativeTokens", "spec.decode.numSpeculativeTokens"),
         "vllm MambaStateShapeCalculator conv rows (compat-rules.md section 9)", check_hybrid_spec_tokens),
    Rule("speculative-incomplete", "spec-decode-mismatch", "error",
         "Speculative decoding names its draft model and token count.",
         ("spec.speculative", "spec.prefill.numSpeculativeTokens", "spec.decode.numSpeculativeTokens"),
         "vllm/config/speculative.py", check_speculative_complete),
    Rule("kv-layout-mismatch", "kv-layout-mismatch", "error", "KV cache layouts match, or the permute path applies.",
         fields_of("kv_cache_layout"),
         "seed 000 section 4; vllm nixl worker layout check (0.11.1+ permute)", check_kv_layout_match),
    Rule("extra-args-managed-flag", "engine-args", "error", "extraArgs do not set flags the operator renders.",
         ("spec.prefill.extraArgs", "spec.decode.extraArgs"), "PDDeployment API", check_extra_args),
    Rule("rdma-missing", "kv-transport", "warning", "GPU engines request an RDMA device for KV transfer.",
         ("spec.network.rdma",), "NIXL/UCX transport selection (TCP fallback)", check_rdma_present),
    Rule("handshake-compat-disabled", "handshake", "warning", "The handshake compatibility check stays on.",
         ("spec.kvTransfer.extraConfig",), "seed 000 section 2; vllm nixl _nixl_handshake (0.13+)", check_handshake_compat),
    # architecture
    Rule("architecture-unknown", "architecture", "warning", "The model's architecture family is known.",
         ("spec.model.architecture", "spec.model.hfArchitecture", "spec.model.name"), _SEED, check_architecture_known),
    Rule("architecture-unsupported", "architecture", "error", "No feature used is a 'no' cell of the matrix.",
         ("spec.model.architecture",), _SEED, check_matrix_unsupported,
         example="model: {hfArchitecture: WhisperForConditionalGeneration}"),
    Rule("architecture-unverified", "architecture", "warning", "No feature used is an 'unknown' or 'in progress' cell.",
         ("spec.model.architecture",), _SEED, check_matrix_unverified),
    Rule("matrix-overridden-by-code", "architecture", "warning",
         "Says where the check follows vLLM's code instead of the matrix (hybrid SSM heterogeneous TP).",
         ("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize"),
         "seed 000 footnote (e) vs vllm nixl add_remote_agent (0.20-0.32)", check_hybrid_hetero_tp_matrix,
         since=_V020),
    # tensor parallel
    Rule("tp-divisibility", "hetero-tp", "error", "One TP size is a multiple of the other.",
         ("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize"),
         "vllm kv_connector/utils.py TransferTopology.tp_ratio (0.20-0.33)", check_tp_divisible,
         example="prefill: {tensorParallelSize: 2}, decode: {tensorParallelSize: 3}"),
    Rule("tp-exceeds-kv-heads", "hetero-tp", "error", "Prefill TP > decode TP only while prefill TP <= KV heads.",
         ("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.model.numKvHeads"),
         "vllm nixl _validate_remote_agent_handshake is_kv_replicated assert (0.20-0.33)", check_tp_kv_heads),
    Rule("tp-kv-heads-unknown", "hetero-tp", "warning", "KV heads are known when prefill TP > decode TP.",
         ("spec.model.numKvHeads",), "compat-rules.md section 9", check_tp_kv_heads_unknown),
    Rule("hetero-tp-p-gt-d-unsupported", "hetero-tp-unsupported-for-version", "error",
         "Prefill TP > decode TP needs a vLLM that supports it.",
         ("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.engine"),
         "vLLM PR #27274 (P TP > D TP), not in releases up to 0.11.0 [issue]", check_p_gt_d_version,
         until=(0, 11, 1)),
    Rule("kv-layout-version", "kv-layout-mismatch", "error", "The KV layout name exists in the vLLM version.",
         ("spec.kvCache.layout", "spec.engine.env"), "vllm envs.py VLLM_KV_CACHE_LAYOUT choices (NHD/HND before 0.29.0)",
         check_layout_version, until=(0, 29, 0)),
    Rule("hetero-tp-kv-layout", "hetero-tp", "error", "Heterogeneous TP uses a block-contiguous layout on prefill.",
         ("spec.kvCache.layout",), "seed 000 section 4; nixl worker head-splitting check (0.20-0.33)",
         check_hetero_tp_layout),
    # hybrid SSM
    Rule("hybrid-ssm-unsupported", "hybrid-ssm", "error", "NixlConnector supports hybrid SSM in the vLLM version.",
         ("spec.model.architecture", "spec.engine"), "vllm-nixl-facts.md section 7: SupportsHMA from 0.18.0",
         check_hybrid_before_hma, until=(0, 18, 0)),
    Rule("hybrid-ssm-hetero-tp", "hetero-tp-unsupported-for-version", "error",
         "Hybrid SSM heterogeneous TP is supported by the vLLM version.",
         ("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.engine"),
         "vllm nixl_connector.py 'Mamba does not support heterogeneous TP yet' (0.18.0-0.19.1)",
         check_hybrid_hetero_tp_old, since=(0, 18, 0), until=_V020),
    Rule("ssm-kind-unsupported", "hybrid-ssm", "error", "The SSM layer kind is supported by the vLLM version.",
         ("spec.model.ssmKind", "spec.engine"),
         "vllm ssm_conv_transfer_utils.derive_mamba_conv_split (Mamba2 0.20, GDN 0.22, Mamba1 0.25)",
         check_ssm_kind_supported, since=_V020, until=(0, 25, 0)),
    Rule("ssm-kind-unknown", "hybrid-ssm", "warning", "The SSM kind of a hybrid model is known.",
         ("spec.model.ssmKind",), "vllm ssm_conv_transfer_utils.derive_mamba_conv_split (0.20-0.24)",
         check_ssm_kind_known, since=_V020, until=(0, 25, 0)),
    Rule("ssm-conv-layout-ds", "ssm-conv-state-layout", "error", "Hybrid SSM engines use the DS conv-state layout.",
         ("spec.kvCache.ssmConvStateLayout", "spec.engine.env", "spec.prefill.env", "spec.decode.env"),
         "seed 001 section 7; vllm nixl worker.__init__ assert is_conv_state_dim_first() (0.20.0+)",
         check_conv_layout_ds, since=_V020, example="kvCache: {ssmConvStateLayout: SD}"),
    Rule("hybrid-hma-required", "hybrid-ssm", "error", "Hybrid SSM engines enable the hybrid KV cache manager.",
         ("spec.prefill.extraArgs", "spec.decode.extraArgs"),
         "seed 001 section 7; vllm/config/vllm.py HMA off with a kv-transfer-config (<= 0.21)",
         check_hybrid_hma, since=(0, 18, 0), until=(0, 22, 0)),
    Rule("hybrid-hma-disabled", "hybrid-ssm", "error", "HMA is not disabled for hybrid SSM models.",
         ("spec.prefill.extraArgs", "spec.decode.extraArgs"), "vllm nixl worker assert _is_hma_required (0.18+)",
         check_hybrid_hma_disabled),
    Rule("mamba2-n-groups-unknown", "hetero-tp", "warning", "Mamba2 heterogeneous TP: n_groups is known.",
         ("spec.model.mambaNGroups", "spec.model.configMapRef"), "vLLM issue #55208 (open) [issue]",
         check_mamba_n_groups_unknown, since=_V020),
    Rule("hybrid-prefix-caching", "hybrid-ssm", "error",
         "Hybrid SSM with heterogeneous TP: prefix caching off on decode.",
         ("spec.decode.extraArgs",), "vllm nixl _validate_remote_agent_handshake (0.22.0+)",
         check_hybrid_prefix_caching, since=(0, 22, 0)),
    Rule("mamba2-n-groups-tp", "hetero-tp", "error", "Mamba2 heterogeneous TP: both TP sizes divide n_groups.",
         ("spec.model.mambaNGroups", "spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize"),
         "vLLM issue #55208 (open) [issue]", check_mamba_n_groups, since=_V020),
    # pipeline parallel
    Rule("pp-decode-unsupported", "pipeline-parallel-unsupported", "error", "Only prefill may be pipeline-parallel.",
         ("spec.decode.pipelineParallelSize",), "seed 000 section 5; vllm nixl consumer PP check (0.26+)", check_pp_decode),
    Rule("pp-pull-unsupported", "pipeline-parallel-unsupported", "error", "Prefill PP > 1 only with the push connector.",
         ("spec.prefill.pipelineParallelSize", "spec.kvTransfer.connector"),
         "seed 000 section 5; vllm nixl base_worker (pull PP+HMA refused from 0.31; PP handshake metadata)",
         check_pp_pull, example="prefill: {pipelineParallelSize: 2} with NixlConnector"),
    Rule("pp-unsupported-version", "pipeline-parallel-unsupported", "error", "Prefill PP > 1 needs vLLM's NIXL PP handling.",
         ("spec.prefill.pipelineParallelSize", "spec.engine"), "vllm-nixl-facts.md section 4.4 (none before 0.26.0)",
         check_pp_version, until=(0, 26, 0)),
    Rule("pp-push-hma-version", "pipeline-parallel-unsupported", "error", "Push with PP > 1 and HMA needs vLLM >= 0.31.",
         ("spec.prefill.pipelineParallelSize", "spec.kvTransfer.connector", "spec.engine"),
         "vllm nixl base_worker.__init__ (0.26.0-0.30.x)", check_pp_push_hma_version, since=(0, 26, 0), until=(0, 31, 0)),
    Rule("pp-hybrid-ssm", "pipeline-parallel-unsupported", "error", "No prefill PP > 1 with push for hybrid SSM models.",
         ("spec.prefill.pipelineParallelSize", "spec.model.architecture"), "seed 000 section 5; vllm nixl push worker (0.31+)",
         check_pp_hybrid_ssm),
    # block size
    Rule("block-size-partial", "block-size-mismatch", "warning", "Block size is set on both roles or neither.",
         ("spec.prefill.blockSize", "spec.decode.blockSize"), "compat-rules.md section 9", check_block_partial),
    Rule("block-size-direction", "block-size-mismatch", "error", "Pull: decode block size is a multiple of prefill's.",
         ("spec.prefill.blockSize", "spec.decode.blockSize"), "seed 000 footnote (c); vllm TransferTopology.block_size_ratio",
         check_block_pull_direction, example="prefill: {blockSize: 32}, decode: {blockSize: 16}"),
    Rule("block-size-push-equal", "block-size-mismatch", "error", "Push: equal block sizes.",
         ("spec.prefill.blockSize", "spec.decode.blockSize", "spec.kvTransfer.connector"),
         "vllm-nixl-facts.md section 4.3 (push) [inference]", check_block_push_equal),
    Rule("block-size-tp-shrink", "block-size-mismatch", "error", "Prefill TP > decode TP: equal block sizes.",
         ("spec.prefill.blockSize", "spec.decode.blockSize", "spec.prefill.tensorParallelSize"),
         "vllm nixl _validate_remote_agent_handshake (0.20-0.33)", check_block_tp_shrink),
    Rule("block-size-hma", "block-size-mismatch", "error", "HMA models: equal block sizes before vLLM 0.27.",
         ("spec.prefill.blockSize", "spec.decode.blockSize", "spec.model.architecture"),
         "seed 000 footnote (f); vllm nixl 'HMA does not support different remote block size yet' (0.18.0-0.26.x)",
         check_block_hma_old, until=(0, 27, 0)),
    Rule("block-size-host-buffer", "block-size-mismatch", "error", "Host buffer: equal block sizes.",
         ("spec.prefill.blockSize", "spec.decode.blockSize", "spec.kvTransfer.bufferDevice"),
         "vllm nixl base_worker (0.27.0+)", check_block_host_buffer, since=(0, 27, 0)),
    # pods
    Rule("side-channel-host-not-routable", "side-channel-host-not-routable", "error",
         "The NIXL side channel binds and advertises the pod IP.",
         ("spec.engine.env", "spec.prefill.env", "spec.decode.env"),
         "vllm envs.py VLLM_NIXL_SIDE_CHANNEL_HOST (bind and advertised address)", check_side_channel_host,
         example="prefill: {env: [{name: VLLM_NIXL_SIDE_CHANNEL_HOST, value: 0.0.0.0}]}"),
    Rule("side-channel-port-conflict", "side-channel-port-conflict", "error",
         "Engines sharing a network namespace use disjoint side-channel ports.",
         ("spec.kvTransfer.sideChannelPort",), "vllm nixl scheduler listener: port = base + DP index (0.11.1+)",
         check_side_channel_ports),
    Rule("side-channel-listener-conflict", "side-channel-port-conflict", "error",
         "The side-channel port is not used by the engine's HTTP or KV events listener.",
         ("spec.kvTransfer.sideChannelPort", "spec.port"), "vllm nixl side-channel listener; --kv-events-config endpoint",
         check_side_channel_vs_listeners),
    Rule("ucx-net-devices-unscoped", "kv-transport", "warning", "With the host network, UCX is told which NICs to use.",
         ("spec.network.ucx.netDevices", "spec.network.hostNetwork"),
         "vLLM docs/features/nixl_connector_usage.md (UCX_NET_DEVICES)", check_ucx_net_devices),
    Rule("expandable-segments-with-nixl", "expandable-segments-with-nixl", "error",
         "No expandable_segments CUDA allocator with NIXL.",
         ("spec.engine.env", "spec.prefill.env", "spec.decode.env"),
         "vllm/config/vllm.py _verify_kv_transfer_compat (0.33 refuses it at startup)", check_expandable_segments),
    Rule("nixl-backend-fabric-mismatch", "nixl-backend-fabric-mismatch", "error", "AWS EFA uses the LIBFABRIC backend.",
         ("spec.kvTransfer.backends", "spec.network.rdma.resourceName"),
         "vllm nixl base_worker backends; NIXL LIBFABRIC plugin", check_efa_backend),
    Rule("memlock-insufficient", "memlock-insufficient", "warning", "KV memory can be pinned (memlock).",
         ("spec.engine",), "NIXL memory registration; IPC_LOCK semantics for non-root", check_memlock),
)

RULES_BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}
if len(RULES_BY_ID) != len(RULES):
    raise RuntimeError("duplicate rule id")
