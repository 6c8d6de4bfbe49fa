"""``UCX_TLS`` read as UCX reads it, and UCX's transports by the memory they move: the one definition that the
compatibility rules (:mod:`pdd_operator.compat.rules.ucx_tls`) and the in-pod preflight (:mod:`pdd_operator.preflight`)
share. Standard library only: the preflight imports it inside any engine image.

NIXL's UCX backend (vLLM's default ``kv_connector_extra_config`` backends ``['UCX']``) creates its UCP context from
the process's ``UCX_*`` environment, and vLLM sets no ``UCX_TLS`` itself (0.9.0-0.34.0), so what the variable allows
is UCX's business. Read in openucx/ucx v1.18.0, v1.19.0 and v1.20.0 (NIXL's wheels bundle UCX 1.19 / 1.20;
vllm-project/aibrix's v0.5.0 vLLM RDMA manifest pins UCX 1.19.0):

- ``src/ucs/config/parser.c`` ``ucs_config_sscanf_allow_list`` (v1.20.0 lines 944-972): a leading ``^`` makes the
  list a deny list; the rest is split at ``,`` (``ucs_config_sscanf_array``, lines 825-855, no trimming); ``all`` as
  the first name allows every transport, and ``all`` followed by other names is a parse error (the context is not
  created at all).
- ``src/ucp/core/ucp_context.c`` ``ucp_tl_aliases`` (v1.20.0 lines 710-731): the aliases below. ``name:aux`` marks a
  transport used only for connection set-up (``UCP_TL_AUX``), and ``\\name`` names the transport, never an alias
  (``ucp_config_is_tl_name_present``). ``ucp_transports_list_search`` and ``ucp_is_resource_in_transports_list``
  (lines 1040-1165) decide per transport: an allow list enables a transport it (or an alias of it) names, as an
  auxiliary one where only ``:aux`` names it; a deny list disables a transport it names, except one that serves some
  alias as auxiliary (``ud_mlx5``, ``ud_verbs``: ``ucp_fill_aux_tls``, lines 1715-1739), which stays as auxiliary
  unless it is denied with its ``:aux`` too (or by ``ib``, whose members list both from 1.19).

Names are matched exactly, as UCX matches them: ``ucs_config_sscanf_array`` splits the value with ``strtok_r(...,
",")`` (empty names dropped, nothing trimmed: parser.c v1.20.0 lines 825-855), ``all`` is recognised by ``strcmp``
(line 961; v1.18.0 and v1.19.0 line 961 too), and ``ucp_str_array_search`` compares each listed name with a transport
or alias name by ``strcmp`` (ucp_context.c v1.20.0 lines 937-960; v1.18.0 line 879, v1.19.0 line 925), as it does
the device names of ``UCX_NET_DEVICES`` (``ucp_is_resource_in_device_list``, v1.20.0 lines 1000-1027). So ``TCP``,
``RC`` or `` cuda_copy`` name nothing UCX has: it warns that they are "not available" (``ucp_report_unavailable``,
lines 1326-1355) and leaves them out. Such a name, one that differs from a UCX name only in case or blanks, is
:attr:`UcxTls.unrecognised` (certainly matching nothing), not a match and not :attr:`UcxTls.unknown`.
"""

from __future__ import annotations

from dataclasses import dataclass

#: ``ucp_tl_aliases`` of UCX v1.20.0 (src/ucp/core/ucp_context.c lines 710-731): alias -> its transports, ``:aux``
#: for an auxiliary one. v1.19.0 is the same but for ``srd`` in ``ib``; v1.18.0's ``ib`` has neither ``gga_mlx5``
#: nor the ``:aux`` members and there is no ``gga`` alias (which changes nothing this module judges: a transport
#: ``ib`` denies stays auxiliary at most). ``ugni`` (Cray) and ``gaudi`` are kept for completeness.
ALIASES: dict[str, tuple[str, ...]] = {
    "mm": ("posix", "sysv", "xpmem"),
    "sm": ("posix", "sysv", "xpmem", "knem", "cma"),
    "shm": ("posix", "sysv", "xpmem", "knem", "cma"),
    "ib": ("rc_verbs", "ud_verbs", "rc_mlx5", "ud_mlx5", "dc_mlx5", "gga_mlx5", "ud_mlx5:aux", "ud_verbs:aux", "srd"),
    "ud_v": ("ud_verbs",),
    "ud_x": ("ud_mlx5",),
    "ud": ("ud_mlx5", "ud_verbs"),
    "rc_v": ("rc_verbs", "ud_verbs:aux"),
    "rc_x": ("rc_mlx5", "ud_mlx5:aux"),
    "rc": ("rc_mlx5", "ud_mlx5:aux", "rc_verbs", "ud_verbs:aux"),
    "dc": ("dc_mlx5", "ud_mlx5:aux"),
    "dc_x": ("dc_mlx5", "ud_mlx5:aux"),
    "ugni": ("ugni_smsg", "ugni_udt:aux", "ugni_rdma"),
    "cuda": ("cuda_copy", "cuda_ipc", "gdr_copy"),
    "rocm": ("rocm_copy", "rocm_ipc", "rocm_gdr"),
    "ze": ("ze_copy", "ze_ipc", "ze_gdr"),
    "gaudi": ("gaudi_gdr",),
    "gga": ("gga_mlx5",),
}

