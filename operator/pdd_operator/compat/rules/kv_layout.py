"""KV cache layout: equal on both roles (or the permute path), named as the vLLM version knows it."""

from __future__ import annotations

from dataclasses import replace

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.attention_backends import selected_backend
from pdd_operator.vllm.gaudi import hetero_connector_loaded
from pdd_operator.vllm.kv_cache_dtypes import forced_layout
from pdd_operator.vllm.must_match import fields_of
from pdd_operator.vllm.versions import fmt

#: Layouts whose last three strides are (H, N, C): ``KVCacheLayout.is_block_contiguous`` (vllm 0.29+).
BLOCK_CONTIGUOUS = ("LBHNC", "BLHNC")

#: vLLM 0.9.0 has no KV cache layout choice: FlashAttention's cache is NHD (LBNHC) whatever the connector
#: (v1/attention/backends/flash_attn.py, read in the 0.9.0 wheel). From 0.9.1 a NIXL engine's cache is HND (LBHNC).
HND_FOR_NIXL_SINCE = (0, 9, 1)
#: 0.9.1-0.10.0 pick HND only when ``kv_transfer_config.kv_connector`` is literally ``"NixlConnector"``
#: (kv_connector/utils.py ``get_kv_connector_cache_layout``, read in the 0.9.1, 0.9.2 and 0.10.0 wheels): a
#: NixlConnector inside a MultiConnector gets NHD. From 0.10.1 the connector class says
#: (``get_required_kvcache_layout``; MultiConnector asks its children: 0.10.1.1 sdist, vllm#21789).
LAYOUT_BY_CONNECTOR_CLASS_SINCE = (0, 10, 1)
#: ``VLLM_KV_CACHE_LAYOUT`` (envs.py) first in 0.9.2 (absent from the 0.9.1 wheel's envs.py).
LAYOUT_ENV_SINCE = (0, 9, 2)
#: ``enable_permute_local_kv`` first in 0.11.1 (vllm-nixl-facts.md section 7).
PERMUTE_SINCE = (0, 11, 1)


def default_layout(pair: PDPair, role) -> tuple[str, str]:
    """``(layout, why)``: the KV cache layout ``role`` runs with (LBHNC = HND, LBNHC = NHD) and, where the vLLM
    release picks it other than HND, why (``""`` otherwise). An unknown release is read as a recent one."""
    version = pair.version
    if version is not None and version < LAYOUT_ENV_SINCE:
        env = None  # VLLM_KV_CACHE_LAYOUT is not read before 0.9.2
    else:
        env = role.kv_layout
    if env:
        return env, ""
    if version is not None and version < HND_FOR_NIXL_SINCE:
        return "LBNHC", "vLLM 0.9.0 lays every KV cache out NHD"
    if version is not None and version < LAYOUT_BY_CONNECTOR_CLASS_SINCE and role.wrapper:
        return "LBNHC", (f"vLLM 0.9.1-0.10.0 choose HND only for a top-level NixlConnector "
                         f"(get_kv_connector_cache_layout), so the {role.role}'s {role.wrapper.split('[', 1)[0]} "
                         "gets NHD")
    return "LBHNC", ""

def gaudi_hetero_layout(role) -> bool:
    """The role is a vllm-gaudi (Intel Gaudi, HPU) engine that converts its NHD KV cache for a CUDA peer itself:
    ``kv_buffer_device`` hpu with ``VLLM_HPU_HETERO_KV_LAYOUT`` true, which llm-d's heterogeneous Gaudi-to-CUDA guide
    requires for that (guides/pd-disaggregation/README.hpu_cuda.md: "required for heterogeneous KV layout
    compatibility with CUDA decode workers") and vllm-gaudi reads as "true" only
    (:func:`~pdd_operator.vllm.gaudi.hetero_connector_loaded`); upstream vLLM's layout check does not describe the
    plugin's side."""
    return role.buffer_device == "hpu" and hetero_connector_loaded(role.env)


