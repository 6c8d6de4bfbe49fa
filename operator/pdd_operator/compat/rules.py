"""The compatibility rules: one :class:`Rule` record each, checked by a small pure function.

Each check takes a :class:`~pdd_operator.compat.context.Context` and returns the violations it
found as ``(message, fix)`` pairs (empty when the rule holds). A rule's ``since``/``until`` bound the
vLLM versions it applies to (``until`` exclusive); ``source`` names the seed section or vLLM file.
Rule ids are stable: users silence, grep and document them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pdd_operator.api.spec import Architecture, KVBufferDevice, SSMKind
from pdd_operator.compat.context import Context
from pdd_operator.compat.matrix import Capability, Cell, cell, overridden
from pdd_operator.compat.versions import Version, fmt

Violation = tuple[str, str]
Check = Callable[[Context], list[Violation]]


@dataclass(frozen=True)
class Rule:
    """A compatibility rule.

    Attributes:
        id: stable kebab-case id.
        severity: ``error`` refuses the spec; ``warning`` allows it and says why to look.
        summary: one line: what the rule checks.
        fields: spec fields the rule reads (dotted, camelCase).
        source: seed section, or vLLM file and versions.
        check: the pure check function.
        since: first vLLM version the rule applies to (inclusive), ``None`` for all.
        until: first vLLM version it no longer applies to (exclusive), ``None`` for all later ones.
    """

    id: str
    severity: Literal["error", "warning"]
    summary: str
    fields: tuple[str, ...]
    source: str
    check: Check
    since: Version | None = None
    until: Version | None = None

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
        """Human form of the version bounds, e.g. ``">= 0.20.0"`` or ``"0.18.0 - 0.19.x"``."""
        if self.since and self.until:
            return f"{fmt(self.since)} <= v < {fmt(self.until)}"
        if self.since:
            return f">= {fmt(self.since)}"
        if self.until:
            return f"< {fmt(self.until)}"
        return "all"


def _tp(ctx: Context) -> tuple[int, int]:
    return ctx.prefill.tensor_parallel_size, ctx.decode.tensor_parallel_size


def _pp(ctx: Context) -> tuple[int, int]:
    return ctx.prefill.pipeline_parallel_size, ctx.decode.pipeline_parallel_size


# --- architecture x capability matrix ---------------------------------------------------------


def _capabilities_used(ctx: Context) -> list[Capability]:
    used = [Capability.BASIC]
    if ctx.spec.speculative is not None:
        used.append(Capability.SPEC_DECODE)
    if ctx.hetero_tp:
        used.append(Capability.HETERO_TP)
    if ctx.spec.kv_transfer.buffer_device == KVBufferDevice.CPU:
        used.append(Capability.HOST_BUFFER)
    bp, bd = ctx.prefill.block_size, ctx.decode.block_size
    if bp is not None and bd is not None and bp != bd:
        used.append(Capability.HETERO_BLOCK)
    return used


def _matrix_cells(ctx: Context, wanted: set[Cell]) -> list[tuple[Capability, Cell]]:
    arch = ctx.model.architecture
    if arch is None:
        return []
    return [
        (cap, cell(arch, cap))
        for cap in _capabilities_used(ctx)
        if cell(arch, cap) in wanted and not overridden(arch, cap, ctx.version)
    ]


def check_matrix_unsupported(ctx: Context) -> list[Violation]:
    return [
        (
            f"{ctx.model.architecture} models do not support {cap} with NixlConnector "
            f"(compatibility matrix: no).",
            "Serve this model without P/D disaggregation, or drop the feature."
            if cap == Capability.BASIC
            else f"Do not use {cap} with this model.",
        )
        for cap, _ in _matrix_cells(ctx, {Cell.NO})
    ]


def check_matrix_unverified(ctx: Context) -> list[Violation]:
    return [
        (
            f"{cap} for {ctx.model.architecture} models is marked '{value}' in the compatibility "
            f"matrix: it is not verified to work with NixlConnector.",
            "Test this combination before production traffic, or avoid the feature.",
        )
        for cap, value in _matrix_cells(ctx, {Cell.UNKNOWN, Cell.IN_PROGRESS})
    ]


def check_architecture_known(ctx: Context) -> list[Violation]:
    if ctx.model.architecture is not None:
        return []
    return [(
        f"The architecture of model {ctx.spec.model.name!r} is not known, so the architecture rules "
        "(heterogeneous TP, block size, pipeline parallel, hybrid SSM) were not all evaluated.",
        "Set spec.model.architecture (and ssmKind for hybrid SSM models) or spec.model.hfArchitecture.",
    )]


# --- connector availability -------------------------------------------------------------------


def check_nixl_available(ctx: Context) -> list[Violation]:
    return [(
        f"vLLM {fmt(ctx.version)} has no NixlConnector (it first ships in 0.9.0).",
        "Use a vLLM >= 0.20 engine image.",
    )]


def check_push_available(ctx: Context) -> list[Violation]:
    if not ctx.push:
        return []
    return [(
        f"NixlPushConnector does not exist in vLLM {fmt(ctx.version)} (first in 0.24.0).",
        "Use connector NixlConnector (pull), or a vLLM >= 0.24 engine image.",
    )]


# --- tensor parallel ----------------------------------------------------------------------------


def check_tp_divisible(ctx: Context) -> list[Violation]:
    p, d = _tp(ctx)
    if max(p, d) % min(p, d) == 0:
        return []
    return [(
        f"Prefill TP {p} and decode TP {d}: neither divides the other, so decode cannot map its ranks "
        "onto prefill's (TransferTopology.tp_ratio asserts at the first request).",
        "Choose tensor parallel sizes where one is a multiple of the other, e.g. 1/2, 2/4, 4/4, 8/2.",
    )]


def check_tp_kv_heads(ctx: Context) -> list[Violation]:
    p, d = _tp(ctx)
    heads = ctx.spec.model.num_kv_heads
    if p <= d or ctx.mla or ctx.hybrid_ssm or heads is None or p <= heads:
        return []
    return [(
        f"Prefill TP {p} > decode TP {d} needs prefill TP <= the model's {heads} KV heads; beyond that "
        "prefill replicates KV heads and decode cannot read them (bare assert at the first request).",
        f"Use prefill TP <= {heads}, or decode TP >= prefill TP.",
    )]


def check_tp_kv_heads_unknown(ctx: Context) -> list[Violation]:
    p, d = _tp(ctx)
    if p <= d or ctx.mla or ctx.hybrid_ssm or ctx.spec.model.num_kv_heads is not None:
        return []
    if ctx.model.architecture is None:
        return []
    return [(
        f"Prefill TP {p} > decode TP {d} is valid only while prefill TP <= the model's KV heads, "
        "which are not given.",
        "Set spec.model.numKvHeads (config.json num_key_value_heads) so this can be checked.",
    )]


def check_hetero_tp_layout(ctx: Context) -> list[Violation]:
    layout = ctx.spec.kv_cache.layout
    if not ctx.hetero_tp or ctx.mla or layout not in ("NHD", "LBNHC"):
        return []
    return [(
        f"Heterogeneous TP splits KV heads, which needs a block-contiguous KV layout; {layout} is not.",
        "Leave spec.kvCache.layout unset (NIXL prefers LBHNC/HND) or set it to LBHNC.",
    )]


# --- hybrid SSM ---------------------------------------------------------------------------------


def check_hybrid_before_hma(ctx: Context) -> list[Violation]:
    if not ctx.hybrid_ssm:
        return []
    return [(
        f"NixlConnector supports hybrid SSM (Mamba) models only from vLLM 0.18.0 (SupportsHMA); this "
        f"deployment runs {fmt(ctx.version)}.",
        "Use a vLLM >= 0.20 engine image.",
    )]


def check_hybrid_hetero_tp_old(ctx: Context) -> list[Violation]:
    if not (ctx.hybrid_ssm and ctx.hetero_tp):
        return []
    p, d = _tp(ctx)
    return [(
        f"vLLM {fmt(ctx.version)} refuses heterogeneous TP for hybrid SSM models (prefill TP {p}, decode "
        f"TP {d}): 'Mamba does not support heterogeneous TP yet'.",
        "Use equal prefill and decode TP, or vLLM >= 0.20 (Mamba2), 0.22 (GDN), 0.25 (Mamba1).",
    )]


_SSM_SINCE: dict[str, Version] = {SSMKind.MAMBA2: (0, 20, 0), SSMKind.GDN: (0, 22, 0), SSMKind.MAMBA1: (0, 25, 0)}


def check_ssm_kind_supported(ctx: Context) -> list[Violation]:
    kind = ctx.model.ssm_kind
    if not ctx.hybrid_ssm or kind is None:
        return []
    since = _SSM_SINCE[kind]
    if ctx.at_least(since):
        return []
    return [(
        f"vLLM {fmt(ctx.version)}'s NIXL conv-state transfer does not support {kind} layers "
        f"(derive_mamba_conv_split; {kind} from {fmt(since)}); the engine fails at startup.",
        f"Use a vLLM >= {fmt(since)} engine image.",
    )]


def check_ssm_kind_known(ctx: Context) -> list[Violation]:
    if not ctx.hybrid_ssm or ctx.model.ssm_kind is not None:
        return []
    return [(
        f"Hybrid SSM model without a known SSM kind: vLLM {fmt(ctx.version)} supports only some kinds "
        "(Mamba2 from 0.20, GDN from 0.22, Mamba1 from 0.25).",
        "Set spec.model.ssmKind to Mamba1, Mamba2 or GDN.",
    )]


def check_conv_layout_ds(ctx: Context) -> list[Violation]:
    if not ctx.hybrid_ssm:
        return []
    out = []
    for name, role in (("prefill", ctx.prefill), ("decode", ctx.decode)):
        layout = ctx.conv_state_layout(role)
        if layout != "DS":
            out.append((
                f"{name}: VLLM_SSM_CONV_STATE_LAYOUT is {layout!r}, but vLLM >= 0.20 asserts DS for every "
                "NIXL deployment of a model with Mamba layers, equal TP or not (startup failure).",
                "Remove the override: leave spec.kvCache.ssmConvStateLayout unset or set it to DS, and drop "
                "any VLLM_SSM_CONV_STATE_LAYOUT env var.",
            ))
    return out


def check_hybrid_spec_tokens(ctx: Context) -> list[Violation]:
    if not ctx.hybrid_ssm or ctx.spec.speculative is None:
        return []
    p, d = ctx.prefill.num_speculative_tokens, ctx.decode.num_speculative_tokens
    if p == d:
        return []
    return [(
        f"numSpeculativeTokens differ (prefill {p}, decode {d}); for hybrid SSM models it changes the "
        "conv-state shape (conv_kernel - 1 + num_spec rows), which NIXL assumes equal on both sides.",
        "Use the same numSpeculativeTokens on prefill and decode.",
    )]


# --- pipeline parallel --------------------------------------------------------------------------


def check_pp_decode(ctx: Context) -> list[Violation]:
    _, d = _pp(ctx)
    if d == 1:
        return []
    return [(
        f"Decode pipeline parallel size {d}: only the prefill side may be pipeline-split.",
        "Set spec.decode.pipelineParallelSize to 1 (use tensor parallel on decode).",
    )]


def check_pp_pull_hma(ctx: Context) -> list[Violation]:
    p, _ = _pp(ctx)
    if p == 1 or ctx.push or not ctx.model.needs_hma:
        return []
    return [(
        f"Prefill pipeline parallel size {p} with the pull NixlConnector on a model that needs the "
        "hybrid KV cache manager: refused (vLLM >= 0.31 at startup; earlier PP stages overwrite each "
        "other's handshake metadata).",
        "Use spec.prefill.pipelineParallelSize 1, or connector NixlPushConnector on vLLM >= 0.31 "
        "(not for hybrid SSM models).",
    )]


def check_pp_push_version(ctx: Context) -> list[Violation]:
    p, _ = _pp(ctx)
    if p == 1:
        return []
    return [(
        f"vLLM {fmt(ctx.version)} has no pipeline-parallel handling in the NIXL connector (first in "
        "0.26.0, push producer only); prefill PP > 1 breaks KV transfer.",
        "Use pipelineParallelSize 1, or vLLM >= 0.26 with NixlPushConnector.",
    )]


def check_pp_push_hma_version(ctx: Context) -> list[Violation]:
    p, _ = _pp(ctx)
    if p == 1 or not ctx.push or not ctx.model.needs_hma:
        return []
    return [(
        f"NixlPushConnector in vLLM {fmt(ctx.version)} does not support pipeline_parallel_size > 1 with "
        "hybrid KV cache layouts (HMA) (startup error; allowed from 0.31.0).",
        "Use prefill pipelineParallelSize 1, or vLLM >= 0.31.",
    )]


def check_pp_hybrid_ssm(ctx: Context) -> list[Violation]:
    p, _ = _pp(ctx)
    if p == 1 or not ctx.hybrid_ssm or not ctx.push:
        return []
    return [(
        "NixlPushConnector does not support pipeline_parallel_size > 1 with Mamba/SSM hybrid KV cache "
        "layouts (startup error).",
        "Use prefill pipelineParallelSize 1 for hybrid SSM models; scale with tensor parallel instead.",
    )]


# --- block size ---------------------------------------------------------------------------------


def _blocks(ctx: Context) -> tuple[int, int] | None:
    bp, bd = ctx.prefill.block_size, ctx.decode.block_size
    if bp is None or bd is None or bp == bd:
        return None
    return bp, bd


def check_block_partial(ctx: Context) -> list[Violation]:
    bp, bd = ctx.prefill.block_size, ctx.decode.block_size
    if (bp is None) == (bd is None):
        return []
    return [(
        f"blockSize is set on one role only (prefill {bp}, decode {bd}); vLLM picks the other's block "
        "size itself, which may not pair with it.",
        "Set spec.prefill.blockSize and spec.decode.blockSize, equal unless you need them to differ.",
    )]


def check_block_pull_direction(ctx: Context) -> list[Violation]:
    pair = _blocks(ctx)
    if pair is None or ctx.push:
        return []
    bp, bd = pair
    if bd % bp == 0:
        return []
    return [(
        f"Pull mode needs the decode block size to be a multiple of the prefill one (prefill {bp}, decode "
        f"{bd}); otherwise every request fails at the first KV read.",
        f"Use equal block sizes, or a decode block size that is a multiple of {bp}.",
    )]


def check_block_push_equal(ctx: Context) -> list[Violation]:
    pair = _blocks(ctx)
    if pair is None or not ctx.push:
        return []
    return [(
        f"NixlPushConnector needs equal block sizes on prefill and decode (prefill {pair[0]}, decode {pair[1]}).",
        "Use the same blockSize on both roles.",
    )]


def check_block_tp_shrink(ctx: Context) -> list[Violation]:
    pair = _blocks(ctx)
    p, d = _tp(ctx)
    if pair is None or p <= d or ctx.mla:
        return []
    return [(
        f"Prefill TP {p} > decode TP {d} needs equal block sizes (prefill {pair[0]}, decode {pair[1]}): "
        "'Different local/remote block sizes are not supported when P TP > D TP'.",
        "Use the same blockSize on both roles.",
    )]


def check_block_hma_old(ctx: Context) -> list[Violation]:
    pair = _blocks(ctx)
    if pair is None or not ctx.model.needs_hma:
        return []
    return [(
        f"vLLM {fmt(ctx.version)} does not support different block sizes with the hybrid KV cache manager "
        f"(prefill {pair[0]}, decode {pair[1]}): 'HMA does not support different remote block size yet' "
        "(allowed from 0.27.0).",
        "Use the same blockSize on both roles, or vLLM >= 0.27.",
    )]


def check_block_host_buffer(ctx: Context) -> list[Violation]:
    pair = _blocks(ctx)
    if pair is None or ctx.spec.kv_transfer.buffer_device != KVBufferDevice.CPU:
        return []
    return [(
        f"Different block sizes (prefill {pair[0]}, decode {pair[1]}) are not supported with a host buffer "
        "(kv_buffer_device cpu).",
        "Use the same blockSize on both roles.",
    )]


# --- handshake and networking -------------------------------------------------------------------


def check_handshake_compat(ctx: Context) -> list[Violation]:
    extra = ctx.spec.kv_transfer.extra_config or {}
    value = extra.get("enforce_handshake_compat", True)
    if value is not False and str(value).lower() != "false":
        return []
    return [(
        "enforce_handshake_compat is false: prefill and decode will pair even when their compatibility "
        "hashes differ, and mismatches show up as wrong output or crashes instead of a handshake error.",
        "Remove enforce_handshake_compat from spec.kvTransfer.extraConfig.",
    )]


def check_side_channel_host(ctx: Context) -> list[Violation]:
    out = []
    for name, role in (("prefill", ctx.prefill), ("decode", ctx.decode)):
        value = ctx.env(role, "VLLM_NIXL_SIDE_CHANNEL_HOST")
        if value is not None:
            out.append((
                f"{name}: env VLLM_NIXL_SIDE_CHANNEL_HOST={value!r} overrides the pod IP the operator sets; "
                "the side channel binds and advertises this address, so peers dial the wrong host.",
                "Remove VLLM_NIXL_SIDE_CHANNEL_HOST from the env lists; the operator sets it to the pod IP.",
            ))
    return out


def check_spec_decode_method(ctx: Context) -> list[Violation]:
    spec = ctx.spec.speculative
    if spec is None:
        return []
    out = []
    needs_draft = spec.method in ("eagle", "eagle3", "draft_model", "dflash", "dspark")
    if needs_draft and not spec.draft_model:
        out.append((
            f"Speculative method {spec.method} needs a draft model.",
            "Set spec.speculative.draftModel.",
        ))
    for name, role in (("prefill", ctx.prefill), ("decode", ctx.decode)):
        if role.num_speculative_tokens is None:
            out.append((
                f"spec.speculative is set but {name}.numSpeculativeTokens is not.",
                f"Set spec.{name}.numSpeculativeTokens.",
            ))
    return out


_SEED_MATRIX = "seed 000 section 1 (architecture x capability matrix)"
_V020 = (0, 20, 0)

#: Every rule, in evaluation order.
RULES: tuple[Rule, ...] = (
    Rule("nixl-connector-unavailable", "error", "The vLLM version ships a NixlConnector.",
         ("spec.engine",), "vllm-nixl-facts.md section 7: NixlConnector first in 0.9.0",
         check_nixl_available, until=(0, 9, 0)),
    Rule("push-connector-unavailable", "error", "NixlPushConnector exists in the vLLM version.",
         ("spec.kvTransfer.connector", "spec.engine"),
         "vllm-nixl-facts.md section 7: kv_connector/factory.py registers NixlPushConnector from 0.24.0",
         check_push_available, until=(0, 24, 0)),
    Rule("architecture-unknown", "warning", "The model's architecture family is known.",
         ("spec.model.architecture", "spec.model.hfArchitecture", "spec.model.name"), _SEED_MATRIX,
         check_architecture_known),
    Rule("architecture-unsupported", "error", "No feature used is a 'no' cell of the matrix.",
         ("spec.model.architecture",), _SEED_MATRIX, check_matrix_unsupported),
    Rule("architecture-unverified", "warning", "No feature used is an 'unknown' or 'in progress' cell.",
         ("spec.model.architecture",), _SEED_MATRIX, check_matrix_unverified),
    Rule("tp-divisibility", "error", "One TP size is a multiple of the other.",
         ("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize"),
         "vllm kv_connector/utils.py TransferTopology.tp_ratio (0.20-0.33)", check_tp_divisible),
    Rule("tp-exceeds-kv-heads", "error", "Prefill TP > decode TP only while prefill TP <= KV heads.",
         ("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.model.numKvHeads"),
         "vllm nixl worker _validate_remote_agent_handshake, is_kv_replicated assert (0.20-0.33)",
         check_tp_kv_heads),
    Rule("tp-kv-heads-unknown", "warning", "KV heads are known when prefill TP > decode TP.",
         ("spec.model.numKvHeads",), "compat-rules.md section 9", check_tp_kv_heads_unknown),
    Rule("hetero-tp-kv-layout", "error", "Heterogeneous TP uses a block-contiguous KV layout.",
         ("spec.kvCache.layout",), "seed 000 section 4; nixl worker head-splitting check (0.20-0.33)",
         check_hetero_tp_layout),
    Rule("hybrid-ssm-unsupported", "error", "NixlConnector supports hybrid SSM in the vLLM version.",
         ("spec.model.architecture", "spec.engine"), "vllm-nixl-facts.md section 7: SupportsHMA from 0.18.0",
         check_hybrid_before_hma, until=(0, 18, 0)),
    Rule("hybrid-ssm-hetero-tp", "error", "Hybrid SSM heterogeneous TP is supported by the vLLM version.",
         ("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.engine"),
         "vllm nixl_connector.py 'Mamba does not support heterogeneous TP yet' (0.18.0-0.19.1)",
         check_hybrid_hetero_tp_old, since=(0, 18, 0), until=_V020),
    Rule("ssm-kind-unsupported", "error", "The SSM layer kind is supported by the vLLM version.",
         ("spec.model.ssmKind", "spec.engine"),
         "vllm ssm_conv_transfer_utils.derive_mamba_conv_split (Mamba2 0.20, GDN 0.22, Mamba1 0.25)",
         check_ssm_kind_supported, since=_V020, until=(0, 25, 0)),
    Rule("ssm-kind-unknown", "warning", "The SSM kind of a hybrid model is known.",
         ("spec.model.ssmKind",), "vllm ssm_conv_transfer_utils.derive_mamba_conv_split (0.20-0.24)",
         check_ssm_kind_known, since=_V020, until=(0, 25, 0)),
    Rule("ssm-conv-layout-ds", "error", "Hybrid SSM engines use the DS conv-state layout.",
         ("spec.kvCache.ssmConvStateLayout", "spec.engine.env", "spec.prefill.env", "spec.decode.env"),
         "seed 001 section 7; vllm nixl worker.__init__ assert is_conv_state_dim_first() (0.20.0+)",
         check_conv_layout_ds, since=_V020),
    Rule("hybrid-spec-tokens-mismatch", "error", "Hybrid SSM P and D use equal numSpeculativeTokens.",
         ("spec.prefill.numSpeculativeTokens", "spec.decode.numSpeculativeTokens"),
         "vllm MambaStateShapeCalculator conv rows (compat-rules.md section 9)", check_hybrid_spec_tokens),
    Rule("speculative-incomplete", "error", "Speculative decoding names its draft and token counts.",
         ("spec.speculative", "spec.prefill.numSpeculativeTokens", "spec.decode.numSpeculativeTokens"),
         "vllm/config/speculative.py", check_spec_decode_method),
    Rule("pp-decode-unsupported", "error", "Only prefill may be pipeline-parallel.",
         ("spec.decode.pipelineParallelSize",),
         "seed 000 section 5; vllm nixl base_worker consumer PP check (0.26+)", check_pp_decode),
    Rule("pp-pull-hma", "error", "Pull connector with prefill PP > 1 only when the model needs no HMA.",
         ("spec.prefill.pipelineParallelSize", "spec.kvTransfer.connector", "spec.model.architecture"),
         "seed 000 section 5; vllm nixl base_worker (0.31+)", check_pp_pull_hma),
    Rule("pp-unsupported-version", "error", "Prefill PP > 1 needs vLLM's NIXL PP handling.",
         ("spec.prefill.pipelineParallelSize", "spec.engine"),
         "vllm-nixl-facts.md section 4.4 (no PP handling before 0.26.0)", check_pp_push_version, until=(0, 26, 0)),
    Rule("pp-push-hma-version", "error", "Push with PP > 1 and HMA needs vLLM >= 0.31.",
         ("spec.prefill.pipelineParallelSize", "spec.kvTransfer.connector", "spec.engine"),
         "vllm nixl base_worker.__init__ (0.26.0-0.30.x)", check_pp_push_hma_version,
         since=(0, 26, 0), until=(0, 31, 0)),
    Rule("pp-hybrid-ssm", "error", "No prefill PP > 1 with push for hybrid SSM models.",
         ("spec.prefill.pipelineParallelSize", "spec.model.architecture"),
         "seed 000 section 5; vllm nixl push worker (0.31+)", check_pp_hybrid_ssm),
    Rule("block-size-partial", "warning", "Block size is set on both roles or neither.",
         ("spec.prefill.blockSize", "spec.decode.blockSize"), "compat-rules.md section 9", check_block_partial),
    Rule("block-size-direction", "error", "Pull: decode block size is a multiple of prefill's.",
         ("spec.prefill.blockSize", "spec.decode.blockSize"),
         "seed 000 footnote (c); vllm TransferTopology.block_size_ratio", check_block_pull_direction),
    Rule("block-size-push-equal", "error", "Push: equal block sizes.",
         ("spec.prefill.blockSize", "spec.decode.blockSize", "spec.kvTransfer.connector"),
         "vllm-nixl-facts.md section 4.3 (push)", check_block_push_equal),
    Rule("block-size-tp-shrink", "error", "Prefill TP > decode TP: equal block sizes.",
         ("spec.prefill.blockSize", "spec.decode.blockSize", "spec.prefill.tensorParallelSize"),
         "vllm nixl worker _validate_remote_agent_handshake (0.20-0.33)", check_block_tp_shrink),
    Rule("block-size-hma", "error", "HMA models: equal block sizes before vLLM 0.27.",
         ("spec.prefill.blockSize", "spec.decode.blockSize", "spec.model.architecture"),
         "seed 000 footnote (f); vllm nixl worker 'HMA does not support different remote block size yet' "
         "(0.18.0-0.26.x)", check_block_hma_old, until=(0, 27, 0)),
    Rule("block-size-host-buffer", "error", "Host buffer: equal block sizes.",
         ("spec.prefill.blockSize", "spec.decode.blockSize", "spec.kvTransfer.bufferDevice"),
         "vllm nixl base_worker (0.27.0+)", check_block_host_buffer, since=(0, 27, 0)),
    Rule("handshake-compat-disabled", "warning", "The handshake compatibility check stays on.",
         ("spec.kvTransfer.extraConfig",), "seed 000 section 2; vllm nixl _nixl_handshake (0.13+)",
         check_handshake_compat),
    Rule("side-channel-host-override", "error", "The NIXL side channel uses the pod IP.",
         ("spec.engine.env", "spec.prefill.env", "spec.decode.env"),
         "vllm envs.py VLLM_NIXL_SIDE_CHANNEL_HOST (bind and advertised address)", check_side_channel_host),
)

RULES_BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}
assert len(RULES_BY_ID) == len(RULES), "duplicate rule id"

__all__ = ["RULES", "RULES_BY_ID", "Rule", "Architecture"]
