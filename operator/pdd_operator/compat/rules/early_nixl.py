"""Faults only the first NixlConnector releases (vLLM 0.9.x-0.10.x) have: the V0 engine fallback, which cannot
run a V1 connector, and 0.9.1's handshake assert that decode holds at least as many KV blocks as prefill.

Read in the 0.9.0, 0.9.1, 0.9.2 and 0.10.0 wheels and the 0.10.1.1 and 0.11.0 sdists (held-out set 26:
vllm#18933, vllm#19338).
"""

from __future__ import annotations

import re

from pdd_operator.compat.gpu_product import gpu_products, pinned_gpu_major
from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.placement import NodeTerm
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.vllm.versions import Version, fmt

#: ``EngineArgs._is_v1_supported_oracle`` (engine/arg_utils.py) falls back to the V0 engine on a CUDA GPU of compute
#: capability below 8.0 ("Compute Capability < 8.0"; ``_raise_or_fallback`` raises ``NotImplementedError`` instead
#: when VLLM_USE_V1=1 is set) in 0.9.0-0.10.1.1, read in those releases; 0.11.0 has no such check (V1 runs there).
#: The V0 engine cannot run a NIXL connector: 0.9.0-0.10.0's ``ensure_kv_transfer_initialized`` builds it with
#: ``KVConnectorFactory.create_connector_v0``, which asserts ``issubclass(connector_cls, KVConnectorBase)`` (a V1
#: connector is not one: vllm#18933's AssertionError), and 0.10.1.1 raises ``ValueError("V0 is no longer
#: supported")``. 0.10.2 was not read: there the finding is a warning.
V0_FALLBACK_READ_UNTIL: Version = (0, 10, 2)
V0_FALLBACK_GONE: Version = (0, 11, 0)
#: 0.11.0 still reads ``VLLM_USE_V1`` (envs.py lines 900-901) but has only the V1 engine: with ``VLLM_USE_V1=0``
#: ``create_engine_config`` keeps ``use_v1`` False and accepts it because the user set it (engine/arg_utils.py lines
#: 1148-1159), then the OpenAI server asserts ``envs.VLLM_USE_V1`` (entrypoints/openai/api_server.py line 209,
#: ``build_async_engine_client_from_engine_args``), so ``vllm serve`` stops whatever the connector. 0.11.1 and 0.11.2
#: define no ``VLLM_USE_V1`` (no mention in their trees): the variable is ignored from there on.
USE_V1_ASSERT_UNTIL: Version = (0, 11, 1)


def use_v1_zero_fault(version: Version | None, use_v1: str | None) -> str | None:
    """Why ``VLLM_USE_V1`` (``use_v1``: the variable's value, ``None`` unset) stops ``vllm serve`` of vLLM ``version``
    whatever its KV connector, or ``None``: only 0.11.0 with ``VLLM_USE_V1=0`` (:data:`USE_V1_ASSERT_UNTIL`). Pure."""
    if version is None or not (V0_FALLBACK_GONE <= version < USE_V1_ASSERT_UNTIL) or str(use_v1 or "").strip() != "0":
        return None
    return (f"VLLM_USE_V1=0 on vLLM {fmt(version)}, which has only the V1 engine: the OpenAI server asserts "
            "envs.VLLM_USE_V1 (entrypoints/openai/api_server.py) and exits before the engine starts")

#: Words of a GPU product name that mark a compute capability below 8.0 (Volta V100 7.0, Turing T4 7.5, Pascal
#: P100/P40/P4 6.x, Kepler K80 3.7, Maxwell M60 5.2; NVIDIA's CUDA GPUs compute capability table).
PRE_AMPERE_WORDS = frozenset({"V100", "V100S", "T4", "P100", "P40", "P4", "K80", "K40", "M60", "M40"})


def pre_ampere(product: str) -> bool:
    """``product`` (a GPU product label value) is a GPU of compute capability below 8.0."""
    return any(word in PRE_AMPERE_WORDS for word in re.split(r"[-_ ]+", product.upper()))


def pre_ampere_gpus(nodes: tuple[NodeTerm, ...] | None) -> str | None:
    """The GPUs a role's placement ``nodes`` pins, named for a message, where every one of them is below compute
    capability 8.0 (:func:`pre_ampere` products, or a pinned ``nvidia.com/gpu.compute.major`` below 8:
    :mod:`pdd_operator.compat.gpu_product`); ``None`` where not pinned or some may be newer."""
    products = gpu_products(nodes)
    if products and all(pre_ampere(p) for p in products):
        return ", ".join(sorted(products))
    major = pinned_gpu_major(nodes)
    return f"compute capability {major}.x" if major is not None and major < 8 else None


