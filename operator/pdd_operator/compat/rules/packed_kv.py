"""Block-outermost ("packed") KV cache layouts across the NIXL transfer: what the 0.31-0.34 NIXL worker refuses.

A KV cache layout is *packed* where the block dimension is outermost (``KVCacheLayout.is_block_outermost``:
BLHNC, BLNHC, BHLNC; vllm/v1/kv_cache_layout.py, 0.29.0-0.34.0): one block row of a shared allocation holds every
layer's page. The NIXL worker reads it as ``_has_packed_cache`` (nixl/base_worker.py, first in 0.31.0; the 0.30.0
worker has no such attribute).

What selects it, per release (vllm/v1/attention/backends/utils.py ``resolve_kv_cache_layout``, 0.31.0-0.34.0):

- ``VLLM_KV_CACHE_LAYOUT`` set to BLHNC, BLNHC or BHLNC on the engine (envs.py accepts them from 0.29.0); a value
  the model's attention backends do not support fails the engine's startup ("does not satisfy every supported set").
- Without it, NIXL's preference: ``NixlConnector.get_required_kvcache_layout`` returns LBHNC for a non-MLA model
  and ``None`` for an MLA model (nixl/connector.py), so an MLA model takes its backends' first choice, and the
  default preference (LBNHC first) where no backend declares any.
- Attention backends that declare only block-outermost layouts force it whatever the connector prefers: the
  DeepSeek-V4 indexer (BLHNC, BLNHC), GLM-5.3-Flash's kpool tail (BLHNC), Step5's split-KV sparse attention (BLNHC),
  Dots3-Note's MLA attention and Qwen4-Exp's QSA indexer (v1/attention/backends/mla/indexer.py and
  vllm/models/*/ in the 0.34.0 sdist). A manifest does not show which backends a model's layers get, so these rules
  judge the layout only where ``VLLM_KV_CACHE_LAYOUT`` (a PDDeployment's ``spec.kvCache.layout``) names it; a model
  that packs by its backends alone is not judged here.
- DCP with a replicated draft cache and mixed page sizes narrows the candidates to block-outermost layouts
  (``resolve_kv_cache_layout``, 0.33.0+): see :mod:`pdd_operator.compat.rules.draft_kv`.

Which side's packing matters: ``add_remote_agent`` runs on the engine that opens the handshake, the decode for the
pull connector and the prefill for the push connector (NixlPushConnector's prefill writes into the decode); its
``_packed_member_layouts`` are compared with the peer's advertised ones.

The 0.31-0.34 NIXL guards (issue 9 sweep): every ``raise`` of kv_connector/v1/nixl/*.py (base_worker, connector,
pull_worker, push_worker, push_scheduler, base_scheduler), multi_connector.py, kv_connector/utils.py and
config/kv_transfer.py in the 0.31.0-0.34.0 sdists, with the rule that covers it or why none is needed. Releases are
those whose sdist holds the text; "internal" means no deployment setting reaches it (a vLLM bug or a corrupt peer).

=====================================================================  =========  =====================================
Guard (message, abridged)                                              Releases   Rule, or why none
=====================================================================  =========  =====================================
PP push with packed KV caches requires MLA                             0.31-0.34  packed-kv-pp-push-non-mla
Attention-HMA push ... decode TP greater than prefill TP (0.34 also    0.31-0.34  push-hma-tp-expansion; the packed case
for packed caches)                                                                is non-MLA, refused first by
                                                                                  packed-kv-pp-push-non-mla
Attention-HMA push requires identical P/D block sizes; NixlPush...     0.31-0.34  block-size-push-equal
requires identical P/D block sizes
Packed KV block rows differ between P and D                            0.33-0.34  packed-kv-rows-differ
Reading multi-group packed KV rows into per-layer regions              0.33       packed-kv-rows-differ (warning)
NIXL head-sharded draft KV under an MLA target requires local TP >=    0.33-0.34  draft-kv-mla-target-tp
remote TP and no DCP; push: ... with heterogeneous TP; Head-sharded
draft KV ... needs the same block-contiguous kv_cache_layout
Multiple connectors provide a KV cache memory pool                     0.31-0.34  multi-connector-mem-pools
DCP requires matching P/D logical block sizes; DCP region pulls        0.31-0.34  dcp-block-size-hetero
require matching logical and physical block sizes
Compressed KV caches cannot be split into kernel blocks with a         0.34       none: the compressed-KV models
layer-outermost KV cache layout                                                   (DeepSeek-V4 indexer: BLHNC/BLNHC
                                                                                  only) cannot resolve a layer-outermost
                                                                                  layout; VLLM_KV_CACHE_LAYOUT=LB* on
                                                                                  them fails layout resolution first
NixlConnector (pull) ... pipeline_parallel_size > 1 with HMA           0.31-0.34  pp-pull-unsupported
NixlPushConnector consumer (decode) ... pipeline_parallel_size > 1     0.31-0.34  pp-decode-unsupported
NixlPushConnector ... PP > 1 with Mamba/SSM hybrid layouts             0.31-0.34  pp-hybrid-ssm
NixlPushConnector does not support decode_context_parallel_size > 1    0.31-0.34  push-dcp-unsupported
NixlConnector PCP: kv_producer only / no bidirectional / PCP+DCP       0.31-0.34  pcp-kv-role-unsupported,
needs TP1                                                                         pcp-bidirectional-unsupported,
                                                                                  pcp-dcp-unsupported
Heterogeneous TP expects same kv_cache_layout                          0.31-0.34  kv-layout-mismatch
Heterogeneous TP head-dimension splitting requires contiguous heads    0.31-0.34  hetero-tp-kv-layout
NIXL KV-head re-sharding is not supported for NVFP4 KV cache           0.33-0.34  nvfp4-kv-hetero-tp
Prefix caching with heterogeneous physical_blocks_per_logical (Mamba)  0.31-0.34  hybrid-prefix-caching
NIXL compatibility hash mismatch                                       0.31-0.34  the must-match rules (model-mismatch,
                                                                                  dtype-, kv-cache-dtype-, attention-
                                                                                  backend-, hma-flag-, spec-decode-
                                                                                  mismatch, vllm-version-mismatch)
Failed to decode NixlHandshakePayload / NixlAgentMetadata;             0.31-0.34  vllm-version-mismatch (connector
NixlConnectorScheduler expects NixlHandshakePayload                               versions differ); else internal
{device} with {kv_buffer_device} kv_buffer is not supported            0.31-0.34  kv-buffer-device-mismatch (the pair);
                                                                                  one engine's device: not judged
kv_transfer_config must be set; kv_role missing or unsupported         0.31-0.34  kv-connector-missing,
                                                                                  engine-args-invalid
Key clash in kv_transfer_params from multiple connectors               0.31-0.34  multi-connector-params-clash
KV cache layout mismatch (MultiConnector children)                     0.31-0.34  none: only OffloadingConnector with
                                                                                  HiSparse asks BLHNC, and HiSparse
                                                                                  runs sparse-MLA models, for which
                                                                                  NIXL asks none (not verified on a GPU)
Replicated PCP cannot be paired with a DCP-sharded NIXL peer; Remote   0.31-0.34  not covered: pcp-dcp-unsupported
NixlConnector PCP+DCP does not span the full PCP group                            judges each engine, not this pairing
NIXL with a DCP-replicated MLA draft cache only supports pulling from  0.34       not covered (noticed; a DCP decode
a DCP prefill into a non-DCP decode; Region-mapped NIXL pulls with                with an MTP draft)
DCP do not support DCP-replicated MLA draft groups
Hybrid MLA+Mamba NIXL transfers require matching DCP sizes             0.31-0.34  not covered (GLM-5.3-Flash with DCP
                                                                                  on one side only; noticed)
NIXL host staging does not preserve CSA-linear shared tensors;         0.31-0.34  not covered: CSA-linear (compressed
CSA-linear ... PLE cache owner / KV-head sharding boundary; PLE                   sparse) and PLE caches are model
pages require identical P/D geometry; holds its PLE state in several              internals the manifest does not name
KV regions
NIXL pull does not yet support a mixed-memory producer; NixlPush...    0.31-0.34  kv-buffer-device-mismatch where the
does not support mixed-memory KV caches                                           roles' buffer devices differ; a
                                                                                  HiSparse host pool: not covered
heterogeneous attn post process is not supported with HMA              0.31-0.34  not covered (permute path with HMA)
Bidirectional KV transfer is not supported for NIXL push connector     0.31-0.34  not covered here (push_scheduler;
                                                                                  kv_connector_extra_config)
Engine ... KV regions / layers / cache groups / block lengths differ,  0.31-0.34  internal: follow from a different
TP ranks lay out regions differently, Different NIXL cache-group                  model, layout, block size or KV
layouts ..., Region-mapped NIXL transfers require matching physical               cache plan, which the must-match and
block sizes                                                                       block-size rules judge first
Decode allocated more KV pages ..., Remote KV pages do not cover ...,  0.31-0.34  internal (per request)
NIXL cache views must have nonnegative strides, Unknown spec type,
Unsupported KVConnectorRole, Unexpected socket type, NIXL is not
available, os.sched_setaffinity, {device} is not supported
HiSparseConnector host_pool_gib / only one HiSparseConnector           0.34       not NIXL: out of these rules' scope
=====================================================================  =========  =====================================

``assert`` statements on the same path (88 in base_worker.py 0.34.0) are invariants of vLLM's own bookkeeping except
the TP divisibility ones (``tp-divisibility``) and the replicated-KV one (``hetero-tp-kv-replicated``);
``logger.error`` on the path reports per-request transfer failures ("NIXL transfer failure", "Declining remote reads
... different P/D block sizes require remote_num_tokens") that no deployment setting decides alone.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.versions import fmt

#: ``KVCacheLayout`` members whose block dimension is outermost (``is_block_outermost``, vllm/v1/kv_cache_layout.py).
BLOCK_OUTERMOST = ("BLHNC", "BLNHC", "BHLNC")
#: The first release whose NIXL worker reads a packed cache (``_has_packed_cache``) and refuses a non-MLA one under
#: PP push ("PP push with packed KV caches requires MLA": nixl/base_worker.py register_kv_caches, 0.31.0 line 1460,
#: 0.32.0 line 1440, 0.33.0 line 1561, 0.34.0 line 1645).
PACKED_PP_PUSH_SINCE = (0, 31, 0)
#: The first release whose handshake compares the two sides' packed rows ("Packed KV block rows differ between P
#: and D": nixl/base_worker.py add_remote_agent, 0.33.0 line 2509, 0.34.0 line 2544; absent from 0.32.0).
PACKED_ROWS_COMPARED_SINCE = (0, 33, 0)
#: The first release that reads a peer's multi-group packed rows into per-layer regions: 0.33.0's
#: ``_split_remote_packed_rows`` raises "Reading multi-group packed KV rows into per-layer regions is not supported"
#: for a row shared by several KV cache groups (base_worker.py 0.33.0 line 578); 0.34.0's
#: ``_expand_remote_packed_rows`` rewrites each member instead.
MULTI_GROUP_ROWS_READ_SINCE = (0, 34, 0)


def written_layout(r: RoleConfig) -> str | None:
    """The role's ``VLLM_KV_CACHE_LAYOUT`` (legacy HND/NHD resolved), ``None`` where it does not set one."""
    return r.kv_layout


