"""A MultiConnector around NIXL whose children each bring their own KV cache memory pool."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.versions import fmt

#: The first release whose ``MultiConnector`` forwards its children's KV cache memory pools
#: (``MultiConnector.get_mem_pool_context``, kv_connector/v1/multi_connector.py, 0.31.0 line 314 to 0.34.0 line
#: 362; the 0.30.0 MultiConnector has no such method, so the base class's ``None`` is used and no child's pool is).
MEM_POOL_FORWARDED_SINCE = (0, 31, 0)
#: Built-in connectors that return a memory pool context when ``kv_connector_extra_config.custom_mem_pool`` is set:
#: only MooncakeStoreConnector (mooncake/store/worker.py ``MooncakeStoreWorker._create_mem_pool``, 0.31.0-0.34.0,
#: which takes NVLINK or BAREX and raises for any other non-empty value). Other built-in connectors ignore the key.
MEM_POOL_CONNECTORS = ("MooncakeStoreConnector",)


def _pool_providers(config: dict) -> tuple[list[str], list[str]]:
    """``(certain, possible)``: children of a MultiConnector ``config`` (recursively) that set ``custom_mem_pool``:
    built-in pool connectors (certain), and connectors loaded from ``kv_connector_module_path`` (possible: their
    class may read the key). A nested MultiConnector counts as one provider where any child below it does."""
    certain: list[str] = []
    possible: list[str] = []
    children = (config.get("kv_connector_extra_config") or {}).get("connectors")
    for child in children if isinstance(children, list) else []:
        if not isinstance(child, dict):
            continue
        name = str(child.get("kv_connector"))
        if name == "MultiConnector":
            c, p = _pool_providers(child)
            (certain if c else possible if p else []).append(name)
            continue
        if not (child.get("kv_connector_extra_config") or {}).get("custom_mem_pool"):
            continue
        if name in MEM_POOL_CONNECTORS:
            certain.append(name)
        elif child.get("kv_connector_module_path"):
            possible.append(name)
    return certain, possible


@rule(
    id="multi-connector-mem-pools", family="multi-connector", severity="error",
    fields=("spec.prefill.kvTransfer", "spec.decode.kvTransfer"),
    source=("vllm kv_connector/v1/multi_connector.py MultiConnector.get_mem_pool_context: ValueError 'Multiple "
            "connectors provide a KV cache memory pool ...; Configure custom_mem_pool on at most one connector.' "
            "(0.31.0-0.34.0), called by gpu_worker before the KV cache is allocated; MooncakeStoreConnector returns "
            "a pool where kv_connector_extra_config.custom_mem_pool is set (mooncake/store/worker.py)"),
    since=MEM_POOL_FORWARDED_SINCE,
    example=("MultiConnector[NixlConnector, MooncakeStoreConnector, MooncakeStoreConnector], both Mooncake children "
             "with custom_mem_pool: NVLINK"),
)
def check_multi_connector_mem_pools(pair: PDPair) -> list[Violation]:
    """At most one child of a MultiConnector sets custom_mem_pool.

    Each role on its own: the KV cache is allocated once, in one pool, so vLLM 0.31+ refuses at startup a
    MultiConnector where two children return a memory pool (error where both are built-in pool connectors; a
    warning where a child loaded from ``kv_connector_module_path`` may be one). Before 0.31 the MultiConnector does
    not forward any child's pool.
    """
    out: list[Violation] = []
    for r in pair.roles:
        if r.connector_note or r.kv_transfer_written.get("kv_connector") != "MultiConnector":
            continue
        certain, possible = _pool_providers(r.kv_transfer_written)
        if len(certain) + len(possible) < 2:
            continue
        names = ", ".join(certain + possible)
        fix = fix_for(pair, f"Set custom_mem_pool on at most one connector of the {r.role}'s MultiConnector.",
                      f"Keep custom_mem_pool in the kv_connector_extra_config of at most one child of the {r.role}'s "
                      "--kv-transfer-config MultiConnector.")
        msg = (f"{r.role}: its MultiConnector has {len(certain) + len(possible)} children with custom_mem_pool "
               f"({names}); vLLM {fmt(pair.version)} allocates the KV cache in one pool and raises 'Multiple "
               "connectors provide a KV cache memory pool' before the KV cache is allocated")
        if len(certain) >= 2:
            out.append((f"{msg}; the engine does not start.", fix))
        else:
            out.append((f"{msg} where the connector loaded from kv_connector_module_path returns a pool for the key "
                        "(its class is not in vLLM).", fix, "warning"))
    return out