#: UCT transports over an InfiniBand / RoCE (Verbs) device that carry data between nodes: RC, UD and DC, each through
#: Verbs and through the mlx5 accelerated path (``ucx_info -d`` on a ConnectX NIC).
VERBS_TRANSPORTS: frozenset[str] = frozenset({"rc_verbs", "rc_mlx5", "ud_verbs", "ud_mlx5", "dc_mlx5"})
#: RDMA transports between nodes: the Verbs ones and AWS EFA's ``srd`` (in the ``ib`` alias from UCX 1.20.0).
#: ``gga_mlx5`` (BlueField's DMA engine, in ``ib`` from 1.19.0) copies within one node and is not one of them.
RDMA_TRANSPORTS: frozenset[str] = VERBS_TRANSPORTS | {"srd"}
#: Transports for accelerator memory on one node (``cuda``, ``rocm``, ``ze``, ``gaudi`` aliases' members).
GPU_TRANSPORTS: frozenset[str] = frozenset({
    "cuda_copy", "cuda_ipc", "gdr_copy", "rocm_copy", "rocm_ipc", "rocm_gdr", "ze_copy", "ze_ipc", "ze_gdr",
    "gaudi_gdr",
})
#: Transports that move host memory only: TCP sockets, the shared-memory ones and the loopback (``ucx_info -d``
#: "memory types: host").
HOST_ONLY_TRANSPORTS: frozenset[str] = frozenset({"tcp", "posix", "sysv", "xpmem", "knem", "cma", "self"})
#: Every UCT transport named here; a name outside these and :data:`ALIASES` is not judged.
KNOWN_TRANSPORTS: frozenset[str] = (RDMA_TRANSPORTS | GPU_TRANSPORTS | HOST_ONLY_TRANSPORTS
                                    | {"gga_mlx5", "ugni_smsg", "ugni_udt", "ugni_rdma"})
#: Transports some alias lists as auxiliary (``ucp_fill_aux_tls``).
_AUX_CAPABLE = frozenset(m.split(":")[0] for members in ALIASES.values() for m in members if m.endswith(":aux"))


@dataclass(frozen=True)
class UcxTls:
    """A ``UCX_TLS`` value as UCX parses it.

    Attributes:
        mode: ``"all"`` (unset, empty or ``all``: every transport), ``"allow"`` or ``"deny"`` (a leading ``^``).
        names: the names listed as written, ``:aux`` and a leading ``\\`` kept (empty for ``all``).
        unknown: listed names that are neither a transport nor an alias known here in any case (the verdicts then
            say ``None``), or the whole value where UCX refuses to parse it (``all`` followed by other names).
        unrecognised: listed names that differ from a transport or alias name (or ``all``) only in case or surrounding
            blanks (``TCP``, ``RC``, `` cuda_copy``): UCX matches names exactly, so they name nothing and are left out
            (module docstring); the verdicts read them as matching nothing.
    """

    mode: str
    names: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    unrecognised: tuple[str, ...] = ()

    def state(self, transport: str) -> str:
        """``"primary"``, ``"aux"`` (connection set-up only) or ``"off"`` for the UCT ``transport``
        (``ucp_is_resource_in_transports_list``, UCX v1.20.0 ucp_context.c lines 1105-1165)."""
        if self.mode == "all":
            return "primary"
        primary = aux_in_main = aux_in_alias = both_in_alias = False
        for entry in self.names:
            base, _, suffix = entry.partition(":")
            strict = base.startswith("\\")
            base = base.lstrip("\\")
            if base == transport:
                primary |= suffix == ""
                aux_in_main |= suffix == "aux"
            if strict or base not in ALIASES:
                continue
            members = ALIASES[base]
            in_alias, aux_member = transport in members, f"{transport}:aux" in members
            if suffix == "":
                primary |= in_alias
                aux_in_alias |= aux_member
                both_in_alias |= in_alias and aux_member
            elif suffix == "aux":
                aux_in_main |= in_alias
        if self.mode == "allow":
            return "primary" if primary else "aux" if aux_in_main or aux_in_alias else "off"
        if transport not in _AUX_CAPABLE:
            return "off" if primary else "primary"
        if (primary and aux_in_main) or both_in_alias:
            return "off"
        return "aux" if primary else "primary"

    def allowed(self, transports: frozenset[str]) -> list[str] | None:
        """The transports of ``transports`` this value enables for data (``"primary"``), sorted; ``None`` where a
        listed name is unknown here (UCX may read it as a transport or alias this module does not know)."""
        if self.unknown:
            return None
        return sorted(t for t in transports if self.state(t) == "primary")


