"""The ``--kv-cache-dtype`` values each vLLM release accepts, and how many bytes a token's KV takes in each.

``CacheConfig.cache_dtype`` is typed by the ``CacheDType`` Literal (vllm/config/cache.py from 0.10.1.1, vllm/config.py
before it). Up to 0.32.0 the hint is the Literal alone, so vllm/engine/arg_utils.py turns it into argparse ``choices``
and any other value stops the server at argument parsing ("argument --kv-cache-dtype: invalid choice", exit 2).
From 0.33.0 the hint is ``CacheDType | str`` (a ``metavar``, no ``choices``) and ``CacheConfig._validate_cache_dtype``
raises ``ValueError("Invalid kv_cache_dtype: ...")`` for a value that is neither in the Literal nor registered by a
platform plugin (``KV_CACHE_DTYPES``, "Custom dtypes registered by platform backends": 0.33.0 lines 69-73 and
468-475, 0.34.0 lines 69-73 and 503-510), which an out-of-tree platform may do.

Read per release in the sdists 0.9.0-0.14.1, 0.16.0-0.22.0 and 0.24.0-0.34.0 (0.15.x, 0.22.1 and 0.23.0 not read;
no value's first release falls in those gaps: each is taken to hold what the releases read on both sides hold).
"""

from __future__ import annotations

from pdd_operator.vllm.versions import Version

#: value -> ``(last release read without it, first release read with it)``; ``None`` for the oldest read (0.9.0).
ADDED: dict[str, tuple[Version | None, Version]] = {
    **dict.fromkeys(("auto", "fp8", "fp8_e4m3", "fp8_e5m2"), (None, (0, 9, 0))),
    "fp8_inc": ((0, 9, 2), (0, 10, 0)),
    "bfloat16": ((0, 10, 2), (0, 11, 0)),
    "fp8_ds_mla": ((0, 11, 0), (0, 11, 1)),
    "float16": ((0, 17, 1), (0, 18, 0)),
    **dict.fromkeys(("turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc",
                     "int8_per_token_head", "fp8_per_token_head", "nvfp4"), ((0, 19, 1), (0, 20, 0))),
    "int4_per_token_head": ((0, 24, 0), (0, 25, 0)),
    "nvfp4_4over6": ((0, 27, 1), (0, 28, 0)),
    "nvfp4_ds_mla": ((0, 29, 0), (0, 30, 0)),
    "ultraquant_4bit": ((0, 31, 0), (0, 32, 0)),
    **dict.fromkeys(("octave_k3v4", "octave_k3v3", "octave_k3v3_compact"), ((0, 32, 0), (0, 33, 0))),
}
#: The first release whose ``cache_dtype`` admits any string (validated against the Literal and the values platform
#: plugins register), not argparse ``choices``.
PLUGIN_DTYPES_SINCE: Version = (0, 33, 0)
#: The oldest release whose ``CacheDType`` was read.
OLDEST_READ: Version = (0, 9, 0)

#: Width classes (:func:`width`): 16/32-bit elements (``auto`` follows ``--dtype``, at least 2 bytes), and one byte
#: per element with per-tensor scales. Every other dtype lays a token's KV out its own way (DeepSeek's fp8/nvfp4 MLA
#: formats; per-token-head scales stored beside 1-byte or 4-bit data; NVFP4's fp4 data with fp8 block scales;
#: TurboQuant, Octave and UltraQuant pack K and V into one slot per head: vllm/v1/kv_cache_interface.py
#: ``KVQuantMode``, 0.34.0 lines 40-63), so it is its own class.
_SIXTEEN_BIT = ("auto", "float16", "bfloat16")
_ONE_BYTE = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")


def accepted(value: str, version: Version | None) -> bool | None:
    """Whether release ``version`` takes ``--kv-cache-dtype value``: ``True``/``False`` where the releases read
    settle it, ``None`` where they do not (no version, before :data:`OLDEST_READ`, a release between the last read
    without the value and the first read with it, or a value not in any release's Literal from
    :data:`PLUGIN_DTYPES_SINCE` on, where a platform plugin may register it)."""
    if version is None or version < OLDEST_READ:
        return None
    added = ADDED.get(value)
    if added is None:
        return None if version >= PLUGIN_DTYPES_SINCE else False
    without, first = added
    if version >= first:
        return True
    return False if without is None or version <= without else None


def width(value: str) -> str:
    """The class of bytes a token's KV takes for ``--kv-cache-dtype value`` at one model and TP: ``"16/32-bit"``,
    ``"1-byte"`` (the per-tensor-scaled fp8 formats), or the value itself for a format with its own layout."""
    lowered = value.lower()
    if lowered in _SIXTEEN_BIT:
        return "16/32-bit"
    if lowered in _ONE_BYTE:
        return "1-byte"
    return lowered


#: The first release whose TurboQuant attention backend declares its KV cache layouts: only LBNHC
#: (``TurboQuantAttentionBackend.supported_kv_cache_layouts``, v1/attention/backends/turboquant_attn.py 0.34.0 lines
#: 159-161; the 0.29.0-0.33.0 backends declare none). ``resolve_kv_cache_layout`` (v1/attention/backends/utils.py
#: 0.34.0 lines 400-415) then drops NIXL's LBHNC preference with a warning and refuses an explicit
#: ``VLLM_KV_CACHE_LAYOUT`` outside the candidates at startup.
TURBOQUANT_LBNHC_SINCE: Version = (0, 34, 0)


def forced_layout(value: str | None, version: Version | None) -> str | None:
    """The KV cache layout a ``--kv-cache-dtype`` forces on a non-MLA model's attention layers whatever the
    connector prefers: ``"LBNHC"`` for a ``turboquant_*`` cache from :data:`TURBOQUANT_LBNHC_SINCE`; ``None``
    otherwise (no value, an unknown release, a dtype whose backend takes NIXL's LBHNC)."""
    if value and value.startswith("turboquant_") and version is not None and version >= TURBOQUANT_LBNHC_SINCE:
        return "LBNHC"
    return None
