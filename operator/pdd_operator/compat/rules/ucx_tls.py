"""The UCX transports an engine allows (``UCX_TLS``) against the memory its KV cache lives in and the RDMA device its
pod holds. How UCX reads ``UCX_TLS`` and which transport moves what: :mod:`pdd_operator.vllm.ucx_tls` (shared with
the in-pod preflight)."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.compat.rules.network import verbs_rdma
from pdd_operator.vllm.expansion import unknown_names
from pdd_operator.vllm.ucx_tls import (
    GPU_TRANSPORTS,
    RDMA_TRANSPORTS,
    VERBS_TRANSPORTS,
    parse,
    unrecognised_devices,
)


def _listed(value: str) -> list[str]:
    """The names a ``UCX_TLS`` value lists as written (``:aux`` dropped) for the messages: an allow list's names,
    ``["all but ..."]`` for a deny list."""
    if value.startswith("^"):
        return [f"all but {value[1:]}"]
    return [t.split(":", 1)[0] for t in value.split(",") if t]


def host_only_transports(ucx_tls: str | None) -> list[str] | None:
    """The transports ``UCX_TLS`` (its raw value; ``None``: unset) allows when every transport it enables for data
    moves host memory only (no :data:`~pdd_operator.vllm.ucx_tls.GPU_TRANSPORTS` nor
    :data:`~pdd_operator.vllm.ucx_tls.RDMA_TRANSPORTS` enabled, as UCX reads the list:
    :func:`pdd_operator.vllm.ucx_tls.parse`), as written (:func:`_listed`); ``None`` otherwise.

    Unset, empty or ``all``, a list that enables a CUDA / ROCm / RDMA transport, a name not known there, and a value
    not all in the manifest (``<unknown:NAME>``, from a variable or an ``envFrom`` source not in the files) give
    ``None``. Pure."""
    if unknown_names(ucx_tls):
        return None
    tls = parse(ucx_tls)
    if tls.mode == "all" or tls.unrecognised or tls.allowed(GPU_TRANSPORTS | RDMA_TRANSPORTS) != []:
        return None  # a name UCX does not recognise: ucx-name-unrecognised says so
    return _listed(ucx_tls or "")


def _kv_in_gpu_memory(r: RoleConfig) -> bool:
    """The engine registers its KV cache in accelerator memory with NIXL (``kv_buffer_device`` cuda or unset, the
    default), not in a host buffer (``cpu``)."""
    return r.buffer_device in (None, "cuda")


@rule(
    id="ucx-tls-no-cuda-transport", family="kv-transport", severity="warning",
    needs=("UCX_TLS",),
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


def no_rdma_transport(ucx_tls: str | None) -> list[str] | None:
    """The transports ``UCX_TLS`` (its raw value; ``None``: unset) allows (:func:`_listed`) when it enables no
    InfiniBand / RoCE transport (:data:`~pdd_operator.vllm.ucx_tls.VERBS_TRANSPORTS`) for data, as UCX reads the list
    (:func:`pdd_operator.vllm.ucx_tls.parse`: aliases, ``^`` deny lists, ``:aux``), else ``None``.

    Unset or ``all`` lets UCX pick every available transport (RC or DC on an RDMA device). A name not known there, a
    value UCX refuses, or one not all in the manifest (``<unknown:NAME>``) gives ``None`` (not known). Pure."""
    if unknown_names(ucx_tls):
        return None
    tls = parse(ucx_tls)
    if tls.mode == "all" or tls.unrecognised or tls.allowed(VERBS_TRANSPORTS) != []:
        return None  # a name UCX does not recognise: ucx-name-unrecognised says so
    return _listed(ucx_tls or "")


def ethernet_only_devices(ucx_net_devices: str | None) -> list[str] | None:
    """The devices ``UCX_NET_DEVICES`` names when each is a network interface (``eth0``, ``lo``, ``net1``, ``bond0``)
    and none an RDMA device, else ``None``. UCX names an RDMA device with its port (``mlx5_2:1``) and a TCP interface
    by its name alone (docs/source/faq.md, "Which network devices does UCX use?": ``UCX_NET_DEVICES=eth2`` uses eth2
    for the TCP sockets transport, ``mlx5_2:1`` the RDMA device): a list of interfaces only leaves UCX no RDMA device.
    Unset, ``all`` or a value not all in the manifest gives ``None``. Pure."""
    value = ucx_net_devices or ""
    if not value or value == "all" or unknown_names(ucx_net_devices) or unrecognised_devices(value):
        return None  # UCX compares names exactly (strcmp): a mis-cased one is ucx-name-unrecognised's
    names = [d for d in value.split(",") if d]
    if not names or any(":" in d for d in names):
        return None
    return names


def _rdma_pods(pair: PDPair) -> list[tuple[RoleConfig, str]]:
    """The roles whose KV NIXL moves with UCX from GPU memory on a pod that is handed an InfiniBand/RoCE device
    (:func:`~pdd_operator.compat.rules.network.verbs_rdma`), each with how it is."""
    return [(r, how) for r in pair.roles
            if r.nixl and "UCX" in r.backends and _kv_in_gpu_memory(r) and (how := verbs_rdma(r))]


_WHY_WARNING = ("That is a failure of no vLLM code (vLLM passes UCX_* to UCX untouched): between nodes UCX then moves "
                "the KV over TCP sockets (staged through host memory by cuda_copy), an order of magnitude slower than "
                "RDMA, while the RDMA device the pod holds goes unused.")


@rule(
    id="ucx-tls-no-rdma-transport", family="kv-transport", severity="warning",
    needs=("UCX_TLS",),
    fields=("spec.network.ucx.transports", "spec.network.rdma.resourceName", "spec.prefill.env", "spec.decode.env",
            "spec.engine.env"),
    source=("UCX docs/source/faq.md ('Which transports does UCX use?': UCX_TLS restricts the transports, '^' makes a "
            "deny list; aliases rc, ud, dc, rc_x/rc_v, ud_x/ud_v, cuda, sm; ucx_info -d lists them per device); NIXL's "
            "UCX backend (vLLM's default kv_connector_extra_config backends ['UCX']) creates its UCP context with the "
            "process's UCX_* environment; vLLM sets none of UCX_TLS (0.9.0-0.34.0)"),
    example="UCX_TLS=cuda_copy,cuda_ipc,tcp on a pod that requests rdma/roce_gdr",
)
def check_ucx_tls_rdma(pair: PDPair) -> list[Violation]:
    """UCX_TLS, where set on an engine whose pod holds an RDMA device for its KV transfer, allows an RDMA
    transport (rc, ud, dc, ib, or all)."""
    out: list[Violation] = []
    for r, how in _rdma_pods(pair):
        if host_only_transports(r.env.get("UCX_TLS")) is not None:
            continue  # no GPU transport at all: ucx-tls-no-cuda-transport says more
        names = no_rdma_transport(r.env.get("UCX_TLS"))
        if names is None:
            continue
        out.append((
            f"{r.role}: {how}, but UCX_TLS={r.env['UCX_TLS']} allows no RDMA transport ({', '.join(names)}; "
            f"no rc, ud, dc or ib). {_WHY_WARNING}",
            fix_for(pair, "Add rc (or dc, ud, ib) to spec.network.ucx.transports, e.g. rc,cuda_copy,cuda_ipc, or "
                          "leave it unset (UCX then uses every transport it finds).",
                    f"Add rc (or dc, ud, ib) to UCX_TLS on the {r.role} container, e.g. rc,cuda_copy,cuda_ipc, or "
                    "remove UCX_TLS (UCX then uses every transport it finds)."),
        ))
    return out


@rule(
    id="ucx-net-devices-no-rdma", family="kv-transport", severity="warning",
    fields=("spec.network.ucx.netDevices", "spec.network.rdma.resourceName", "spec.prefill.env", "spec.decode.env",
            "spec.engine.env"),
    source=("UCX docs/source/faq.md ('Which network devices does UCX use?': UCX_NET_DEVICES restricts UCX to the "
            "devices named; eth2 is a TCP sockets device, mlx5_2:1 an RDMA device and its port; ucx_info -d); NIXL's "
            "UCX backend reads the process's UCX_* environment; vLLM sets UCX_NET_DEVICES itself only where "
            "VLLM_NIC_SELECTION_VARS names it (0.23.0+: vllm/v1/executor/vllm_net_devices.py set_worker_net_device, "
            "0.23.0 l.174-181, puts the GPU's RDMA device in front of the value)"),
    example="UCX_NET_DEVICES=eth0 on a pod that requests nvidia.com/hostdev",
)
def check_ucx_net_devices_rdma(pair: PDPair) -> list[Violation]:
    """UCX_NET_DEVICES, where set on an engine whose pod holds an RDMA device for its KV transfer, names an RDMA
    device (mlx5_0:1), not only network interfaces (eth0, lo)."""
    out: list[Violation] = []
    for r, how in _rdma_pods(pair):
        names = ethernet_only_devices(r.env.get("UCX_NET_DEVICES"))
        if names is None or "UCX_NET_DEVICES" in r.env.get("VLLM_NIC_SELECTION_VARS", "") \
                or unknown_names(r.env.get("VLLM_NIC_SELECTION_VARS", "")):
            continue  # vLLM 0.23+ may put the GPU's RDMA device in front (set_worker_net_device)
        out.append((
            f"{r.role}: {how}, but UCX_NET_DEVICES={r.env['UCX_NET_DEVICES']} names only network interfaces "
            f"({', '.join(names)}), which UCX drives with its TCP transport; no RDMA device (device:port, e.g. "
            f"mlx5_0:1) is left to it. {_WHY_WARNING}",
            fix_for(pair, "Set spec.network.ucx.netDevices to the GPU-local RDMA devices (e.g. mlx5_0:1), or leave it "
                          "unset.",
                    f"Set UCX_NET_DEVICES on the {r.role} container to the GPU-local RDMA devices (e.g. mlx5_0:1), or "
                    "remove it."),
        ))
    return out


@rule(
    id="ucx-name-unrecognised", family="kv-transport", severity="warning",
    needs=("UCX_TLS",),
    fields=("spec.network.ucx.transports", "spec.network.ucx.netDevices", "spec.prefill.env", "spec.decode.env",
            "spec.engine.env"),
    source=("openucx/ucx src/ucs/config/parser.c ucs_config_sscanf_array (strtok_r at ',', nothing trimmed) and "
            "ucs_config_sscanf_allow_list (strcmp with 'all'), src/ucp/core/ucp_context.c ucp_str_array_search "
            "(strcmp of each listed transport, alias or device name; v1.20.0 lines 937-960, v1.19.0 line 925, v1.18.0 "
            "line 879) and ucp_report_unavailable ('... not available, please use one or more of'); NIXL's UCX backend "
            "reads the process's UCX_* environment, vLLM passes it untouched"),
    example="UCX_TLS=RC,CUDA_COPY on a NixlConnector engine",
)
def check_ucx_names(pair: PDPair) -> list[Violation]:
    """The names of UCX_TLS and UCX_NET_DEVICES are UCX's own, as UCX spells them (lower-case, no blanks): UCX matches
    them exactly, so ``RC``, ``TCP``, ``ALL`` or ``MLX5_0:1`` name nothing and are left out."""
    out: list[Violation] = []
    for r in pair.roles:
        if not r.nixl or "UCX" not in r.backends:
            continue
        for var in ("UCX_TLS", "UCX_NET_DEVICES"):
            value = r.env.get(var)
            if value is None or unknown_names(value):
                continue
            bad = parse(value).unrecognised if var == "UCX_TLS" else unrecognised_devices(value)
            if not bad:
                continue
            shown = ", ".join(repr(n) for n in bad)
            what = "transport and alias names (rc, cuda_copy, tcp, all)" if var == "UCX_TLS" else \
                "device names (mlx5_0:1) and all"
            out.append((
                f"{r.role}: {var}={value} lists {shown}, which UCX does not recognise: it compares {what} exactly "
                "(strcmp), nothing trimmed or case-folded, so it warns that they are not available and leaves them "
                "out; NIXL's UCX backend then runs without them (with an allow list of nothing else UCX knows, without "
                "any transport or device to move the KV).",
                fix_for(pair, f"Write the names as UCX spells them in the {var} setting (lower-case, no blanks: "
                              f"{', '.join(repr(n.strip().lower()) for n in bad)}).",
                        f"Write the names as UCX spells them in {var} on the {r.role} container (lower-case, no "
                        f"blanks: {', '.join(repr(n.strip().lower()) for n in bad)})."),
            ))
    return out
