"""KV transport preflight: run before vLLM starts (init container, same engine image) to prove that
NIXL will move KV over RDMA, not silently over TCP.

Checks, in order: RDMA devices visible in the pod (``/sys/class/infiniband``, port state), the
memlock limit (pinning KV memory for RDMA), whether NIXL's UCX backend can be created and which
transports UCX would use (RDMA or TCP), and, when a GPU is present, whether GPU memory can be
registered. The result is one JSON object written as the container's termination message, which the
operator folds into the PDDeployment's ``KVTransportReady`` condition.

Standard library only (plus the engine's ``nixl`` package when present, and :mod:`pdd_operator.vllm.ucx_tls`, which
is standard library only too), so it runs in any engine image.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import resource
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pdd_operator.vllm.ucx_tls import allows_rdma

#: Reasons, from best to worst; the operator uses them as condition reasons.
RDMA_READY = "RDMAReady"
TCP_FALLBACK = "TCPFallback"
NO_RDMA_DEVICE = "NoRDMADevice"
MEMLOCK_TOO_LOW = "MemlockTooLow"
NIXL_UNAVAILABLE = "NIXLUnavailable"
GPU_REGISTRATION_FAILED = "GPURegistrationFailed"



@dataclass
class PortState:
    """One RDMA device port: ``mlx5_0:1`` and its state (``ACTIVE``, ``DOWN``...) and link layer."""

    name: str
    state: str
    link_layer: str = ""


@dataclass
class Result:
    """The preflight's verdict, as written to the termination message (JSON, camelCase keys)."""

    reason: str
    ready: bool
    transport: str
    message: str
    devices: list[dict] = field(default_factory=list)
    memlock_bytes: int | None = None
    checks: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        data = asdict(self)
        data["memlockBytes"] = data.pop("memlock_bytes")
        return json.dumps(data, sort_keys=True, separators=(",", ":"))


