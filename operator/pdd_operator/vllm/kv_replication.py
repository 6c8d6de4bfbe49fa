"""When vLLM's KV connectors count an engine's KV cache as replicated across its TP ranks: one fact, read per release.

A GQA model with fewer KV heads than TP ranks gives each rank one whole head, replicated (``ModelConfig.
get_num_kv_heads``: ``max(1, heads // tp)``). The connectors ask whether a TP size replicates through one function,
``is_kv_replicated``, whose bound moved once:

- 0.9.2-0.19.1: ``tp_size // total_num_kv_heads >= 1``, so a TP **equal to** the heads counts (vllm#19691): inline in
  ``NixlConnectorWorker.add_remote_agent`` (v1/nixl_connector.py 0.9.2 line 747, 0.10.0 line 761, 0.10.1.1 line 924,
  0.10.2 line 916, 0.11.0 line 974), then a method of the connector's KV topology (v1/nixl_connector.py 0.11.1 and
  0.11.2 lines 759-765, 0.12.0 lines 763-769), then of kv_connector/utils.py's (0.13.0 lines 294-300, 0.14.0 lines
  402-408, 0.16.0-0.17.1 lines 445-451, 0.18.0-0.19.1 lines 456-462; the 0.19.x MooncakeConnector asks it of its own
  engine, ``_producer_cache_is_replicated``, v1/mooncake/mooncake_connector.py line 1559).
- from 0.20.0: ``remote_tp_size > total_num_kv_heads``, only a TP **above** the heads (kv_connector/utils.py 0.20.0
  lines 594-598, ``local_replicates_kv_cache`` line 607; 0.21.0 line 529; 0.23.0 lines 549-552; 0.34.0 lines
  572-575).
- 0.9.1 and older have no replicated case (v1/nixl_connector.py 0.9.1: every TP ratio is linear).
"""

from __future__ import annotations

from pdd_operator.vllm.versions import Version

#: The releases whose ``is_kv_replicated`` counts a TP equal to the KV heads as replicated (module docstring).
KV_REPLICATED_AT_HEADS: tuple[Version, Version] = ((0, 9, 2), (0, 20, 0))


def replicated_at_heads(version: Version | None) -> bool:
    """vLLM ``version`` counts an engine whose TP equals the model's KV heads as replicated
    (:data:`KV_REPLICATED_AT_HEADS`); False on an unknown release (``None``). Pure."""
    return version is not None and KV_REPLICATED_AT_HEADS[0] <= version < KV_REPLICATED_AT_HEADS[1]


def kv_replicated(tp: int, heads: int, version: Version | None) -> bool | None:
    """Whether vLLM ``version``'s connectors count an engine of TP ``tp`` over a model of ``heads`` KV heads
    (config.json ``num_key_value_heads``; not MLA) as replicated: above the heads always, at them on
    :data:`KV_REPLICATED_AT_HEADS`, below them never. ``None`` at the heads on an unknown release (``version``
    ``None``), where the release decides. For releases from 0.9.2 (0.9.1 has no replicated case). Pure."""
    if tp != heads:
        return tp > heads
    return None if version is None else replicated_at_heads(version)