def packed(r: RoleConfig) -> bool:
    """The role's written layout is block-outermost (BLHNC, BLNHC, BHLNC)."""
    return written_layout(r) in BLOCK_OUTERMOST


def initiator(pair: PDPair) -> tuple[RoleConfig, RoleConfig]:
    """``(local, remote)`` of the NIXL handshake: the prefill opens it for the push connector, the decode for pull."""
    return (pair.prefill, pair.decode) if pair.prefill.push else (pair.decode, pair.prefill)


@rule(
    id="packed-kv-pp-push-non-mla", family="pipeline-parallel-unsupported", severity="error",
    fields=("spec.kvCache.layout", "spec.prefill.pipelineParallelSize", "spec.kvTransfer.connector",
            "spec.model.architecture"),
    source=("vllm nixl/base_worker.py register_kv_caches: NotImplementedError 'PP push with packed KV caches requires "
            "MLA' where the worker is a push worker (_supports_pp_hma), pp_size > 1, the layout is block-outermost "
            "(_has_packed_cache) and the model has no Mamba layers, and any layer spec is not MLAAttentionSpec / "
            "SlidingWindowMLASpec (0.31.0 line 1460, 0.32.0 line 1440, 0.33.0 line 1561, 0.34.0 line 1645); the "
            "0.34.0 handshake guard 'Attention-HMA push does not support decode TP greater than prefill TP yet' "
            "also fires for packed caches, but only for a non-MLA model, which this refusal stops first"),
    since=PACKED_PP_PUSH_SINCE,
    example="prefill: {pipelineParallelSize: 2}, NixlPushConnector, VLLM_KV_CACHE_LAYOUT=BLHNC, a Llama model",
    needs=("VLLM_KV_CACHE_LAYOUT",),
)
def check_packed_pp_push(pair: PDPair) -> list[Violation]:
    """A PP push prefill with a block-outermost KV cache layout serves an MLA model.

    ``(prefill PP, prefill VLLM_KV_CACHE_LAYOUT, model family)``: a NixlPushConnector prefill with PP > 1 registers
    each layer's page of a packed row as its own region and refuses, when it registers its KV caches (startup of the
    KV transfer, before any request), any layer that is not MLA. Hybrid SSM models are refused under PP push by
    ``pp-hybrid-ssm``; a model whose family is not known is a warning.
    """
    p = pair.prefill
    if (p.pp or 1) == 1 or not p.push or not packed(p) or pair.mla or pair.hybrid_ssm:
        return []
    layout = written_layout(p)
    fix = fix_for(pair, "Leave spec.kvCache.layout unset (or LBHNC) when the prefill is pipeline-parallel, or run the "
                        "prefill with pipelineParallelSize 1.",
                  "Drop VLLM_KV_CACHE_LAYOUT (or set LBHNC) on the prefill container, or run it without "
                  "--pipeline-parallel-size.")
    what = (f"NixlPushConnector prefill with pipeline parallel size {p.pp} and VLLM_KV_CACHE_LAYOUT={layout} "
            f"(block-outermost)")
    if pair.model.architecture is None:
        return [(f"{what}: vLLM {fmt(pair.version)} refuses it for a model that is not MLA ('PP push with packed KV "
                 "caches requires MLA') when the prefill registers its KV caches; this model's family is not known.",
                 fix, "warning")]
    return [(f"{what} on a {pair.model.architecture} model: vLLM {fmt(pair.version)}'s push worker registers each "
             "layer's page of a packed row on its own and raises 'PP push with packed KV caches requires MLA' when "
             "it registers the KV caches; no KV moves.", fix)]


