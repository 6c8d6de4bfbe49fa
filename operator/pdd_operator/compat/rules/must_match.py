"""Settings prefill and decode must share (the NIXL compatibility hash); fields come from vllm/must_match.py."""

from __future__ import annotations

from collections.abc import Callable

from pdd_operator.compat.connector_hma import wrapper_hma_off
from pdd_operator.compat.gpu_product import GPU_PRODUCT_LABELS, pinned_gpu_capability, pinned_gpu_major
from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.placement import HOSTNAME_LABEL, same_node
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.compat.rules.block_size import engine_block_sizes
from pdd_operator.compat.spec_factors import hashed_factor_differences
from pdd_operator.vllm.attention_backends import (
    BACKEND_ENV,
    CUDA_CAPABILITIES,
    backend_env_read,
    backend_kind,
    backend_refusal,
    default_backend_at,
)
from pdd_operator.vllm.block_size import gpu_platform
from pdd_operator.vllm.dtype import (
    BF16_CAVEAT,
    DSV32_HOOK_SINCE,
    GPU_HOOK_CAPABILITY,
    MODELOPT_KV_MAPPED_SINCE,
    auto_dtype,
    auto_kv_cache_dtype,
    dtype_name,
    gpu_hooked_kv_cache_dtype,
    hooked_kv_cache_dtype,
)
from pdd_operator.vllm.expansion import unknown_names
from pdd_operator.vllm.hf_cache import hub_cache, resolves_to_snapshot, snapshot
from pdd_operator.vllm.kv_cache_dtypes import width as kv_cache_width
from pdd_operator.vllm.model_config import KVGeometry, kv_geometry
from pdd_operator.vllm.must_match import fields_of
from pdd_operator.vllm.nixl_handshake_wire import unreadable_reply
from pdd_operator.vllm.quantization_floor import min_capability
from pdd_operator.vllm.transfer_mode import TRANSFER_MODE_OPTION_SINCE, invalid_option
from pdd_operator.vllm.versions import Version, fmt

#: The first release with the NIXL compatibility hash (``compute_nixl_compatibility_hash``, checked in
#: ``_nixl_handshake``): absent from v1/nixl_connector.py in the 0.11.0, 0.11.1 and 0.12.0 wheels, present in 0.13.0.
HASH_SINCE = (0, 13, 0)


def hash_enforced(pair: PDPair) -> bool:
    """The engine that runs the NIXL handshake compares the compatibility hashes: vLLM's ``_nixl_handshake``
    (0.13-0.33) raises on a mismatch only where that engine's ``kv_connector_extra_config.enforce_handshake_compat``
    is not false (default true; facts section 1.4). The decode dials the prefill in pull mode; in push mode both
    dial each other (the prefill handshakes the decode's side channel to write, vllm nixl push_worker.py), so there
    either one enforcing refuses the pair."""
    initiators = pair.roles if pair.push else (pair.decode,)
    return any(str(r.extra.get("enforce_handshake_compat", True)).lower() != "false" for r in initiators)


def hashed(pair: PDPair) -> bool:
    """False when the pair's handshake compares no hash: a known vLLM release before :data:`HASH_SINCE`, or the
    check turned off (:func:`hash_enforced`). A setting that differs only in how it is written (the ``--model``
    string, ``auto`` against ``bfloat16``) then passes, so its rule can only warn."""
    return (pair.version is None or pair.version >= HASH_SINCE) and hash_enforced(pair)


def _no_hash(pair: PDPair) -> str:
    """Why the handshake compares no hash here (for :func:`hashed` false), as a sentence."""
    if not hash_enforced(pair):
        return ("enforce_handshake_compat is false on the engine that runs the NIXL handshake, so it does not "
                "compare the compatibility hashes.")
    return f"vLLM {fmt(pair.version)} has no NIXL compatibility hash (from 0.13.0), so the handshake does not refuse it."


def _differ(pair: PDPair, value: Callable[[RoleConfig], object], what: str, fix: str,
            hash_only: bool = False) -> list[Violation]:
    """A finding when ``value`` differs between the roles; ``hash_only``: only the compatibility hash tells the
    two apart (a warning before :data:`HASH_SINCE`)."""
    p, d = value(pair.prefill), value(pair.decode)
    if p == d:
        return []
    if hash_only and not hashed(pair):
        return [(f"{what} differs: prefill {p!r}, decode {d!r}. {_no_hash(pair)} The transfer works only where "
                 "both sides still lay out the same KV.", fix, "warning")]
    return [(f"{what} differs: prefill {p!r}, decode {d!r}.", fix)]


_EAGLE = {"eagle", "eagle3", "mtp", "dflash", "dspark"}


def _eagle_settings(r: RoleConfig) -> tuple | None:
    """(method, draft model, revision) of an EAGLE-family ``--speculative-config``, else ``None``. A model-type
    method (``qwen3_next_mtp``, ``deepseek_mtp``: every name of vllm/config/speculative.py ``MTPModelTypes`` ends in
    ``_mtp``) is read as the ``mtp`` that ``SpeculativeConfig.__post_init__`` rewrites it to ("method ... is
    deprecated and replaced with mtp", 0.32.0 wheel), so the hash compares it as mtp."""
    spec = r.speculative or {}
    method = spec.get("method")
    if isinstance(method, str) and method.endswith("_mtp"):
        method = "mtp"
    if method not in _EAGLE:
        return None
    return method, spec.get("model"), spec.get("revision")

@rule(
    id="vllm-version-mismatch", family="vllm-version-mismatch", severity="error",
    fields=fields_of("vllm_version"),
    source=("vllm/distributed/kv_transfer/kv_connector/v1: compute_nixl_compatibility_hash factor vllm_version = "
            "vllm.__version__ (nixl_connector.py 0.13.0 line 178, 0.19.1 line 223; nixl/metadata.py 0.20.0 line 105, "
            "0.33.0 line 188, 0.34.0 line 191; read in the wheels and sdists 0.13.0-0.34.0); the handshake reply's wire format "
            "(NixlAgentMetadata up to 0.12.0, NixlHandshakePayload from 0.13.0, their required fields read in the "
            "sdists 0.9.0-0.34.0: pdd_operator.vllm.nixl_handshake_wire); no hash in 0.11.0-0.12.0, or "
            "enforce_handshake_compat false on the engine that runs the handshake (_nixl_handshake): a warning "
            "where the reply still decodes"),
)
def check_version_match(pair: PDPair) -> list[Violation]:
    """Prefill and decode run the same vLLM version.

    An error where the engine that dials the handshake (the decode; in push mode both) cannot decode the other's
    reply (:func:`~pdd_operator.vllm.nixl_handshake_wire.unreadable_reply`: a release before 0.13.0 against one from
    0.13.0, or two releases whose ``NixlAgentMetadata`` required fields differ where no hash check comes first), or
    where the compatibility hash (0.13+) refuses the pair; a warning where neither is established.
    """
    p, d = pair.prefill.version_text, pair.decode.version_text
    if p is None or d is None or p == d:
        return []
    fix = "Run the same engine image on both roles."
    dialers = ((pair.decode, pair.prefill), (pair.prefill, pair.decode)) if pair.push else ((pair.decode, pair.prefill),)
    for dialer, listener in dialers:
        enforced = str(dialer.extra.get("enforce_handshake_compat", True)).lower() != "false"
        why = unreadable_reply(dialer.version, listener.version, inner=not enforced)
        if why:
            return [(f"vLLM versions differ: prefill {p}, decode {d}; {why}.", fix)]
    if not hashed(pair):
        return [(f"vLLM versions differ: prefill {p}, decode {d}. {_no_hash(pair)} Whether the two releases' agent "
                 "metadata and KV layouts still agree was not established.", fix, "warning")]
    return [(
        f"vLLM versions differ: prefill {p}, decode {d}. The NIXL handshake hashes the exact version string "
        "and refuses the pair (0.13+).",
        fix,
    )]


