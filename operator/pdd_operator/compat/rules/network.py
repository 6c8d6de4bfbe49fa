"""KV transport and networking: the side channel, its ports, UCX devices, RDMA and fabrics."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.placement import HOSTNAME_ASSUMPTION, hostname_assumed, may_share_node, pinned_node, same_node
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.args import HOST_IP, POD_IP
from pdd_operator.vllm.expansion import unknown, unknown_names
from pdd_operator.vllm.http_socket import ALWAYS_RELEASES, GATED_SINCE_TEXT, http_reuse_port
from pdd_operator.vllm.versions import dev_build_floor

#: The everyday spellings of the loopback and wildcard hosts, which a message names without explaining them.
_BARE = {"0.0.0.0", "::", "localhost", "127.0.0.1", "::1"}


def host_kind(host: str | None) -> Literal["loopback", "wildcard", "empty"] | None:
    """What a ``VLLM_NIXL_SIDE_CHANNEL_HOST`` value (``None``: unset) names as vLLM binds and advertises it:
    ``"loopback"`` (unset, vLLM's default ``localhost``; ``localhost``; any 127.0.0.0/8 or ``::1`` address),
    ``"wildcard"`` (``0.0.0.0``, ``::`` or another spelling of the unspecified address: the listener binds every
    interface), ``"empty"`` (set to the empty string: ``tcp://:<port>`` has no host, which vLLM's split_zmq_path
    refuses), else ``None`` (a name or a specific address, judged by nobody here).

    An IPv6 address in brackets is read as the address: vLLM's ``make_zmq_path`` brackets only a bare valid IPv6
    address and keeps any other host as written (``tcp://[::]:5600``), and ``split_zmq_path`` / ``make_zmq_socket``
    read the host of that path with ``urlparse(...).hostname``, which drops the brackets, and turn IPv6 on for it
    (0.10.0 vllm/utils/__init__.py lines 2747-2783 and 2829-2833; 0.23.0 vllm/utils/network_utils.py), so ``[::]``
    binds the IPv6 wildcard and the peer dials it back as such. An IPv4-mapped IPv6 address (``::ffff:127.0.0.1``) is
    read as the IPv4 address it maps. Pure."""
    if host is None:
        return "loopback"
    text = host.strip()
    if not text:
        return "empty"
    if text.lower() == "localhost":
        return "loopback"
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_unspecified:
        return "wildcard"
    return "loopback" if address.is_loopback else None



def _behind_aibrix_gateway(pair: PDPair) -> bool:
    """Both engines are roles of an AIBrix StormService, which the AIBrix gateway routes."""
    return all(r.workload_kind == "StormService" for r in pair.roles)


def _port_unknown(r: RoleConfig) -> bool:
    """The role sets VLLM_NIXL_SIDE_CHANNEL_PORT to a value that is not in the files (a variable from the image or a
    ConfigMap, a shell command substitution such as ``$(get_next_tcp_port)``): vLLM listens on that value, not on
    its default."""
    return bool(unknown_names(r.env.get("VLLM_NIXL_SIDE_CHANNEL_PORT")))


def _port_source(r: RoleConfig) -> str:
    """Where an unknown VLLM_NIXL_SIDE_CHANNEL_PORT (:func:`_port_unknown`) comes from, for messages."""
    names = unknown_names(r.env.get("VLLM_NIXL_SIDE_CHANNEL_PORT"))
    why = dict(r.opaque).get("VLLM_NIXL_SIDE_CHANNEL_PORT")
    return f"${names[0]}, {why}" if why else f"the value of ${names[0]}"


#: The first release whose NIXL listener takes one port per data-parallel rank (``VLLM_NIXL_SIDE_CHANNEL_PORT +
#: data_parallel_rank``, 0.11.1 nixl_connector.py lines 352-355; 0.32.0 nixl/base_scheduler.py ``+
#: data_parallel_index``) and whose default base is 5600 (envs.py). Before it every worker of an engine binds its own
#: port, base + DP rank x TP size + TP rank (0.9.1 v1/nixl_connector.py lines 183-186 ``data_parallel_rank_local *
#: tensor_parallel_size`` and ``_nixl_handshake_listener`` ``base_port + tp_rank``; 0.9.2-0.11.0 the same with
#: ``data_parallel_rank``, 0.11.0 lines 267-270 and 608-622; 0.9.0 ``VLLM_NIXL_SIDE_CHANNEL_PORT + rank``, line 406),
#: default base 5557.
PER_DP_RANK_SINCE = (0, 11, 1)
#: The releases that bind one side-channel port per TP rank (before :data:`PER_DP_RANK_SINCE`), for messages.
PER_TP_RANK_RELEASES = "0.9.0-0.11.0"


#: The last release whose NIXL side-channel port counts the engine core's LOCAL data-parallel rank (0.9.1
#: v1/nixl_connector.py lines 183-186 and 340-343, ``data_parallel_rank_local * tensor_parallel_size``); 0.9.2 on
#: count the global rank (0.9.2 lines 192-194 ``data_parallel_rank``; 0.11.1 lines 352-355). A headless launch of
#: ranks 2-3 therefore binds the ports of ranks 0-1 on 0.9.1, the same ones as its leader on that host.
LOCAL_DP_INDEX_UNTIL = (0, 9, 1)


def _ports(r: RoleConfig, version=None) -> set[int]:
    """The side-channel ports the role's engine listens on in its own network namespace (base + DP index, 0.11.1+;
    base + DP index x TP size + TP rank before, :data:`PER_DP_RANK_SINCE`), empty where the base is not in the files
    (:func:`_port_unknown`). An engine whose DP ranks span launches (``RoleConfig.spans_nodes``) binds only those of
    its own engine cores (:func:`_own_dp_indices`); where they are not known, the whole group's range is taken.
    ``version`` stands in for the role's own (for an engine whose version is unknown); an unknown one is taken as
    0.11.1 or later."""
    raw = r.env.get("VLLM_NIXL_SIDE_CHANNEL_PORT")
    if _port_unknown(r):
        return set()
    version = version or r.version
    old = version is not None and version < PER_DP_RANK_SINCE
    base = int(raw) if raw and raw.isdigit() else (5557 if old else 5600)
    indices = _own_dp_indices(r, version) or range(r.dp or 1)
    tp = r.tp or 1 if old else 1
    return {base + i * tp + t for i in indices for t in range(tp)}


def _own_dp_indices(r: RoleConfig, version) -> range | None:
    """The DP indices whose side-channel ports ``r``'s own launch binds, where its ranks span launches
    (``RoleConfig.spans_nodes``: a ``--headless`` worker, a start rank, an external-LB rank): its
    ``data_parallel_size_local`` engine cores from global rank ``dp_first`` on, or from 0 on vLLM up to
    :data:`LOCAL_DP_INDEX_UNTIL` (the local rank); ``None`` where the launch does not span or a count is unknown."""
    if not r.spans_nodes or r.dp_local is None or r.dp_first is None:
        return None
    first = 0 if version is not None and version <= LOCAL_DP_INDEX_UNTIL else r.dp_first
    return range(first, first + r.dp_local)


def _newer_than_per_tp(r: RoleConfig) -> bool:
    """An engine of unknown version that runs 0.11.1 or later all the same: a development build of a later line
    (:func:`~pdd_operator.vllm.versions.dev_build_floor`) or a flag first parsed in a later release
    (``RoleConfig.flag_floor``)."""
    floors = [f for f in (dev_build_floor(r.version_text), r.flag_floor and r.flag_floor[0]) if f]
    return r.version is None and any(f >= PER_DP_RANK_SINCE for f in floors)


def _old_release_clash(p: RoleConfig, d: RoleConfig) -> list[int]:
    """Where at least one engine's vLLM version is unknown: the side-channel ports both would bind on the releases
    of :data:`PER_TP_RANK_RELEASES` (one port per TP rank, :func:`_ports`), sorted; empty where both versions are
    known (each is judged on its own) or those ports are disjoint too."""
    if p.version is not None and d.version is not None or any(_newer_than_per_tp(r) for r in (p, d)):
        return []
    before = (PER_DP_RANK_SINCE[0], PER_DP_RANK_SINCE[1], PER_DP_RANK_SINCE[2] - 1)
    return sorted(_ports(p, p.version or before) & _ports(d, d.version or before))


_EFA = "vpc.amazonaws.com/efa"


#: Words in extended-resource names of RDMA devices: the k8s-rdma-shared-dev-plugin's ``rdma/*``, NVIDIA
#: network operator's host devices (``nvidia.com/hostdev``), SR-IOV VFs (``*sriov*``, ``*_vf``), vendor plugins
#: (``vke.volcengine.com/rdma``, ``mellanox.com/*``, ``*/hca``, ``*/roce``, ``*/ib``) and AWS EFA.
_RDMA_WORDS = ("rdma", "hostdev", "sriov", "hca", "roce", "mellanox", "infiniband")


def _rdma_resources(r: RoleConfig) -> list[str]:
    return [k for k in r.resources
            if k == _EFA or any(w in k.lower() for w in _RDMA_WORDS) or k.endswith("/ib") or k.endswith("_vf")]


def _has_rdma(r: RoleConfig) -> bool:
    return bool(_rdma_resources(r)) or any("nic" in c or "rdma" in c for c in r.dra_claims)


def verbs_rdma(r: RoleConfig) -> str:
    """How the role's pod is handed an InfiniBand/RoCE device that UCX's verbs transports (rc, ud, dc) drive, as a
    phrase for findings, or ``""``: an RDMA extended resource other than AWS EFA (:data:`_RDMA_WORDS`: ``rdma/*``,
    ``nvidia.com/hostdev``, SR-IOV VFs, vendor plugins), a DRA claim of a NIC, or a ``hostPath`` mount of
    ``/dev/infiniband`` (:attr:`RoleConfig.rdma_mount`). EFA is left out: its UCX transport is ``srd`` (UCX 1.19), and
    NIXL on EFA is judged by ``nixl-backend-fabric-mismatch`` and the EFA rules."""
    resources = [k for k in _rdma_resources(r) if k != _EFA]
    if resources:
        return f"the pod requests an RDMA device ({resources[0]})"
    if claim := next((c for c in r.dra_claims if "nic" in c or "rdma" in c), None):
        return f"the pod claims an RDMA NIC through DRA ({claim})"
    if r.rdma_mount:
        return f"the container mounts the node's /dev/infiniband at {r.rdma_mount}"
    return ""


#: Resources whose device plugin hands the pod an RDMA device but no network interface of its own: SR-IOV VFs,
#: host devices and vendor VF plugins need a pod network attachment (Multus) for RoCE GIDs / addresses; the
#: shared-device plugin (rdma/*) and EFA work in the pod's namespace as they are.
def _needs_attachment(resource: str) -> bool:
    return not (resource.startswith("rdma/") or resource == _EFA)

@rule(
    id="rdma-missing", family="kv-transport", severity="warning",
    fields=("spec.network.rdma",),
    source="NIXL/UCX transport selection (TCP fallback)",
)
def check_rdma_present(pair: PDPair) -> list[Violation]:
    """GPU engines request an RDMA device for KV transfer."""
    if not pair.managed:
        return []
    roles = [r for r in pair.roles if any(k.endswith("/gpu") for k in r.resources) or r.dra_claims]
    if not roles or any(_has_rdma(r) or r.networks for r in roles) or any(r.buffer_device == "cpu" for r in roles):
        return []
    return [(
        "No RDMA device is requested (spec.network.rdma is unset): unless prefill and decode share NVLink on one node, "
        "UCX falls back to TCP and time to first token grows 10-40x.",
        "Set spec.network.rdma.resourceName to the cluster's RDMA resource (e.g. rdma/ib, rdma/rdma_shared_device_a).",
    )]


@rule(
    id="side-channel-host-not-routable", family="side-channel-host-not-routable", severity="error",
    fields=("spec.engine.env", "spec.prefill.env", "spec.decode.env"),
    source="vllm envs.py VLLM_NIXL_SIDE_CHANNEL_HOST (bind and advertised address, default 'localhost'); a "
    "loopback host reaches the peer only inside one network namespace (one pod, or hostNetwork pods pinned to one "
    "node: the single-host example of docs/features/nixl_connector_usage.md, vllm#24249). A wildcard host "
    "(0.0.0.0, ::) binds every interface, so the listener is reachable at the pod IP; behind the AIBrix gateway "
    "of a StormService the advertised one is replaced by the prefill pod IP (vllm-project/aibrix "
    "pkg/plugins/gateway/algorithms/pd/transfer/shfs.go MergePrefillResponse; its NIXL agent, nixl.go, does not "
    "replace it), so there the verdict depends on a router the manifests do not show: a warning. In one network "
    "namespace a wildcard host works: the decode dials the advertised 0.0.0.0 (vllm nixl request_finished "
    "remote_host=side_channel_host; make_zmq_path), which Linux connects to the local host, where the listener "
    "bound every interface (yeqcharlotte/router scripts/llama3.1, DP 2 on both roles on one host). Two hostNetwork "
    "pods share the node's namespace only on one node: the decode on another node dials its own node, where no "
    "listener or another prefill's answers (vllm nixl _nixl_handshake: 'Remote NIXL agent engine ID mismatch', "
    "0.11.0 nixl_connector.py, 0.33.0 nixl/base_worker.py); where kube-scheduler decides (nothing in the files "
    "forces them together or apart, pdd_operator.compat.placement) that is a warning, an error only where they "
    "can never share one (nodeName, node selectors or affinity that differ, required anti-affinity on "
    "kubernetes.io/hostname) or a role has more replicas than one node holds (each binds the node's ports); a "
    "nodeName against a kubernetes.io/hostname selector is one node or two only if the label is the node's name "
    "(the kubelet's default, not --hostname-override): a warning either way. Where the scheduler decides but the two "
    "roles' side-channel ports overlap (base + DP index, both hostNetwork), no placement works: on one node the "
    "second engine's listener thread cannot bind ('Address already in use') and the engine waits for it without a "
    "timeout (ready_event.wait() in set_xfer_handshake_metadata, 0.14.0 nixl_connector.py, 0.32.0 "
    "nixl/base_scheduler.py), on two the loopback host is wrong: an error. "
    "Every spelling of the loopback or wildcard address counts as it (host_kind): an IPv6 one in brackets too, "
    "since make_zmq_path keeps '[::]' as written and split_zmq_path reads its host as '::' (0.10.0 "
    "vllm/utils/__init__.py lines 2747-2783). "
    "A host left as an unexpanded $(VAR) or "
    "${VAR} fails on either role: every engine binds its listener on it and waits for it (ready_event.wait(): 0.9.1 "
    "v1/nixl_connector.py, 0.11.1 nixl_connector.py, 0.32.0 nixl/base_scheduler.py), and ZeroMQ refuses the address",
    example="prefill: {env: [{name: VLLM_NIXL_SIDE_CHANNEL_HOST, value: 0.0.0.0}]}",
)
def check_side_channel_host(pair: PDPair) -> list[Violation]:
    """The NIXL side channel binds and advertises the pod IP."""
    p, d = pair.prefill, pair.decode
    host_network = p.host_network and d.host_network
    # One network namespace for both engines (containers of one pod, or hostNetwork pods that must run on
    # one node): the advertised loopback address reaches the peer's listener, as on a single host.
    one_namespace = pair.shared_network or (host_network and same_node(p, d))
    apart = _kept_apart(pair) if host_network and not one_namespace else None
    # a verdict that takes spec.nodeName and the kubernetes.io/hostname label as one node is a warning
    assumed = host_network and not pair.shared_network and hostname_assumed(p, d)
    out = []
    for r in pair.roles:
        host = r.env.get("VLLM_NIXL_SIDE_CHANNEL_HOST")
        if host and _UNEXPANDED.search(host):  # every engine binds its own listener, so either role fails
            out.append(_unexpanded_host(r.role, host))
            continue
        if host == unknown(LWS_LEADER) and _listens_in_every_pod(r):  # either role: the other pods cannot bind
            out.append(_leader_host(r))
            continue
        if r.role == "decode" and not _decode_is_dialed(pair):
            continue  # in pull mode only the prefill's listener is dialed: the decode's host is never used
        if host == POD_IP or (host == HOST_IP and r.host_network):
            continue
        kind = host_kind(host)
        # A wildcard host advertised in one namespace: the decode dials 0.0.0.0 (or ::), which Linux connects to
        # the local host (a destination of INADDR_ANY / in6addr_any is this host), where the listener bound every
        # interface: it works as loopback does.
        if kind in ("loopback", "wildcard") and one_namespace:
            if assumed:
                out.append((
                    f"{r.role}: VLLM_NIXL_SIDE_CHANNEL_HOST is {host or 'unset'}, which reaches the peer only in one "
                    f"network namespace: the hostNetwork pods are on one node {HOSTNAME_ASSUMPTION} (one is placed by "
                    "spec.nodeName, the other by that label); otherwise the decode dials its own node and the first "
                    "request fails.",
                    "Pin both pods the same way (both spec.nodeName, or both the kubernetes.io/hostname "
                    "nodeSelector), or set it from the downward API: status.hostIP.", "warning"))
            continue
        if host is None:
            what = "is unset (vLLM's default localhost)"
        elif kind is not None:
            what = f"is {host!r}" + (f" (the {kind} address)" if kind != "empty" and host.strip() not in _BARE else "")
        elif host == HOST_IP:
            what = "is the node IP but the pod does not use the host network"
        else:
            continue  # a literal address: may be right (static setups); not judged
        fix = "Set it from the downward API: valueFrom.fieldRef.fieldPath status.podIP (status.hostIP with hostNetwork)."
        if kind == "wildcard" and _behind_aibrix_gateway(pair):
            out.append((
                f"{r.role}: VLLM_NIXL_SIDE_CHANNEL_HOST {what}: the listener binds every interface, but the prefill "
                "advertises this host as remote_host. The AIBrix gateway in front of a StormService replaces it with "
                "the prefill pod IP (its default KV transfer agent); with any other router or agent the decode dials "
                "itself and the first request fails. Not checked: the router is not in these files.", fix, "warning"))
            continue
        if host_network and host != HOST_IP and apart == "" and _side_channel_clash(pair):
            port = _side_channel_clash(pair)[0]
            out.append((
                f"{r.role}: VLLM_NIXL_SIDE_CHANNEL_HOST {what}, and prefill and decode are hostNetwork pods whose "
                f"side-channel ports overlap ({port}...): on one node the second engine cannot bind its listener "
                "('Address already in use') and never finishes starting; on two the decode dials its own node for "
                "the prefill's listener and the first request fails (where both declare the port as a host port the "
                "scheduler never puts them on one node). Whichever node the scheduler picks, no KV moves.",
                fix_for(pair, "Remove VLLM_NIXL_SIDE_CHANNEL_HOST from spec.engine.env / spec.<role>.env (the "
                        "operator sets the pod IP).",
                        "Set it from the downward API: valueFrom.fieldRef.fieldPath status.hostIP.")))
            continue
        if host_network and host != HOST_IP and apart == "":
            out.append((
                f"{r.role}: VLLM_NIXL_SIDE_CHANNEL_HOST {what}. Prefill and decode are hostNetwork pods, which share "
                "the node's network namespace only on one node, and nothing in these files puts them on one node or "
                "keeps them apart: on one node this host reaches the peer; on two the decode dials its own node and "
                "the first request fails. Not checked: the scheduler's choice is not in these files.",
                fix_for(pair, "Remove VLLM_NIXL_SIDE_CHANNEL_HOST from spec.engine.env / spec.<role>.env (the "
                        "operator sets the pod IP), or keep both roles on one node (spec.placement.topologyKey "
                        "kubernetes.io/hostname with topologyPolicy Required).",
                        "Set it from the downward API: valueFrom.fieldRef.fieldPath status.hostIP, or pin both pods "
                        "to one node (the same kubernetes.io/hostname nodeSelector, or required pod affinity on "
                        "kubernetes.io/hostname)."), "warning"))
            continue
        why = f" Prefill and decode are hostNetwork pods that {apart}, so the decode dials its own node." if apart else ""
        lowered = host_network and host != HOST_IP and apart == _ASSUMED_APART
        out.append((
            f"{r.role}: VLLM_NIXL_SIDE_CHANNEL_HOST {what}. It is both the bind address and the address advertised "
            f"to the peer, so the peer dials the wrong host and the first request fails.{why}",
            fix, *(("warning",) if lowered else ()),
        ))
    return out


#: The variable LeaderWorkerSet's webhook sets to the group leader pod's DNS name (``<lws>-<group>.<subdomain>.
#: <namespace>``: kubernetes-sigs/lws pkg/utils/pod/pod_utils.go ``AddLWSVariables``), the same in every pod of a group.
LWS_LEADER = "LWS_LEADER_ADDRESS"


def _listens_in_every_pod(r: RoleConfig) -> bool:
    """Every pod of the engine's LeaderWorkerSet group (:attr:`RoleConfig.group_uniform`, more than one pod) runs
    engine cores of its own, each with its own NIXL handshake listener: data-parallel ranks local to the pod
    (``--data-parallel-size`` > 1 and a known count of them here: ``dp_local``, or the script's launches of the group,
    :attr:`RoleConfig.pod_dp_ranks`). The listener runs in the engine core's scheduler from 0.11.1 (nixl/
    base_scheduler.py 0.26.0 lines 275-308) and in its rank-0 worker before, in the pod the DP rank runs in. A TP x PP
    instance spread over the pods (``--nnodes``) runs one engine core, on the leader: not this case."""
    local = r.pod_dp_ranks if r.pod_dp_ranks is not None else r.dp_local
    return (r.group_uniform and r.pod_group > 1 and r.dp is not None and r.dp > 1
            and local is not None and local >= 1)


def _leader_host(r: RoleConfig) -> Violation:
    """The finding for a side-channel host set to the LeaderWorkerSet leader's address in a group whose every pod
    runs its own engine cores (:func:`_listens_in_every_pod`): each binds its listener on that host and advertises it
    (nixl/base_scheduler.py 0.26.0 lines 64 and 275-308, pull_scheduler.py line 275 ``remote_host``)."""
    return (
        f"{r.role}: VLLM_NIXL_SIDE_CHANNEL_HOST is $({LWS_LEADER}), the group leader's address, in every one of the "
        f"{r.pod_group} pods of its LeaderWorkerSet group, and each pod runs data-parallel engine cores of its own, "
        "each binding its NIXL handshake listener on that host and advertising it to the peer: on the pods other than "
        "the leader the address is not theirs, so the listener cannot bind ('Cannot assign requested address') and "
        "the engine core waits for it without a timeout (ready_event.wait(), nixl/base_scheduler.py), while the "
        "peer dials the leader for their ranks, where none of them listens.",
        f"Set VLLM_NIXL_SIDE_CHANNEL_HOST in the {r.role} container from the downward API: valueFrom.fieldRef."
        "fieldPath status.podIP (each pod its own IP).",
    )


def _side_channel_clash(pair: PDPair) -> list[int]:
    """The side-channel ports both engines would bind (:func:`_ports`), sorted; empty where a port is not in the
    files. Two hostNetwork pods with such a port never both run on one node: the second cannot bind its listener
    there, or, where both declare it as a host port, the scheduler's NodePorts filter never places them together."""
    p, d = pair.prefill, pair.decode
    if _port_unknown(p) or _port_unknown(d):
        return []
    return sorted(_ports(p) & _ports(d))


#: A variable reference left in a value as written: ``$(VAR)`` the kubelet did not expand (VAR not defined earlier in
#: the container's env: Kubernetes "Define dependent environment variables", ``expansion.Expand`` leaves it unchanged)
#: or a shell's ``${VAR}`` / ``$VAR`` in an env value or exec-form argument, which no shell expands.
_UNEXPANDED = re.compile(r"\$(\(|\{)?[A-Za-z_]")


def _unexpanded_host(role: str, host: str) -> Violation:
    """The finding for a side-channel host that reaches vLLM as an unexpanded ``$(VAR)`` / ``${VAR}`` reference.

    vLLM binds its handshake listener on ``tcp://<host>:<port>`` (make_zmq_path) in a thread and waits for it
    (``ready_event.wait()``: 0.9.1 v1/nixl_connector.py, 0.11.1 nixl_connector.py, 0.32.0 nixl/base_scheduler.py
    set_xfer_handshake_metadata); ZeroMQ refuses such an address (``ZMQError: No such device``, pyzmq with 0.32.0's
    make_zmq_path), so the thread dies before the event is set and that engine never finishes starting."""
    return (
        f"{role}: VLLM_NIXL_SIDE_CHANNEL_HOST reaches vLLM as {host!r}, unexpanded: the kubelet expands $(VAR) only "
        "from variables defined earlier in the container's env (and leaves any other reference as written), and no "
        "shell expands a ${VAR} in an env value. vLLM binds its NIXL side-channel listener on that text, which "
        "ZeroMQ refuses ('No such device'), and the engine waits forever for the listener to start.",
        "Set it from the downward API (valueFrom.fieldRef.fieldPath status.podIP), or define the variable it names "
        "(e.g. POD_IP from status.podIP) before it in the container's env.",
    )


def _decode_is_dialed(pair: PDPair) -> bool:
    """Whether the prefill dials the decode's side channel, so the decode's advertised host matters too.

    In pull mode it does not: the decode reads the prefill's blocks after a handshake with the prefill's
    listener at the ``remote_host``/``remote_port`` the prefill returned (``request_finished``, 0.11.0
    nixl_connector.py, 0.33.0 nixl/pull_scheduler.py), and the decode's own host goes nowhere. It does in push
    mode (``NixlPushConnector``: the decode advertises ``decode_host``, nixl/push_scheduler.py) and with
    ``kv_connector_extra_config.bidirectional_kv_xfer`` (0.21+: the decode returns its ``remote_host`` so the
    prefill can read a later turn's KV from it, nixl/pull_scheduler.py ``do_remote_decode``)."""
    return any(r.push or bool(r.extra.get("bidirectional_kv_xfer")) for r in pair.roles)


def _kept_apart(pair: PDPair) -> str:
    """Why hostNetwork prefill and decode pods never all share one node (a clause for a message), ``""`` when the
    scheduler decides: their placements exclude each other (:func:`~pdd_operator.compat.placement.may_share_node`),
    or a role runs more than one pod, and each binds the node's ports (its HTTP ``--port``, the side channel), so one
    node holds one of them and some prefill/decode pair is on two nodes (or a replica fails to bind)."""
    if not may_share_node(pair.prefill, pair.decode, assume_hostname_is_name=False):
        return "never run on one node (their node selection or required anti-affinity keeps them apart)"
    many = [r for r in pair.roles if r.replicas is not None and r.replicas > 1]
    if many:
        r = many[0]
        return (f"cannot all share a node ({r.replicas} {r.role} replicas bind the same node ports, one per node: "
                "requests paired across nodes fail)")
    if not may_share_node(pair.prefill, pair.decode):
        return _ASSUMED_APART
    return ""


#: :func:`_kept_apart`'s clause where only :data:`~pdd_operator.compat.placement.HOSTNAME_ASSUMPTION` keeps the pods
#: apart (one placed by ``spec.nodeName``, the other by the hostname label): what follows from it is a warning.
_ASSUMED_APART = (f"are on different nodes {HOSTNAME_ASSUMPTION} (one is placed by spec.nodeName, the other by that "
                  "label)")


def _bind_addresses_differ(p: RoleConfig, d: RoleConfig) -> bool:
    """Whether the two engines bind their side-channel listeners on different specific addresses, so equal ports do
    not collide: vLLM's listener binds ``tcp://<VLLM_NIXL_SIDE_CHANNEL_HOST>:<port>`` (make_zmq_path in
    ``_nixl_handshake_listener``, 0.10.1.1 nixl_connector.py lines 559-576; 0.33.0 nixl/base_scheduler.py), and two
    sockets bound to one port on two different addresses coexist (bind(2) refuses only the same address, or any
    address once a wildcard holds the port). Such engines are two hosts' launch scripts (each exports its own node's
    IP, littlemex/disaggregated-inference-with-nixl-over-aws-efa experiments/scripts/start_{producer,consumer}_efa.sh)
    or one host with both addresses. False where either host is unset (vLLM's localhost), loopback, a wildcard, the
    same text, or a placeholder (pod or node IP, an unexpanded variable): those can be one address."""
    hosts = [r.env.get("VLLM_NIXL_SIDE_CHANNEL_HOST") for r in (p, d)]
    specific = [h for h in hosts if h and host_kind(h) is None and h not in (POD_IP, HOST_IP)
                and not _UNEXPANDED.search(h)]
    return len(specific) == 2 and specific[0] != specific[1]


@rule(
    id="side-channel-port-conflict", family="side-channel-port-conflict", severity="error",
    fields=("spec.kvTransfer.sideChannelPort",),
    source=("vllm nixl scheduler listener: port = base + DP index (0.11.1+: 0.11.1 nixl_connector.py lines 352-355, "
            "0.32.0 nixl/base_scheduler.py); before, one per worker, base + DP rank x TP size + TP rank (0.9.1-0.11.0 "
            "nixl_connector.py: 0.11.0 lines 267-270, 608-622), so two TP-2 engines with bases 5577 and 5578 "
            "overlap there; an engine of unknown version whose ports overlap only on those releases: a warning; "
            "two hostNetwork pods share a namespace "
            "only on one node, which kube-scheduler decides (its NodePorts filter keeps pods asking for one host "
            "port apart; a hostNetwork containerPort is a hostPort, k8s.io/api core/v1 ContainerPort; its "
            "InterPodAffinity filter keeps them apart when a required anti-affinity term of either on "
            "kubernetes.io/hostname selects the other, pdd_operator.compat.placement)"),
)
def check_side_channel_ports(pair: PDPair) -> list[Violation]:
    """Engines sharing a network namespace use disjoint side-channel ports.

    Containers of one pod (or a script's engines) always share it: an overlap is an error. Two hostNetwork
    pods share the node's namespace only when they land on one node: an error where they must (one
    ``spec.nodeName`` or ``kubernetes.io/hostname`` selector, :func:`same_node`), nothing where they never can
    (:func:`may_share_node`, or both ask for the overlapping port as a host port, which the scheduler's NodePorts
    filter keeps on different nodes), and a warning where the scheduler decides (the second engine on a shared
    node fails, on different nodes both run). Engines that bind distinct specific side-channel addresses
    (:func:`_bind_addresses_differ`) never collide, whatever the port."""
    p, d = pair.prefill, pair.decode
    # spec.nodeName against the kubernetes.io/hostname label: apart or together only if the label is the name
    assumed = not pair.shared_network and p.host_network and d.host_network and hostname_assumed(p, d)
    host_shared = p.host_network and d.host_network and may_share_node(p, d, assume_hostname_is_name=not assumed)
    if not (pair.shared_network or host_shared):
        return []
    unknown = [r.role for r in (p, d) if _port_unknown(r)]
    if unknown:
        whys = "; ".join(f"{r.role}'s is {_port_source(r)}" for r in (p, d) if _port_unknown(r))
        return [(f"The {' and '.join(unknown)} VLLM_NIXL_SIDE_CHANNEL_PORT is not in these files ({whys}), so "
                 "whether the two engines' side-channel ports overlap in their shared network namespace was not "
                 "checked.",
                 fix_for(pair, "Set spec.kvTransfer.sideChannelPort.",
                         "Write each role's VLLM_NIXL_SIDE_CHANNEL_PORT as a literal to have it checked."), "warning")]
    clash = sorted(_ports(p) & _ports(d))
    if not pair.shared_network:
        clash = [port for port in clash if not (port in p.host_ports and port in d.host_ports)]
    if _bind_addresses_differ(p, d):
        return []
    if not clash:
        return _unknown_release_clash(pair)
    fix = fix_for(pair, "Set a different spec.kvTransfer.sideChannelPort range per role.",
                  "Give each role its own VLLM_NIXL_SIDE_CHANNEL_PORT range (base to base + data parallel size, "
                  "x tensor parallel size before vLLM 0.11.1, must not overlap)"
                  + (" on each engine's line of the script." if pair.one_container else "." if
                                pair.shared_network else
                                ", or keep the pods on different nodes (required pod anti-affinity on "
                                "kubernetes.io/hostname, or the port as a containerPort of both: with hostNetwork it "
                                "is a host port the scheduler never places twice on one node)."))
    if pair.shared_network or same_node(p, d, assume_hostname_is_name=False):
        where = ("engines of one container" if pair.one_container else "containers of one pod"
                 if pair.shared_network else "hostNetwork pods bound to one node")
        return [(f"Prefill and decode are {where} and their NIXL side-channel ports overlap ({clash[0]}...): the "
                 "second engine fails with 'Address already in use'.", fix)]
    if assumed:
        together = same_node(p, d)
        return [(f"Prefill and decode are hostNetwork pods and their NIXL side-channel ports overlap ({clash[0]}...); "
                 "one is placed by spec.nodeName and the other by the kubernetes.io/hostname label, so they are on "
                 + ("one node" if together else "different nodes") + f" {HOSTNAME_ASSUMPTION}"
                 + (": then the second engine fails with 'Address already in use'." if together else
                    "; if not, and both land on one node, the second engine fails with 'Address already in use'."),
                 fix, "warning")]
    return [(f"Prefill and decode are hostNetwork pods and their NIXL side-channel ports overlap ({clash[0]}...); "
             "nothing in these files keeps them on different nodes or puts them on one. If the scheduler places "
             "both on one node the second engine fails with 'Address already in use'; on different nodes both run "
             "(not checked: node capacity and the scheduler's choice are not in these files).", fix, "warning")]


def _unknown_release_clash(pair: PDPair) -> list[Violation]:
    """The warning for engines of one namespace whose side-channel ports are disjoint from 0.11.1 on but overlap on
    the releases of :data:`PER_TP_RANK_RELEASES` (one port per TP rank, :func:`_old_release_clash`), where a role's
    vLLM version is unknown: which one it runs decides whether the second engine can bind its listener."""
    p, d = pair.prefill, pair.decode
    clash = _old_release_clash(p, d)
    if not pair.shared_network:
        clash = [port for port in clash if not (port in p.host_ports and port in d.host_ports)]
    if not clash:
        return []
    unknown = [r.role for r in pair.roles if r.version is None]
    return [(
        f"The {' and '.join(unknown)} {'engines' + chr(39) if len(unknown) > 1 else 'engine' + chr(39) + 's'} vLLM "
        f"version is unknown. On vLLM {PER_TP_RANK_RELEASES} every tensor-parallel worker "
        "binds its own NIXL side-channel port (VLLM_NIXL_SIDE_CHANNEL_PORT + DP rank x TP size + TP rank, default "
        f"base 5557), and there the two engines' ports overlap ({clash[0]}...): where they share a network namespace "
        "the second engine fails with 'Address already in use'. From 0.11.1 on each engine binds one port per "
        "data-parallel rank, and these do not overlap. Not checked: which release runs is not in these files.",
        fix_for(pair, "Set spec.engine.vllmVersion, or a spec.kvTransfer.sideChannelPort per role at least "
                "data parallel size x tensor parallel size apart.",
                "Pin the image to a vLLM release (a tag that starts with the version), or space the roles' "
                "VLLM_NIXL_SIDE_CHANNEL_PORT at least data parallel size x tensor parallel size apart."),
        "warning")]


def _http_shared(a: RoleConfig, b: RoleConfig) -> bool | None:
    """Whether the HTTP sockets of engines ``a`` and ``b`` may both listen on one port of one network namespace: both
    set SO_REUSEPORT (:func:`~pdd_operator.vllm.http_socket.http_reuse_port`: every release through 0.24.x, from 0.25.0
    only with more than one API server) and run as one user (Linux refuses SO_REUSEPORT across effective UIDs:
    ``False`` where the containers' ``runAsUser`` differ; where unset, the image's user, taken as one, as a script's
    engines run as the shell's). ``False`` where one lacks it (the second bind or ``listen`` fails with EADDRINUSE),
    ``None`` where a release or an API server count is not known."""
    reuse = [http_reuse_port(r.version, r.api_servers) for r in (a, b)]
    if False in reuse or None not in (a.run_as_user, b.run_as_user) and a.run_as_user != b.run_as_user:
        return False
    return True if all(reuse) else None


def _split_http(a: RoleConfig, b: RoleConfig, clash: list[int]) -> tuple[list[int], int | None]:
    """``clash`` (ports both engines listen on) split into the ports where a socket without SO_REUSEPORT is involved
    (a ZeroMQ listener: the NIXL side channel, the KV events publisher; ZeroMQ sets no SO_REUSEPORT) and the HTTP port
    that is only each engine's HTTP ``--port`` on both sides, or ``None``."""
    http = a.http_port if a.http_port is not None and a.http_port == b.http_port else None
    if http is None or http not in clash:
        return clash, None
    zmq_a = (set(a.other_ports) - {http}) | _ports(a)
    zmq_b = (set(b.other_ports) - {http}) | _ports(b)
    if http in zmq_a or http in zmq_b:  # the port is also a ZeroMQ listener's on one side
        return clash, None
    return [port for port in clash if port != http], http


def _shared_http_finding(a: RoleConfig, b: RoleConfig, port: int, where: str, same_role: bool, fix: str
                         ) -> Violation:
    """The finding for engines ``a`` and ``b`` of one network namespace whose HTTP ``--port`` is the same and nothing
    else clashes: an error where vLLM's code fails (:func:`_http_shared` ``False``), else a warning that says what
    happens (both listen and the kernel spreads connections between them) or on which releases it fails."""
    shared = _http_shared(a, b)
    versions = sorted({".".join(map(str, r.version)) for r in (a, b) if r.version is not None})
    if shared is False and a.run_as_user != b.run_as_user:
        return (f"{where} and both serve HTTP on port {port}, as different users (runAsUser {a.run_as_user} and "
                f"{b.run_as_user}): Linux lets two sockets share a port through SO_REUSEPORT only under one effective "
                "UID, so the engine whose API server binds or starts listening second fails with 'OSError: [Errno "
                "98] Address already in use'.", fix)
    if shared is False:
        lone = next(r for r in (a, b) if http_reuse_port(r.version, r.api_servers) is False)
        return (
            f"{where} and both serve HTTP on port {port}: vLLM {'.'.join(map(str, lone.version or ()))} sets "
            f"SO_REUSEPORT on its HTTP socket only when it starts more than one API server (from "
            f"{GATED_SINCE_TEXT}: cli/serve.py run_multi_api_server, reuse_port=num_api_servers > 1), and the "
            f"{lone.role} runs one, so the engine whose API server binds or starts listening second fails with "
            "'OSError: [Errno 98] Address already in use' (at start-up, or once its model has loaded where both bound "
            "before either listened).", fix)
    if shared:
        what = (f"both start (their HTTP sockets set SO_REUSEPORT{' on vLLM ' + ', '.join(versions) if versions else ''}"
                "), and the kernel spreads incoming connections between them")
        effect = (" as one load-balanced endpoint: a client cannot address either engine alone (its /metrics, "
                  "/health) and both must serve the same model." if same_role else
                  ": the proxy's prefill request reaches the decode engine about half the time and its decode request "
                  "the prefill engine, so the P/D split does not hold (an engine may be asked to read the KV it "
                  "holds itself, or a KV producer to decode). Not checked: which engine serves each request is the "
                  "kernel's choice.")
        return (f"{where} and both serve HTTP on port {port}: {what}{effect}", fix, "warning")
    return (
        f"{where} and both serve HTTP on port {port}. On vLLM {ALWAYS_RELEASES} the HTTP socket sets SO_REUSEPORT, so "
        "both start and the kernel spreads connections between them"
        + ("" if same_role else " (the proxy's prefill requests reach the decode engine and the reverse)")
        + f"; from {GATED_SINCE_TEXT} it does so only with more than one API server, and the engine that binds or "
        "listens second fails with 'Address already in use'. Not checked: the release or the API server count is not "
        "in these files.", fix, "warning")


@rule(
    id="listener-port-conflict", family="side-channel-port-conflict", severity="error",
    fields=("spec.kvTransfer.sideChannelPort", "spec.port"),
    source=("vllm serve binds --port (default 8000) through create_server_socket, which sets SO_REUSEPORT always on "
            "0.9.0-0.24.x (vllm/entrypoints/openai/api_server.py, 0.9.0 lines 1275-1285) and from 0.25.0 only with "
            "more than one API server (cli/serve.py 0.25.0 line 284, 0.34.0 line 303; entrypoints/launchers/"
            "launcher.py 0.34.0 lines 343-356; pdd_operator.vllm.http_socket); the NIXL side channel and the KV "
            "events publisher are ZeroMQ listeners, which set no SO_REUSEPORT. Linux lets two sockets listen on one "
            "port only when both set SO_REUSEPORT under one effective UID (net/ipv4/inet_connection_sock.c "
            "inet_csk_bind_conflict), else the second fails with EADDRINUSE; a MoRIIOConnector worker binds ZeroMQ "
            "handshake and notify listeners on tcp://*:(port + DP rank + TP rank) (moriio_connector.py 0.25.0 lines "
            "967-969 and 1211-1213, moriio_engine.py 0.25.0 lines 691-692; pdd_operator.vllm.moriio_ports), whatever "
            "the release"),
    needs=("--kv-events-config",), without_connector=True,
)
def check_listeners_across_roles(pair: PDPair) -> list[Violation]:
    """Engines sharing a network namespace (containers of one pod, or a script's two engines in one container)
    do not listen on the same port: one's HTTP or KV-events port against the other's HTTP, KV-events or
    side-channel port (side channel against side channel is ``side-channel-port-conflict``). Two hostNetwork pods
    bound to one node (:func:`same_node`) share the node's namespace too (a port both ask for as a host port is left
    out: the scheduler never places them together); where the scheduler decides, nothing is said here. HTTP against
    HTTP fails only where a socket lacks SO_REUSEPORT (:func:`_http_shared`); where both set it, both engines run and
    the kernel splits the proxy's requests between them: a warning (:func:`_shared_http_finding`)."""
    p, d = pair.roles
    bound = (not pair.shared_network and p.host_network and d.host_network
             and same_node(p, d, assume_hostname_is_name=False))
    if not (pair.shared_network or bound):
        return []
    clash = sorted((set(p.other_ports) & (set(d.other_ports) | _side_channel(d)))
                   | (_side_channel(p) & set(d.other_ports)))
    if bound:
        clash = [port for port in clash if not (port in p.host_ports and port in d.host_ports)]
    if not clash:
        return []
    where = ("engines of one container" if pair.one_container else "containers of one pod" if pair.shared_network
             else "hostNetwork pods bound to one node")
    fix = fix_for(pair, "Set a different spec.kvTransfer.sideChannelPort per role.",
                  "Give each engine its own --port (and VLLM_NIXL_SIDE_CHANNEL_PORT) in its "
                  + ("line of the script." if pair.one_container else "container's command" + (
                      " (Dynamo's KV events publisher: its own DYN_VLLM_KV_EVENT_PORT), or keep the pods on different "
                      "nodes." if bound else ".")))
    hard, http = _split_http(p, d, clash)
    if not hard and http is not None:
        return [_shared_http_finding(p, d, http, f"Prefill and decode are {where}", False, fix)]
    return [(
        f"Prefill and decode are {where} and both listen on port {', '.join(map(str, clash))} (vLLM's HTTP --port "
        "defaults to 8000; KV events, the NIXL side channel and MoRIIO's handshake and notify ports are ZeroMQ "
        "listeners, which set no SO_REUSEPORT): the engine that starts second fails with 'Address already in use'.",
        fix)]


def _side_channel(r: RoleConfig) -> set[int]:
    """The NIXL side-channel ports ``r``'s engine listens on (:func:`_ports`); none for an engine whose transfer runs
    through another connector (MoRIIO, Mooncake, P2pNccl bind their own listeners: ``RoleConfig.other_ports``)."""
    return _ports(r) if r.nixl else set()


def _bound(r: RoleConfig) -> set[int]:
    """The ports ``r``'s engine listens on, as far as the files say: its HTTP and KV-events ports
    (``RoleConfig.other_ports``) and, for a NIXL engine that runs all its data-parallel ranks itself, its
    side-channel ports (:func:`_ports`). A rank of a larger data-parallel group (``--data-parallel-rank``, a start
    rank: ``RoleConfig.spans_nodes``) listens on base + its rank (nixl/base_scheduler.py 0.32.0 ``side_channel_port
    + data_parallel_index``; config/parallel.py: the index is ``--data-parallel-rank``), which is not read here, so
    its side channel is compared only where the launch's own ranks are known (:func:`_own_dp_indices`: set 25's four
    prefill ranks of one pod share VLLM_NIXL_SIDE_CHANNEL_PORT and bind base + 0 to 3; on 0.9.1 a headless worker
    binds the local indices, set 77's leader and worker of one host with one base clash)."""
    spans_known = not r.spans_nodes or _own_dp_indices(r, r.version) is not None
    return set(r.other_ports) | (_ports(r) if r.nixl and spans_known else set())


@rule(
    id="same-role-port-conflict", family="side-channel-port-conflict", severity="error",
    fields=("spec.port", "spec.kvTransfer.sideChannelPort"),
    source=("vllm serve binds --port (default 8000; its socket sets SO_REUSEPORT always on 0.9.0-0.24.x, from "
            "0.25.0 only with more than one API server: pdd_operator.vllm.http_socket), the KV events publisher its "
            "endpoint and each NIXL worker its side-channel port (VLLM_NIXL_SIDE_CHANNEL_PORT + DP index from "
            "0.11.1, 5600 by default; base + DP x TP before, 5557), both ZeroMQ listeners without SO_REUSEPORT; Linux "
            "lets two processes of one network namespace listen on one port only when both sockets set SO_REUSEPORT "
            "under one effective UID (net/ipv4/inet_connection_sock.c inet_csk_bind_conflict), else EADDRINUSE"),
    example="two prefill engines of one script on one host, both --port 8100",
    needs=("--kv-events-config",), without_connector=True,
)
def check_same_role_ports(pair: PDPair) -> list[Violation]:
    """Engines of one role that share a network namespace (a script's engines on one host, containers of one pod)
    do not listen on the same port: the pair's prefill against the other prefill engines there, its decode against
    the other decode engines (:attr:`PDPair.neighbours`; prefill against decode is ``listener-port-conflict`` and
    ``side-channel-port-conflict``). Ports not in the files (a ``--port $P`` the script does not set, a side-channel
    port from elsewhere) are not compared. Replicas of one role on the host network that the manifest pins to one
    node share that node's namespace too (:func:`_pinned_replicas`). Where only the HTTP ``--port`` is shared and both
    sockets set SO_REUSEPORT (:func:`_http_shared`), both engines run behind one kernel-balanced port: a warning."""
    out: list[Violation] = []
    for role, where, other in pair.neighbours:
        own = pair.prefill if role == "prefill" else pair.decode
        clash = sorted(_bound(own) & _bound(other))
        if not clash:
            continue
        shared = "engines of one container" if pair.one_container else "containers of one pod"
        fix = fix_for(pair, "Give each engine its own port.",
                      f"Give each {role} engine its own --port and VLLM_NIXL_SIDE_CHANNEL_PORT"
                      + (" on its line of the script." if pair.one_container else " in its container."))
        hard, http = _split_http(own, other, clash)
        if not hard and http is not None:
            out.append(_shared_http_finding(
                own, other, http, f"{role}: this {role} engine and the {role} engine {where} are {shared} (one "
                "network namespace)", True, fix))
            continue
        out.append((
            f"{role}: this {role} engine and the {role} engine {where} are {shared} (one network namespace) and both "
            f"listen on port {', '.join(map(str, clash))} (vLLM's HTTP --port defaults to 8000, the NIXL side channel "
            "to 5600, a ZeroMQ listener without SO_REUSEPORT): the engine that starts second fails with 'Address "
            "already in use'.", fix))
    out += _pinned_replicas(pair)
    return out


def _pinned_replicas(pair: PDPair) -> list[Violation]:
    """Replicas of one role on the host network that the manifest pins to one node (``spec.nodeName``, a
    ``kubernetes.io/hostname`` selector or required node affinity admitting one node: :func:`pinned_node`, without
    taking the name for the hostname label): every replica shares that node's network namespace and binds the same
    ports. A PDDeployment is left out (the operator renders its pods)."""
    out: list[Violation] = []
    for r in pair.roles if not pair.managed else ():
        node = pinned_node(r.nodes)
        clash = sorted(_bound(r))
        if not r.host_network or r.replicas is None or r.replicas < 2 or node is None or not clash:
            continue
        hard, http = _split_http(r, r, clash)
        if not hard and http is not None:  # replicas of one engine: only the HTTP port, SO_REUSEPORT decides
            out.append(_shared_http_finding(
                r, r, http, f"{r.role}: the {r.replicas} replicas of this {r.role} run on the host network and the "
                f"manifest pins them all to one node ({node[0].removeprefix('field:')} {node[1]})", True,
                fix_for(pair, "Run one replica per node.", f"Run one {r.role} replica on that node, or let the "
                        "replicas spread over nodes (drop the single-node pin).")))
            continue
        out.append((
            f"{r.role}: the {r.replicas} replicas of this {r.role} run on the host network and the manifest pins them "
            f"all to one node ({node[0].removeprefix('field:')} {node[1]}): they share that node's network namespace and "
            f"each listens on port {', '.join(map(str, clash))} (vLLM's HTTP --port defaults to 8000, the NIXL side "
            "channel to 5600), so only one of them runs: the next fails with 'Address already in use', or stays "
            "Pending where the ports are declared (on the host network a containerPort is a hostPort, and the "
            "scheduler's NodePorts filter never puts two pods asking for one on one node).",
            fix_for(pair, "Run one replica per node.",
                    f"Run one {r.role} replica on that node, or let the replicas spread over nodes (drop the "
                    "single-node pin), or give each its own Deployment with its own --port and "
                    "VLLM_NIXL_SIDE_CHANNEL_PORT.")))
    return out


@rule(
    id="side-channel-listener-conflict", family="side-channel-port-conflict", severity="error",
    fields=("spec.kvTransfer.sideChannelPort", "spec.port"),
    source="vllm nixl side-channel listener; --kv-events-config endpoint",
    needs=("--kv-events-config",),
)
def check_side_channel_vs_listeners(pair: PDPair) -> list[Violation]:
    """The side-channel port is not used by the engine's HTTP or KV events listener."""
    out = []
    for r in pair.roles:
        clash = sorted(_ports(r) & set(r.other_ports))
        if clash:
            out.append((
                f"{r.role}: the NIXL side-channel port {clash[0]} is also used by another listener of the engine "
                "(HTTP or KV events).",
                "Choose a side-channel port (spec.kvTransfer.sideChannelPort) that no other listener uses.",
            ))
    return out


@rule(
    id="ucx-net-devices-unscoped", family="kv-transport", severity="warning",
    fields=("spec.network.ucx.netDevices", "spec.network.hostNetwork"),
    source=("vLLM docs/features/nixl_connector_usage.md (UCX_NET_DEVICES); ai-dynamo/dynamo#10852 ('all' bound "
            "management NICs, NIXL_ERR_BACKEND)"),
)
def check_ucx_net_devices(pair: PDPair) -> list[Violation]:
    """UCX is told which NICs to use where it can see more than the pod's own: the host network (unset or 'all'),
    or 'all' in a pod network. A pod of the shared-device RDMA plugin that leaves UCX_NET_DEVICES unset is not
    flagged: it sees only the devices the plugin mounts, and UCX picks among those. A privileged container on the
    host network needs no RDMA resource to see them: the runtime hands it every host device, /dev/infiniband
    included (Kubernetes security context ``privileged``), and UCX also opens the mlx5 devices behind VM or
    management networking ('UCX ERROR ibv_query_gid ... failed', NIXL backend creation fails: smg-project/smg#2520)."""
    out = []
    for r in pair.roles:
        devices = r.env.get("UCX_NET_DEVICES")
        host_devices = r.host_network and r.privileged
        if not (_has_rdma(r) or host_devices) or "UCX" not in r.backends:
            continue  # no RDMA device, or NIXL does not use UCX (LIBFABRIC only): UCX_NET_DEVICES is never read
        if r.host_network and devices in (None, "all"):
            why = (f"the engine uses the host network{' in a privileged container' if host_devices else ''}, so UCX "
                   f"sees every NIC of the node and UCX_NET_DEVICES is {'unset' if devices is None else 'all'}")
        elif devices == "all":
            why = ("UCX_NET_DEVICES is 'all': UCX opens every device the pod can see, including management or "
                   "BlueField ports and NICs without RoCE GIDs (backend init fails with NIXL_ERR_BACKEND)")
        else:
            continue
        out.append((
            f"{r.role}: {why}; it may pick a NIC far from the GPU, one without RDMA, or an Ethernet port.",
            fix_for(pair, "Set spec.network.ucx.netDevices to the GPU-local RDMA devices, e.g. mlx5_0:1.",
                    f"Set UCX_NET_DEVICES on the {r.role} container to the GPU-local RDMA devices, e.g. mlx5_0:1."),
        ))
    return out


@rule(
    id="rdma-device-visibility", family="kv-transport", severity="warning",
    fields=("spec.network.rdma.resourceName", "spec.network.networks", "spec.network.ucx.netDevices"),
    source=("UCX/NIXL register_memory and QP setup on a device without a usable port in the pod: 'ibv_modify_qp "
            "... failed to modify to RTR: No such device', NIXL_ERR_BACKEND (vllm-project/aibrix#1433, #1783); the "
            "attachments read: pdd_operator.compat.pair.NETWORK_ATTACHMENT_ANNOTATIONS (Multus, Volcano Engine as "
            "AIBrix uses it, GKE multi-network)"),
)
def check_rdma_visibility(pair: PDPair) -> list[Violation]:
    """An RDMA device from an SR-IOV or vendor plugin comes with a network attachment or a UCX device list."""
    out = []
    for r in pair.roles:
        needing = [k for k in _rdma_resources(r) if _needs_attachment(k)]
        if not needing or r.host_network or r.networks or r.env.get("UCX_NET_DEVICES") not in (None, "all"):
            continue
        out.append((
            f"{r.role}: the pod gets an RDMA device from {needing[0]} but no pod network attachment "
            "(k8s.v1.cni.cncf.io/networks, k8s.volcengine.com/pod-networks, networking.gke.io/interfaces, ...) and "
            "no UCX_NET_DEVICES: such devices usually have no RoCE GID or address "
            "in the pod, and UCX fails to bring up its queue pairs (NIXL_ERR_BACKEND at register_memory or the "
            "first transfer).",
            fix_for(pair, "Set spec.network.networks to the RDMA NetworkAttachmentDefinition and "
                    "spec.network.ucx.netDevices to its device.",
                    f"Add the RDMA network annotation (k8s.v1.cni.cncf.io/networks) to the {r.role} pod and set "
                    "UCX_NET_DEVICES to that device."),
        ))
    return out


#: First vLLM release in which UCX on an EFA device is reported to fail rather than crawl: vllm-project/vllm#41814
#: (0.17.1 in Dynamo's vllm-runtime 1.1.0, NIXL 1.0.1: "UCX can't establish cross-node handshakes" on EFA) and
#: aws-samples/awsome-inference#72 (0.19.1: handshake_failed, a stall, fixed by backends [LIBFABRIC]). Earlier
#: reports (ai-dynamo/nixl#909 in llm-d's vLLM 0.11 image, ai-dynamo/dynamo#4185) saw the KV move over UCX's software
#: emulation, only slowly; an unknown or earlier release is therefore a warning, not an error.
UCX_ON_EFA_FAILS_SINCE = (0, 17, 0)


def _efa(r: RoleConfig) -> str | None:
    """How the role's pod shows it runs on AWS EFA: the ``vpc.amazonaws.com/efa`` device resource, or libfabric
    told to use the EFA provider (``FI_PROVIDER=efa``, AWS's EFA installer and Deep Learning Containers); ``None``
    when neither."""
    if _EFA in r.resources:
        return f"the pod gets AWS EFA devices ({_EFA})"
    if str(r.env.get("FI_PROVIDER", "")).strip().lower() == "efa":
        return "the container sets FI_PROVIDER=efa (libfabric's AWS EFA provider)"
    return None


@rule(
    id="nixl-backend-fabric-mismatch", family="nixl-backend-fabric-mismatch", severity="error",
    fields=("spec.kvTransfer.backends", "spec.network.rdma.resourceName"),
    source=("vllm nixl worker (0.11.0-0.34.0: kv_transfer_config.get_from_extra_config('backends', ['UCX']), the "
            "agent is created with those backends; nixl_connector.py before 0.20, nixl/worker.py 0.20.x, "
            "nixl/base_worker.py 0.24+; 0.9.0-0.10.2 read no list and run UCX: pdd_operator/vllm/nixl_backends.py); "
            "NIXL src/core/nixl_agent.cpp: loadRemoteMD keeps only the remote's "
            "backends the local agent also has, prepXferDlist on the remote agent returns NIXL_ERR_NOT_FOUND when "
            "none is left and createXferReq finds no common backend (vLLM's add_remote_agent prep_xfer_dlist "
            "raises in the decode's handshake); NIXL LIBFABRIC plugin for AWS EFA"),
)
def check_efa_backend(pair: PDPair) -> list[Violation]:
    """Prefill and decode NIXL agents share a backend (an error where their lists are disjoint: the decode's
    reads from the prefill fail), and AWS EFA uses the LIBFABRIC backend (an error with the EFA device resource;
    a warning where only ``FI_PROVIDER=efa`` says so, since UCX may still reach the peer over TCP)."""
    out = []
    p, d = pair.prefill, pair.decode
    shared = set(p.backends) & set(d.backends)
    if not shared:
        defaulted = [r.role for r in pair.roles if "backends" not in r.extra]
        out.append((
            f"prefill and decode NIXL agents share no backend (prefill {p.backends}, decode {d.backends}"
            + (f"; {' and '.join(defaulted)} {'has' if len(defaulted) == 1 else 'have'} no "
               "kv_connector_extra_config.backends, so vLLM's default ['UCX']" if defaulted else "")
            + "): the decode's agent loads none of the prefill's backends from its metadata, so preparing the "
            "remote descriptors fails (NIXL_ERR_NOT_FOUND) at the handshake and no KV is ever read.",
            "Give both roles the same kv_connector_extra_config.backends (e.g. [LIBFABRIC] on both on AWS EFA, or "
            "leave it unset on both for UCX).",
        ))
    for r in pair.roles:
        efa = _efa(r)
        if efa is None or "LIBFABRIC" in r.backends:
            continue
        hard = _EFA in r.resources and r.version is not None and r.version >= UCX_ON_EFA_FAILS_SINCE
        out.append((
            f"{r.role}: {efa} but NIXL uses backends {r.backends}; UCX cannot drive EFA's SRD "
            "transport and stalls or falls back to software emulation"
            + ("." if hard else " or TCP, if it reaches the peer at all"
               + (" (transfers worked, slowly, on vLLM 0.11 builds: ai-dynamo/nixl#909, ai-dynamo/dynamo#4185; the "
                  "cross-node handshake failed on 0.17.1 and 0.19.1: vllm-project/vllm#41814)"
                  if _EFA in r.resources else "") + "."),
            "Set spec.kvTransfer.backends to [LIBFABRIC] (kv_connector_extra_config.backends).",
            *(() if hard else ("warning",)),
        ))
    return out


#: libfabric providers NIXL's LIBFABRIC plugin can build rails on besides EFA (ai-dynamo/nixl
#: src/utils/libfabric/libfabric_common.cpp getAvailableNetworkDevices: cxi, then efa, then tcp, then sockets).
_OTHER_FABRIC_PROVIDERS = frozenset({"cxi", "tcp", "sockets"})


def _efa_only(fi_provider: object) -> bool:
    """``FI_PROVIDER`` (libfabric's provider filter, a comma-separated list; ``^`` excludes) lets libfabric open
    the EFA provider and none NIXL could fall back to."""
    value = str(fi_provider or "").strip().lower()
    names = {n.strip() for n in value.split(",") if n.strip()}
    return not value.startswith("^") and "efa" in names and not names & _OTHER_FABRIC_PROVIDERS


@rule(
    id="efa-device-missing", family="kv-transport", severity="error",
    fields=("spec.network.rdma.resourceName", "spec.kvTransfer.backends"),
    source=("vllm NIXL worker (nixl_connector.py 0.11.0 lines 473-483, 0.14.0 lines 824-849; nixl/worker.py 0.20.0 lines "
            "104-182, 0.21.0 lines 217-283; nixl/base_worker.py 0.26.0 lines 261-341, 0.34.0 lines 683-797): the agent "
            "is created with kv_connector_extra_config backends, and NIXL's nixl_agent creates each one "
            "(src/api/python/_api.py create_backend); the LIBFABRIC plugin discovers devices with fi_getinfo "
            "(src/utils/libfabric/libfabric_common.cpp getAvailableNetworkDevices), its rail manager refuses when "
            "none is found ('No network devices discovered; cannot create rails', libfabric_rail_manager.cpp) and the "
            "backend constructor throws ('Failed to initialize the rail manager', libfabric_backend.cpp), so the "
            "engine fails at start-up; FI_PROVIDER=efa leaves libfabric no TCP provider to fall back to, and a "
            "container sees the EFA verbs devices only when the EFA device plugin hands them over "
            "(vpc.amazonaws.com/efa) or it runs privileged"),
    since=(0, 11, 0),
)
def check_efa_device(pair: PDPair) -> list[Violation]:
    """A NIXL agent with the LIBFABRIC backend that libfabric may only run on AWS EFA (``FI_PROVIDER=efa``) gets an
    EFA device: a pod whose GPUs come from the device plugin (a ``*/gpu`` resource) sees no EFA device unless it
    requests ``vpc.amazonaws.com/efa``, runs privileged or holds a DRA claim (which may carry one). A script's host or
    a Compose service is not judged (their devices are not in the files)."""
    out = []
    for r in pair.roles:
        if "LIBFABRIC" not in r.backends or not _efa_only(r.env.get("FI_PROVIDER")):
            continue
        if not any(k.endswith("/gpu") for k in r.resources) or _EFA in r.resources or r.privileged or r.dra_claims:
            continue
        out.append((
            f"{r.role}: NIXL's only fabric here is LIBFABRIC with FI_PROVIDER=efa, but the pod requests no EFA "
            f"device ({_EFA}) and is not privileged, so libfabric finds no EFA device, NIXL's LIBFABRIC backend "
            "cannot create its rails ('No network devices discovered') and the engine fails at start-up"
            + (" (the host network does not bring the EFA verbs devices into the container)" if r.host_network
               else "") + ".",
            fix_for(pair, f"Set spec.network.rdma.resourceName to {_EFA} with the count the nodes offer.",
                    f"Request {_EFA} in the {r.role} container's resources (requests and limits, the count the node's "
                    "EFA device plugin offers)."),
        ))
    return out
