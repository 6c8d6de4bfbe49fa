"""Hybrid SSM (Mamba) models: HMA, conv-state layout, SSM kinds, heterogeneous TP and the state dtypes per vLLM version."""

from __future__ import annotations

from pdd_operator.compat.connector_hma import CONNECTOR_HMA, connector_without_hma, wrapper_hma_off
from pdd_operator.compat.dynamo_engine_defaults import prefix_caching_default
from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import NOT_CHECKED, Violation, fix_for, rule
from pdd_operator.vllm.cpu_conv_layout import NIXL_DS_SINCE, cpu_conv_layout
from pdd_operator.vllm.dtype import auto_dtype, dtype_name
from pdd_operator.vllm.kernel_block import runs_logical_block
from pdd_operator.vllm.must_match import fields_of
from pdd_operator.vllm.versions import HYBRID_NIXL_PREFIX_CACHING_SINCE, Version, fmt, is_cpu_image

_V020 = (0, 20, 0)


#: The release lines whose NIXL read path asserts nothing when a transferred request of a hybrid SSM model hits
#: decode's prefix cache: 0.18.0 and 0.19.1 nixl_connector.py _read_blocks and 0.21.0 nixl/worker.py _read_blocks trim
#: the SSM group's remote blocks like any other ('Partial prefix cache hit: just read uncomputed blocks', every group).
#: 0.20.0 does not trim them, and its ``assert len(local_block_descs_ids) == len(remote_block_descs_ids)`` fails;
#: 0.22.0 asserts equal SSM block counts in _apply_prefix_caching, 0.23.0-0.26.0 'SSM can only have one local block'.
_PREFIX_NO_ASSERT: tuple[tuple[Version, Version], ...] = (((0, 18, 0), (0, 20, 0)), ((0, 21, 0), (0, 22, 0)))

#: First release that turns prefix caching on by default for hybrid models. vllm/config/model.py
#: ModelConfig.is_prefix_caching_supported returns False for attn_type "hybrid" in the 0.20.0-0.25.0 wheels and True
#: from 0.26.0, but EngineArgs._set_default_chunked_prefill_and_prefix_caching_args keeps hybrid models opt-in in
#: 0.26.0, 0.27.0 and 0.27.1 ("is_prefix_caching_supported and not model_config.is_hybrid", engine/arg_utils.py
#: lines 2514-2522 in 0.26.0, 2598-2606 in 0.27.0) and applies is_prefix_caching_supported alone from 0.28.0 (lines
#: 2646-2650), when neither --enable-prefix-caching nor --no-enable-prefix-caching is given.
_HYBRID_PREFIX_DEFAULT_SINCE: Version = (0, 28, 0)


def decode_prefix_caching(pair: PDPair) -> bool:
    """Whether decode runs a hybrid model with prefix caching: its flag, else its launcher's default (Dynamo's
    dynamo.vllm turns it on, :func:`~pdd_operator.compat.dynamo_engine_defaults.prefix_caching_default`), else
    vLLM's default for the version."""
    flag = pair.decode.prefix_caching
    if flag is not None:
        return flag
    launcher = prefix_caching_default(pair.decode.launcher, flag)
    return launcher if launcher is not None else pair.at_least(_HYBRID_PREFIX_DEFAULT_SINCE)


def _prefix_caching_how(pair: PDPair) -> str:
    if pair.decode.prefix_caching:
        return "--enable-prefix-caching"
    if prefix_caching_default(pair.decode.launcher, pair.decode.prefix_caching):
        return ("prefix caching (dynamo.vllm turns it on when neither --enable-prefix-caching nor "
                "--no-enable-prefix-caching is given, dynamo/vllm/args.py update_engine_config_with_dynamo)")
    return f"prefix caching (vLLM's default for hybrid models from {fmt(_HYBRID_PREFIX_DEFAULT_SINCE)})"


_SSM_SINCE: dict[str, Version] = {"Mamba2": (0, 20, 0), "GDN": (0, 22, 0), "Mamba1": (0, 25, 0)}

@rule(
    id="hybrid-ssm-unsupported", family="hybrid-ssm", severity="error",
    fields=("spec.model.architecture", "spec.engine"),
    source="vllm-nixl-facts.md section 7: SupportsHMA from 0.18.0",
    until=(0, 18, 0),
)
def check_hybrid_before_hma(pair: PDPair) -> list[Violation]:
    """NixlConnector supports hybrid SSM in the vLLM version."""
    if not pair.hybrid_ssm:
        return []
    return [(f"NixlConnector supports hybrid SSM (Mamba) models only from vLLM 0.18.0; this runs {fmt(pair.version)}.",
             "Use a vLLM >= 0.20 engine image.")]


