"""A V0-only KV connector on the V1 engine of vLLM 0.9.0-0.10.0: the engine fails as it builds the connector.

0.9.0-0.10.0 register four names for V0 connector classes next to the V1 ones (kv_connector/factory.py 0.9.2 lines
86-108): ``PyNcclConnector`` and ``MooncakeConnector`` (both the V0 ``simple_connector.SimpleConnector``),
``LMCacheConnector`` (V0 ``lmcache_connector``) and ``MooncakeStoreConnector`` (V0 ``mooncake_store_connector``). The V1
engine builds its connector with ``KVConnectorFactory.create_connector_v1`` (the scheduler, v1/core/sched/scheduler.py
0.9.2 line 86, and each worker, kv_transfer_state.py line 64), which takes the registered class whatever
``kv_connector_module_path`` says and asserts ``issubclass(connector_cls, KVConnectorBase_V1)`` (factory.py 0.9.0
lines 52-72, 0.9.1-0.10.0 lines 53-73): AssertionError, the engine core never starts. A MultiConnector child is built
the same way (v1/multi_connector.py 0.9.2 line 52).

Which engine runs: ``VLLM_USE_V1`` (envs.py, default "1" but unset counts as unset: ``envs.is_set``). ``=0`` selects
the V0 engine, which builds these with ``create_connector_v0`` (factory.py lines 37-50): they run there, and this rule
says nothing (the V0 transfer is not described by these rules: "not checked"). ``=1`` forces V1: the connector's
assert (or ``_raise_or_fallback``'s NotImplementedError for a V0-only feature) stops the engine. Unset,
``EngineArgs._is_v1_supported_oracle`` (engine/arg_utils.py 0.9.2 lines 1306-1505) falls back to V0 for a list of
features (a GPU below compute capability 8.0, --preemption-mode, --num-scheduler-steps, a speculative method other
than ngram / medusa / eagle, a non-auto --kv-cache-dtype on some backends, VLLM_ATTENTION_BACKEND values,
pipeline parallelism on some executors, models not V1-compatible, ...); where the manifest shows one of them the
engine may run V0 and the finding is a warning, else it is an error. 0.10.1 dropped the V0 names from the registry
(``kv-connector-unregistered`` judges them from there).
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.compat.rules.early_nixl import pre_ampere_gpus
from pdd_operator.vllm.kv_transfer_config import multi_connector_children
from pdd_operator.vllm.v1_oracle import V0_FALLBACK_FLAGS
from pdd_operator.vllm.versions import Version, fmt

#: The releases whose factory registers V0 connector classes beside the V1 engine's (0.9.0, 0.9.1, 0.9.2, 0.10.0 read).
V0_NAMES_RELEASES: tuple[Version, Version] = ((0, 9, 0), (0, 10, 1))
#: name -> the V0 class the factory registers under it (factory.py 0.9.2 lines 86-108).
V0_ONLY = {"PyNcclConnector": "SimpleConnector", "MooncakeConnector": "SimpleConnector",
           "LMCacheConnector": "LMCacheConnector (V0)", "MooncakeStoreConnector": "MooncakeStoreConnector (V0)"}
#: The executors with which the V1 oracle keeps pipeline parallelism on V1 (engine/arg_utils.py
#: _is_v1_supported_oracle: ``pipeline_parallel_size > 1 and distributed_executor_backend not in (...)`` falls back):
#: 0.9.0 lists ``("ray", "mp", "external_launcher")`` (line 1378), so an unset backend (``None``) falls back to V0;
#: 0.9.1 (line 1434), 0.9.2 (line 1482) and 0.10.0 (line 1439) add ``ParallelConfig.distributed_executor_backend``,
#: the unset default ``None``, so PP with no backend given runs V1. ``None`` here is a backend not given.
PP_V1_BACKENDS_0_9_0: frozenset[str | None] = frozenset(("ray", "mp", "external_launcher"))
PP_V1_BACKENDS: frozenset[str | None] = frozenset((None, "ray", "mp", "external_launcher"))


def _v0_fallback(pair: PDPair, r: RoleConfig, version: Version) -> str | None:
    """What in the manifest may make vLLM ``version``'s unset-VLLM_USE_V1 oracle fall back to the V0 engine, or
    ``None``. Pipeline parallelism falls back only with an executor outside :data:`PP_V1_BACKENDS` (0.9.1-0.10.0) or
    :data:`PP_V1_BACKENDS_0_9_0` (0.9.0); an unknown PP size may."""
    if old := pre_ampere_gpus(r.nodes):
        return f"its GPUs ({old}) are below compute capability 8.0"
    flags = sorted({*r.v0_fallback_flags, *(a.split("=", 1)[0] for a in r.extra_args if a.split("=", 1)[0] in V0_FALLBACK_FLAGS)})
    if r.kv_cache_dtype not in (None, "auto") and "--kv-cache-dtype" not in flags:
        flags.append("--kv-cache-dtype")
    if r.speculative and "--speculative-config" not in flags:
        flags.append("--speculative-config")
    if flags:
        return f"it sets {', '.join(flags)}, which the V1 oracle may answer with the V0 engine"
    if "VLLM_ATTENTION_BACKEND" in r.env:
        return "VLLM_ATTENTION_BACKEND is set, some of whose values the V1 oracle answers with the V0 engine"
    if r.pp is None or r.pp > 1:
        backends = PP_V1_BACKENDS_0_9_0 if version < (0, 9, 1) else PP_V1_BACKENDS
        if r.pp is None or r.executor not in backends:
            shown = f"--distributed-executor-backend {r.executor}" if r.executor else "no --distributed-executor-backend"
            return f"pipeline parallelism with {shown} runs the V0 engine on vLLM {fmt(version)}"
    if pair.hybrid_ssm or pair.model.architecture is None:
        return "the model's V1 support is not known here"
    return None


@rule(
    id="kv-connector-v0-only", family="connector", severity="error",
    fields=("spec.kvTransfer.connector", "spec.engine.env"),
    source=("vllm distributed/kv_transfer/kv_connector/factory.py KVConnectorFactory.create_connector_v1: assert "
            "issubclass(connector_cls, KVConnectorBase_V1) (0.9.0 lines 52-72, 0.9.1-0.10.0 lines 53-73) for the V0 "
            "classes registered as PyNcclConnector, MooncakeConnector, LMCacheConnector, MooncakeStoreConnector (lines "
            "86-108); envs.py VLLM_USE_V1 and engine/arg_utils.py _is_v1_supported_oracle (0.9.2 lines 1075-1082, "
            "1306-1505); the names gone from 0.10.1"),
    since=V0_NAMES_RELEASES[0], until=V0_NAMES_RELEASES[1], without_connector=True,
    example='--kv-transfer-config {"kv_connector":"PyNcclConnector","kv_role":"kv_producer"} on vLLM 0.9.2, '
    "VLLM_USE_V1 unset",
)
def check_v0_connector_on_v1(pair: PDPair) -> list[Violation]:
    """An engine of vLLM 0.9.0-0.10.0 that runs the V1 engine names no V0-only KV connector (PyNcclConnector,
    MooncakeConnector, LMCacheConnector, MooncakeStoreConnector), alone or as a MultiConnector child.

    VLLM_USE_V1=0: nothing (the V0 engine runs it). VLLM_USE_V1=1: an error. Unset: an error, a warning where the
    manifest shows something the V1 oracle may answer with the V0 engine (:func:`_v0_fallback`)."""
    out: list[Violation] = []
    for r in pair.roles:
        version = r.version or pair.version
        if version is None or not V0_NAMES_RELEASES[0] <= version < V0_NAMES_RELEASES[1]:
            continue
        written = r.kv_transfer_written
        children = multi_connector_children(written) if isinstance(written, dict) else []
        names = [n for n in dict.fromkeys([r.connector, *(c.get("kv_connector") for c in children)]) if n in V0_ONLY]
        use_v1 = str(r.env.get("VLLM_USE_V1", "")).strip()
        if not names or use_v1 == "0":
            continue
        name = names[0]
        fallback = None if use_v1 == "1" else _v0_fallback(pair, r, version)
        engine = ("VLLM_USE_V1=1 forces the V1 engine" if use_v1 == "1" else
                  f"with VLLM_USE_V1 unset vLLM {fmt(version)} runs the V1 engine")
        out.append((
            f"{r.role}: kv_connector {name} is vLLM {fmt(version)}'s V0 {V0_ONLY[name]}, and {engine}, whose "
            "KVConnectorFactory.create_connector_v1 asserts a KVConnectorBase_V1 subclass as the engine builds its "
            "connector: AssertionError, the engine never starts"
            + (f" (unless the V0 engine runs: {fallback}; not decided here)." if fallback else "."),
            fix_for(pair, "Use a V1 connector (NixlConnector, P2pNcclConnector, LMCacheConnectorV1).",
                    f"Set VLLM_USE_V1=0 in the {r.role} container's environment to run the V0 engine, which builds "
                    f"{name}, or name a V1 connector (NixlConnector, P2pNcclConnector from 0.9.2, LMCacheConnectorV1) "
                    "in its --kv-transfer-config."),
            *(("warning",) if fallback else ()),
        ))
    return out