@rule(
    id="model-mismatch", family="model-mismatch", severity="error",
    fields=fields_of("model"),
    source=("vllm nixl compute_nixl_compatibility_hash factor model (v1/nixl_connector.py 0.13.0 l.145, nixl/"
            "metadata.py 0.20.0 l.71, 0.28.0 l.126, 0.33.0 l.146; 0.13.0-0.33.0, read in the "
            "wheels); no hash in 0.9.0-0.12.0, or enforce_handshake_compat false on the engine that runs the handshake "
            "(_nixl_handshake): a warning, but an error where both ids are known checkpoints whose KV layouts differ "
            "(pdd_operator.vllm.model_config.kv_geometry): the block-length asserts (nixl_connector.py 0.9.2 l.753/761, "
            "0.10.0 l.767/775, 0.11.0 l.979-1000, 0.12.0 l.1566-1583) or, from 0.11.0, the region-count assert "
            "(0.11.0 l.1023, 0.12.0 l.1587, nixl/worker.py 0.20.0 l.1520, base_worker.py 0.34.0 l.3018). "
            "Dynamo's worker replaces a Hub id by its cache snapshot "
            "path before vLLM reads it (components/src/dynamo/vllm/main.py fetch_llm): an id against that path is a "
            "warning (equal at one revision); docs/features/nixl_connector_compatibility.md 'What must match' (l.74 in "
            "0.20.0, l.76 from 0.28.0); secondary: seed 000 section 2"),
    needs=("--model",),
)
def check_model_match(pair: PDPair) -> list[Violation]:
    """Prefill and decode serve the identical --model string (as vLLM receives it).

    Where no compatibility hash runs (before 0.13.0, or ``enforce_handshake_compat`` false), two strings are an error
    only where both name known checkpoints whose KV layouts vLLM's handshake or reads refuse
    (:func:`_layouts_refused`), else a warning: the strings alone do not show the layouts (a local path, a copy of
    one checkpoint under two names)."""
    fix = "Pass the identical --model string on both roles (the handshake hashes it as written)."
    for a, b in ((pair.prefill, pair.decode), (pair.decode, pair.prefill)):
        snap = snapshot(b.model)
        cache = hub_cache(a.env)
        # a cache directory not in the files (HF_HOME from a Secret) may be the snapshot's: the same warning
        if (snap and resolves_to_snapshot(a.launcher, a.model) and snap.repo_id == a.model
                and (cache in (None, snap.cache) or unknown_names(cache))):
            return [(f"{a.role} passes the Hub id {a.model!r}, which {a.launcher} replaces by its snapshot in the Hub "
                     f"cache before vLLM starts; {b.role} passes the snapshot path {b.model!r}. vLLM hashes the "
                     f"path, so the two match only while the id's current revision is {snap.revision!r} (and the "
                     "cache directory is the same); when the Hub moves on, the handshake refuses the pair.",
                     f"Pass the snapshot path {b.model!r} on both roles (or the id on both).", "warning")]
    if pair.prefill.model != pair.decode.model and not hashed(pair) and (why := _layouts_refused(pair)):
        return [(f"The --model string differs: prefill {pair.prefill.model!r}, decode {pair.decode.model!r}. "
                 f"{_no_hash(pair)} But the two checkpoints lay out different KV: {why}.",
                 "Serve the same checkpoint on both roles.")]
    return _differ(pair, lambda r: r.model, "The --model string", fix, True)


#: The first release whose NIXL handshake asserts that the remote's KV region count equals the local layer count
#: (``assert len(nixl_agent_meta.kv_caches_base_addr) == len(self.block_len_per_layer)``: nixl_connector.py 0.11.0
#: l.1023, 0.12.0 l.1587, 0.13.0 l.1630, 0.16.0 l.1813; nixl/worker.py 0.20.0 l.1520; nixl/base_worker.py 0.25.0
#: l.1752, 0.30.0 l.2410, 0.34.0 l.3018 against its local regions). 0.9.x-0.10.x compare one block length only
#: (nixl_connector.py 0.9.2 l.753 and l.761, 0.10.0 l.767 and l.775).
LAYER_COUNT_CHECKED_SINCE = (0, 11, 0)


def _layouts_refused(pair: PDPair) -> str | None:
    """Why vLLM refuses a pair whose two ``--model`` checkpoints are both known
    (:func:`~pdd_operator.vllm.model_config.kv_geometry`) and lay out different KV, where no compatibility hash
    runs, or ``None`` where they are not both known or vLLM's asserts would pass (same per-layer width and, before
    :data:`LAYER_COUNT_CHECKED_SINCE`, a decode with no more layers than the prefill: it then reads the prefill's
    first layers, a wrong answer the rule can only warn of). Per-layer width: the block length a worker registers is
    ``block_size x per-rank width x dtype bytes`` (per-rank width: ``max(1, KV heads // TP) x head size``, the MLA
    latent whole), and the handshake accepts the prefill's where it equals the decode's times ``tp_ratio`` or, for
    replicated KV (0.11+), the decode's own; widths that meet neither are refused (:func:`_rank_widths_refused`)."""
    p, d = kv_geometry(pair.prefill.model), kv_geometry(pair.decode.model)
    if p is None or d is None or p == d:
        return None
    shapes = f"prefill {p.describe()}, decode {d.describe()}"
    if _rank_widths_refused(p, d, pair.tps):
        return (f"{shapes}; the handshake asserts the prefill's block length against the decode's for its TP ratio "
                "(nixl_connector.py 0.9.2 l.753/761, 0.10.0 l.767/775, 0.11.0 l.979-1000, 0.12.0 l.1566-1583) and "
                "the widths differ")
    if p.layers == d.layers or (pair.version is not None and pair.version < LAYER_COUNT_CHECKED_SINCE
                                and d.layers < p.layers):
        return None
    if pair.version is not None and pair.version < LAYER_COUNT_CHECKED_SINCE:
        return (f"{shapes}; vLLM {fmt(pair.version)} checks no layer count, and the decode's reads index KV regions "
                "past the prefill's (_get_block_descs_ids over the decode's own num_regions, nixl_connector.py 0.9.2 "
                "l.1053-1080), which its NIXL agent never registered")
    return (f"{shapes}; the handshake asserts the prefill's region count equals the decode's layer count "
            "(nixl_connector.py 0.11.0 l.1023, 0.12.0 l.1587; nixl/worker.py 0.20.0 l.1520; base_worker.py 0.34.0 "
            "l.3018)")