@rule(
    id="hybrid-ssm-hetero-tp", family="hetero-tp-unsupported-for-version", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.engine"),
    source="vllm nixl_connector.py 'Mamba does not support heterogeneous TP yet' (0.18.0-0.19.1)",
    since=(0, 18, 0), until=_V020,
)
def check_hybrid_hetero_tp_old(pair: PDPair) -> list[Violation]:
    """Hybrid SSM heterogeneous TP is supported by the vLLM version."""
    if not (pair.hybrid_ssm and pair.hetero_tp):
        return []
    p, d = pair.tps
    return [(
        f"vLLM {fmt(pair.version)} refuses heterogeneous TP for hybrid SSM models (prefill TP {p}, decode TP {d}): "
        "'Mamba does not support heterogeneous TP yet'.",
        "Use equal prefill and decode TP, or vLLM >= 0.20 (Mamba2), 0.22 (GDN), 0.25 (Mamba1).",
    )]


@rule(
    id="ssm-kind-unsupported", family="hybrid-ssm", severity="error",
    fields=("spec.model.ssmKind", "spec.engine"),
    source="vllm ssm_conv_transfer_utils.derive_mamba_conv_split (Mamba2 0.20, GDN 0.22, Mamba1 0.25)",
    since=_V020, until=(0, 25, 0),
)
def check_ssm_kind_supported(pair: PDPair) -> list[Violation]:
    """The SSM layer kind is supported by the vLLM version."""
    kind = pair.model.ssm_kind
    if not pair.hybrid_ssm or kind is None or pair.at_least(_SSM_SINCE[kind]):
        return []
    since = _SSM_SINCE[kind]
    return [(
        f"vLLM {fmt(pair.version)}'s NIXL conv-state transfer does not support {kind} layers "
        f"(derive_mamba_conv_split; {kind} from {fmt(since)}): the engine fails at startup.",
        f"Use a vLLM >= {fmt(since)} engine image.",
    )]


@rule(
    id="ssm-kind-unknown", family="hybrid-ssm", severity="warning",
    fields=("spec.model.ssmKind",),
    source="vllm ssm_conv_transfer_utils.derive_mamba_conv_split (0.20-0.24)",
    since=_V020, until=(0, 25, 0),
)
def check_ssm_kind_known(pair: PDPair) -> list[Violation]:
    """The SSM kind of a hybrid model is known."""
    if not pair.hybrid_ssm or pair.model.ssm_kind is not None:
        return []
    return [(
        f"Hybrid SSM model without a known SSM kind: vLLM {fmt(pair.version)} supports only some kinds "
        "(Mamba2 from 0.20, GDN from 0.22, Mamba1 from 0.25).",
        "Set spec.model.ssmKind to Mamba1, Mamba2 or GDN.",
    )]


@rule(
    id="ssm-conv-layout-ds", family="ssm-conv-state-layout", severity="error",
    fields=("spec.kvCache.ssmConvStateLayout", "spec.engine.env", "spec.prefill.env", "spec.decode.env"),
    source="seed 001 section 7; vllm nixl worker.__init__ assert is_conv_state_dim_first() (0.20.0+); "
           "platforms/cpu.py CpuPlatform.check_and_update_config writes the layout (0.22.0+, pdd_operator.vllm.cpu_conv_layout)",
    since=_V020, example="kvCache: {ssmConvStateLayout: SD}",
    needs=("VLLM_SSM_CONV_STATE_LAYOUT",),
)
def check_conv_layout_ds(pair: PDPair) -> list[Violation]:
    """Hybrid SSM engines use the DS conv-state layout. Where the model's architecture is unknown and the two roles'
    layouts differ (DS on one only), the verdict rests on whether the model has Mamba or linear-attention layers
    (the role without DS then fails the assert at startup; a model without them never reads the variable): not
    checked. On vLLM's CPU images the platform writes the layout itself (:mod:`pdd_operator.vllm.cpu_conv_layout`):
    from 0.31.0 an unset one becomes DS for a NIXL connector; 0.22-0.30 write SD over any value on AMX or
    AVX-512-BF16 hosts, so DS in the manifest holds only on other hosts (a warning)."""
    layouts = [r.env.get("VLLM_SSM_CONV_STATE_LAYOUT") for r in pair.roles]
    if pair.model.architecture is None and layouts.count("DS") == 1:
        other, raw = next((r, layout) for r, layout in zip(pair.roles, layouts, strict=True) if layout != "DS")
        shown = "unset, vLLM's default SD" if raw is None else repr(raw)
        return [(
            f"VLLM_SSM_CONV_STATE_LAYOUT is DS on one role only ({other.role}: {shown}) "
            f"and the architecture of model {pair.prefill.model!r} is not known: if it has Mamba or linear-attention "
            f"layers, the {other.role}'s NIXL worker asserts DS at startup (vLLM >= 0.20) and never starts.",
            fix_for(pair, "Set VLLM_SSM_CONV_STATE_LAYOUT=DS on both roles (or on neither for a model without SSM "
                    "layers), or pass the model's config.json (--model-config, spec.model.configMapRef) or "
                    "spec.model.architecture.",
                    "Set VLLM_SSM_CONV_STATE_LAYOUT=DS in both containers' env (or in neither for a model without SSM "
                    "layers), or give pdd check the model's config.json (--model-config, or a ConfigMap in the files)."),
            NOT_CHECKED,
        )]
    if not pair.hybrid_ssm:
        return []
    out = []
    for r in pair.roles:
        layout = r.env.get("VLLM_SSM_CONV_STATE_LAYOUT")
        version = r.version or pair.version
        if is_cpu_image(r.image) and version is not None:
            effective, hosts = cpu_conv_layout(version, layout)
            if effective == "DS" and hosts:
                out.append((
                    f"{r.role}: VLLM_SSM_CONV_STATE_LAYOUT is DS, but the CPU platform of vLLM {fmt(version)} "
                    f"(platforms/cpu.py) sets SD over it on hosts {hosts}; there the NIXL worker's DS assert fails at "
                    "startup (vllm#58034).",
                    fix_for(pair, f"Set spec.engine.image to a CPU image of vLLM >= {fmt(NIXL_DS_SINCE)} (it keeps DS "
                            "for NIXL), or keep the pods off such hosts (spec.<role>.nodeSelector on the CPU feature).",
                            f"Use a CPU image tag of vLLM >= {fmt(NIXL_DS_SINCE)} in the {r.role}'s container (it keeps "
                            "DS for NIXL), or keep its pods off such hosts (a nodeSelector on the CPU feature label)."),
                    "warning",
                ))
                continue
            if effective == "DS":
                continue
        if layout != "DS":
            shown = "unset (vLLM's default SD)" if layout is None else repr(layout)
            out.append((
                f"{r.role}: VLLM_SSM_CONV_STATE_LAYOUT is {shown}, but vLLM >= 0.20 asserts DS at startup for every "
                "NIXL deployment of a model with Mamba layers, equal TP or not.",
                "Set VLLM_SSM_CONV_STATE_LAYOUT=DS on both roles: leave spec.kvCache.ssmConvStateLayout unset or DS, "
                "and drop any env override.",
            ))
    return out


