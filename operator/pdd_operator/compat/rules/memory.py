"""Memory NIXL registers for RDMA: the CUDA allocator and memlock."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
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
    fields=("spec.engine",), in_manifest=("securityContext.capabilities", "securityContext.runAsNonRoot"),
    source=("NIXL memory registration (ibv_reg_mr pins pages against RLIMIT_MEMLOCK unless CAP_IPC_LOCK is "
            "effective, i.e. for root); NVIDIA/nvcf#1354; NVIDIA container toolkit #2037"),
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
        elif "IPC_LOCK" in r.capabilities and _has_rdma(r) and pair.preflight in (None, "Disabled"):
            # IPC_LOCK is there, but the ceiling it lifts comes from the node's container runtime (LimitMEMLOCK),
            # which no manifest shows: say what was not checked and how to check it. A PDDeployment's preflight
            # (policy Warn or Fail) measures it in the pod and reports MemlockTooLow in KVTransportReady.
            out.append((
                f"{r.role}: the memlock ceiling is not checked: it comes from the node's container runtime "
                "(LimitMEMLOCK), not from any manifest, and NVIDIA/nvcf#1354 saw NIXL fail to register memory with "
                "IPC_LOCK added while that ceiling stayed low.",
                fix_for(pair, "Enable the preflight (spec.network.preflight.policy Warn or Fail): it measures the "
                        "memlock limit in the pod; or make sure the nodes run containerd with LimitMEMLOCK=infinity.",
                        "Check 'Max locked memory' in /proc/self/limits of a running engine, or set "
                        "LimitMEMLOCK=infinity for the nodes' containerd."),
            ))
    return out
