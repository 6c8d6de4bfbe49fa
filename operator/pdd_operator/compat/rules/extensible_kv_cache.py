"""The extensible KV cache (``--enable-extensible-kv-cache``, new in vLLM 0.34.0) asked for where vLLM cannot give it.

vLLM 0.34.0 settles the option once per engine (``VllmConfig._resolve_extensible_kv_cache``, vllm/config/vllm.py
lines 3180-3270). Left unset it turns itself on where supported and off elsewhere; asked for explicitly
(``--enable-extensible-kv-cache``) where one of these holds, it raises ``ValueError("enable_extensible_kv_cache:
<why>.")`` while the engine's config is built (lines 3262-3263), so the engine never starts:

- ``--kv-cache-memory-bytes`` or ``--num-gpu-blocks-override`` is given: the cache is sized from measured memory,
  which they override (lines 3203-3212);
- a KV connector shares the cache through legacy CUDA IPC: ``LMCacheMPConnector`` (``KVCacheAccess.LEGACY_IPC``,
  v1/lmcache_mp_connector.py lines 473-475, and the factory's fallback for the lmcache package's class,
  kv_connector/factory.py lines 136-152; lines 3218-3222);
- a connector allocates the cache from its own pool (``custom_mem_pool`` in any ``kv_connector_extra_config``,
  config/kv_transfer.py ``uses_custom_mem_pool`` lines 174-183; lines 3223-3230);
- on ROCm, a connector that registers the cache with UCX or RDMA (``KVCacheAccess.REGISTERS``: NIXL with a device
  KV buffer, nixl/connector.py lines 85-90; ``MooncakeConnector``, mooncake/mooncake_connector.py lines 777-779;
  ``MooncakeStoreConnector``, mooncake/store/connector.py lines 134-136; ``MoRIIOConnector``,
  moriio/moriio_connector.py lines 282-284; ``UMBPStoreConnector``, umbp/connector.py lines 104-106; a
  ``MultiConnector`` holds its children's flags, multi_connector.py lines 237-248): "UCX and RDMA cannot yet register
  driver-mapped memory" (lines 3231-3238; ``needs_single_chunk``, config/kv_transfer.py).

Not judged here: the CUDA-only platform check (lines 3201-3202: XPU, TPU, CPU; a manifest rarely says which of those
an image runs) and elastic EP (``--enable-elastic-ep``, lines 3213-3217). Releases before 0.34.0 have no such flag
(``cli-flag-not-yet``).
"""

from __future__ import annotations

from pdd_operator.compat.pair import NIXL_CONNECTORS, PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.vllm.versions import Version, fmt

#: The release that added ``--enable-extensible-kv-cache`` (engine/arg_utils.py 0.34.0 lines 615 and 1413-1414).
EXTENSIBLE_KV_CACHE_SINCE: Version = (0, 34, 0)
#: Connectors whose ``kv_cache_access`` includes ``KVCacheAccess.REGISTERS`` whatever their options (0.34.0 sdist);
#: NIXL's does unless its ``kv_buffer_device`` is ``cpu`` (:func:`_registering`).
REGISTERING: tuple[str, ...] = ("MooncakeConnector", "MooncakeStoreConnector", "MoRIIOConnector", "UMBPStoreConnector")


def _connectors(config: dict) -> list[dict]:
    """The connector configs a ``--kv-transfer-config`` object runs: itself, and a MultiConnector's children (as
    ``KVTransferConfig._connector_children`` reads them, one level)."""
    extra = config.get("kv_connector_extra_config")
    children = extra.get("connectors") if isinstance(extra, dict) else None
    if config.get("kv_connector") == "MultiConnector" and isinstance(children, list):
        return [config, *(c for c in children if isinstance(c, dict))]
    return [config]


def _registering(config: dict) -> bool:
    name = config.get("kv_connector")
    if name in NIXL_CONNECTORS:
        return config.get("kv_buffer_device") != "cpu"
    return name in REGISTERING


def refusal(r: RoleConfig) -> str | None:
    """Why vLLM 0.34.0 refuses ``--enable-extensible-kv-cache`` on engine ``r`` (vLLM's own words after
    "enable_extensible_kv_cache: "), ``None`` where the flag is not given true or nothing here refuses it. Checked in
    vLLM's order, so the reason named is the one its error gives."""
    if r.extensible_kv_cache is not True:
        return None
    written = r.kv_transfer_written or r.kv_transfer
    connectors = _connectors(written) if written.get("kv_connector") else []
    if r.kv_cache_memory_bytes is not None:
        return "it sizes the KV cache from measured memory, which kv_cache_memory_bytes overrides"
    if r.num_gpu_blocks_override is not None:
        return "it sizes the KV cache from measured memory, which num_gpu_blocks_override overrides"
    if any(c.get("kv_connector") == "LMCacheMPConnector" and not c.get("kv_connector_module_path")
           for c in connectors):
        return "a KV connector (LMCacheMPConnector) shares the KV cache through legacy CUDA IPC"
    if any((c.get("kv_connector_extra_config") or {}).get("custom_mem_pool") for c in connectors
           if isinstance(c.get("kv_connector_extra_config") or {}, dict)):
        return "custom_mem_pool allocates the KV cache from a connector's memory pool"
    if r.on_rocm and (names := [str(c.get("kv_connector")) for c in connectors if _registering(c)]):
        return (f"on ROCm, UCX and RDMA cannot yet register driver-mapped memory, which {names[0]} requires "
                "(it registers the KV cache)")
    return None


@rule(
    id="extensible-kv-cache-unsupported", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.kvTransfer.connector"),
    since=EXTENSIBLE_KV_CACHE_SINCE, without_connector=True, one_engine=True,
    needs=("--enable-extensible-kv-cache", "--kv-cache-memory-bytes", "--num-gpu-blocks-override"),
    source=("vllm/config/vllm.py _resolve_extensible_kv_cache (0.34.0 lines 3180-3270): 'enable_extensible_kv_cache: "
            "<why>.' where the flag is given and kv_cache_memory_bytes / num_gpu_blocks_override / a "
            "legacy-IPC connector / custom_mem_pool, or ROCm with a connector that registers the KV cache "
            "(KVCacheAccess.REGISTERS: NIXL on a device buffer, Mooncake, MooncakeStore, MoRIIO, UMBP)"),
    example="--enable-extensible-kv-cache with NixlConnector on vllm/vllm-openai-rocm:v0.34.0",
)
def check_extensible_kv_cache(pair: PDPair) -> list[Violation]:
    """``--enable-extensible-kv-cache`` only where vLLM 0.34.0 can give it.

    Not with ``--kv-cache-memory-bytes``, ``--num-gpu-blocks-override``, LMCacheMPConnector or a connector's
    ``custom_mem_pool``, and not on ROCm with a KV connector that registers the cache (NIXL on a device buffer,
    Mooncake, MoRIIO, UMBP).

    Each role on its own: the role given the flag fails while its config is built and never starts.
    """
    out: list[Violation] = []
    for r in pair.roles:
        why = refusal(r)
        if why is None:
            continue
        version = r.version or pair.version
        release = fmt(version) if version else "this release"
        out.append((
            f"{r.role}: --enable-extensible-kv-cache where {why}: vLLM {release} raises \"enable_extensible_kv_cache: "
            f"...\" while building the engine's config (vllm/config/vllm.py _resolve_extensible_kv_cache), so this "
            "engine never starts.",
            f"Remove --enable-extensible-kv-cache from the {r.role} engine (vLLM turns the extensible KV cache on by "
            "itself where it is supported), or remove what it cannot be combined with.",
        ))
    return out