@rule(
    id="hybrid-hma-required", family="hybrid-ssm", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source="seed 001 section 7; vllm/config/vllm.py HMA off with a kv-transfer-config (<= 0.21)",
    since=(0, 18, 0), until=(0, 22, 0),
    needs=("--disable-hybrid-kv-cache-manager",),
)
def check_hybrid_hma(pair: PDPair) -> list[Violation]:
    """Hybrid SSM engines enable the hybrid KV cache manager."""
    if not pair.hybrid_ssm:
        return []
    return [(
        f"{r.role}: hybrid SSM models need the hybrid KV cache manager, which a kv-transfer-config turns off in "
        "vLLM <= 0.21 unless --no-disable-hybrid-kv-cache-manager is given (startup assert).",
        "Pass --no-disable-hybrid-kv-cache-manager on both roles.",
    ) for r in pair.roles if r.hma is not True]


@rule(
    id="hybrid-hma-disabled", family="hybrid-ssm", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm nixl worker assert _is_hma_required (0.18+); config/vllm.py HMA auto-disabled for a MultiConnector "
            "child without SupportsHMA (0.22.0-0.34.0 sdists, vllm#41847)"),
    needs=("--disable-hybrid-kv-cache-manager",),
)
def check_hybrid_hma_disabled(pair: PDPair) -> list[Violation]:
    """HMA is not disabled for hybrid SSM models: neither by --disable-hybrid-kv-cache-manager nor, with no HMA flag,
    by a wrapper connector that turns it off by itself (:func:`~pdd_operator.compat.connector_hma.wrapper_hma_off`:
    vLLM's MultiConnector with a child that is not ``SupportsHMA`` on 0.22.0-0.34.x, vllm#41847; 0.34.0
    config/vllm.py: "hybrid SSM models (e.g. Jamba, Bamba) require HMA and will fail at startup without it")."""
    if not pair.hybrid_ssm:
        return []
    out: list[Violation] = [(
        f"{r.role}: --disable-hybrid-kv-cache-manager is set, but NIXL asserts HMA is on for models with Mamba layers.",
        "Remove --disable-hybrid-kv-cache-manager.",
    ) for r in pair.roles if r.hma is False]
    for r in pair.roles:
        if r.hma is None and r.version_text is not None and (why := wrapper_hma_off(r)):
            out.append((
                f"{r.role}: {why}, but NIXL asserts HMA is on for models with Mamba layers (nixl worker "
                "'assert self._is_hma_required'): the engine fails at startup.",
                "Take the connector that does not support HMA out of the wrapper's connectors (the model needs HMA).",
            ))
    return out


#: Checkpoints of a hybrid SSM family without attention layers: every layer holds Mamba state, one KV cache spec
#: type, which the unified KV cache manager holds without HMA.
_SSM_ONLY = ("MambaForCausalLM", "Mamba2ForCausalLM")
#: The first release whose KV cache setup refuses a hybrid model with the hybrid KV cache manager off: ValueError
#: "Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one unified type"
#: (v1/core/kv_cache_utils.py 0.11.0 l.1146, 0.14.0 l.1203, 0.18.0 l.1214, 0.20.0 l.1403, 0.23.0 l.1426).
_UNIFY_RAISES_SINCE: Version = (0, 11, 0)


