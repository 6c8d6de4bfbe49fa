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
