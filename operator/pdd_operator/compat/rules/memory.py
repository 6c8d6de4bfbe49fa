"""Memory NIXL registers for RDMA: the CUDA allocator and memlock."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.compat.rules.network import _has_rdma


@rule(
    id="expandable-segments-with-nixl", family="expandable-segments-with-nixl", severity="error",
    fields=("spec.engine.env", "spec.prefill.env", "spec.decode.env"),
    source="vllm/config/vllm.py _verify_kv_transfer_compat (0.33 refuses it at startup)",
)
def check_expandable_segments(pair: PDPair) -> list[Violation]:
    """No expandable_segments CUDA allocator with NIXL."""
    out = []
    for r in pair.roles:
        conf = r.env.get("PYTORCH_CUDA_ALLOC_CONF", "").replace(" ", "").lower()
        if "expandable_segments:true" in conf:
            out.append((
                f"{r.role}: PYTORCH_CUDA_ALLOC_CONF enables expandable_segments; memory NIXL registered for RDMA is "
                "later remapped, and transfers fail with remote access errors (vLLM 0.33 refuses it at startup).",
                "Remove expandable_segments:True from PYTORCH_CUDA_ALLOC_CONF.",
            ))
    return out


@rule(
    id="memlock-insufficient", family="memlock-insufficient", severity="warning",
    fields=("spec.engine",),
    source="NIXL memory registration; IPC_LOCK semantics for non-root",
)
def check_memlock(pair: PDPair) -> list[Violation]:
    """KV memory can be pinned (memlock)."""
    out = []
    for r in pair.roles:
        if "IPC_LOCK" in r.capabilities and r.run_as_non_root:
            out.append((
                f"{r.role}: the engine runs as non-root with IPC_LOCK; the capability only lifts the memlock limit for "
                "root, so NIXL may fail to register KV memory.",
                "Run the engine as root (the default for vLLM images) or raise LimitMEMLOCK on the nodes' container runtime.",
            ))
        elif "IPC_LOCK" not in r.capabilities and r.connector and not pair.managed and _has_rdma(r):
            out.append((
                f"{r.role}: the engine container lacks the IPC_LOCK capability; NIXL pins KV memory for RDMA and may hit "
                "the memlock limit.",
                "Add securityContext.capabilities.add: [IPC_LOCK] (no privileged mode needed).",
            ))
    return out