@rule(
    id="hybrid-connector-without-hma", family="hybrid-ssm", severity="error", since=_UNIFY_RAISES_SINCE,
    fields=("spec.model.architecture", "spec.model.configMapRef"),
    source=("vllm/config/vllm.py VllmConfig.__post_init__: with a --kv-transfer-config and no HMA flag the hybrid KV "
            "cache manager is turned off (every connector before 0.22.0; from 0.22.0 where "
            "KVConnectorFactory.supports_hma_config is false: 0.23.0 l.1479-1501, 'hybrid SSM models (e.g. Jamba, "
            "Bamba) require HMA and will fail at startup without it'), and a Mamba + attention model then fails in "
            "v1/core/kv_cache_utils.py ('Hybrid KV cache manager is disabled but failed to convert the KV cache specs "
            "to one unified type': 0.11.0 l.1146, 0.18.0 l.1214, 0.23.0 l.1421-1428); with "
            "--no-disable-hybrid-kv-cache-manager the factory refuses the connector instead (hma-explicit-forced-off); "
            "which connector classes are SupportsHMA per release: pdd_operator.compat.connector_hma.CONNECTOR_HMA"),
    example="Qwen3.6-35B-A3B (Gated DeltaNet + attention) over P2pNcclConnector on vLLM 0.23.0",
    without_connector=True,
)
def check_hybrid_connector_without_hma(pair: PDPair) -> list[Violation]:
    """A hybrid SSM model's engine uses a KV connector that keeps the hybrid KV cache manager (HMA): vLLM's own
    P2pNcclConnector, LMCacheConnectorV1, ExampleConnector, MooncakeConnector before 0.20.0 and MoRIIOConnector before
    0.30.0 are not ``SupportsHMA`` (:data:`~pdd_operator.compat.connector_hma.CONNECTOR_HMA`), so vLLM turns HMA off
    for them and the model's Mamba and attention KV cache specs cannot be unified: the engine fails at startup, on
    either role and whatever the peer runs. NIXL and wrapper connectors are judged by hybrid-ssm-unsupported,
    hybrid-hma-required and hybrid-hma-disabled; a checkpoint with Mamba layers only is not refused."""
    if not pair.hybrid_ssm or pair.hf_architecture in _SSM_ONLY:
        return []
    out: list[Violation] = []
    for r in pair.roles:
        if r.hma is True or (name := connector_without_hma(r)) is None:
            continue
        later = CONNECTOR_HMA[name][2]
        since = f" (it is SupportsHMA from {fmt(later)})" if later else ""
        out.append((
            f"{r.role}: model {r.model!r} has Mamba or linear-attention layers beside attention, which need vLLM's "
            f"hybrid KV cache manager; {name} does not subclass SupportsHMA in vLLM {fmt(r.version)}{since}, so vLLM "
            "turns the manager off for it and fails at startup: 'Hybrid KV cache manager is disabled but failed to "
            "convert the KV cache specs to one unified type'.",
            fix_for(pair, "Use NixlConnector (SupportsHMA from vLLM 0.18.0) for this model, or a model without SSM "
                          "layers.",
                    f"Use NixlConnector (SupportsHMA from vLLM 0.18.0) in the {r.role}'s --kv-transfer-config for "
                    "this model, or serve a model without SSM layers over this connector."),
        ))
    return out


@rule(
    id="mamba2-n-groups-unknown", family="hetero-tp", severity="warning",
    fields=("spec.model.mambaNGroups", "spec.model.configMapRef"),
    source="vLLM issue #55208 (open) [issue]",
    since=_V020,
)
def check_mamba_n_groups_unknown(pair: PDPair) -> list[Violation]:
    """Mamba2 heterogeneous TP: n_groups is known."""
    if not (pair.hybrid_ssm and pair.hetero_tp) or pair.n_groups or pair.model.ssm_kind not in (None, "Mamba2"):
        return []
    return [(
        "Mamba2 heterogeneous TP corrupts the conv state when n_groups is not divisible by both TP sizes "
        "(vLLM issue #55208, e.g. Falcon-H1 with n_groups 1), and n_groups is not known here.",
        "Set spec.model.mambaNGroups or spec.model.configMapRef (config.json) so this can be checked, or use equal TP.",
    )]


#: Attention backends whose kernel pages are fixed sizes in every release from 0.22.0 to 0.34.0: FLASHINFER's
#: ``get_supported_kernel_block_sizes`` is ``[16, 32, 64]`` (flashinfer.py line 339 of 0.22.0; 0.27.0 lines 356-375 add
#: 128-1024 for GQA on Blackwell): a hybrid model's logical block runs as several kernel pages.
_FIXED_PAGE_BACKENDS = ("FLASHINFER",)
#: The smallest kernel block of the backends above and of the MultipleOf(16) ones: an explicit ``--block-size`` up to it
#: leaves ``_align_hybrid_block_size``'s alignment where it is (``max(smallest kernel size, block_size)``).
_SMALLEST_KERNEL_BLOCK = 16