def _rank_widths_refused(p: KVGeometry, d: KVGeometry, tps: tuple[int, int] | None) -> bool:
    """Whether the per-rank KV widths of prefill ``p`` and decode ``d`` at TP sizes ``tps`` (prefill, decode) fail
    every block-length relation vLLM's handshake accepts: ``remote == local x tp_ratio`` (tp_ratio = decode TP //
    prefill TP; nixl_connector.py 0.9.2 l.761, 0.10.0 l.775, 0.12.0 l.1577-1580) and, for replicated KV or MLA,
    ``remote == local`` (0.11.0 l.979, 0.12.0 l.1566-1570). A per-rank width is ``max(1, KV heads // TP) x head
    size`` (vLLM's ``ModelConfig.get_num_kv_heads``), the MLA latent whole. Unknown TP: never refused. Pure."""
    if tps is None or min(tps) < 1:
        return False

    def per_rank(g: KVGeometry, tp: int) -> int:
        return sum(g.latent) if g.latent else max(1, (g.kv_heads or 0) // tp) * (g.head_size or 0)

    remote, local = per_rank(p, tps[0]), per_rank(d, tps[1])
    return remote not in (local, local * max(1, tps[1] // tps[0]))


def _dtype(r: RoleConfig) -> str:
    """The role's ``--dtype`` with vLLM's aliases resolved (``auto`` when not given)."""
    return dtype_name(r.dtype)


@rule(
    id="dtype-mismatch", family="model-mismatch", severity="error",
    fields=fields_of("dtype"),
    needs=("--dtype",),
    source=("vllm nixl compute_nixl_compatibility_hash (nixl/metadata.py 0.20.0 l.71, 0.34.0 l.149) factor dtype = "
            "str(model_config.dtype), "
            "the resolved torch dtype (vllm/config/model.py _get_and_verify_dtype / _resolve_auto_dtype, read in "
            "0.9.0-0.34.0: half/float16 and float/float32 are one dtype; auto is config.json's torch_dtype, float32 "
            "-> float16 before 0.10 and the platform's preferred dtype after; vllm/dtype.py): where the checkpoint's "
            "dtype is known (config.json, a well-known id) auto is resolved as on a GPU with bfloat16 and judged like "
            "an explicit value; where it is not, auto against float16/bfloat16 is a warning naming both; auto never "
            "gives float32 (an error); no hash (before 0.13, or enforce_handshake_compat off) and equal element "
            "width: a warning, since the block-byte assert passes; docs/features/nixl_connector_compatibility.md 'What "
            "must match' (l.74 in 0.20.0, l.76 from 0.28.0); secondary: seed 000 section 2"),
)
def check_dtype_match(pair: PDPair) -> list[Violation]:
    """Prefill and decode load the model in the same torch dtype (--dtype, as vLLM resolves it)."""
    fix = "Use the same --dtype on both roles."
    p, d = _dtype(pair.prefill), _dtype(pair.decode)
    if p == d:
        return []
    width = {"float32": 4}
    if "auto" not in (p, d):
        return _differ(pair, _dtype, "--dtype", fix, hash_only=width.get(p, 2) == width.get(d, 2))
    auto_role, other = (pair.prefill, d) if p == "auto" else (pair.decode, p)
    resolved = auto_dtype(pair.checkpoint_dtype, pair.version)
    if resolved is not None:
        caveat = f" ({BF16_CAVEAT})" if resolved == "bfloat16" and other == "float16" else ""
        return _differ(pair, lambda r: resolved if _dtype(r) == "auto" else _dtype(r),
                       f"--dtype (auto resolves to {resolved} from the checkpoint's torch_dtype "
                       f"{pair.checkpoint_dtype}{caveat})", fix, hash_only=width.get(resolved, 2) == width.get(other, 2))
    if other == "float32":  # auto downcasts float32 checkpoints: it never gives float32 on CUDA or x86/aarch64 CPUs
        return _differ(pair, _dtype, "--dtype (auto never resolves to float32)", fix)
    return [(f"--dtype differs as written: {auto_role.role} 'auto', the other {other!r}. vLLM hashes the resolved "
             "torch dtype, and auto resolves from the checkpoint's config.json torch_dtype, which is not known here "
             f"(float32 and bfloat16 checkpoints give bfloat16, float16 ones float16); the pair is refused at the "
             f"handshake wherever that is not {other}.",
             fix + " Or give the model's config.json (pdd check --model-config) to have auto resolved.", "warning")]


@rule(
    id="kv-cache-dtype-mismatch", family="kv-cache-dtype-mismatch", severity="error",
    fields=fields_of("cache_dtype"),
    needs=("--kv-cache-dtype",),
    source=("vllm nixl compute_nixl_compatibility_hash factor cache_dtype (nixl/metadata.py 0.20.0 l.71, 0.33.0 "
            "l.146), the raw string "
            "(0.13.0-0.33.0, read in the wheels; not compared where enforce_handshake_compat is false on the engine that "
            "runs the handshake); no hash in 0.9.1-0.12.0, whose handshake asserts equal KV block "
            "bytes (v1/nixl_connector.py add_remote_agent, _validate_remote_agent_handshake in 0.12.0): an fp8 "
            "cache against a 16/32-bit one at one block size is an error there, other differences a warning; 0.9.0 "
            "(sdist) neither exchanges nor asserts the block length, and its add_remote_agent reads the prefill's "
            "blocks with the decode's own block_len (v1/nixl_connector.py l.538-575): the same error there; vLLM docs/"
            "features/nixl_connector_compatibility.md 'What must match' and 'Quantized KV cache' (l.98 in 0.20.0, "
            "l.126 in 0.31.0-0.33.0); the string as the model's config hook leaves it (VllmConfig.__post_init__ runs "
            "MODELS_CONFIG_MAP's verify_and_update_config first: DeepseekV32ForCausalLM bfloat16 -> auto from 0.11.0 "
            "and fp8* -> fp8_ds_mla in 0.11.0-0.17.1 (auto too in 0.11.0 only, 0.11.1 l.478-479), "
            "MistralLarge4ForCausalLM bfloat16 -> auto from 0.34.0; "
            "vllm/model_executor/models/config.py 0.11.0 l.418-425, 0.18.0 l.39-41, 0.34.0 l.91-93 and l.151-152: "
            "pdd_operator.vllm.dtype.hooked_kv_cache_dtype); GPU-dependent hooks (GlmMoeDsaForCausalLM auto -> "
            "fp8_e4m3 on CUDA SM10x from 0.32.0, 0.34.0 l.163-175; Glm5Next auto -> fp8 there from 0.33.0, 0.34.0 "
            "l.184-201) judged by the GPU product a node label pins, else a warning: pdd_operator.vllm.dtype."
            "gpu_hooked_kv_cache_dtype; secondary: seed 000 sections 2 and 6"),
)
def check_kv_cache_dtype_match(pair: PDPair) -> list[Violation]:
    """Prefill and decode use the same --kv-cache-dtype.

    From 0.13.0 the string is hashed as the model's config hook leaves it (DeepSeek-V3.2 turns ``bfloat16`` into
    ``auto``: :func:`~pdd_operator.vllm.dtype.hooked_kv_cache_dtype`), so any other difference is refused at the
    handshake; where the release is unknown and the hook's releases disagree, a warning. Before it, the
    handshake compares the KV block length in bytes (:data:`BLOCK_BYTES_CHECKED_SINCE`): an fp8 cache on one
    role and a 16/32-bit one on the other at equal block sizes fails there; other differences (``auto`` against
    ``bfloat16``) may pass, hence a warning. 0.9.0 asserts nothing but reads the prefill's blocks with the decode's
    own block length, so the same width difference corrupts the decode's KV there: also an error. One block size:
    both roles write the same ``--block-size`` (or neither
    does), or the sizes the engines run with agree: ``--block-size`` where given, else vLLM's default where its code
    pins it (a decode's explicit 16 against a CUDA prefill's unset
    size on 0.10.x is one block size; :func:`~pdd_operator.compat.rules.block_size.engine_block_sizes`).
    Where a config hook rewrites ``auto`` on some GPUs only (GLM-5 on SM10x: :func:`_gpu_decides`), roles pinned to
    one compute capability by a GPU product label are judged by what the hook makes of them there; otherwise a
    difference the hook could close is a warning that the GPU decides. Where the checkpoint's architecture is not
    known but its name reads as sparse MLA (a local path such as ``/models/DeepSeek-V3.2-NVFP4``), a difference
    DeepSeek-V3.2's hook would fold (two ``fp8*`` spellings before 0.18.0, ``bfloat16`` against ``auto``) is a
    warning: :func:`_hook_may_close`."""
    fix = "Use the identical --kv-cache-dtype string on both roles (auto and bfloat16 do not pair)."
    p, d = _kv_cache_dtype(pair, pair.prefill), _kv_cache_dtype(pair, pair.decode)
    other = d if p == "auto" else p
    if ("auto" in (p, d) and other in MODELOPT_KV_MAPPED_SINCE and pair.checkpoint_dtype is None
            and (pair.version is None or pair.version >= MODELOPT_KV_MAPPED_SINCE[other])):
        return [(f"--kv-cache-dtype differs as written: prefill {p!r}, decode {d!r}. From vLLM "
                 f"{fmt(MODELOPT_KV_MAPPED_SINCE[other])} auto becomes "
                 f"{other} for a ModelOpt checkpoint whose config.json names that KV cache quantization "
                 "(resolve_kv_cache_dtype_string), and stays 'auto' (refused at the handshake) for any other; the "
                 "checkpoint's config.json is not known here.",
                 fix + " Or give the model's config.json (pdd check --model-config) to have auto resolved.", "warning")]
    sizes = engine_block_sizes(pair)
    one_size = pair.prefill.block_size == pair.decode.block_size or (sizes[0] is not None and sizes[0] == sizes[1])
    if p != d and not hashed(pair) and _kv_width(p) != _kv_width(d) and one_size \
            and pair.version is not None and pair.version >= BLOCK_BYTES_CHECKED_SINCE:
        return [(f"--kv-cache-dtype differs: prefill {p!r}, decode {d!r}. The handshake compares no NIXL "
                 f"compatibility hash here, but vLLM {fmt(pair.version)}'s handshake asserts that prefill's KV "
                 f"block length in bytes equals decode's ('... and same dtype'); {_kv_width(p)} against "
                 f"{_kv_width(d)} elements at one block size differ, so decode fails on its first handshake with "
                 "this prefill.", fix)]
    if p != d and not hashed(pair) and _kv_width(p) != _kv_width(d) and one_size \
            and pair.version is not None and pair.version < BLOCK_BYTES_CHECKED_SINCE:
        return [(f"--kv-cache-dtype differs: prefill {p!r}, decode {d!r}. vLLM {fmt(pair.version)}'s handshake "
                 "exchanges no block length and asserts none: the decode registers the prefill's blocks with its own "
                 f"block length (add_remote_agent), {_kv_width(d)} against the prefill's {_kv_width(p)} elements at "
                 "one block size, so every read takes another block's bytes in another dtype and the decode computes "
                 "on corrupted KV.", fix)]
    if p != d and (closed := _hook_may_close(pair)) is not None:
        return [(f"--kv-cache-dtype differs as written: prefill {p!r}, decode {d!r}. The model is a sparse-MLA "
                 f"checkpoint by its name ({pair.model.source}), but its config.json architecture is not known here: "
                 f"if it is {DSV32_ARCHITECTURE}, vLLM's config hook makes both {closed!r} before the handshake "
                 "hashes them and the pair runs; for another architecture (GLM-5's GlmMoeDsaForCausalLM keeps fp8 "
                 "spellings apart) the handshake refuses it.",
                 fix + " Or give the model's config.json (pdd check --model-config) to have the hook read.", "warning")]
    hooked = any(_kv_cache_dtype(pair, r) != _kv_cache_dtype(pair, r, hook=False) for r in pair.roles)
    what = (f"--kv-cache-dtype (as {pair.hf_architecture}'s config hook leaves it, which the handshake hashes)"
            if hooked else "--kv-cache-dtype (hashed as the raw string)")
    old_p, old_d = (_kv_cache_dtype(pair, r, version=DSV32_HOOK_SINCE) for r in pair.roles)
    if pair.version is None and (old_p == old_d) != (p == d):
        raw_p, raw_d = (_kv_cache_dtype(pair, r, hook=False) for r in pair.roles)
        return [(f"--kv-cache-dtype differs as written: prefill {raw_p!r}, decode {raw_d!r}. {pair.hf_architecture}'s "
                 f"config hook makes them {p!r} and {d!r} on the newest releases but {old_p!r} and {old_d!r} on "
                 f"0.11-0.17 (fp8* -> fp8_ds_mla until 0.17, auto too in 0.11.0; from 0.18.0 it maps only bfloat16 to "
                 "auto); the handshake refuses the pair where they "
                 "differ, and the vLLM version is not known here.", fix, "warning")]
    if hashed(pair) and (gpu := _gpu_decides(pair, p, d, fix)) is not None:
        return gpu
    return _differ(pair, lambda r: _kv_cache_dtype(pair, r), what, fix, True)


def _gpu_kv_cache_dtypes(pair: PDPair, r: RoleConfig, value: str) -> tuple[set[str], int | None]:
    """The ``cache_dtype`` values role ``r`` may hash once a GPU-dependent config hook ran
    (:func:`~pdd_operator.vllm.dtype.gpu_hooked_kv_cache_dtype`: GLM-5's ``auto`` -> ``fp8_e4m3`` on SM10x), from
    ``value`` (:func:`_kv_cache_dtype`), and the compute capability major its GPU product label pins (``None``: not
    pinned). One value where the hook does not apply, the role runs ROCm, or its GPU is pinned; both where it is not."""
    family = pair.model.architecture  # a hybrid MLA (GLM-5.3-Flash) does not say whether it has index_topk: unknown
    hooked = gpu_hooked_kv_cache_dtype(value, pair.hf_architecture, pair.version,
                                       None if family in (None, "hybrid-ssm") else family == "sparse-mla")
    cap = pinned_gpu_major(r.nodes)
    if hooked is None or gpu_platform(r.image, r.resources) == "rocm":
        return {value}, cap
    if cap is None:
        return {value, hooked}, cap
    return ({hooked} if cap == GPU_HOOK_CAPABILITY else {value}), cap


def _gpu_decides(pair: PDPair, p: str, d: str, fix: str) -> list[Violation] | None:
    """The finding where a GPU-dependent config hook decides whether the hashed ``cache_dtype`` strings ``p`` and
    ``d`` (as :func:`_kv_cache_dtype` reads them) match, or ``None`` where it decides nothing (then the strings are
    compared as they are).

    Both roles' GPUs pinned to one compute capability (node labels, :func:`_gpu_kv_cache_dtypes`): judged by what
    the hook makes of them there (equal: no finding; different: the handshake's hash refuses the pair, an error).
    A role not pinned whose hook could make the strings equal or different: a warning that the GPU decides."""
    ps, pcap = _gpu_kv_cache_dtypes(pair, pair.prefill, p)
    ds, dcap = _gpu_kv_cache_dtypes(pair, pair.decode, d)
    if len(ps) == len(ds) == 1 and ps == {p} and ds == {d}:
        return None  # no hook moved a value: compared as written
    if len(ps) == len(ds) == 1:
        (hp,), (hd,) = ps, ds
        if hp == hd:
            return []
        return [(f"--kv-cache-dtype on the GPUs the roles are pinned to: prefill {hp!r} (compute capability {pcap}.x), "
                 f"decode {hd!r} (compute capability {dcap}.x): {pair.hf_architecture}'s config hook turns 'auto' into "
                 f"an FP8 KV cache on SM10x GPUs only (vllm/model_executor/models/config.py), and the NIXL "
                 "compatibility hash reads the result, so the handshake refuses the pair.",
                 fix + " Or run both roles on GPUs of one compute capability family.")]
    if p != d and ps & ds:
        return [(f"--kv-cache-dtype differs as written: prefill {p!r}, decode {d!r}. {pair.hf_architecture}'s config "
                 f"hook turns 'auto' into {sorted((ps - {p}) | (ds - {d}))[0]!r} on CUDA GPUs of compute capability 10.x "
                 "(B200, B300, GB200) and leaves it elsewhere, so the GPU decides whether the hashed strings match; the "
                 "GPU is not pinned by a node label (nvidia.com/gpu.product) here.",
                 fix + " Or pin both roles to one GPU product (nodeSelector nvidia.com/gpu.product).", "warning")]
    return None


#: The architecture whose config hook folds the fp8 spellings into one (and bfloat16 into auto): DeepSeek-V3.2's.
DSV32_ARCHITECTURE = "DeepseekV32ForCausalLM"


def _hook_may_close(pair: PDPair) -> str | None:
    """The one ``cache_dtype`` DeepSeek-V3.2's config hook (:func:`~pdd_operator.vllm.dtype.hooked_kv_cache_dtype`)
    would make of both roles' written values on the pair's release, where the checkpoint's config.json architecture
    is not known but its name reads as sparse MLA (a local path such as ``/models/DeepSeek-V3.2-NVFP4``:
    :attr:`PDPair.model`), so the hook may run; ``None`` where the architecture is known, the name is not sparse
    MLA, or the hook leaves them apart (vllm/model_executor/models/config.py 0.16.0 l.543-562: ``fp8*`` ->
    ``fp8_ds_mla``, ``bfloat16`` -> ``auto``)."""
    if pair.hf_architecture is not None or pair.model.architecture != "sparse-mla":
        return None
    p, d = (hooked_kv_cache_dtype(_kv_cache_dtype(pair, r, hook=False), DSV32_ARCHITECTURE, pair.version)
            for r in pair.roles)
    return p if p == d else None


def _kv_cache_dtype(pair: PDPair, r: RoleConfig, version: Version | None = None, hook: bool = True) -> str:
    """The role's ``cache_dtype`` as the handshake hashes it: the raw string, ``auto`` where not given (``auto`` is
    not the model dtype), or from 0.14.0 what ``auto`` becomes for a ModelOpt checkpoint with a KV cache
    quantization (:func:`~pdd_operator.vllm.dtype.checkpoint_kv_cache_dtype`, where its config.json is known); then,
    with ``hook``, what the model's config hook makes of it (:func:`~pdd_operator.vllm.dtype.hooked_kv_cache_dtype`:
    DeepSeek-V3.2's ``bfloat16`` -> ``auto``), on ``version`` (default: the pair's, :attr:`PDPair.version`)."""
    version = version or pair.version
    raw = r.kv_cache_dtype or "auto"
    if raw == "auto" and (resolved := auto_kv_cache_dtype(pair.checkpoint_kv_cache_dtype, version)):
        raw = resolved
    return hooked_kv_cache_dtype(raw, pair.hf_architecture, version) if hook else raw


#: The first release whose NIXL handshake was read to assert equal KV block lengths in bytes: v1/nixl_connector.py
#: ``add_remote_agent`` (0.9.1, 0.9.2, 0.10.0, 0.10.1.1, 0.10.2, 0.11.0, 0.11.1: ``block_len == self.block_len *
#: tp_ratio`` "... and same dtype" (0.9.1-0.10.0: ``self.block_len == block_len`` for MLA), and
#: ``block_len_per_layer == block_lens`` for MLA or replicated KV) and ``_validate_remote_agent_handshake`` (0.12.0).
#: 0.9.0's add_remote_agent (read in its wheel and sdist) has no block-length assert and no block length in
#: NixlAgentMetadata (v1/nixl_connector.py 0.9.0 l.47-55): it builds the remote descriptors with the decode's own
#: ``block_len`` (l.565-575), so KV of another element width is read at the wrong offsets and lengths, silently.
BLOCK_BYTES_CHECKED_SINCE = (0, 9, 1)


def _kv_width(kv_cache_dtype: str) -> str:
    """The width class of a ``--kv-cache-dtype`` value (:func:`pdd_operator.vllm.kv_cache_dtypes.width`): "1-byte"
    for the per-tensor-scaled fp8 formats, "16/32-bit" for ``auto`` (the model's --dtype, at least 2 bytes),
    ``float16`` and ``bfloat16``, and the value itself for a format with its own per-token size (``fp8_ds_mla``,
    the per-token-head, NVFP4, TurboQuant, Octave and UltraQuant formats)."""
    return kv_cache_width(kv_cache_dtype)


#: vLLM releases whose source was read for the attention-backend rule: they choose the backend from
#: --attention-backend / --attention-config only (VLLM_ATTENTION_BACKEND is ignored from 0.16.0:
#: :data:`~pdd_operator.vllm.attention_backends.BACKEND_ENV`) and hash attn_backend_name into the NIXL compatibility
#: hash (nixl/metadata.py compute_nixl_compatibility_hash). 0.26.0 and 0.32.0 first; the 0.18.0-0.24.0 sdists read for
#: set 28 (engine/arg_utils.py --attention-backend, attn_backend_name hashed in v1/nixl_connector.py 0.18-0.19 and
#: nixl/metadata.py 0.20-0.24) moved it back to 0.18.0.
_BACKEND_FLAG_SINCE = (0, 18, 0)
#: The releases whose default backend choice (vllm/platforms/cuda.py _get_backend_priorities) was read: the
#: one-sided case (:func:`_one_sided_backend`) predicts the other role's backend only from here. The non-MLA
#: priority lists read alike in 0.18.0, 0.19.0, 0.20.0, 0.21.0, 0.22.0, 0.23.0, 0.24.0, 0.25.0 and 0.26.0 (set 80;
#: 0.20.0 cuda.py lines 79-146 append TURBOQUANT, which a TurboQuant KV cache dtype selects, not ``auto``).
_DEFAULT_BACKEND_SINCE = (0, 18, 0)
# VLLM_ATTENTION_BACKEND: the NIXL handshake compares the backend names: ``assert nixl_agent_meta.attn_backend_name ==
# self.backend_name`` in add_remote_agent (v1/nixl_connector.py 0.9.1 line 674, 0.10.0 line 748, 0.10.2 line 901,
# 0.11.0 line 959, 0.12.0 line 1528), then the compatibility hash's attn_backend_name (0.13.0 line 187, 0.14.1
# line 200). 0.9.0 compares none, but its connector knows no FlashInfer layout at all (no ``_use_flashinfer`` in
# the 0.9.0 sdist's nixl_connector.py; vllm#19090 "allowed but broken"), and this rule has refused a differing
# variable there before set 80 as well. VLLM_ATTENTION_BACKEND chooses the backend where the release reads it
# (:func:`~pdd_operator.vllm.attention_backends.backend_env_read`: 0.9.0-0.14.1), so a difference is certain there;
# where the release ignores it (0.16.0 and later) a difference changes nothing and is not reported here (the
# env-var rules say the variable is unread); where that is unknown (0.15.x, an unknown version) it is a warning.


@rule(
    id="attention-backend-mismatch", family="model-mismatch", severity="error",
    fields=("spec.engine.env", "spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm nixl/metadata.py compute_nixl_compatibility_hash factor attn_backend_name, the backend chosen by "
            "--attention-backend / --attention-config (0.18.0-0.24.0, 0.26.0, 0.32.0: vllm/engine/arg_utils.py; envs.py has no "
            "VLLM_ATTENTION_BACKEND); VLLM_ATTENTION_BACKEND where the release reads it and compares backend names "
            "(0.9.1-0.14.1: add_remote_agent's assert, then the hash; vllm#23587, set 80); other versions: a warning; "
            "a backend named on one role only against vLLM's own choice per compute capability (platforms/cuda.py "
            "_get_backend_priorities, the backends' supports_compute_capability, 0.18.0-0.34.0: TRITON_ATTN on V100); "
            "a ROCm backend (ROCM_*) named against a CUDA engine, whose platforms/cuda.py picks none in 0.9.1-0.34.0"),
    needs=("--attention-backend", "--attention-config", "VLLM_ATTENTION_BACKEND"),
)
def check_attention_backend_match(pair: PDPair) -> list[Violation]:
    """Prefill and decode name the same attention backend (it sets the KV layout and is hashed)."""
    out: list[Violation] = []
    for what, value, certain in (
        ("--attention-backend", lambda r: r.attention_backend, pair.version is not None and pair.at_least(_BACKEND_FLAG_SINCE)),
        (BACKEND_ENV, lambda r: r.env.get(BACKEND_ENV), backend_env_read(pair.version)),
    ):
        if certain is False and what == BACKEND_ENV:
            continue
        p, d = value(pair.prefill), value(pair.decode)
        if p is None or d is None or _backend_key(p) == _backend_key(d) or "AUTO" in (str(p).upper(), str(d).upper()):
            continue
        where = "vLLM " + fmt(pair.version) if pair.version else "this vLLM (version unknown)"
        message = (f"{what} differs: prefill {p!r}, decode {d!r}. The attention backend decides the KV cache layout "
                   f"(FlashInfer keeps blocks first, FlashAttention K/V first) and is a factor of the NIXL "
                   f"compatibility hash; with two backends the handshake refuses the pair or the server crashes.")
        if not certain:
            message += f" Whether {where} reads {what} was not verified, so this is a warning."
        fix = fix_for(pair, "Set the same attention backend for both roles.",
                      f"Give the prefill and decode containers the same {what} (or leave it unset on both).")
        out.append((message, fix) if certain else (message, fix, "warning"))
    # "auto" is vLLM's own choice, as if unset (vllm/config/attention.py: "auto" or None selects automatically)
    named = [r for r in pair.roles if r.attention_backend and r.attention_backend.lower() != "auto"]
    if len(named) == 1:
        out.extend(_one_sided_backend(pair, named[0], pair.decode if named[0] is pair.prefill else pair.prefill))
    return out


def _backend_key(name: object) -> str:
    """A backend name as vLLM resolves it: upper-cased, and the V1 suffix of 0.9-0.10's names dropped
    (``FLASH_ATTN_VLLM_V1`` is the V1 engine's FLASH_ATTN: vllm/attention/selector.py 0.10.0 maps one to the other)."""
    return str(name).upper().removesuffix("_VLLM_V1")


def _one_sided_backend(pair: PDPair, named: RoleConfig, other: RoleConfig) -> list[Violation]:
    """A backend named on one role only: the other role runs vLLM's own choice for its GPU
    (:func:`~pdd_operator.vllm.attention_backends.default_backend_at`), which the handshake hashes as well.

    Judged for a non-MLA plain model (dense or MoE, no sliding window) with the ``auto`` KV cache dtype, a block size
    FlashAttention takes, CUDA, and a release whose flag and hash were read. Where the other role's pods pin GPUs of one
    compute capability (``nvidia.com/gpu.product``: V100 7.0, T4 7.5, A100 8.0, H100 9.0, B200 10.0, ...), vLLM's
    choice for that GPU decides: an error where it differs. Where no GPU is pinned, an error only where the named
    backend differs from vLLM's choice on every GPU vLLM runs the model on (:data:`~pdd_operator.vllm.attention_backends.
    CUDA_CAPABILITIES`: FLASH_ATTN from 8.x, FLASHINFER on 10.x, TRITON_ATTN on V100 and on T4 from 0.24.0; from
    7.5 only for FP8 weights, which no V100 loads: :func:`~pdd_operator.vllm.quantization_floor.min_capability`); where
    some GPU would pick the named one (TRITON_ATTN on a V100), a warning that says which. Otherwise a warning that the
    two may differ. A ROCm backend (:data:`ROCM_BACKEND_PREFIX`) named while the other role runs vLLM's CUDA platform
    is an error on every release and GPU: CUDA never picks one by itself. A backend the model cannot use at all is
    left to ``attention-backend-unsupported``."""
    x = named.attention_backend.upper()
    family = pair.model.architecture
    if backend_refusal(x, family):
        return []
    if x.startswith(ROCM_BACKEND_PREFIX) and gpu_platform(other.image, other.resources) == "cuda" and hashed(pair):
        return [(f"--attention-backend {named.attention_backend} is set on the {named.role} only; the {other.role} "
                 "runs vLLM's CUDA platform, whose own choice is never a ROCm backend (vllm/platforms/cuda.py names "
                 "none in any release 0.9.1-0.34.0; its priority lists hold FLASHINFER, FLASH_ATTN, TRITON_ATTN, "
                 "FLEX_ATTENTION and TurboQuant). attn_backend_name is a factor of the NIXL compatibility hash, so "
                 f"the handshake refuses the pair ({x} against a CUDA backend).",
                 fix_for(pair, "Run both roles on one GPU vendor, or name a backend both platforms have.",
                         f"Run the {other.role} on the {named.role}'s platform (the same GPU vendor and image), or "
                         "both on one vendor."))]
    cc = pinned_gpu_capability(other.nodes)
    head = pair.model.head_size
    unread = {name for name, _ in other.opaque} & {"--block-size", "--kv-cache-dtype"}
    plain = (family in ("dense", "moe") and not pair.model.sliding_window and backend_kind(x) is not None and not unread
             and other.kv_cache_dtype in (None, "auto") and (other.block_size is None or other.block_size % 16 == 0)
             and gpu_platform(other.image, other.resources) == "cuda"
             and (BACKEND_ENV not in other.env or backend_env_read(pair.version) is False)
             and (other.dtype or "auto").lower() not in ("float32", "float")
             and pair.version is not None and pair.at_least(_DEFAULT_BACKEND_SINCE))
    fix = fix_for(pair, "Name the same attention backend in both roles' extraArgs (or in neither).",
                  f"Give the {other.role} container the same --attention-backend {named.attention_backend} "
                  f"(or drop it from the {named.role}).")
    said = (f"--attention-backend {named.attention_backend} is set on the {named.role} only; the {other.role} names "
            "none, so vLLM picks its own")
    chosen = default_backend_at(cc, head, pair.version) if plain and cc is not None else None
    if chosen is not None:
        if chosen == x:
            return []
        return [(f"{said} for that GPU (compute capability {cc[0]}.{cc[1]}: {chosen} for this model, "
                 f"vllm/platforms/cuda.py _get_backend_priorities). attn_backend_name is a factor of the NIXL "
                 f"compatibility hash, so the handshake refuses the pair ({x} against {chosen}).", fix)]
    floor = min_capability(other.model or pair.prefill.model, dict(other.weight_flags or ()).get(
        "--quantization", dict(other.weight_flags or ()).get("-q")))
    runs_on = tuple(c for c in CUDA_CAPABILITIES if floor is None or c >= floor)
    everywhere = ({c: default_backend_at(c, head, pair.version) for c in runs_on}
                  if plain and cc is None and head is not None else {})
    whichever = ("whichever NVIDIA GPU it gets" if floor is None else
                 f"whichever NVIDIA GPU it gets (FP8 weights load only from compute capability {floor[0]}.{floor[1]}: "
                 "vllm/config/vllm.py refuses a quantization method below its get_min_capability)")
    if everywhere and None not in everywhere.values():
        picks = ", ".join(f"{b} on {'/'.join(f'{c[0]}.{c[1]}' for c, v in everywhere.items() if v == b)}"
                          for b in dict.fromkeys(everywhere.values()))
        if x not in everywhere.values():
            return [(f"{said}, which on vLLM {fmt(pair.version)} for this model (head size {head}) is {picks} "
                     f"(compute capability; vllm/platforms/cuda.py _get_backend_priorities), never {x}, {whichever}. "
                     "attn_backend_name is a factor of the NIXL compatibility hash, so the "
                     "handshake refuses the pair.", fix)]
        same = "/".join(f"{c[0]}.{c[1]}" for c, v in everywhere.items() if v == x)
        return [(f"{said}, which depends on its GPU: for this model on vLLM {fmt(pair.version)} it is {picks} "
                 f"(compute capability; vllm/platforms/cuda.py _get_backend_priorities). The {other.role}'s pods pin "
                 f"no GPU product ({GPU_PRODUCT_LABELS[0]} or another GPU or instance type label), so the pair "
                 f"works only on compute capability {same}; "
                 "elsewhere the two backends differ and, attn_backend_name being a factor of the NIXL compatibility "
                 "hash, the handshake refuses the pair.", fix, "warning")]
    return [(f"--attention-backend {named.attention_backend} is set on the {named.role} only; the {other.role} runs "
             "the backend vLLM picks by itself, which depends on its GPU and model (FLASH_ATTN on compute capability "
             "8.x/9.x, FLASHINFER on 10.x and TRITON_ATTN on V100 for most non-MLA models). The backend is a factor of "
             "the NIXL compatibility hash: if the two differ, the handshake refuses the pair.", fix, "warning")]


#: ROCm's own backend names (``AttentionBackendEnum``: ROCM_ATTN, ROCM_AITER_FA, ROCM_AITER_MLA, ...): vLLM's CUDA
#: platform never picks one by itself (vllm/platforms/cuda.py mentions no ROCm backend in 0.9.1, 0.10.1.1, 0.11.0,
#: 0.12.0, 0.18.0, 0.26.0 or 0.34.0; platforms/rocm.py ``_get_backend_priorities`` starts with ROCM_ATTN, 0.20.0
#: lines 357-388).
ROCM_BACKEND_PREFIX = "ROCM_"


def _chosen_backend(pair: PDPair, r: RoleConfig, capability: tuple[int, int]) -> str | None:
    """The backend vLLM picks by itself for role ``r`` on a GPU of compute ``capability``
    (:func:`~pdd_operator.vllm.attention_backends.default_backend_at` with the role's KV cache dtype), ``None`` where
    that is not decided here."""
    return default_backend_at(capability, pair.model.head_size, pair.version, r.kv_cache_dtype)


def _plain_default(pair: PDPair, r: RoleConfig) -> bool:
    """Role ``r`` runs vLLM's own backend choice and :func:`_chosen_backend` describes it: no backend named
    (``--attention-backend`` / ``--attention-config`` unset or ``auto``; ``VLLM_ATTENTION_BACKEND`` unset or unread),
    a non-MLA plain model (dense or MoE, no sliding window, not float32), CUDA, a block size FlashAttention takes."""
    return ((r.attention_backend is None or r.attention_backend.lower() == "auto")
            and (BACKEND_ENV not in r.env or backend_env_read(pair.version) is False)
            and pair.model.architecture in ("dense", "moe") and not pair.model.sliding_window
            and (r.dtype or "auto").lower() not in ("float32", "float")
            and (r.block_size is None or r.block_size % 16 == 0)
            and gpu_platform(r.image, r.resources) == "cuda")


@rule(
    id="attention-backend-gpu-default", family="model-mismatch", severity="error",
    fields=("spec.placement.gpuProduct", "spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm/platforms/cuda.py _get_backend_priorities (non-MLA: FLASHINFER first on compute capability 10.x, "
            "FLASH_ATTN first elsewhere; 0.18.0 lines 83-97, 0.19.0 lines 51-113, 0.20.0 lines 79-143, 0.34.0 lines "
            "148-173), FLASH_ATTN's fp8 KV cache only with FA3 on 9.x (fa_utils.py flash_attn_supports_fp8, 0.19.0 "
            "lines 157-161), and the NIXL compatibility hash's attn_backend_name (nixl_connector.py 0.19.0 lines "
            "189-250 and 1320-1332; nixl/metadata.py 0.20.0 lines 71-129, worker.py lines 420-430)"),
    since=_DEFAULT_BACKEND_SINCE,
    needs=("--attention-backend", "--attention-config", "VLLM_ATTENTION_BACKEND", "--kv-cache-dtype", "--block-size"),
    example="prefill nodeSelector nvidia.com/gpu.product NVIDIA-B200, decode NVIDIA-H100-80GB-HBM3, no "
            "--attention-backend, vLLM 0.19.0",
)
def check_gpu_default_backends(pair: PDPair) -> list[Violation]:
    """Prefill and decode that name no attention backend get the same one from vLLM on the GPUs they are pinned to.

    With no backend named, each engine runs the first valid backend of vLLM's priority list for its own GPU
    (:func:`~pdd_operator.vllm.attention_backends.default_backend_at`): FLASHINFER on compute capability 10.x (B200,
    GB200), FLASH_ATTN on 8.x and 9.x for the ``auto`` KV cache dtype; with an fp8 KV cache FLASH_ATTN only on 9.x
    (FA3), FLASHINFER elsewhere. The name is a factor of the NIXL compatibility hash, so two pinned GPUs whose
    choices differ make the handshake refuse the pair: an error (a warning where the hash is not enforced). Where one
    role's GPU is pinned (:func:`~pdd_operator.compat.gpu_product.pinned_gpu_capability`: GPU product, GKE
    accelerator, Karpenter and EKS labels, cloud instance types) and the other's is left to the scheduler (and no
    required pod affinity per node may hold it beside the pinned role), a warning where some GPU the other may get
    picks another backend.
    MLA models, ROCm, a named backend (``attention-backend-mismatch``) and other KV dtypes are not judged here.
    """
    if pair.mla or not all(_plain_default(pair, r) for r in pair.roles):
        return []
    caps = {r.role: pinned_gpu_capability(r.nodes) for r in pair.roles}
    if same_node(pair.prefill, pair.decode):  # pod affinity holds one on the other's node: one GPU
        known = {c for c in caps.values() if c is not None}
        caps = dict.fromkeys(caps, known.pop() if len(known) == 1 else None)
    fix = fix_for(pair, "Pin both roles to GPUs of one compute capability family, or name one attention backend "
                        "valid on both GPUs in both roles' extraArgs.",
                  "Place both roles on GPUs of one compute capability family (nodeSelector / nodeAffinity), or give "
                  "both containers the same --attention-backend, one valid on both GPUs (FLASHINFER runs on 7.5-12.1).")
    p_cap, d_cap = caps["prefill"], caps["decode"]
    if p_cap is not None and d_cap is not None:
        p, d = _chosen_backend(pair, pair.prefill, p_cap), _chosen_backend(pair, pair.decode, d_cap)
        if p is None or d is None or p == d:
            return []
        fp8 = sorted({r.kv_cache_dtype for r in pair.roles if r.kv_cache_dtype not in (None, "auto")})
        message = (f"Neither role names an attention backend, so vLLM {fmt(pair.version)} picks one per GPU: "
                   f"{p} on the prefill's (compute capability {p_cap[0]}.{p_cap[1]}), {d} on the decode's "
                   f"({d_cap[0]}.{d_cap[1]}) (vllm/platforms/cuda.py _get_backend_priorities"
                   + (f"; with --kv-cache-dtype {'/'.join(fp8)} FLASH_ATTN is valid only with FA3 on 9.x" if fp8 else "")
                   + "). attn_backend_name is a factor of the NIXL compatibility hash")
        if not hashed(pair):
            return [(f"{message}. {_no_hash(pair)} The two backends may still lay the KV cache out differently.",
                     fix, "warning")]
        return [(f"{message}, so the handshake refuses the pair.", fix)]
    pinned = [r for r in pair.roles if caps[r.role] is not None]
    if len(pinned) != 1:
        return []
    (held,) = pinned
    free = pair.decode if held is pair.prefill else pair.prefill
    if any(t.topology_key == HOSTNAME_LABEL for t in free.pod_affinity):
        return []  # a required pod affinity per node may hold it beside the pinned role (labels not all known here)
    mine = _chosen_backend(pair, held, caps[held.role])
    theirs = {c: _chosen_backend(pair, free, c) for c in CUDA_CAPABILITIES}
    other = sorted({b for b in theirs.values() if b is not None and b != mine})
    if mine is None or not other:
        return []
    where = ", ".join(f"{b} on {'/'.join(f'{c[0]}.{c[1]}' for c, v in theirs.items() if v == b)}" for b in other)
    return [(f"Neither role names an attention backend; the {held.role} is pinned to GPUs of compute capability "
             f"{caps[held.role][0]}.{caps[held.role][1]}, where vLLM {fmt(pair.version)} picks {mine}, but the "
             f"{free.role}'s GPU is left to the scheduler ({GPU_PRODUCT_LABELS[0]} or another GPU or instance type "
             f"label pins nothing), and there vLLM picks {where} (vllm/platforms/cuda.py _get_backend_priorities). "
             "On such a node the two attn_backend_name factors of the NIXL compatibility hash differ and the "
             "handshake refuses the pair: the GPU the scheduler picks decides.", fix, "warning")]


#: Why a ``NixlConnector`` with ``transfer_mode`` push has no known mode on an unknown release.
TRANSFER_MODE_OPTION_SINCE_TEXT = (f"NixlConnector reads kv_connector_extra_config transfer_mode from vLLM "
                                   f"{fmt(TRANSFER_MODE_OPTION_SINCE)} (factory.py; older releases pull)")


def described_mode(r: RoleConfig) -> str:
    """The connector as written, with its ``transfer_mode`` when one is given (for messages)."""
    value = r.extra.get("transfer_mode")
    return f"{r.connector} with transfer_mode {value!r}" if value is not None else str(r.connector)


@rule(
    id="transfer-mode-mismatch", family="transfer-mode-mismatch", severity="error",
    fields=fields_of("transfer_mode"),
    source=("vllm nixl compute_nixl_compatibility_hash factor transfer_mode (nixl/metadata.py: absent in 0.27.0; "
            "0.28.0 l.130 and l.184, 0.34.0 l.152 and l.205, default 'pull'); docs/features/"
            "nixl_connector_compatibility.md 'What must match', push vs pull (l.85 from 0.28.0); secondary: seed 000 "
            "section 2"),
)
def check_transfer_mode_match(pair: PDPair) -> list[Violation]:
    """Push and pull connectors never pair.

    The mode is the connector's (:func:`~pdd_operator.vllm.transfer_mode.transfer_mode`: from 0.34.0 a
    ``NixlConnector`` with ``transfer_mode`` push pushes, so two names may run one mode and one name two modes).
    A mode that cannot be told (an invalid ``transfer_mode``, judged by ``nixl-transfer-mode-invalid``) is left out;
    ``transfer_mode`` push on an unknown release is a warning.
    """
    p, d = pair.prefill.transfer_mode, pair.decode.transfer_mode
    if p == d or any(invalid_option(r.connector, r.extra) is not None for r in pair.roles):
        return []
    if p is None or d is None:
        return [(
            f"The transfer mode of {described_mode(pair.prefill)} (prefill) and {described_mode(pair.decode)} "
            f"(decode) cannot be told: {TRANSFER_MODE_OPTION_SINCE_TEXT} and the vLLM release is not known. If the "
            "two engines run different modes, the handshake refuses the pair.",
            "Name the mode by the connector: NixlConnector (pull) on both roles, or NixlPushConnector on both.",
            "warning")]
    caught = "the handshake refuses it" if pair.at_least((0, 28, 0)) else (
        "vLLM before 0.28 does not hash the transfer mode, so the handshake passes and transfers fail later")
    return [(
        f"Transfer modes differ: prefill {described_mode(pair.prefill)} ({p}), decode {described_mode(pair.decode)} "
        f"({d}); push and pull never pair ({caught}).",
        "Use NixlConnector on both roles, or NixlPushConnector on both.",
    )]


def hma_disabled(r: RoleConfig, version) -> bool:
    """The engine's effective ``disable_hybrid_kv_cache_manager`` under a KV connector (vllm/config/vllm.py):
    up to 0.21 a kv-transfer-config turns HMA off unless --no-disable-hybrid-kv-cache-manager is given; from
    0.22 HMA stays on for connectors that support it (NixlConnector) unless --disable-... is given, and goes off
    under a wrapper that turns it off by itself (:func:`~pdd_operator.compat.connector_hma.wrapper_hma_off`) where
    the role's image names its vLLM (the wrapper's own HMA handling ships with that image's Dynamo/KVBM, so an
    image of unknown contents is not claimed)."""
    if version < (0, 22, 0):
        return r.hma is not True
    return r.hma is False or (r.hma is None and r.version_text is not None and wrapper_hma_off(r) is not None)


@rule(
    id="hma-flag-mismatch", family="hma-flag-mismatch", severity="error",
    fields=fields_of("is_hma_enabled"),
    source=("vllm nixl/metadata.py compute_nixl_compatibility_hash: is_hma_enabled = not "
            "scheduler_config.disable_hybrid_kv_cache_manager (0.18+, every model); vllm/config/vllm.py decides the "
            "effective value (connector turns HMA off up to 0.21, keeps it on from 0.22)"),
    since=(0, 18, 0),
    needs=("--disable-hybrid-kv-cache-manager",),
)
def check_hma_flag_match(pair: PDPair) -> list[Violation]:
    """Both roles run with the same effective hybrid KV cache manager setting (it is hashed)."""
    p, d = (hma_disabled(r, pair.version) for r in pair.roles)
    if p == d:
        return []
    off = "prefill" if p else "decode"
    on = "decode" if p else "prefill"
    off_role = pair.prefill if p else pair.decode
    flag = ("--no-disable-hybrid-kv-cache-manager is given only on the " + on
            if pair.version < (0, 22, 0) else
            f"on the {off}, {wrapper_hma_off(off_role)}" if off_role.hma is None and wrapper_hma_off(off_role) else
            "--disable-hybrid-kv-cache-manager is given only on the " + off)
    return [(
        f"The hybrid KV cache manager is off on {off} and on on {on} ({flag}); vLLM {fmt(pair.version)} hashes "
        "is_hma_enabled for every model, so the NIXL handshake refuses the pair.",
        fix_for(pair, "Give the same HMA flag in spec.prefill.extraArgs and spec.decode.extraArgs.",
                "Give the prefill and decode containers the same HMA flag (both or neither)."),
    )]


@rule(
    id="spec-decode-mismatch", family="spec-decode-mismatch", severity="error",
    fields=fields_of("speculative_config")[:1],
    source=("vllm nixl metadata.py _get_speculative_compatibility_factors (0.28.0 l.83; 0.28+): method, draft "
            "model, revision, parallel_drafting (0.28.0-0.33.0 sdists), effective draft kv_cache_dtype (0.28.0-0.34.0 "
            "sdists); docs/features/nixl_connector_compatibility.md footnote 1 (l.60, 0.20.0-0.34.0); secondary: seed "
            "000 footnote (a)"),
    needs=("--speculative-config",),
)
def check_spec_decode_match(pair: PDPair) -> list[Violation]:
    """EAGLE-family speculative settings are equal on P and D.

    The method, draft model and revision; where those agree, also the other hashed factors
    (:func:`~pdd_operator.compat.spec_factors.hashed_factor_differences`: parallel_drafting in 0.28-0.33, the
    draft's effective KV cache dtype from 0.28).
    """
    p, d = _eagle_settings(pair.prefill), _eagle_settings(pair.decode)
    if p == d:
        return hashed_factor_differences(pair) if p is not None else []
    caught = "the handshake refuses it" if pair.at_least((0, 28, 0)) else (
        "vLLM before 0.28 does not check this: long prompts crash decode with illegal memory accesses")
    return [(
        f"EAGLE-family speculative settings differ: prefill {p}, decode {d}; the draft model's KV must match ({caught}).",
        "Use the same speculative method and draft model on both roles (ngram and suffix may differ).",
    )]


@rule(
    id="hybrid-spec-tokens-mismatch", family="spec-decode-mismatch", severity="warning",
    fields=("spec.prefill.numSpeculativeTokens", "spec.decode.numSpeculativeTokens"),
    source=("vllm model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator: the conv state has "
            "conv_kernel - 1 + num_spec rows; read in the 0.20.0-0.34.0 wheels, no release refuses a difference: "
            "num_speculative_tokens is no compatibility-hash factor (nixl/metadata.py "
            "_get_speculative_compatibility_factors hashes method, draft model, revision, KV dtype, aux layers; "
            "0.30-0.34), _validate_remote_agent_handshake skips the block-length check for Mamba layers (0.33, 0.34: "
            "'Mamba uses the ssm_sizes counterpart'), and _build_mamba_remote computes the conv offsets from the local "
            "conv rows (ssm_conv_transfer_utils.py, 0.22-0.34): decode reads the conv state with its own row count, "
            "wrong state and no error raised. A warning, not a refusal"),
    needs=("--speculative-config",),
)
def check_hybrid_spec_tokens(pair: PDPair) -> list[Violation]:
    """Hybrid SSM P and D use equal numSpeculativeTokens (else the conv state is read with the wrong row count)."""
    if not pair.hybrid_ssm or not any(r.speculative for r in pair.roles):
        return []
    p, d = pair.prefill.num_spec_tokens, pair.decode.num_spec_tokens
    if p == d:
        return []
    return [(
        f"num_speculative_tokens differ (prefill {p}, decode {d}); for hybrid SSM models it sets the conv-state "
        "rows (conv_kernel - 1 + num_speculative_tokens). vLLM does not refuse the pair (no hash factor, no handshake "
        "check of Mamba state sizes through 0.34), but the decode reads the prefill's conv state with its own row "
        "count, so transferred requests continue from a wrong state.",
        "Use the same numSpeculativeTokens on prefill and decode.",
    )]


@rule(
    id="speculative-incomplete", family="spec-decode-mismatch", severity="error",
    fields=("spec.speculative", "spec.prefill.numSpeculativeTokens", "spec.decode.numSpeculativeTokens"),
    source=("vllm/config/speculative.py SpeculativeConfig.__post_init__: with num_speculative_tokens and no model, "
            "mtp and dspark take the target model (dspark since 0.25.0: 'DeepSeek DSpark can ship the weights inside "
            "the target checkpoint'), ngram/suffix need none, and every other method raises 'num_speculative_tokens "
            "was provided but without speculative model' (0.25.0-0.33.0); without num_speculative_tokens a named "
            "draft model's config.json n_predict supplies it ('Default to max value defined in draft model config': "
            "config.py 0.9.0 l.2568, config/speculative.py 0.11.0 l.387, 0.20.0 l.655-661, 0.31.0 l.1485; "
            "v1/worker/gpu/spec_decode/speculator_config.py 0.34.0 l.275-282), else 'num_speculative_tokens must be "
            "provided with speculative model unless the draft model config contains an n_predict parameter' "
            "(config/speculative.py 0.20.0 l.870-875, 0.34.0 l.1653-1658)"),
    needs=("--speculative-config",),
    without_connector=True,
)
def check_speculative_complete(pair: PDPair) -> list[Violation]:
    """Speculative decoding names its draft model (unless the method takes the target's) and token count.

    Without ``num_speculative_tokens`` vLLM takes the count from a named draft model's config.json (``n_predict``,
    0.9.0-0.34.0) and fails only where that config has none: with a draft ``model`` in the config the missing count
    is a warning (the draft's config.json is not in the files), not a refusal."""
    out: list[Violation] = []
    for r in pair.roles:
        spec = r.speculative
        if not spec:
            continue
        if spec.get("method") in ("eagle", "eagle3", "draft_model", "dflash") and not spec.get("model"):
            out.append((f"{r.role}: speculative method {spec.get('method')} needs a draft model.",
                        "Set spec.speculative.draftModel."))
        if spec.get("num_speculative_tokens") is None and spec.get("model"):
            out.append((
                f"{r.role}: --speculative-config gives no num_speculative_tokens; vLLM takes it from the config.json "
                f"of the draft model {spec['model']!r} (n_predict) and fails at startup only if that config has none, "
                "which the files do not show.",
                fix_for(pair, f"Set spec.{r.role}.numSpeculativeTokens to the count the draft was trained for.",
                        f"Set num_speculative_tokens in the {r.role}'s --speculative-config to the count the draft "
                        "was trained for."),
                "warning",
            ))
        elif spec.get("num_speculative_tokens") is None:
            out.append((f"{r.role}: speculative decoding without num_speculative_tokens.",
                        f"Set spec.{r.role}.numSpeculativeTokens."))
    return out


#: Revisions that move (a branch): the same name may resolve to either pinned commit of the other role.
_MOVING_REVISIONS = {"main", "master", "head"}

#: The revision the Hugging Face Hub loads when none is given: huggingface_hub ``constants.DEFAULT_REVISION``,
#: which ``hf_hub_download`` and ``snapshot_download`` put in place of ``revision=None`` (huggingface_hub 0.x-1.x,
#: the client vLLM 0.9-0.33 downloads weights and config with).
HUB_DEFAULT_REVISION = "main"


def effective_revision(role: RoleConfig) -> str | None:
    """The revision ``role`` loads: its ``--revision``, or the Hub's default branch (:data:`HUB_DEFAULT_REVISION`)
    when unset. None when unset and the weights come from ModelScope (``VLLM_USE_MODELSCOPE``; its default branch is
    not the Hub's), so an unset revision is then compared as written."""
    if role.revision:
        return role.revision
    modelscope = role.env.get("VLLM_USE_MODELSCOPE", "").lower() in ("1", "true", "yes", "on")
    return None if modelscope else HUB_DEFAULT_REVISION


@rule(
    id="model-revision-mismatch", family="model-mismatch", severity="error",
    fields=fields_of("model_revision"),
    source=("vllm nixl/metadata.py compute_nixl_compatibility_hash hashes no revision (0.13-0.33; vllm PR #55776, "
            "open, proposes it): the handshake passes and decode continues from KV of other weights. With "
            "HF_HUB_OFFLINE=1, vllm/engine/arg_utils.py (seen in 0.26.0 and 0.32.0) replaces the model id by the "
            "revision's snapshot path, which the hash does include: the handshake refuses the pair "
            "(docs/conformance.md revision-refused). An unset revision is the Hub's main (huggingface_hub "
            "DEFAULT_REVISION in hf_hub_download / snapshot_download), so main against none is equal"),
    needs=("--revision",),
)
def check_model_revision_match(pair: PDPair) -> list[Violation]:
    """Prefill and decode load the same model revision (vLLM does not compare it).

    Two pinned revisions that differ load different weights: an error (wrong output on every request).
    When one side is unset or a branch (``main``) it may resolve to the other's commit: a warning. An unset revision
    is the Hub's ``main`` (:func:`effective_revision`), so ``--revision main`` against none is no difference.
    """
    p, d = pair.prefill.revision, pair.decode.revision
    if p == d or effective_revision(pair.prefill) == effective_revision(pair.decode):
        return []
    pinned = all(r and r.lower() not in _MOVING_REVISIONS for r in (p, d))
    offline = all(r.env.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on") for r in pair.roles)
    message = f"Model revisions differ: prefill {p or 'default (main)'}, decode {d or 'default (main)'}. " + (
        "With HF_HUB_OFFLINE=1 vLLM serves the model from each revision's snapshot directory and hashes that path, "
        "so the NIXL handshake refuses the pair and every request fails (typical mid rolling update)."
        if offline else
        "vLLM does not compare revisions, so the pair starts and decode continues from KV computed by other "
        "weights: wrong output, no error (typical mid rolling update)."
    )
    if not pinned:
        message += " One side follows a branch, which may resolve to the other side's commit."
    fix = fix_for(pair, "Set spec.model.revision (one value for both roles).",
                  "Pass the same --revision to the prefill and decode containers, and roll them out together.")
    return [(message, fix) if pinned else (message, fix, "warning")]