def rdma_ports(sys_root: Path = Path("/sys/class/infiniband")) -> list[PortState]:
    """RDMA device ports visible in this container (empty when there are none)."""
    out: list[PortState] = []
    if not sys_root.is_dir():
        return out
    for dev in sorted(sys_root.iterdir()):
        ports = dev / "ports"
        for port in sorted(ports.iterdir()) if ports.is_dir() else []:
            state = _read(port / "state")  # e.g. "4: ACTIVE"
            out.append(PortState(f"{dev.name}:{port.name}", state.split(":")[-1].strip() or "UNKNOWN",
                                 _read(port / "link_layer")))
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def memlock_limit() -> int | None:
    """Soft RLIMIT_MEMLOCK in bytes; ``None`` means unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return None if soft == resource.RLIM_INFINITY else soft


def ucx_allows_rdma(env: dict[str, str]) -> bool:
    """Whether ``UCX_TLS`` lets UCX move data over an RDMA transport, as UCX reads the list
    (:func:`pdd_operator.vllm.ucx_tls.allows_rdma`: aliases, ``^`` deny lists, ``:aux``): unset and ``all`` do. A
    value with a name not known there counts as allowing it (the preflight reports a TCP fallback only when sure)."""
    return allows_rdma(env.get("UCX_TLS")) is not False


def _nixl_api():
    for name in ("nixl._api", "nixl_cu12._api", "nixl_cu13._api"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def nixl_ucx_check() -> tuple[bool, str, bool]:
    """Create a NIXL agent with the UCX backend and register a host buffer.

    Returns ``(ok, detail, ib_module)``: ``ib_module`` says whether the UCX bundled with NIXL has its
    InfiniBand transport module (without it UCX can only use TCP and shared memory).
    """
    api = _nixl_api()
    if api is None:
        return False, "the nixl Python package is not installed", False
    try:
        agent = api.nixl_agent("pdd-preflight", api.nixl_agent_config(backends=["UCX"]))
        buf = ctypes.create_string_buffer(1 << 20)
        descs = agent.get_reg_descs([(ctypes.addressof(buf), len(buf), 0, "")], "DRAM")
        handle = agent.register_memory(descs)
        agent.deregister_memory(handle)
    except Exception as exc:  # noqa: BLE001  (any NIXL/UCX failure is the finding)
        return False, f"NIXL UCX agent failed: {exc}", False
    return True, "NIXL UCX agent created and host memory registered", _ucx_has_ib_module(api)


def _ucx_has_ib_module(api) -> bool:
    roots = [Path(api.__file__).resolve().parent.parent]
    roots += [Path(p) for p in os.environ.get("UCX_MODULE_DIR", "").split(":") if p]
    roots += [Path("/usr/lib/ucx"), Path("/usr/lib64/ucx"), Path("/usr/local/ucx/lib/ucx"), Path("/opt/ucx/lib/ucx")]
    for root in roots:
        if root.is_dir() and any(root.rglob("libuct_ib*.so*")):
            return True
    return False


def gpu_registration_check() -> tuple[bool | None, str]:
    """Register one GPU buffer with NIXL when a GPU and torch are present; ``None`` when not applicable."""
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return None, "torch not installed: GPU registration not checked"
    if not torch.cuda.is_available():
        return None, "no GPU visible: GPU registration not checked"
    api = _nixl_api()
    if api is None:
        return False, "the nixl Python package is not installed"
    try:
        agent = api.nixl_agent("pdd-preflight-gpu", api.nixl_agent_config(backends=["UCX"]))
        tensor = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
        handle = agent.register_memory(tensor)
        agent.deregister_memory(handle)
    except Exception as exc:  # noqa: BLE001
        return False, f"registering GPU memory failed: {exc}"
    return True, "GPU memory registered with NIXL"


def decide(
    ports: list[PortState], memlock: int | None, min_memlock: int, nixl: tuple[bool, str, bool],
    rdma_allowed: bool, gpu: tuple[bool | None, str],
) -> Result:
    """Turn the observations into a verdict (pure: every input is passed in)."""
    checks = {
        "devices": ", ".join(f"{p.name}={p.state}" for p in ports) or "none",
        "memlock": "unlimited" if memlock is None else str(memlock),
        "nixl": nixl[1],
        "gpu": gpu[1],
        "ucxTls": "allows RDMA" if rdma_allowed else "excludes RDMA transports",
    }
    devices = [asdict(p) for p in ports]
    active = [p for p in ports if p.state == "ACTIVE"]

    def result(reason: str, ready: bool, transport: str, message: str) -> Result:
        return Result(reason, ready, transport, message, devices, memlock, checks)

    if not nixl[0]:
        return result(NIXL_UNAVAILABLE, False, "none", nixl[1])
    if gpu[0] is False:
        return result(GPU_REGISTRATION_FAILED, False, "none", gpu[1])
    if not ports:
        low = "" if memlock is None or memlock >= min_memlock else (
            f" The memlock limit ({memlock} bytes) is also below {min_memlock}.")
        return result(NO_RDMA_DEVICE, False, "tcp",
                      "No RDMA device is visible in the pod (/sys/class/infiniband is empty); NIXL/UCX will use TCP." + low)
    if memlock is not None and memlock < min_memlock:
        return result(MEMLOCK_TOO_LOW, False, "tcp",
                      f"The memlock limit is {memlock} bytes (< {min_memlock}); RDMA memory registration will fail. "
                      "Run the engine as root with IPC_LOCK and raise LimitMEMLOCK in the node's container runtime.")
    if not active:
        return result(TCP_FALLBACK, False, "tcp", f"No RDMA port is ACTIVE ({checks['devices']}).")
    if not nixl[2]:
        return result(TCP_FALLBACK, False, "tcp", "The UCX that NIXL loads has no InfiniBand transport module.")
    if not rdma_allowed:
        return result(TCP_FALLBACK, False, "tcp", f"UCX_TLS={os.environ.get('UCX_TLS', '')} excludes RDMA transports.")
    return result(RDMA_READY, True, "rdma", f"RDMA ready on {', '.join(p.name for p in active)}.")


def run(sys_root: Path = Path("/sys/class/infiniband"), min_memlock: int = 1 << 30) -> Result:
    """Observe this container and decide."""
    return decide(rdma_ports(sys_root), memlock_limit(), min_memlock, nixl_ucx_check(),
                  ucx_allows_rdma(dict(os.environ)), gpu_registration_check())