@rule(
    id="hybrid-prefix-caching", family="hybrid-ssm", severity="error",
    fields=("spec.decode.extraArgs", "spec.model.numKvHeads", "spec.prefill.tensorParallelSize",
            "spec.decode.tensorParallelSize"),
    source=("vllm nixl _validate_remote_agent_handshake: RuntimeError 'Prefix caching with heterogeneous "
            "physical_blocks_per_logical is not supported for Mamba hybrid models' when decode's cache_config "
            "enables prefix caching and the roles' _physical_blocks_per_logical_kv_block differ (0.22.0 nixl/worker.py "
            "lines 1439-1453, 0.26.0 base_worker.py 1708, 0.27.0 1733, 0.31.0 2534, 0.33.0 2773, 0.34.0 2837; absent in "
            "0.21.0). That ratio is logical block / kernel block (_sync_block_size_with_kernel, "
            "v1/worker/utils.py select_common_block_size): 1 on both roles for backends taking MultipleOf(16) "
            "(TRITON_ATTN, FLEX_ATTENTION, FLASH_ATTN from 0.25 with FlashAttention 2/3), so they never raise it; "
            "FLASHINFER's 16/32/64 pages do where the blocks split into different page counts. The decode's "
            "logical block is the smaller where its TP is the larger past the KV heads (platforms/interface.py "
            "_align_hybrid_block_size), and then kv_connector/utils.py block_size_ratio asserts 'Local block size ... "
            "is not divisible by remote block size' where the pages differ instead. On for hybrid models by default "
            "from 0.28.0 (engine/arg_utils.py: 0.26.0-0.27.1 keep hybrid models opt-in although vllm/config/model.py "
            "is_prefix_caching_supported says yes from 0.26.0); vllm#41886, vllm#45019"),
    since=(0, 22, 0),
    needs=("--enable-prefix-caching",),
)
def check_hybrid_prefix_caching(pair: PDPair) -> list[Violation]:
    """Hybrid SSM with heterogeneous TP past the KV heads and prefix caching on decode: the roles' kernel blocks per
    logical block differ, which vLLM refuses at the NIXL handshake.

    Where the decode has the larger TP and it exceeds the KV heads, the decode's logical block is the smaller
    (``_align_hybrid_block_size``: its Mamba page shrinks with TP, its attention page per token no longer does), and
    with neither role giving a ``--block-size`` above 16 the handshake fails on every kernel: where the decode's
    kernel block is a multiple of the prefill's (``block_size_ratio`` passes) it holds fewer kernel blocks per logical
    block, so this RuntimeError; otherwise 'Local block size ... is not divisible by remote block size'. An error
    there (it takes the prefill's Mamba page to exceed one aligned attention block, as for every hybrid model whose
    block vLLM raises: 528 tokens for Qwen3.5 at TP 8; a smaller page would give both roles one aligned block).
    Where the prefill has the larger TP, the decode's block is the larger, and whether the roles' page counts differ
    is the kernel's (the GPU's) and the model's Mamba page's: backends that run the logical block as one kernel
    block (:func:`~pdd_operator.vllm.kernel_block.runs_logical_block`: FlashAttention 2/3, TRITON_ATTN) never raise it,
    so silence where both roles pin one; FLASHINFER's 16/32/64-token pages (Blackwell's default) and FlashAttention
    4's pages raise it where the page counts differ (blocks 528 and 1056 split into 33 pages each and pass, 528 and
    1072 do not): a warning. A warning too where the KV heads are unknown or a larger ``--block-size`` is given.
    """
    if not (pair.hybrid_ssm and pair.hetero_tp) or not decode_prefix_caching(pair):
        return []
    heads = pair.page_kv_heads  # 1 for a hybrid MLA model: its MLA page per token never shrinks with TP
    if heads is not None and max(pair.tps) <= heads:
        # Both roles shard the attention KV and the Mamba state by TP: the same logical block size on
        # both, so the same physical blocks per logical block (the PRs' 1P2D/2P1D sweeps pass).
        return []
    p_tp, d_tp = pair.tps
    logical = all(runs_logical_block(r.attention_backend, pair.version, pair.model.head_size) for r in pair.roles)
    if logical and p_tp > d_tp:
        return []  # one kernel block per logical block on both roles: the RuntimeError is never raised
    error = "Prefix caching with heterogeneous physical_blocks_per_logical is not supported for Mamba hybrid models"
    fix = fix_for(pair, "Disable prefix caching on decode (--no-enable-prefix-caching); the operator does this unless "
                  "spec.decode.extraArgs override it.",
                  "Pass --no-enable-prefix-caching to the decode container (vLLM enables prefix caching by default).")
    kernels = ("Which kernel runs is the GPU's choice: FlashAttention 2/3 (Hopper and older) and TRITON_ATTN run the "
               "logical block as one kernel block and never raise it; FLASHINFER's 16/32/64-token pages (the default on "
               "Blackwell) and FlashAttention 4's pages raise it where the two blocks split into different page counts")
    if heads is None:
        return [(
            f"decode: {_prefix_caching_how(pair)} with a hybrid SSM model and heterogeneous TP {p_tp}/{d_tp}: if either "
            "TP exceeds the model's KV heads, the roles get different logical blocks, and where they split into "
            f"different numbers of kernel pages vLLM refuses prefix caching on decode ('{error}'). {kernels}; the KV "
            "heads are not known here.",
            fix + " " + fix_for(pair, "Or give the model's KV heads (spec.model.numKvHeads).",
                                "Or give pdd check the model's config.json (--model-config)."), "warning",
        )]
    past = (f"heterogeneous TP {p_tp}/{d_tp} of a hybrid MLA model (its MLA page per token never shrinks with TP)"
            if pair.hybrid_mla else f"heterogeneous TP {p_tp}/{d_tp} past the model's {heads} KV heads")
    if d_tp > p_tp and all(r.block_size is None or r.block_size <= _SMALLEST_KERNEL_BLOCK for r in pair.roles):
        pinned = pair.decode.attention_backend if all(
            (r.attention_backend or "").upper() in _FIXED_PAGE_BACKENDS for r in pair.roles) else None
        which = (f"on {pinned}'s fixed pages either both roles run the same page and the page counts differ "
                 f"('{error}') or the decode's page is not a multiple of the prefill's" if pinned else
                 "kernels that run the logical block (FlashAttention 2/3, TRITON_ATTN) fail the block-size assert "
                 "('Local block size ... is not divisible by remote block size'); fixed pages (FLASHINFER, "
                 f"FlashAttention 4) fail it too or, with the same page on both, raise '{error}'")
        return [(
            f"decode: {_prefix_caching_how(pair)} with a hybrid SSM model and {past}: the decode's logical block is "
            "the smaller (its Mamba page shrinks with TP, its attention page per token no longer does), so the NIXL "
            f"handshake fails on every kernel: {which}.",
            fix_for(pair, "Use equal prefill and decode TP, or TP sizes within the model's KV heads; disabling prefix "
                    "caching on decode (--no-enable-prefix-caching) is enough only where both roles run the same "
                    "kernel page (FLASHINFER).",
                    "Use equal tensor-parallel sizes, or sizes within the model's KV heads; --no-enable-prefix-caching "
                    "on the decode container is enough only where both roles run the same kernel page (FLASHINFER)."),
        )]
    direction = ("the decode's block is the larger, and one 2 or 4 times the prefill's splits into the same page "
                 "count" if p_tp > d_tp else "a --block-size above 16 may give both roles the same block")
    return [(
        f"decode: {_prefix_caching_how(pair)} with a hybrid SSM model and {past}: the roles may get different logical "
        f"blocks (vLLM sizes each to hold its TP-sharded Mamba page). {kernels} ('{error}'); {direction}, which the "
        "model's Mamba page decides.",
        fix, "warning",
    )]