def _known(name: str) -> bool:
    """``name`` (one listed entry) is a transport or alias of UCX as written: ``[\\]NAME[:aux]``."""
    base, _, suffix = name.partition(":")
    return base.lstrip("\\") in KNOWN_TRANSPORTS | ALIASES.keys() and suffix in ("", "aux")


def parse(value: str | None) -> UcxTls:
    """``UCX_TLS`` (its raw value; ``None``: unset) as UCX parses it (:class:`UcxTls`): split at ``,`` with empty names
    dropped and nothing trimmed or case-folded (module docstring). Pure."""
    text = value or ""
    deny = text.startswith("^")
    names = tuple(n for n in (text[1:] if deny else text).split(",") if n)
    if not names:
        return UcxTls("all")
    if names[0] == "all":
        return UcxTls("all") if len(names) == 1 else UcxTls("allow", names, (text,))
    unrecognised = tuple(n for n in names if not _known(n) and (_known(n.strip().lower()) or n.strip().lower() == "all"))
    unknown = tuple(n for n in names if not _known(n) and n not in unrecognised)
    return UcxTls("deny" if deny else "allow", names, unknown, unrecognised)


#: Prefixes of the RDMA device names the Linux kernel gives (``ibv_devices``: ``mlx5_0``, ``mlx4_0``, ``efa_0``,
#: ``bnxt_re0``, ``irdma0``, ``rxe0``, ``qedr0``, ``hfi1_0``, ``erdma_0``, ``ionic_0``): lower-case, as UCX names them.
RDMA_DEVICE_PREFIXES = ("mlx5_", "mlx4_", "efa", "bnxt_re", "irdma", "rxe", "qedr", "hfi1_", "erdma", "ionic")


def unrecognised_devices(value: str | None) -> tuple[str, ...]:
    """The names of ``UCX_NET_DEVICES`` (its raw value) that UCX will match with no device: any name with blanks around
    it (`` mlx5_0:1``, `` lo``), and ``all`` or an RDMA device (:data:`RDMA_DEVICE_PREFIXES`, ``mlx5_0:1``) written in
    another case (``ALL``, ``MLX5_0:1``); UCX compares device names and ``all`` by ``strcmp`` (module docstring). An
    interface name in capitals (``Eth0``) may be the interface's own. Pure."""
    out = []
    for name in (n for n in (value or "").split(",") if n):
        folded = name.strip().lower()
        if name != name.strip() or (name != folded and (folded == "all" or folded.startswith(RDMA_DEVICE_PREFIXES))):
            out.append(name)  # no device name has blanks; RDMA device names and all are lower-case
    return tuple(out)


def allows_rdma(value: str | None, transports: frozenset[str] = RDMA_TRANSPORTS) -> bool | None:
    """Whether ``UCX_TLS`` ``value`` lets UCX move data over one of ``transports`` (default: every RDMA transport;
    :data:`VERBS_TRANSPORTS` for an InfiniBand / RoCE device): unset and ``all`` do; ``None`` where a name is not
    known here or UCX refuses the value."""
    allowed = parse(value).allowed(transports)
    return None if allowed is None else bool(allowed)
