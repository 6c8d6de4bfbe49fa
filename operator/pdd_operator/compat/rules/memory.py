"""Memory NIXL registers for RDMA: the CUDA allocator and memlock."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import COMPOSE_KIND, Violation, fix_for, rule
from pdd_operator.compat.rules.network import _has_rdma
from pdd_operator.vllm.nixl_devices import nixl_device_type
from pdd_operator.vllm.nixl_devices import nixl_memory_type as device_memory_type
from pdd_operator.vllm.versions import Version, fmt, image_repository, is_cpu_image

#: First vLLM release whose ``VllmConfig._verify_kv_transfer_compat`` (vllm/config/vllm.py, called from
#: ``__post_init__``) refuses to start an engine with any KV connector while ``PYTORCH_CUDA_ALLOC_CONF`` holds
#: ``expandable_segments:True`` (vllm#41237; read in the 0.21.0, 0.22.0, 0.23.0 and 0.24.0 sdists and in 0.33.0;
#: absent from 0.20.2). Before it the engine starts and the fault comes at the first RDMA transfer.
EXPANDABLE_SEGMENTS_REFUSED_SINCE: Version = (0, 21, 0)
#: First release with ``--enable-cumem-allocator`` (``ModelConfig.enable_cumem_allocator``, vllm/config/model.py
#: 0.22.0, which ``--enable-sleep-mode`` also sets); from it the refusal exempts that field, in 0.21 only
#: ``enable_sleep_mode``.
CUMEM_ALLOCATOR_FLAG_SINCE: Version = (0, 22, 0)
#: First release read whose ``CuMemAllocator.use_memory_pool`` (vllm/device_allocator/cumem.py, vllm#40812) turns
#: expandable_segments off around its pool, so KV the pool holds (sleep mode or the cumem allocator) lands on pages
#: PyTorch never remaps (read in the sdists: absent from 0.18.0, 0.19.1 and 0.20.0, present from 0.20.1).
CUMEM_POOL_STABLE_SINCE: Version = (0, 20, 1)
#: The flags that put the KV cache in CuMemAllocator's pool: the release each first takes effect from.
CUMEM_FLAGS: dict[str, Version] = {"--enable-sleep-mode": CUMEM_POOL_STABLE_SINCE,
                                   "--enable-cumem-allocator": CUMEM_ALLOCATOR_FLAG_SINCE}


#: First vLLM release whose pinned PyTorch reads ``PYTORCH_ALLOC_CONF``, the accelerator-agnostic allocator variable,
#: before ``PYTORCH_CUDA_ALLOC_CONF`` (PyTorch 2.9.0, which vLLM 0.11.1 moved to; torch's precedence as vLLM 0.34.0
#: writes it down in vllm/device_allocator/alloc_conf.py ``ALLOC_CONF_ENV_VARS``: "the accelerator-agnostic variable
#: wins, then the CUDA one"). vLLM's own startup refusal never reads it: ``_verify_kv_transfer_compat`` checks only
#: ``PYTORCH_CUDA_ALLOC_CONF`` (config/vllm.py 0.23.0 lines 827-829, 0.26.0 lines 916-918, 0.34.0 lines 1242-1244).
GENERAL_ALLOC_CONF_SINCE: Version = (0, 11, 1)


def expandable_segments(alloc_conf: str | None) -> bool:
    """``PYTORCH_CUDA_ALLOC_CONF`` (its raw value, ``None``: unset) turns on PyTorch's expandable segments."""
    return "expandable_segments:true" in (alloc_conf or "").replace(" ", "").lower()