@rule(
    id="mamba2-n-groups-tp", family="hetero-tp", severity="warning",
    fields=("spec.model.mambaNGroups", "spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize"),
    source=("vLLM issue #55208 (open); read in the 0.22.0-0.34.0 wheels, no release refuses it: where a TP size does "
            "not divide n_groups, mamba_utils.py MambaStateShapeCalculator.extra_groups_for_head_shards replicates "
            "groups (tp - n_groups extra), so the B/C columns of one rank's conv state hold other groups on each side, "
            "while ssm_conv_transfer_utils.py derives the per-rank B/C widths from the local shape and "
            "_build_mamba_remote reads the remote slices by position; _validate_remote_agent_handshake checks no "
            "Mamba block lengths (0.33, 0.34): wrong conv state, no error raised. A warning, not a refusal"),
    since=_V020,
)
def check_mamba_n_groups(pair: PDPair) -> list[Violation]:
    """Mamba2 heterogeneous TP: both TP sizes divide n_groups (else the decode reads other groups' conv state)."""
    if not (pair.hybrid_ssm and pair.hetero_tp and pair.n_groups) or pair.model.ssm_kind not in (None, "Mamba2"):
        return []
    bad = [tp for tp in pair.tps if pair.n_groups % tp]
    if not bad:
        return []
    return [(
        f"Mamba2 n_groups {pair.n_groups} is not divisible by TP {bad[0]}: that side replicates groups across ranks, "
        "and with heterogeneous TP the decode reads the prefill's conv-state B/C slices by position, so transferred "
        "requests continue from another group's state (vLLM issue #55208). vLLM raises no error for it.",
        f"Use equal prefill and decode TP, or TP sizes that divide n_groups ({pair.n_groups}).",
    )]