@rule(
    id="kv-layout-mismatch", family="kv-layout-mismatch", severity="error",
    fields=fields_of("kv_cache_layout"),
    source=("vllm nixl worker's KV layout check in the handshake, with enable_permute_local_kv from 0.11.1 "
            "(v1/nixl_connector.py 0.11.1 l.841 and l.1047; nixl/worker.py 0.20.0 l.192 and l.490; nixl/"
            "base_worker.py 0.34.0 l.864 and l.1372); a vllm-gaudi role with "
            "VLLM_HPU_HETERO_KV_LAYOUT converts its own side (llm-d README.hpu_cuda.md): a warning; 0.9.0 NHD for "
            "every cache, 0.9.1-0.10.0 HND only for a top-level NixlConnector (kv_connector/utils.py "
            "get_kv_connector_cache_layout, read in the wheels); docs/features/nixl_connector_compatibility.md 'KV "
            "cache layout' (l.92 in 0.20.0, l.101 from 0.28.0); secondary: seed 000 section 4"),
    needs=("VLLM_KV_CACHE_LAYOUT", "VLLM_HPU_HETERO_KV_LAYOUT"),
)
def check_kv_layout_match(pair: PDPair) -> list[Violation]:
    """KV cache layouts match, or the permute path applies."""
    if pair.mla:
        return []
    (p, p_why), (d, d_why) = (default_layout(pair, r) for r in pair.roles)
    if p == d:
        return []
    permute = bool(pair.decode.kv_transfer.get("enable_permute_local_kv"))
    if p == "LBHNC" and d == "LBNHC" and permute and not pair.hma_required \
            and (pair.version is None or pair.version >= PERMUTE_SINCE):
        return []
    fix = ("Use the same VLLM_KV_CACHE_LAYOUT on both roles, or (non-hybrid models, prefill LBHNC/HND, decode "
           "LBNHC/NHD) set spec.kvTransfer.enablePermuteLocalKv.")
    message = f"KV cache layouts differ: prefill {p}, decode {d}."
    if p_why or d_why:
        message += (f" {p_why or d_why}; the handshake of this release compares no layout (NixlAgentMetadata), so "
                    "whole blocks arrive in the other layout and decode computes on permuted K/V.")
        fix = ("Use the same connector on both roles (both NixlConnector, or both in the same wrapper), or a vLLM "
               ">= 0.10.1 engine image, whose MultiConnector takes its NIXL child's HND layout.")
    if any(gaudi_hetero_layout(r) for r in pair.roles):
        return [(message + " One role is a vllm-gaudi engine with VLLM_HPU_HETERO_KV_LAYOUT, which converts its own "
                 "layout for a CUDA peer; that conversion is the plugin's and is not checked here.", fix, "warning")]
    return [(message, fix)]