def expandable_segments_fault(version: Version | None, alloc_conf: str | None, cumem_flags, rdma: bool | None,
                              ) -> tuple[str, str] | None:
    """The one definition of ``expandable-segments-with-nixl``: how vLLM ``version`` (``None``: unknown) fails an
    engine with a KV connector, ``PYTORCH_CUDA_ALLOC_CONF`` = ``alloc_conf``, the true flags ``cumem_flags`` (of
    :data:`CUMEM_FLAGS`) and an RDMA device (``rdma``; ``None``: not known), as ``(severity, why)``; ``None``
    where it does not.

    - no ``expandable_segments:True``, or the KV cache in CuMemAllocator's pool (a flag of :data:`CUMEM_FLAGS`
      from the release it works in; with an unknown version the flag is taken at its word): ``None``;
    - from :data:`EXPANDABLE_SEGMENTS_REFUSED_SINCE`: ``error``, refused at startup;
    - before it: ``error`` over RDMA (the registered pages are remapped: IBV_WC_REM_ACCESS_ERR at the first
      inter-node transfer, vllm#41237), ``warning`` without (UCX copies over TCP or cuda_ipc read the current
      mapping: ai-dynamo/nixl#1754 saw the slow path, data correct);
    - unknown version: ``error`` over RDMA (every release fails: from 0.21 at startup, before it at the first
      transfer), else ``warning`` saying the version decides (from 0.21 refused at startup; before it a slower copy
      without RDMA, or not known): an unknown version is refused only where every release is.
    """
    if not expandable_segments(alloc_conf):
        return None
    if any(version is None or version >= CUMEM_FLAGS[f] for f in cumem_flags if f in CUMEM_FLAGS):
        return None
    if version is None:
        if rdma:
            return "error", ("vLLM from 0.21 refuses it at startup (vllm/config/vllm.py _verify_kv_transfer_compat); "
                             "older releases start and fail at the first RDMA transfer")
        over = "" if rdma is False else ", while over RDMA they fail at the first transfer"
        return "warning", ("vLLM from 0.21 refuses it at startup (vllm/config/vllm.py _verify_kv_transfer_compat); "
                           "older releases start, and without an RDMA device UCX copies through the current mapping "
                           f"(ai-dynamo/nixl#1754){over}; this engine's vLLM version is unknown, so the version decides")
    if version >= EXPANDABLE_SEGMENTS_REFUSED_SINCE:
        exempt = "--enable-cumem-allocator or --enable-sleep-mode" if version >= CUMEM_ALLOCATOR_FLAG_SINCE else (
            "--enable-sleep-mode (--enable-cumem-allocator arrived in 0.22)")
        return "error", (f"vLLM {fmt(version)} refuses it at startup unless {exempt} puts the KV cache in the cumem "
                         "allocator's pool (vllm/config/vllm.py _verify_kv_transfer_compat)")
    why = (f"vLLM {fmt(version)} starts, and transfers fail once PyTorch remaps registered pages "
           "(IBV_WC_REM_ACCESS_ERR at the first inter-node transfer, vllm#41237)")
    return ("error", why) if rdma else ("warning", why + "; without an RDMA device UCX copies through the current "
                                        "mapping, so it may only slow the transfer (ai-dynamo/nixl#1754)")