@rule(
    id="hybrid-ssm-prefix-caching", family="hybrid-ssm", severity="error",
    fields=("spec.decode.extraArgs",),
    source=("vllm nixl _apply_prefix_caching when a transferred request hits decode's prefix cache: assert "
            "num_local_blocks == 1, 'SSM can only have one local block' (0.23.0-0.26.0 nixl worker/base_worker.py; seen "
            "on 0.26, ai-dynamo/dynamo#12197), assert num_local_blocks == num_remote_blocks for SSM groups (0.22.0 "
            "nixl/worker.py), assert len(local_block_descs_ids) == len(remote_block_descs_ids) in _read_blocks, which "
            "leaves SSM groups untrimmed (0.20.0). 0.21.0 trims them and asserts nothing (a warning there); "
            "0.27.0 and 0.27.1 pair SSM state slots by position (read in the released wheels; docs/conformance.md). "
            "0.18.0 and 0.19.1 (nixl_connector.py _read_blocks, hybrid SSM over NIXL from 0.18.0) trim every group "
            "and assert nothing: a warning there, as in 0.21.0; mamba cache mode align fails there by "
            "hybrid-mamba-align-external-kv"),
    since=(0, 18, 0), until=HYBRID_NIXL_PREFIX_CACHING_SINCE,
    needs=("--enable-prefix-caching",),
)
def check_hybrid_ssm_prefix_caching(pair: PDPair) -> list[Violation]:
    """Hybrid SSM models: decode does not run with prefix caching enabled (any TP)."""
    if not pair.hybrid_ssm or not decode_prefix_caching(pair):
        return []
    how = _prefix_caching_how(pair)
    certain = not (pair.version is not None and any(lo <= pair.version < hi for lo, hi in _PREFIX_NO_ASSERT))
    fix = fix_for(pair, ("Remove --enable-prefix-caching from spec.decode.extraArgs" if pair.decode.prefix_caching else
                         "Add --no-enable-prefix-caching to spec.decode.extraArgs") + " (or use vLLM >= 0.27).",
                  "Pass --no-enable-prefix-caching to the decode container instead (or use vLLM >= 0.27).")
    if not certain:
        return [(
            f"decode: {how} with a hybrid SSM model on vLLM {fmt(pair.version)}: NIXL has no prefix "
            "caching support for Mamba hybrids there; its code asserts nothing when a transferred request hits "
            "decode's prefix cache (0.20 and 0.22-0.26 do, and the engine dies), so whether the SSM state arrives "
            "intact was not established.", fix, "warning")]
    return [(
        f"decode: {how} with a hybrid SSM model on vLLM {fmt(pair.version)}: when a request whose "
        "KV arrives over NIXL also hits decode's local prefix cache, decode asserts ('SSM can only have one local "
        "block') and the engine dies (startup is fine; the first long shared prefix kills it).", fix)]


#: The first release whose NIXL transfer of Mamba states was read for :func:`check_mamba_state_dtypes` (the 0.22.0,
#: 0.23.0, 0.29.0, 0.30.0 and 0.34.0 wheels); before it a difference is a warning.
MAMBA_STATE_READ_SINCE: Version = (0, 22, 0)


def _state_dtype(pair: PDPair, r: RoleConfig, state: str) -> tuple[str | None, str]:
    """``(dtype, as written)`` of ``r``'s ``conv`` or ``ssm`` Mamba state as vLLM resolves it; the dtype is ``None``
    where it rests on what is not known here.

    vLLM's ``MambaStateDtypeCalculator._mamba_state_dtype`` (model_executor/layers/mamba/mamba_utils.py, 0.22.0
    l.84-97, 0.30.0 l.97-110, used by the Mamba1, Mamba2 and Gated DeltaNet models): the conv state takes
    ``--mamba-cache-dtype`` (``auto``: the model's dtype; no model hook changes it), the temporal state
    ``--mamba-ssm-cache-dtype``. An ``auto`` SSM dtype is left unresolved: model hooks replace it from the checkpoint
    (model_executor/models/config.py, 0.22.0-0.34.0: NemotronH's ``mamba_ssm_cache_dtype``, else float32; Qwen3.5's
    ``mamba_ssm_dtype``), else it follows the conv state."""
    conv_written = (r.mamba_cache_dtype or "auto").lower()
    model_dtype = dtype_name(r.dtype)
    if model_dtype == "auto":
        model_dtype = auto_dtype(pair.checkpoint_dtype, r.version or pair.version)
    conv = conv_written if conv_written != "auto" else model_dtype
    if state == "conv":
        return conv, conv_written
    ssm_written = (r.mamba_ssm_cache_dtype or "auto").lower()
    return (None if ssm_written == "auto" else ssm_written), ssm_written


_STATE_FLAGS = {"conv": "--mamba-cache-dtype", "ssm": "--mamba-ssm-cache-dtype"}