@rule(
    id="kv-layout-version", family="kv-layout-mismatch", severity="error",
    fields=("spec.kvCache.layout", "spec.engine.env"),
    source="vllm envs.py VLLM_KV_CACHE_LAYOUT choices (NHD/HND before 0.29.0)",
    until=(0, 29, 0),
    needs=("VLLM_KV_CACHE_LAYOUT",),
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


def _head_split_exempt(pair: PDPair) -> bool | None:
    """Whether vLLM's head-splitting guard lets a heterogeneous-TP pair through whatever its KV layout: ``True``,
    ``False``, or ``None`` when the model's KV heads are not known and nothing else exempts it.

    The guard runs in ``add_remote_agent`` of the engine that opens the handshake (the decode for pull, the prefill
    for push) and skips MLA, a replicated remote KV cache (``TransferTopology.is_kv_replicated``: the remote TP
    above the model's total KV heads, kv_connector/utils.py) and that engine's own ``enable_permute_local_kv``
    (nixl/worker.py 0.20.0-0.22.x, nixl/base_worker.py 0.24.0 lines 1683-1695, 0.26.0 lines 1760-1772, 0.30.0
    lines 2332-2344, 0.34.0 lines 2895-2906; the guard is absent from 0.19.0 and earlier)."""
    opener, remote = (pair.prefill, pair.decode) if pair.push else (pair.decode, pair.prefill)
    if pair.mla or opener.kv_transfer.get("enable_permute_local_kv"):
        return True
    if pair.num_kv_heads is None or remote.tp is None:
        return None
    return remote.tp > pair.num_kv_heads


#: First release whose NIXL handshake refuses heterogeneous TP on a layout whose heads are not contiguous ("Heterogeneous
#: TP head-dimension splitting requires contiguous heads", nixl/worker.py 0.20.0 lines 1457-1471; no such check in
#: nixl_connector.py 0.19.0 or 0.19.1, whose add_remote_agent only compares the two layouts, 0.19.1 lines 2101-2118).
HEAD_SPLIT_GUARD_SINCE = (0, 20, 0)


@rule(
    id="hetero-tp-kv-layout", family="hetero-tp", severity="error",
    fields=("spec.kvCache.layout", "spec.kvCache.dtype"),
    source=("vllm nixl worker head-splitting check (0.20-0.34: nixl/worker.py 0.20.0 lines 1457-1471, "
            "nixl/base_worker.py add_remote_agent "
            "'Heterogeneous TP head-dimension splitting requires contiguous heads', 0.34.0 lines 2895-2906, not for "
            "MLA, a replicated KV cache (the handshake's remote TP > KV heads) or the handshaking engine's "
            "enable_permute_local_kv, for a written VLLM_KV_CACHE_LAYOUT as for a forced one); a turboquant_* KV "
            "cache runs LBNHC from 0.34.0 whatever NIXL prefers (pdd_operator.vllm.kv_cache_dtypes.forced_layout); "
            "a warning before 0.20.0, which has no such check (nixl_connector.py 0.19.0, 0.19.1); docs/features/"
            "nixl_connector_compatibility.md 'KV cache layout' (l.92 in 0.20.0, l.101 from 0.28.0); secondary: seed "
            "000 section 4"),
    needs=("VLLM_KV_CACHE_LAYOUT", "VLLM_HPU_HETERO_KV_LAYOUT", "--kv-cache-dtype"),
)
def check_hetero_tp_layout(pair: PDPair) -> list[Violation]:
    """Heterogeneous TP uses a block-contiguous layout on prefill: an error from :data:`HEAD_SPLIT_GUARD_SINCE`, whose
    handshake refuses it; a warning on an older release, which has no such check (nixl_connector.py 0.19.1)."""
    layout = pair.prefill.kv_layout
    if not pair.hetero_tp or pair.mla:
        return []
    if layout is None:
        return _forced_token_major(pair)
    if layout in BLOCK_CONTIGUOUS:
        return []
    exempt = _head_split_exempt(pair)
    if exempt:
        return []
    message = f"Heterogeneous TP splits KV heads, which needs a block-contiguous KV layout on prefill; {layout} is not."
    fix = ("Leave the KV layout unset (NIXL prefers LBHNC/HND) or set it to LBHNC, or set enable_permute_local_kv in "
           "the decode's --kv-transfer-config.")
    if pair.version is not None and pair.version < HEAD_SPLIT_GUARD_SINCE:
        return [(message + f" vLLM {fmt(pair.version)} does not check this (the handshake refuses it from "
                 f"{fmt(HEAD_SPLIT_GUARD_SINCE)}): the engines start, and the transfer splits heads that are not "
                 "contiguous, which vLLM says only works with HND, so the decode may read wrong KV; this is a warning.",
                 fix, "warning")]
    if exempt is None:
        return [(message + " The model's KV heads are not known (a TP above them replicates the cache, which is not "
                 "split), so this is a warning.", fix, "warning")]
    return [(message, fix)]


def _forced_token_major(pair: PDPair) -> list[Violation]:
    """The finding for a heterogeneous-TP pair whose KV cache dtype forces the token-major LBNHC layout
    (:func:`~pdd_operator.vllm.kv_cache_dtypes.forced_layout`) where no ``VLLM_KV_CACHE_LAYOUT`` is written: the
    handshake refuses head splitting unless :func:`_head_split_exempt`; ``[]`` where no dtype forces it."""
    forced = [r for r in pair.roles if forced_layout(r.kv_cache_dtype, r.version or pair.version)]
    exempt = _head_split_exempt(pair)
    opening = pair.prefill if pair.push else pair.decode
    permute = bool(opening.kv_transfer.get("enable_permute_local_kv")) and not pair.mla and len(forced) == 2
    host_buffer = False
    if permute:
        # the handshake turns the permutation on only for a remote LBHNC cache received into a local LBNHC one
        # (nixl/base_worker.py 0.34.0 l.864 and l.2857-2870): two LBNHC caches never do, so the guard still runs;
        # with a host buffer (kv_buffer_device cpu) the opener's buffer is LBHNC instead (l.1371-1380): not judged
        host_buffer = opening.buffer_device == "cpu"
        exempt = _head_split_exempt(replace(pair, **{opening.role: replace(opening, kv_transfer={
            k: v for k, v in opening.kv_transfer.items() if k != "enable_permute_local_kv"})}))
    if not forced or exempt or pair.tps is None:
        return []
    r = forced[0]
    opener = "prefill's handshake (push)" if pair.push else "decode's handshake"
    message = (f"--kv-cache-dtype {r.kv_cache_dtype} on the {r.role}: vLLM {fmt(r.version or pair.version)}'s TurboQuant "
               "attention backend supports only the token-major LBNHC KV layout, so the engine drops NIXL's LBHNC "
               f"preference; with prefill TP {pair.tps[0]} and decode TP {pair.tps[1]} the transfer splits KV heads, "
               f"and the {opener} raises 'Heterogeneous TP head-dimension splitting requires contiguous "
               "heads'.")
    fix = ("Use the same tensor parallel size on both roles with a TurboQuant KV cache, or another --kv-cache-dtype "
           "(fp8) with heterogeneous TP.")
    if permute and not host_buffer:
        message += (" enable_permute_local_kv does not help: the handshake permutes only a remote LBHNC cache into a "
                    "local LBNHC one, and both TurboQuant caches are LBNHC (nixl/base_worker.py 0.34.0 "
                    "add_remote_agent).")
    if host_buffer:
        return [(message + " With enable_permute_local_kv and a host buffer (kv_buffer_device cpu) the "
                 f"{opening.role}'s host copy is LBHNC instead, which these rules do not follow, so this is a warning.",
                 fix, "warning")]
    if exempt is None:
        return [(message + " The model's KV heads are not known (a TP above them replicates the cache and is not "
                 "split), so this is a warning.", fix, "warning")]
    return [(message, fix)]


@rule(
    id="kv-layout-dtype-unsupported", family="kv-layout-mismatch", severity="error",
    fields=("spec.kvCache.layout", "spec.kvCache.dtype"),
    source=("vllm/v1/attention/backends/utils.py resolve_kv_cache_layout (0.34.0 lines 400-405: an explicit "
            "VLLM_KV_CACHE_LAYOUT outside the candidates raises 'does not satisfy every supported set') with "
            "TurboQuantAttentionBackend.supported_kv_cache_layouts = (LBNHC,) (turboquant_attn.py 0.34.0 lines "
            "159-161; the 0.29.0-0.33.0 backends declare none): pdd_operator.vllm.kv_cache_dtypes.forced_layout"),
    without_connector=True,
    needs=("VLLM_KV_CACHE_LAYOUT", "--kv-cache-dtype"),
    example="--kv-cache-dtype turboquant_k8v4 with VLLM_KV_CACHE_LAYOUT=LBHNC on vllm/vllm-openai:v0.34.0",
)
def check_layout_for_dtype(pair: PDPair) -> list[Violation]:
    """A written ``VLLM_KV_CACHE_LAYOUT`` is one the KV cache dtype's attention backend supports.

    Per role, on its own release: where the ``--kv-cache-dtype`` forces a layout
    (:func:`~pdd_operator.vllm.kv_cache_dtypes.forced_layout`: LBNHC for turboquant_* from 0.34.0) and
    ``VLLM_KV_CACHE_LAYOUT`` names another one (HND = LBHNC included), the engine core's layout resolution raises
    at startup; without the variable it only drops NIXL's preference (``hetero-tp-kv-layout`` judges that). MLA
    models are not judged (their layout is their MLA backend's)."""
    if pair.mla:
        return []
    out: list[Violation] = []
    for r in pair.roles:
        version = r.version or pair.version
        forced = forced_layout(r.kv_cache_dtype, version)
        if forced is None or r.kv_layout is None or r.kv_layout == forced:
            continue
        out.append((
            f"{r.role}: --kv-cache-dtype {r.kv_cache_dtype} on vLLM {fmt(version)} runs an attention backend that "
            f"supports only the {forced} KV layout, and VLLM_KV_CACHE_LAYOUT={r.env.get('VLLM_KV_CACHE_LAYOUT')} "
            "names another: the engine's layout resolution raises 'VLLM_KV_CACHE_LAYOUT=... does not satisfy every "
            "supported set' and the server never starts.",
            fix_for(pair, f"Remove spec.kvCache.layout or set it to {forced}, or use another spec.kvCache.dtype.",
                    f"Remove VLLM_KV_CACHE_LAYOUT from the {r.role} container's env or set it to {forced}, or use "
                    "another --kv-cache-dtype (fp8)."),
        ))
    return out


#: The vLLM releases whose source shows cross-layer KV blocks as a NIXL compatibility-hash factor
#: (compute_nixl_compatibility_hash(vllm_config, attn_backend_name, cross_layers_blocks) and
#: kv_connector_extra_config enable_cross_layers_blocks: read in the 0.16.0, 0.17.1, 0.18.0 and 0.20.0-0.28.0
#: wheels; 0.13.0-0.15.0 have neither), and the first release without it (0.29.0: no factor, no
#: prefer_cross_layer_blocks in the NIXL connector; 0.30.0-0.32.0 the same).
CROSS_LAYERS_HASHED = ((0, 16, 0), (0, 29, 0))
CROSS_LAYERS_GONE = (0, 29, 0)
#: In-tree connectors whose ``prefer_cross_layer_blocks`` is the base class's ``False`` in 0.26.0
#: (vllm/distributed/kv_transfer/kv_connector/v1/base.py); OffloadingConnector returns ``True``.
_NO_CROSS_LAYERS = {"LMCacheConnectorV1", "P2pNcclConnector", "SharedStorageConnector", "ExampleConnector",
                    "MooncakeConnector"}
_CROSS_LAYER_BACKENDS = {"FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"}


def cross_layer_blocks(pair: PDPair, role) -> bool | None:
    """Whether ``role`` registers its KV cache as cross-layer blocks, per vLLM 0.26.0's
    ``NixlBaseConnector.prefer_cross_layer_blocks`` (nixl/connector.py): ``enable_cross_layers_blocks`` in
    the NixlConnector's extra config, no Mamba layers, a FLASH_ATTN/FLASHINFER/TRITON_ATTN backend, the HND
    layout; inside a MultiConnector only when every child prefers it (multi_connector.py ``all(...)``).
    ``None`` when a child connector outside vLLM's tree (Dynamo's DynamoConnector, ...) decides it."""
    extra = role.kv_transfer.get("kv_connector_extra_config") or {}
    if str(extra.get("enable_cross_layers_blocks", "False")).lower() != "true" or pair.hybrid_ssm:
        return False
    backend = selected_backend(role.attention_backend, role.env, pair.version)
    if (backend and str(backend).upper() not in _CROSS_LAYER_BACKENDS) or (role.kv_layout or "HND").upper() == "NHD":
        return False
    if not role.wrapper:
        return True
    children = [c.strip() for c in role.wrapper.split("[", 1)[-1].rstrip("]").split(",")]
    states = [True if c in ("NixlConnector", "OffloadingConnector") else False if c in _NO_CROSS_LAYERS else None
              for c in children]
    if False in states:
        return False
    return None if None in states else True


@rule(
    id="cross-layers-blocks-mismatch", family="kv-layout-mismatch", severity="error",
    fields=("spec.kvTransfer.extraConfig",),
    source=("vllm nixl/metadata.py compute_nixl_compatibility_hash factor cross_layers_blocks and "
            "nixl/connector.py prefer_cross_layer_blocks (0.16.0-0.28.x, read in the wheels); multi_connector.py "
            "(every child must prefer it); 0.29.0+ has no cross-layer path (no finding); earlier versions a "
            "warning (ai-dynamo/dynamo#10027)"),
    needs=("--attention-backend", "--attention-config", "VLLM_ATTENTION_BACKEND"),
)
def check_cross_layer_blocks_match(pair: PDPair) -> list[Violation]:
    """Cross-layer KV blocks are in effect on both roles or on neither (the layout is hashed)."""
    if pair.version is not None and pair.at_least(CROSS_LAYERS_GONE):
        return []
    p, d = (cross_layer_blocks(pair, r) for r in pair.roles)
    if p == d or (p is not True and d is not True):
        return []
    on, other = ("prefill", pair.decode) if p else ("decode", pair.prefill)
    state = cross_layer_blocks(pair, other)
    how = "not" if state is False else "perhaps not (a connector outside vLLM decides it)"
    hashed = pair.version is not None and CROSS_LAYERS_HASHED[0] <= pair.version < CROSS_LAYERS_HASHED[1]
    certain = state is False and hashed
    message = (f"Cross-layer KV blocks are in effect on {on} and {how} on the other role ({other.wrapper or other.connector}): "
               "enable_cross_layers_blocks takes effect only for a NixlConnector whose every sibling connector prefers "
               "it, and vLLM hashes the resulting layout, so the NIXL handshake refuses the pair "
               "('NIXL compatibility hash mismatch').")
    if not hashed:
        message += " vLLM hashes it in 0.16-0.28 only; for this version it is a warning."
    elif not certain:
        message += " Whether the other role's connector stack registers cross-layer blocks is not in these files, so a warning."
    fix = ("Set enable_cross_layers_blocks the same way where it takes effect: drop it from the standalone "
           "NixlConnector, or give both roles the same connector stack.")
    return [(message, fix) if certain else (message, fix, "warning")]