@rule(
    id="expandable-segments-with-nixl", family="expandable-segments-with-nixl", severity="error",
    fields=("spec.engine.env", "spec.prefill.env", "spec.decode.env"),
    source=("vllm/config/vllm.py VllmConfig._verify_kv_transfer_compat (0.21.0+: refused at startup with any KV "
            "connector unless enable_sleep_mode, from 0.22.0 enable_cumem_allocator, which sleep mode sets; "
            "vllm#41237; 0.34.0 lines 1227-1260); vllm/device_allocator/cumem.py use_memory_pool turns "
            "expandable_segments off around the pool (0.20.1+). Before 0.21: IBV_WC_REM_ACCESS_ERR at the first RDMA "
            "transfer (vllm#41237); a warning without RDMA"),
    without_connector=True,
)
def check_expandable_segments(pair: PDPair) -> list[Violation]:
    """No expandable_segments CUDA allocator with a KV connector, unless the cumem allocator holds the KV cache.

    Each role on its own: the role whose registered pages move breaks every transfer that reads or writes them,
    and from 0.21 that role does not start. That startup refusal holds for any KV connector (vLLM checks
    ``kv_transfer_config``, not the connector: vllm/config/vllm.py ``_verify_kv_transfer_compat``, 0.21.0-0.34.0), so
    it is judged on an engine alone (``without_connector``): a role with another connector (LMCache, Mooncake) or
    one whose counterpart moves no KV over NIXL is refused from 0.21 on, and only there; what the remapped pages do
    to a transfer before 0.21 is a NIXL fact, judged only where both roles run NIXL. A role without a KV connector
    passes (vLLM returns before the check).
    """
    out = []
    nixl_pair = all(x.nixl for x in pair.roles)
    for r in pair.roles:
        if r.connector is None:
            continue
        if not nixl_pair and (r.version is None or r.version < EXPANDABLE_SEGMENTS_REFUSED_SINCE):
            continue
        variable, fault = allocator_conf_fault(r.version, r.env, r.cumem_flags, _has_rdma(r), nixl=nixl_pair)
        if fault is None:
            continue
        severity, why = fault
        held = ("memory NIXL registered for RDMA can be remapped later" if r.nixl else
                f"vLLM refuses it with any KV connector, {r.wrapper or r.connector} included")
        out.append((
            f"{r.role}: {variable} enables expandable_segments; {held}: {why}.",
            f"Remove expandable_segments:True from {variable}, or start the engine with "
            "--enable-cumem-allocator (vLLM 0.22+) or --enable-sleep-mode, which keep the KV cache out of "
            "expandable segments.",
            severity,
        ))
    return out


def allocator_conf_fault(version: Version | None, env: dict[str, str], cumem_flags, rdma: bool | None, *,
                         nixl: bool = True) -> tuple[str, tuple[str, str] | None]:
    """Which allocator variable of an engine's ``env`` turns expandable segments on, and how vLLM ``version``
    (``None``: unknown) fails with it, as ``(variable, (severity, why))``; ``(variable, None)`` where it does not.

    ``PYTORCH_CUDA_ALLOC_CONF`` is judged by :func:`expandable_segments_fault` (vLLM's startup refusal reads it). Where
    that finds nothing, ``PYTORCH_ALLOC_CONF`` (the variable PyTorch reads first from 2.9, vLLM
    :data:`GENERAL_ALLOC_CONF_SINCE`) may still put the KV cache in expandable segments: vLLM does not refuse it,
    the engine starts and NIXL's registrations go stale once PyTorch remaps the pages (``error`` over RDMA,
    ``warning`` without: the same transfer fault as before 0.21). Only a NIXL pair's transfer (``nixl``) is judged
    so. Not on releases whose PyTorch ignores the variable; with an unknown version only a ``warning`` (older
    releases ignore it). The cumem allocator's pool exempts either variable (:data:`CUMEM_FLAGS`)."""
    cuda_conf = env.get("PYTORCH_CUDA_ALLOC_CONF")
    general = env.get("PYTORCH_ALLOC_CONF")
    refusal = expandable_segments_fault(version, cuda_conf, cumem_flags, rdma)
    if general and (version is None or version >= GENERAL_ALLOC_CONF_SINCE):
        if refusal is not None and (version is None or version >= EXPANDABLE_SEGMENTS_REFUSED_SINCE):
            return "PYTORCH_CUDA_ALLOC_CONF", refusal  # refused at startup, whatever PyTorch then reads
        refusal = None  # PyTorch reads PYTORCH_ALLOC_CONF instead of PYTORCH_CUDA_ALLOC_CONF
    if refusal is not None:
        return "PYTORCH_CUDA_ALLOC_CONF", refusal
    if not nixl or not expandable_segments(general):
        return "PYTORCH_ALLOC_CONF", None
    if version is not None and version < GENERAL_ALLOC_CONF_SINCE:
        return "PYTORCH_ALLOC_CONF", None  # PyTorch before 2.9 reads only PYTORCH_CUDA_ALLOC_CONF
    if any(version is None or version >= CUMEM_FLAGS[f] for f in cumem_flags if f in CUMEM_FLAGS):
        return "PYTORCH_ALLOC_CONF", None
    unread = ("vLLM's startup check reads only PYTORCH_CUDA_ALLOC_CONF (vllm/config/vllm.py "
              "_verify_kv_transfer_compat), so the engine starts, while PyTorch reads PYTORCH_ALLOC_CONF first "
              "(vllm/device_allocator/alloc_conf.py ALLOC_CONF_ENV_VARS) and puts the KV cache in expandable segments")
    if version is None:
        return "PYTORCH_ALLOC_CONF", ("warning", (
            f"from vLLM {fmt(GENERAL_ALLOC_CONF_SINCE)} (PyTorch 2.9) {unread}, and transfers over RDMA fail once "
            "PyTorch remaps registered pages (IBV_WC_REM_ACCESS_ERR, vllm#41237); older releases ignore the "
            "variable, and this engine's vLLM version is unknown, so the version decides"))
    why = (f"on vLLM {fmt(version)} {unread}; transfers fail once PyTorch remaps registered pages "
           "(IBV_WC_REM_ACCESS_ERR at the first inter-node transfer, vllm#41237)")
    return "PYTORCH_ALLOC_CONF", (("error", why) if rdma else (
        "warning", why + "; without an RDMA device UCX copies through the current mapping, so it may only slow the "
        "transfer (ai-dynamo/nixl#1754)"))