@rule(
    id="packed-kv-rows-differ", family="kv-layout-mismatch", severity="error",
    fields=("spec.kvCache.layout", "spec.prefill.env", "spec.decode.env", "spec.model.architecture"),
    source=("vllm nixl/base_worker.py add_remote_agent: RuntimeError 'Packed KV block rows differ between P and D. "
            "Use the same VLLM_KV_CACHE_LAYOUT and block size on both sides.' where the local worker has "
            "_packed_member_layouts (a block-outermost MLA cache without Mamba layers, registered as whole rows: "
            "pp_size 1, or a page that is not contiguous) and they differ from the peer's advertised ones (0.33.0 "
            "lines 2500-2511, 0.34.0 lines 2538-2546); a peer whose rows are packed while the local cache is not is "
            "split instead (_split_remote_packed_rows 0.33.0, _expand_remote_packed_rows 0.34.0)"),
    since=PACKED_ROWS_COMPARED_SINCE,
    example="MLA model, NixlConnector, decode VLLM_KV_CACHE_LAYOUT=BLHNC, prefill LBHNC (or unset)",
    needs=("VLLM_KV_CACHE_LAYOUT", "--block-size"),
)
def check_packed_rows(pair: PDPair) -> list[Violation]:
    """The engine that opens the NIXL handshake packs its MLA KV rows as its peer does.

    ``(handshake opener's layout, peer's layout, block sizes)``: the opener (decode for pull, prefill for push)
    with a block-outermost layout on an MLA model transfers whole block rows, so the peer must lay its rows out
    alike: a peer with a layer-outermost layout (LB*, or no ``VLLM_KV_CACHE_LAYOUT`` on a dense MLA model) or another
    block size fails the handshake (error). The opener running PP > 1 registers whole rows only for non-contiguous
    pages, and a sparse-MLA peer without a layout may be packed by its indexer backend: warnings.
    """
    if not pair.mla or pair.hybrid_ssm:
        return []
    local, remote = initiator(pair)
    if not packed(local):
        several_groups = pair.model.architecture == "sparse-mla" or pair.model.sliding_window
        if packed(remote) and several_groups and pair.version is not None and pair.version < MULTI_GROUP_ROWS_READ_SINCE:
            return [(f"The {remote.role} packs its MLA KV cache block-outermost (VLLM_KV_CACHE_LAYOUT="
                     f"{written_layout(remote)}) and the {local.role}, which opens the NIXL handshake, does not: vLLM "
                     f"{fmt(pair.version)} splits a peer's packed rows per layer only for a single KV cache group and "
                     "raises 'Reading multi-group packed KV rows into per-layer regions is not supported' where this "
                     "model's layers (sparse-MLA indexer or sliding-window layers) share a row across groups.",
                     fix_for(pair, "Set the same spec.kvCache.layout for both roles.",
                             "Set the same VLLM_KV_CACHE_LAYOUT on the prefill and decode containers."), "warning")]
        return []
    lay_l, lay_r = written_layout(local), written_layout(remote)
    fix = fix_for(pair, "Set the same spec.kvCache.layout (and block size) for both roles.",
                  f"Set the same VLLM_KV_CACHE_LAYOUT ({lay_l}) and --block-size on the prefill and decode containers.")
    opener = f"the {local.role} (which opens the NIXL handshake for {'push' if local.push else 'pull'})"
    if not packed(remote):
        peer = f"VLLM_KV_CACHE_LAYOUT={lay_r}" if lay_r else "no VLLM_KV_CACHE_LAYOUT"
        msg = (f"{opener} packs its MLA KV cache block-outermost (VLLM_KV_CACHE_LAYOUT={lay_l}) and the {remote.role} "
               f"has {peer}")
        if lay_r is None and pair.model.architecture == "sparse-mla":
            return [(f"{msg}; a sparse-MLA model's indexer backend may pack the {remote.role}'s cache as well, else "
                     f"vLLM {fmt(pair.version)} refuses the handshake ('Packed KV block rows differ between P and D').",
                     fix, "warning")]
        severity = "warning" if (local.pp or 1) > 1 else "error"
        return [(f"{msg}: vLLM {fmt(pair.version)}'s handshake compares the packed rows and raises 'Packed KV block "
                 "rows differ between P and D'; every request fails."
                 + (f" (The {local.role} runs PP {local.pp}: it packs whole rows only where a layer's page is not "
                    "contiguous.)" if severity == "warning" else ""), fix, severity)]
    if local.block_size and remote.block_size and local.block_size != remote.block_size:
        return [(f"{opener} and the {remote.role} both pack their MLA KV cache block-outermost, with block sizes "
                 f"{local.block_size} and {remote.block_size}: the rows' page sizes differ and vLLM "
                 f"{fmt(pair.version)} may refuse the handshake ('Packed KV block rows differ between P and D'), "
                 "unless both run the same kernel block size.", fix, "warning")]
    return []