@rule(
    id="nixl-needs-v1-engine", family="connector", severity="error",
    fields=("spec.placement.gpuProduct", "spec.engine.env"),
    source=("vllm engine/arg_utils.py EngineArgs._is_v1_supported_oracle ('Compute Capability < 8.0' falls back to V0, "
            "0.9.0-0.10.1.1) and kv_transfer_state.py / kv_connector/factory.py (V0: create_connector_v0 asserts "
            "issubclass(connector_cls, KVConnectorBase) in 0.9.0-0.10.0, 'V0 is no longer supported' in 0.10.1.1); "
            "read in the wheels and sdists; no fallback in 0.11.0 (vllm#18933), where VLLM_USE_V1=0 instead fails the "
            "OpenAI server's assert envs.VLLM_USE_V1 (entrypoints/openai/api_server.py line 209; the variable is gone "
            "from 0.11.1)"),
    until=USE_V1_ASSERT_UNTIL,
    example="NixlConnector on V100 nodes (nvidia.com/gpu.product Tesla-V100-SXM2-32GB), vLLM 0.9.1",
)
def check_nixl_needs_v1(pair: PDPair) -> list[Violation]:
    """A NIXL engine runs vLLM's V1 engine: not VLLM_USE_V1=0, not a GPU below compute capability 8.0 (V100, T4).

    Up to 0.10.x both fall back to the V0 engine, which cannot build the connector; 0.11.0 has no fallback and runs
    V1 on older GPUs, but still reads VLLM_USE_V1 and its OpenAI server asserts it (:func:`use_v1_zero_fault`)."""
    out: list[Violation] = []
    for r in pair.roles:
        use_v1 = str(r.env.get("VLLM_USE_V1", "")).strip()
        if r.version is not None and r.version >= V0_FALLBACK_GONE:
            if fault := use_v1_zero_fault(r.version, use_v1):
                out.append((f"{r.role}: {fault}, so this engine never starts.",
                            "Remove VLLM_USE_V1=0 from the engine's environment (0.11.0 runs only the V1 engine).")
                           )
            continue
        old = pre_ampere_gpus(r.nodes)
        if use_v1 == "0":
            why = "VLLM_USE_V1=0 selects the V0 engine"
        elif old:
            why = (f"its GPUs ({old}) are below compute capability 8.0, so EngineArgs._is_v1_supported_oracle "
                   "falls back to the V0 engine (with VLLM_USE_V1=1 it raises NotImplementedError instead)")
        else:
            continue
        version = fmt(r.version) if r.version else "this release"
        unread = r.version is not None and r.version >= V0_FALLBACK_READ_UNTIL
        out.append((
            f"{r.role}: {why}; the V0 engine of vLLM {version} cannot run the NIXL connector (V0 builds it with "
            "create_connector_v0, which asserts a V0 KVConnectorBase; 0.10.1 raises 'V0 is no longer supported'), "
            "so this engine never starts"
            + (" (0.10.2's code was not read; 0.10.1.1 and 0.11.0 were)." if unread else "."),
            "Run the engines on GPUs of compute capability 8.0 or newer (A100, L4, H100) without VLLM_USE_V1=0, or use "
            "a vLLM >= 0.11 engine image, whose V1 engine runs on older GPUs.",
            *(("warning",) if unread else ()),
        ))
    return out


#: 0.9.1's ``NixlConnectorWorker.add_remote_agent`` (v1/nixl_connector.py, read in the wheel) asserts
#: ``self.num_blocks >= nixl_agent_meta.num_blocks`` when decode first reaches a prefill (vllm#19338); 0.9.0 has no
#: such assert and 0.9.2 dropped it (vllm#19532), both read in their wheels.
BLOCK_COUNT_ASSERT: tuple[Version, Version] = ((0, 9, 1), (0, 9, 2))


def _memory_twin(p: RoleConfig, d: RoleConfig) -> bool:
    """Prefill and decode size their KV cache alike but for ``--gpu-memory-utilization``: same model, dtypes,
    block size, parallelism, scheduler budget, speculative config, attention backend and GPUs per pod."""
    keys = ("model", "dtype", "kv_cache_dtype", "block_size", "tp", "pp", "dp", "scheduler", "speculative",
            "attention_backend", "cumem_flags", "gpus")
    return all(getattr(p, k) == getattr(d, k) for k in keys)


@rule(
    id="decode-kv-blocks-below-prefill", family="kv-blocks", severity="error",
    fields=("spec.prefill.gpuMemoryUtilization", "spec.decode.gpuMemoryUtilization"),
    source=("vllm v1/nixl_connector.py 0.9.1 add_remote_agent: assert self.num_blocks >= nixl_agent_meta.num_blocks "
            "(vllm#19338; dropped in 0.9.2 by vllm#19532); v1/worker/gpu_worker.py determine_available_memory: the KV "
            "budget is gpu_memory_utilization x total minus the profiled non-KV memory"),
    since=BLOCK_COUNT_ASSERT[0], until=BLOCK_COUNT_ASSERT[1],
    example="decode --gpu-memory-utilization 0.8, prefill 0.9, otherwise identical engines on H100s, vLLM 0.9.1",
)
def check_decode_blocks(pair: PDPair) -> list[Violation]:
    """On vLLM 0.9.1 decode holds at least as many KV blocks as prefill (no lower --gpu-memory-utilization)."""
    p, d = pair.prefill, pair.decode
    if p.gpu_memory_utilization is None or d.gpu_memory_utilization is None:
        return []
    if d.gpu_memory_utilization >= p.gpu_memory_utilization:
        return []
    products = (gpu_products(p.nodes), gpu_products(d.nodes))
    same_gpu = pair.shared_network or (products[0] is not None and len(products[0]) == 1 and products[0] == products[1])
    certain = same_gpu and _memory_twin(p, d)
    message = (f"decode --gpu-memory-utilization {d.gpu_memory_utilization} < prefill's {p.gpu_memory_utilization}: "
               "each engine's KV budget is that fraction of the GPU minus the same profiled weights and activations, "
               "so decode gets fewer KV blocks, and vLLM 0.9.1's NIXL handshake asserts decode's block count >= "
               "prefill's (AssertionError in add_remote_agent at decode's first request, vllm#19338)")
    if not certain:
        message += ("; here the two engines differ in more than that (or their GPU models are not known to be one), "
                    "so the block counts are not certain.")
    fix = ("Give decode at least prefill's --gpu-memory-utilization on vLLM 0.9.1, or use a vLLM >= 0.9.2 engine "
           "image (the assert was dropped).")
    return [(message + ("." if certain else ""), fix, *(() if certain else ("warning",)))]
