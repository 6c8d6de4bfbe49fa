"""Memory NIXL registers for RDMA: the CUDA allocator and memlock."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.compat.rules.network import _has_rdma
from pdd_operator.vllm.versions import is_cpu_image


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


def _raised_by_script(r) -> bool:
    """The engine's script surely raises its memlock limit to unlimited before starting it.

    ``ulimit -l unlimited`` without ``-S`` sets the hard limit too, which setrlimit(2) allows only with
    CAP_SYS_RESOURCE ("A privileged process (under Linux: one with the CAP_SYS_RESOURCE capability ...) may make
    arbitrary changes to either limit value"); a capability added to a non-root container is not effective. With
    RLIMIT_MEMLOCK at RLIM_INFINITY the RDMA core pins any amount (Linux drivers/infiniband/core/umem.c
    ib_umem_get: ``new_pinned > lock_limit && !capable(CAP_IPC_LOCK)`` fails only under a finite limit).
    """
    return r.memlock_ulimit == ("unlimited", "unlimited") and not r.run_as_non_root and _has_cap(r, "SYS_RESOURCE")


def _has_cap(r, name: str) -> bool:
    """The container has capability ``name`` (``IPC_LOCK``): added to it, or every capability of a privileged
    container."""
    return r.privileged or any(str(c).upper().removeprefix("CAP_") == name for c in r.capabilities)


def _ulimit_note(r) -> str:
    """A sentence on the script's ``ulimit -l`` where it may not raise the limit (``""`` where it runs none)."""
    if r.memlock_ulimit is None:
        return ""
    soft, hard = r.memlock_ulimit
    finite = [v for v in (soft, hard) if v not in (None, "unlimited")]
    if finite:
        return f" The script's ulimit -l {finite[0]} (KiB) is a finite limit, which may be below the KV cache it pins."
    if hard is None:
        return " The script's ulimit -S -l unlimited raises the soft limit only up to the hard limit the runtime sets."
    if soft is None:
        return " The script raises the hard memlock limit only (ulimit -H -l); the soft limit is what pinning obeys."
    who = "runs as non-root, so an added capability is not effective" if r.run_as_non_root else "lacks SYS_RESOURCE"
    return (f" The script's ulimit -l unlimited sets the hard limit, which needs CAP_SYS_RESOURCE (setrlimit(2)), and "
            f"the container {who}: it fails unless the runtime's hard limit is already unlimited.")


@rule(
    id="memlock-insufficient", family="memlock-insufficient", severity="warning",
    fields=("spec.engine",), in_manifest=("securityContext.capabilities", "securityContext.runAsNonRoot"),
    source=("NIXL memory registration (ibv_reg_mr pins pages against RLIMIT_MEMLOCK unless CAP_IPC_LOCK is "
            "effective, i.e. for root: Linux drivers/infiniband/core/umem.c ib_umem_get); NVIDIA/nvcf#1354; NVIDIA "
            "container toolkit #2037; a script's ulimit -l unlimited raises the hard limit only with "
            "CAP_SYS_RESOURCE (setrlimit(2))"),
)
def check_memlock(pair: PDPair) -> list[Violation]:
    """KV memory can be pinned (memlock)."""
    out = []
    for r in pair.roles:
        if _raised_by_script(r):
            continue  # the engine runs with RLIMIT_MEMLOCK unlimited: pinning needs no IPC_LOCK and no runtime ceiling
        note = _ulimit_note(r)
        if _has_cap(r, "IPC_LOCK") and r.run_as_non_root:
            out.append((
                f"{r.role}: the engine runs as non-root with IPC_LOCK; the capability only lifts the memlock limit for "
                "root, so NIXL may fail to register KV memory." + note,
                "Run the engine as root (the default for vLLM images) or raise LimitMEMLOCK on the nodes' container runtime.",
            ))
        elif not _has_cap(r, "IPC_LOCK") and r.connector and not pair.managed and _has_rdma(r):
            out.append((
                f"{r.role}: the engine container lacks the IPC_LOCK capability; NIXL pins KV memory for RDMA and may hit "
                "the memlock limit." + note,
                "Add securityContext.capabilities.add: [IPC_LOCK] (no privileged mode needed).",
            ))
        elif _has_cap(r, "IPC_LOCK") and _has_rdma(r) and pair.preflight in (None, "Disabled"):
            # IPC_LOCK is there, but the ceiling it lifts comes from the node's container runtime (LimitMEMLOCK),
            # which no manifest shows: say what was not checked and how to check it. A PDDeployment's preflight
            # (policy Warn or Fail) measures it in the pod and reports MemlockTooLow in KVTransportReady.
            out.append((
                f"{r.role}: the memlock ceiling is not checked: it comes from the node's container runtime "
                "(LimitMEMLOCK), not from any manifest, and NVIDIA/nvcf#1354 saw NIXL fail to register memory with "
                "IPC_LOCK added while that ceiling stayed low." + note,
                fix_for(pair, "Enable the preflight (spec.network.preflight.policy Warn or Fail): it measures the "
                        "memlock limit in the pod; or make sure the nodes run containerd with LimitMEMLOCK=infinity.",
                        "Check 'Max locked memory' in /proc/self/limits of a running engine, set "
                        "LimitMEMLOCK=infinity for the nodes' containerd, or run ulimit -l unlimited before the engine "
                        "with the SYS_RESOURCE capability added."),
            ))
    return out


#: vLLM versions whose NIXL worker is read to build the remote transfer descriptors with its own memory type
#: (0.26.0 nixl/base_worker.py add_remote_agent ``get_xfer_descs(blocks_data, self.nixl_memory_type)``; 0.32.0
#: ``mem_type = self.nixl_memory_type``); vllm#53554 (open) adds the remote's type to the handshake metadata.
LOCAL_MEMORY_TYPE_READ = ((0, 26, 0), (0, 33, 0))


def nixl_memory_type(role) -> str | None:
    """The NIXL memory type a role registers its KV under: ``DRAM``, ``VRAM`` or None (not known here).

    DRAM: a host buffer (``kv_buffer_device`` cpu) or a CPU engine (vLLM's CPU image: KV is in host memory).
    VRAM: an NVIDIA GPU engine with the default (cuda) buffer. Other accelerators (XPU, HPU, TPU) report their
    own type through their platform, so None. Source: vLLM 0.26.0/0.32.0 nixl/base_worker.py (``use_host_buffer``
    and ``current_platform.get_nixl_memory_type()``, VRAM unless a host buffer).
    """
    if role.buffer_device == "cpu" or is_cpu_image(role.image):
        return "DRAM"
    if role.buffer_device in (None, "cuda") and role.resources.get("nvidia.com/gpu"):
        return "VRAM"
    return None


@rule(
    id="kv-buffer-device-mismatch", family="kv-buffer-device-mismatch", severity="error",
    fields=("spec.kvTransfer.bufferDevice",),
    source=("vllm 0.26.0 and 0.32.0 nixl/base_worker.py: the decoder describes the remote's KV blocks with its own "
            "nixl_memory_type (DRAM for kv_buffer_device cpu, else VRAM), so a prefill in VRAM read as DRAM (or the "
            "reverse) fails; vllm#53554 (open) sends each side's type in the handshake. Other versions: a warning"),
)
def check_kv_buffer_device_match(pair: PDPair) -> list[Violation]:
    """Both roles register their KV under the same NIXL memory type (both host buffers or both device memory)."""
    types = [nixl_memory_type(r) for r in pair.roles]
    if None in types or types[0] == types[1]:
        return []
    p, d = (r.buffer_device or "the default (cuda)" for r in pair.roles)
    certain = pair.version is not None and LOCAL_MEMORY_TYPE_READ[0] <= pair.version < LOCAL_MEMORY_TYPE_READ[1]
    message = (f"Prefill registers its KV as {types[0]} (kv_buffer_device {p}), decode as {types[1]} (kv_buffer_device "
               f"{d}): vLLM's NIXL worker describes the remote's blocks with its own memory type, so the transfer "
               "reads the wrong kind of memory.")
    if not certain:
        message += " Read in vLLM 0.26 and 0.32's source only; for this version it is a warning."
    fix = "Use the same kv_buffer_device on both roles (both cpu, or both the device)."
    return [(message, fix) if certain else (message, fix, "warning")]