@rule(
    id="mamba-state-dtype-mismatch", family="hybrid-ssm", severity="error",
    fields=fields_of("mamba_state_dtypes"),
    source=("vllm nixl worker: the decode builds its reads of the prefill's Mamba states from its own sizes "
            "(_build_mamba_remote descriptors: conv slices from its own decomposition, "
            "ssm_conv_transfer_utils.remote_conv_offsets, and ssm_read_size its own when the TPs are equal; 0.22.0 and "
            "0.23.0 nixl/worker.py l.1063-1097, 0.29.0 nixl/base_worker.py l.1460-1495, 0.30.0 l.1734-1768, 0.34.0 "
            "l.2136-2170) while _validate_remote_agent_handshake skips the block-length check of Mamba models (0.22.0 "
            "worker.py l.1519 'TODO: For mamba models, validate FA and mamba block_lens separately', 0.30.0 "
            "base_worker.py l.2345-2360) and compute_nixl_compatibility_hash hashes neither dtype (nixl/metadata.py "
            "0.22.0-0.34.0); the dtypes from model_executor/layers/mamba/mamba_utils.py _mamba_state_dtype and the "
            "NemotronH and Qwen3.5 hooks that fill an auto SSM dtype (model_executor/models/config.py); read in the "
            "0.22.0, 0.23.0, 0.29.0, 0.30.0 and 0.34.0 wheels; not read before 0.22.0 (a warning there)"),
    since=(0, 18, 0),
    needs=("--mamba-cache-dtype", "--mamba-ssm-cache-dtype"),
)
def check_mamba_state_dtypes(pair: PDPair) -> list[Violation]:
    """Prefill and decode of a hybrid SSM model keep their Mamba conv and SSM states in the same dtypes.

    vLLM compares neither dtype: the decode reads each transferred request's states with its own sizes at the
    prefill's offsets, so a state of another dtype (float16 against float32, or bfloat16 against float16 at one size)
    arrives as garbage and the Mamba layers decode from it while the request succeeds. Both dtypes are resolved as
    vLLM resolves them (:func:`_state_dtype`); where that rests on what is not known here (the model's dtype, what a
    model hook makes of an ``auto`` SSM dtype) a difference as written is a warning, and so is an SSM difference on
    vLLM's CPU images (their platform may reset the SSM dtype). Judged for the Mamba1, Mamba2 and
    Gated DeltaNet kinds, whose models take both flags; a hybrid model of unknown kind is not checked (a linear
    attention model's state takes only ``--mamba-cache-dtype``)."""
    if not pair.hybrid_ssm:
        return []
    written = {s: (_state_dtype(pair, pair.prefill, s)[1], _state_dtype(pair, pair.decode, s)[1]) for s in _STATE_FLAGS}
    if all(p == d for p, d in written.values()):
        return []
    fix = fix_for(pair, "Give --mamba-cache-dtype and --mamba-ssm-cache-dtype the same values in "
                        "spec.prefill.extraArgs and spec.decode.extraArgs (or leave them out of both).",
                  "Give both engines the same --mamba-cache-dtype and --mamba-ssm-cache-dtype (or neither).")
    if pair.model.ssm_kind is None:
        shown = "; ".join(f"{_STATE_FLAGS[s]} prefill {p}, decode {d}" for s, (p, d) in written.items() if p != d)
        return [(f"The Mamba state dtypes differ ({shown}) on a hybrid model of unknown SSM kind: a Mamba or Gated "
                 "DeltaNet model's decode then reads the prefill's states as garbage, a linear-attention model reads "
                 "only --mamba-cache-dtype.", fix, NOT_CHECKED)]
    out = []
    for state, (wp, wd) in written.items():
        if wp == wd:
            continue
        (p, _), (d, _) = _state_dtype(pair, pair.prefill, state), _state_dtype(pair, pair.decode, state)
        name = "conv" if state == "conv" else "temporal (SSM)"
        said = f"{_STATE_FLAGS[state]} prefill {wp}, decode {wd}"
        if p is not None and d is not None:
            if p == d:
                continue
            if state == "ssm" and any(is_cpu_image(r.image) for r in pair.roles):
                out.append((f"The {name} state dtype differs ({said}) on vLLM's CPU image, whose platform may reset "
                            "an SSM dtype to float32 for its accelerated GDN backend (platforms/cpu.py): where it "
                            "stays, the decode reads the prefill's Mamba states as garbage.", fix, "warning"))
                continue
            if pair.version is not None and pair.version < MAMBA_STATE_READ_SINCE:
                out.append((f"The {name} state dtype differs ({said}: {p} against {d}); how vLLM "
                            f"{fmt(pair.version)} moves Mamba states over NIXL was not read here (from 0.22.0 the "
                            "decode reads them with its own sizes, unchecked: garbage states).", fix, "warning"))
                continue
            out.append((f"The {name} state dtype differs ({said}: {p} against {d}). vLLM neither hashes nor checks "
                        "it: the decode reads every transferred request's Mamba states with its own sizes at the "
                        "prefill's offsets, so the states arrive as garbage and the output is wrong while requests "
                        "return 200.", fix))
            continue
        unknown = ("the model's checkpoint (NemotronH takes its mamba_ssm_cache_dtype, else float32; Qwen3.5 its "
                   "mamba_ssm_dtype; other models the conv state's dtype)" if state == "ssm" else "the model's dtype")
        out.append((f"The {name} state dtype is written differently ({said}) and what auto resolves to rests on "
                    f"{unknown}, which is not known here: where they differ, the decode reads the prefill's Mamba "
                    "states as garbage (vLLM neither hashes nor checks them).", fix, "warning"))
    return out
