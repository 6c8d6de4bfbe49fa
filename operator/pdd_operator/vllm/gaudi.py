"""vllm-gaudi's heterogeneous NIXL connector (Intel Gaudi, HPU): what it changes about the KV a prefill sends.

vllm-gaudi (the out-of-tree HPU platform plugin) imports ``hetero_hpu_nixl_connector`` when an engine's
``VLLM_HPU_HETERO_KV_LAYOUT`` is ``"true"`` (vllm_gaudi/__init__.py ``register_ops``: ``os.getenv(...,
"false").lower() == "true"``; read at vllm-project/vllm-gaudi d01a3ca, first in v0.15.1: vllm-gaudi#867 "Enable
support for prefill side kv_layout and block_size update"). That module patches upstream's ``NixlConnector`` so
that, with ``enable_permute_local_kv`` and prefix caching off, the prefill post-processes its KV on save
(``if_postprocess_kvcache_on_save``, hetero_hpu_nixl_connector.py lines 145-166): HND layout, and blocks of
``kv_connector_extra_config.agreed_block_size`` tokens where that is not larger than its own block size ("Only allow
save to smaller block size"); prefix caching on turns the post-processing off ("KV cache postprocess is not
compatible with prefix caching."). It then registers and advertises the saved block length (``register_kv_caches``
lines 1112-1122: block_len scaled down by the on-save ratio "so GPU validation passes"), so a decode whose block size
is a multiple of the saved one reads it where upstream's handshake (block_size_ratio = decode // prefill, asserted
>= 1 in nixl/base_worker.py) would refuse the engines' own sizes. Upstream's code does not describe that path and its
behaviour is the plugin release's: rules that rest on it warn, never refuse.
"""

from __future__ import annotations

from collections.abc import Mapping

#: The environment variable whose value ``"true"`` loads vllm-gaudi's heterogeneous NIXL connector.
HETERO_ENV = "VLLM_HPU_HETERO_KV_LAYOUT"
#: The first vllm-gaudi release with the heterogeneous connector (its releases carry the vLLM release they build on).
HETERO_SINCE = (0, 15, 1)


def hetero_connector_loaded(env: Mapping[str, str]) -> bool:
    """Whether vllm-gaudi loads its heterogeneous NIXL connector for an engine of environment ``env``: exactly where
    ``VLLM_HPU_HETERO_KV_LAYOUT`` lower-cased is ``"true"`` (vllm_gaudi/__init__.py ``register_ops`` line 106 at
    vllm-project/vllm-gaudi 091bbad: ``os.getenv("VLLM_HPU_HETERO_KV_LAYOUT", "false").lower() == "true"``); ``"1"``,
    ``"yes"`` or a value with spaces around it leave it unloaded."""
    return str(env.get(HETERO_ENV, "false")).lower() == "true"


def hetero_saved_block_size(env: Mapping[str, str], kv_transfer: Mapping, block_size: int | None,
                            prefix_caching: bool | None) -> int | None:
    """The block size in tokens a vllm-gaudi prefill saves its KV in for its peer (module docstring), where its
    heterogeneous connector changes it: ``None`` where the connector is not loaded (``env`` lacks
    ``VLLM_HPU_HETERO_KV_LAYOUT=true``), ``enable_permute_local_kv`` is off in ``kv_transfer`` (the parsed
    ``--kv-transfer-config``), prefix caching is not explicitly off (``prefix_caching`` is ``False`` only for
    ``--no-enable-prefix-caching``; vLLM's V1 default is on), ``block_size`` (``--block-size``) is not given, or the
    agreed size is not smaller than ``block_size``. Raises nothing: an unreadable ``agreed_block_size`` is ``None``."""
    if not hetero_connector_loaded(env) or block_size is None:
        return None
    if kv_transfer.get("enable_permute_local_kv") is not True or prefix_caching is not False:
        return None
    extra = kv_transfer.get("kv_connector_extra_config")
    agreed = extra.get("agreed_block_size") if isinstance(extra, Mapping) else None
    try:
        agreed = int(agreed) if agreed is not None and not isinstance(agreed, bool) else None
    except (TypeError, ValueError):
        return None
    return agreed if agreed is not None and 0 < agreed < block_size else None
