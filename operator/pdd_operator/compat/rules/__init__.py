"""The compatibility rules, one module per family, each rule defined where its check is.

Each check takes a :class:`~pdd_operator.compat.pair.PDPair` (the prefill and decode engines as they
will be started) and returns its violations as ``(message, fix)`` pairs (empty when the rule holds);
the :func:`~pdd_operator.compat.rules.base.rule` decorator on it carries the id, severity, version
bounds, fields and source. Importing this package registers every rule; :data:`RULES` lists them in
evaluation order (registration order), :data:`RULES_BY_ID` by id. Ids are stable.
"""

from __future__ import annotations

# Registration order (these modules in this order, rules in file order) is the evaluation order; a unit
# test fails when a module of this package is missing here.
from pdd_operator.compat.rules import (  # noqa: F401  (each module registers its rules)
    architecture,
    aux_output,
    backend_connector,
    block_size,
    buffer_device,
    config_file,
    connector,
    connector_mix,
    connector_registry,
    dcp_block_size,
    decode_context,
    draft_kv,
    dynamo_worker,
    early_nixl,
    ec_connector,
    engine_args,
    engine_id,
    env_vars,
    expert_parallel,
    extensible_kv_cache,
    fp8_block,
    grpc_server,
    heads,
    hetero_tp,
    hma,
    hma_forced,
    hybrid_block_geometry,
    hybrid_ssm,
    kernel_block,
    known_bad,
    kv_cache_dtype,
    kv_layout,
    kv_role,
    mamba_align,
    max_model_len,
    mem_pool,
    memory,
    middleware,
    model_registry,
    mooncake,
    mooncake_lease,
    moriio_pair,
    multi_connector,
    must_match,
    network,
    nixl_backend,
    nixl_hma_block,
    nvfp4_kv,
    offloading,
    p2p_nccl,
    p2p_nccl_pair,
    packed_kv,
    parallelism,
    pd_proxy,
    pipeline_parallel,
    pod_ports,
    pp_push_hma,
    records,
    request_path,
    rocm_image,
    rust_frontend,
    sleep_mode,
    sliding_window_flag,
    speculative_config,
    transfer_mode,
    triton_layout,
    ucx_tls,
    v0_connector,
    v0_pair,
    version_source,
    weights,
)
from pdd_operator.compat.rules.base import REGISTRY, Rule, Violation, record, rule

#: Every registered rule id, in evaluation order (records without a check included).
RULES: tuple[Rule, ...] = tuple(REGISTRY)
#: The rules with a check function, which :func:`pdd_operator.compat.engine.evaluate` runs.
CHECKS: tuple[Rule, ...] = tuple(r for r in RULES if r.check is not None)
RULES_BY_ID: dict[str, Rule] = {r.id: r for r in RULES}

__all__ = ["CHECKS", "RULES", "RULES_BY_ID", "Rule", "Violation", "record", "rule"]