def _raised_by_script(r) -> bool:
    """The engine's script surely raises its memlock limit to unlimited before starting it.

    ``ulimit -l unlimited`` without ``-S`` sets the hard limit too, which setrlimit(2) allows only with
    CAP_SYS_RESOURCE ("A privileged process (under Linux: one with the CAP_SYS_RESOURCE capability ...) may make
    arbitrary changes to either limit value"); a capability added to a non-root container is not effective. With
    RLIMIT_MEMLOCK at RLIM_INFINITY the RDMA core pins any amount (Linux drivers/infiniband/core/umem.c
    ib_umem_get: ``new_pinned > lock_limit && !capable(CAP_IPC_LOCK)`` fails only under a finite limit).
    A Compose service's ``ulimits.memlock: -1`` is set by Docker for the container (docker run reference, ``--ulimit``):
    no capability is needed for it.
    """
    if r.workload_kind == COMPOSE_KIND:  # Docker sets the service's ulimits before the process starts (no setrlimit)
        return r.memlock_ulimit == ("unlimited", "unlimited")
    return r.memlock_ulimit == ("unlimited", "unlimited") and not r.run_as_non_root and _has_cap(r, "SYS_RESOURCE")


#: Images whose default user is root (vLLM's docker/Dockerfile: the ``vllm-openai`` target sets no ``USER``; only
#: ``vllm-openai-nonroot`` switches to ``USER vllm``, 0.28.0 l.1090-1092, 0.34.0 alike; 0.9.0 and 0.20.0 have no
#: ``USER`` at all). Dynamo's runtime images end with ``USER dynamo`` (a non-root user), so they are not listed.
ROOT_IMAGE_REPOSITORIES = frozenset({"vllm/vllm-openai"})


