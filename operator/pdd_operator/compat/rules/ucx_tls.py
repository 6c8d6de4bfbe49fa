"""The UCX transports an engine allows (``UCX_TLS``) against the memory its KV cache lives in."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.expansion import unknown_names

#: UCX transports (and aliases) that move host memory only: TCP, shared memory and the loopback. A list of only
#: these has no transport for CUDA device memory (``cuda_copy``, ``cuda_ipc``, ``gdr_copy``, the ``cuda`` alias)
#: nor an RDMA transport that could carry it with GPUDirect (``rc``, ``dc``, ``ud``, ``ib``, ...): UCX's
#: ``ucx_info -d`` lists "memory types: host" for each of these.
HOST_ONLY_TRANSPORTS: frozenset[str] = frozenset({
    "tcp", "sm", "shm", "self", "cma", "knem", "xpmem", "mm", "posix", "sysv",
})


def host_only_transports(ucx_tls: str | None) -> list[str] | None:
    """The transports of ``UCX_TLS`` (its raw value; ``None``: unset) when every one of them moves host memory
    only (:data:`HOST_ONLY_TRANSPORTS`); ``None`` otherwise.

    Unset, empty, ``all``, an exclusion list (``^...``, which keeps every transport it does not name) or any
    transport outside that set (a CUDA or ROCm copy transport, an RDMA transport, one this module does not know)
    gives ``None``, and so does a value that is not all in the manifest (``<unknown:NAME>``, from a variable or an
    ``envFrom`` source not in the files). A ``:aux`` suffix (UCX's auxiliary-transport mark) is ignored.
    """
    value = (ucx_tls or "").strip().lower()
    if not value or value.startswith("^") or unknown_names(ucx_tls):
        return None
    names = [t.strip().split(":", 1)[0] for t in value.split(",") if t.strip()]
    if not names or any(t not in HOST_ONLY_TRANSPORTS for t in names):
        return None
    return names


def _kv_in_gpu_memory(r: RoleConfig) -> bool:
    """The engine registers its KV cache in accelerator memory with NIXL (``kv_buffer_device`` cuda or unset, the
    default), not in a host buffer (``cpu``)."""
    return r.buffer_device in (None, "cuda")


@rule(
    id="ucx-tls-no-cuda-transport", family="kv-transport", severity="warning",
    fields=("spec.network.ucx.transports", "spec.prefill.env", "spec.decode.env", "spec.engine.env"),
    source=("NIXL UCX backend (kv_connector_extra_config.backends, vLLM default ['UCX']) registers the GPU KV cache "
            "(kv_buffer_device cuda) and moves it with the transports UCX_TLS allows; tcp, sm/shm, cma, self move host "
            "memory only (ucx_info -d). vLLM passes UCX_TLS through untouched (it sets only UCX_RCACHE_MAX_UNRELEASED, "
            "0.16+), so its code does not settle the outcome: a warning (vllm-project/vllm#52607 for the transport "
            "choice on one node)"),
    example="UCX_TLS=tcp,self on the decode of a NixlConnector pair with the KV cache on the GPU",
)
def check_ucx_tls(pair: PDPair) -> list[Violation]:
    """UCX_TLS, where set on an engine whose KV cache NIXL's UCX backend moves from GPU memory, allows a
    transport for GPU memory (cuda_copy, cuda_ipc, an RDMA transport, or all)."""
    out: list[Violation] = []
    for r in pair.roles:
        if not r.nixl or "UCX" not in r.backends or not _kv_in_gpu_memory(r):
            continue
        names = host_only_transports(r.env.get("UCX_TLS"))
        if names is None:
            continue
        out.append((
            f"{r.role}: UCX_TLS={r.env['UCX_TLS']} allows only host-memory transports ({', '.join(names)}), but the "
            "KV cache NIXL registers with UCX is in GPU memory: with no cuda_copy, cuda_ipc or RDMA transport UCX "
            "has no way to move it, so registering it or every KV transfer is expected to fail.",
            fix_for(pair, "Add cuda_copy (and cuda_ipc on one node, rc with GPUDirect RDMA across nodes) to "
                          "spec.network.ucx.transports, or leave it unset.",
                    f"Add cuda_copy (and cuda_ipc on one node, rc with GPUDirect RDMA across nodes) to UCX_TLS on "
                    f"the {r.role} container, or remove UCX_TLS."),
        ))
    return out