def _ipc_lock_effective(r) -> bool:
    """CAP_IPC_LOCK is in the engine's effective set in the host's user namespace, so the RDMA core pins any amount
    whatever RLIMIT_MEMLOCK the container runtime sets (Linux drivers/infiniband/core/umem.c ``ib_umem_get``: ``if
    (new_pinned > lock_limit && !capable(CAP_IPC_LOCK))`` fails only without the capability; ``can_do_mlock`` alike).

    That holds for a root process of a container that adds IPC_LOCK or is privileged: runc gives a root process the
    OCI spec's capabilities as its effective set (containerd's CRI puts the added ones, or all for a privileged
    container, in the bounding, permitted and effective sets), while a non-root process loses them at execve unless
    they are ambient. Root is known where ``runAsUser: 0`` is set, or where nothing sets a user and the image's default
    user is root (:data:`ROOT_IMAGE_REPOSITORIES`). In a pod user namespace (``hostUsers: false``) the capability is
    not held in the initial namespace, against which ``capable()`` checks."""
    if not _has_cap(r, "IPC_LOCK") or r.run_as_non_root or not r.host_users:
        return False
    return r.run_as_user == 0 or (r.run_as_user is None and image_repository(r.image) in ROOT_IMAGE_REPOSITORIES)


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
            "CAP_SYS_RESOURCE (setrlimit(2)); runc gives a root process the added capabilities (all when privileged) "
            "as effective, a non-root one loses them at execve; vLLM's vllm-openai image runs as root "
            "(docker/Dockerfile: USER only in vllm-openai-nonroot), Dynamo's runtime images as USER dynamo"),
)
def check_memlock(pair: PDPair) -> list[Violation]:
    """KV memory can be pinned (memlock).

    No warning where the engine surely runs with RLIMIT_MEMLOCK unlimited (:func:`_raised_by_script`) or with
    CAP_IPC_LOCK effective (:func:`_ipc_lock_effective`: root with IPC_LOCK added or privileged, in the host's user
    namespace), since the kernel then never compares pinned pages with the limit (``ib_umem_get``); a warning where
    IPC_LOCK is added but the process may not be root (its user not pinned, an image such as Dynamo's runtime with a
    non-root ``USER``), where it is missing on an RDMA engine, or where a non-root user holds it."""
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
        elif _has_cap(r, "IPC_LOCK") and _has_rdma(r) and pair.preflight in (None, "Disabled") \
                and not _ipc_lock_effective(r):
            # IPC_LOCK is added, but whether it is effective depends on the process's user, which the manifest does
            # not pin (a root process holds it and pins past any limit: _ipc_lock_effective; the image's user, e.g.
            # Dynamo's "dynamo", does not), and otherwise the ceiling comes from the node's container runtime
            # (LimitMEMLOCK), which no manifest shows: say what was not checked and how to check it. A PDDeployment's
            # preflight (policy Warn or Fail) measures it in the pod and reports MemlockTooLow in KVTransportReady.
            out.append((
                f"{r.role}: the memlock ceiling is not checked: IPC_LOCK lifts it only for a root process (the "
                "container's user is not set here, and images such as Dynamo's runtime run as a non-root user), and "
                "otherwise it comes from the node's container runtime (LimitMEMLOCK), not from any manifest; "
                "NVIDIA/nvcf#1354 saw NIXL fail to register memory with IPC_LOCK added while that ceiling stayed "
                "low." + note,
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
    VRAM: an NVIDIA GPU engine with the default (cuda) buffer, and any engine vLLM's in-tree GPU or XPU platform
    runs with a cuda or xpu buffer (:func:`pdd_operator.vllm.nixl_devices.nixl_memory_type`: AMD GPUs, Intel XPUs).
    Out-of-tree platforms (HPU, Neuron) report their own type through their platform, so None. Source: vLLM
    0.17.0/0.26.0/0.28.0/0.32.0 nixl/base_worker.py (``use_host_buffer`` and ``current_platform.get_nixl_memory_type()``,
    else VRAM for kv_buffer_device cuda or xpu, DRAM for cpu).
    """
    if role.buffer_device == "cpu" or is_cpu_image(role.image):
        return "DRAM"
    if role.buffer_device in (None, "cuda") and role.resources.get("nvidia.com/gpu"):
        return "VRAM"
    return device_memory_type(nixl_device_type(role.image, role.resources, role.env), role.buffer_device)


@rule(
    id="kv-buffer-device-mismatch", family="kv-buffer-device-mismatch", severity="error",
    fields=("spec.kvTransfer.bufferDevice",),
    source=("vllm 0.26.0 and 0.32.0 nixl/base_worker.py: the decoder describes the remote's KV blocks with its own "
            "nixl_memory_type (DRAM for kv_buffer_device cpu, else VRAM), so a prefill in VRAM read as DRAM (or the "
            "reverse) fails; vllm#53554 (open) sends each side's type in the handshake. Other versions: a warning. "
            "A NIXL child of MultiConnector registers with its own kv_buffer_device (multi_connector.py "
            "KVTransferConfig(**ktc), 0.34.0 lines 274-279), not the parent's"),
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
