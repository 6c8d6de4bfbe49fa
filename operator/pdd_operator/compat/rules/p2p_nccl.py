"""What vLLM's P2pNcclConnector refuses when its engine starts (``P2pNcclEngine.__init__``): engine-alone rules, so
they hold on any pair that names the connector, also where its KV path is not judged (an unknown or other release:
:func:`pdd_operator.compat.engine._foreign_connector`). What the two engines of a P2pNccl pair must agree on is
:mod:`pdd_operator.compat.rules.p2p_nccl_pair`."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.placement import same_node
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.versions import UPSTREAM_REPOSITORIES, fmt, image_repository

#: ``P2pNcclConnector`` is registered in kv_connector/factory.py from 0.9.2 (v1/p2p/p2p_nccl_engine.py, 0.9.2 sdist)
#: up to 0.23.x (0.23.0 sdist); the 0.24.0 factory no longer names it.
P2P_NCCL_SINCE = (0, 9, 2)
P2P_NCCL_UNTIL = (0, 24, 0)
#: 0.9.2-0.11.0 build ``http_address`` from ``kv_connector_extra_config['http_port']`` unconditionally (KeyError,
#: p2p_nccl_engine.py line 95 in 0.11.0; the same in the 0.9.2, 0.10.0 and 0.10.1.1 sdists); from 0.11.1 the key is
#: read only when ``proxy_ip`` and ``proxy_port`` are both non-empty, and its absence raises ValueError
#: ("kv_connector_extra_config.http_port is required", 0.11.1-0.23.0 sdists). vllm#24720, vllm#26628.
HTTP_PORT_ONLY_WITH_PROXY_SINCE = (0, 11, 1)


def _set(extra: dict, key: str) -> bool:
    """``get_from_extra_config(key, "")`` is not ``""`` (the engine's test for the proxy keys)."""
    return extra.get(key, "") != ""


@rule(
    id="p2p-nccl-http-port-missing", family="connector", severity="error",
    fields=("spec.kvTransfer.extraConfig",),
    source=("vllm distributed/kv_transfer/kv_connector/v1/p2p/p2p_nccl_engine.py P2pNcclEngine.__init__: "
            "kv_connector_extra_config['http_port'] read unconditionally (KeyError, 0.9.2-0.11.0), from 0.11.1 only "
            "with proxy_ip and proxy_port set (ValueError 'kv_connector_extra_config.http_port is required'); read in "
            "the 0.9.2, 0.10.0, 0.10.1.1, 0.11.0, 0.11.1, 0.12.0-0.14.0, 0.18.0 and 0.23.0 sdists; vllm#24720, "
            "vllm#26628"),
    example='--kv-transfer-config {"kv_connector":"P2pNcclConnector","kv_role":"kv_producer",'
    '"kv_connector_extra_config":{"proxy_ip":"proxy","proxy_port":"30001"}} on v0.12.0',
    since=P2P_NCCL_SINCE, until=P2P_NCCL_UNTIL,
    without_connector=True, any_release=True,
)
def check_p2p_nccl_http_port(pair: PDPair) -> list[Violation]:
    """A P2pNcclConnector engine names its HTTP port in kv_connector_extra_config where vLLM reads it.

    On an unknown release (``any_release``) only an engine that registers with a proxy (``proxy_ip`` and
    ``proxy_port`` set) is judged, and only of an upstream image or a host install: every release that ships the
    connector refuses it (KeyError 0.9.2-0.11.0, ValueError 0.11.1-0.23.0: p2p_nccl_engine.py read in the 0.9.2,
    0.10.0, 0.10.1, 0.10.1.1, 0.10.2, 0.11.0, 0.11.1, 0.11.2, 0.12.0-0.14.0, 0.15.0, 0.15.1, 0.16.0, 0.17.0, 0.17.1,
    0.18.0, 0.19.1, 0.20.0-0.20.2, 0.21.0, 0.22.0 and 0.23.0 releases), and the others do not register
    P2pNcclConnector at all
    (0.9.1's and 0.24.0's factory.py): the engine does not start on any release. Without the proxy keys 0.11.1 on
    starts it, so nothing is said."""
    out: list[Violation] = []
    unknown = pair.version is None
    proxy_only = pair.at_least(HTTP_PORT_ONLY_WITH_PROXY_SINCE)
    for r in pair.roles:
        if r.connector != "P2pNcclConnector" or "http_port" in r.extra:
            continue
        registers = _set(r.extra, "proxy_ip") and _set(r.extra, "proxy_port")
        if (proxy_only or unknown) and not registers:
            continue
        if unknown and r.image and image_repository(r.image) not in UPSTREAM_REPOSITORIES:
            continue  # a fork may carry a P2pNcclConnector of its own; a host install ("") is vLLM's
        if unknown:
            out.append((
                f"{r.role}: P2pNcclConnector registering with the proxy (proxy_ip, proxy_port) without http_port in "
                "kv_connector_extra_config: every vLLM release that ships P2pNcclConnector (0.9.2-0.23) refuses it "
                "when the connector starts (KeyError: 'http_port' up to 0.11.0, ValueError "
                "'kv_connector_extra_config.http_port is required' from 0.11.1), and the others do not register the "
                "connector, so the engine does not start whatever the release.",
                fix_for(pair, "Add http_port (the engine's --port) to kv_connector_extra_config.",
                        f"Add \"http_port\": \"<the {r.role} engine's --port>\" to its kv_connector_extra_config."),
            ))
            continue
        why = ("builds its HTTP address from kv_connector_extra_config['http_port'] when the connector starts "
               "(KeyError: 'http_port')" if not proxy_only else
               "needs kv_connector_extra_config.http_port to register with the proxy at proxy_ip:proxy_port "
               "(ValueError 'kv_connector_extra_config.http_port is required')")
        out.append((
            f"{r.role}: P2pNcclConnector without http_port in kv_connector_extra_config: vLLM {fmt(pair.version)}'s "
            f"P2pNcclEngine {why}, so the engine does not start.",
            fix_for(pair, "Add http_port (the engine's --port) to kv_connector_extra_config.",
                    f"Add \"http_port\": \"<the {r.role} engine's --port>\" to its kv_connector_extra_config."),
        ))
    return out


@rule(
    id="p2p-nccl-connector-unavailable", family="connector", severity="error",
    fields=("spec.kvTransfer.connector", "spec.engine"),
    source=("vllm distributed/kv_transfer/kv_connector/factory.py: KVConnectorFactory.get_connector_class raises "
            "ValueError('Unsupported connector type: ...') for a kv_connector not in its registry and without "
            "kv_connector_module_path; the 0.23.0 sdist registers P2pNcclConnector, the 0.24.0 sdist, the 0.32.0 "
            "wheel and the 0.34.0 sdist neither register it nor ship kv_connector/v1/p2p. Judged on upstream vLLM "
            "images only (UPSTREAM_REPOSITORIES)"),
    example='--kv-transfer-config {"kv_connector":"P2pNcclConnector","kv_role":"kv_producer"} on '
    "vllm/vllm-openai:v0.24.0",
    since=P2P_NCCL_UNTIL,
    without_connector=True,
)
def check_p2p_nccl_registered(pair: PDPair) -> list[Violation]:
    """An engine of an upstream vLLM image that names P2pNcclConnector runs a release that still registers it."""
    out: list[Violation] = []
    for r in pair.roles:
        if (r.connector != "P2pNcclConnector" or r.kv_transfer.get("kv_connector_module_path")
                or r.version is None or r.version < P2P_NCCL_UNTIL
                or image_repository(r.image) not in UPSTREAM_REPOSITORIES):
            continue
        out.append((
            f"{r.role}: vLLM {fmt(r.version)} ({r.image}) no longer has P2pNcclConnector (registered up to 0.23.x): "
            "KVConnectorFactory raises 'Unsupported connector type: P2pNcclConnector' when the engine builds its "
            "connector, so the engine does not start.",
            fix_for(pair, "Use spec.kvTransfer.connector NixlConnector, or a vLLM image <= 0.23.",
                    f"Use NixlConnector in the {r.role} container's --kv-transfer-config, or a vLLM image <= 0.23 "
                    "(vllm/vllm-openai:v0.23.0)."),
        ))
    return out


#: ``KVTransferConfig.kv_port``'s default (vllm/config/__init__.py 0.10.1.1 line 3177; vllm/config/kv_transfer.py later).
KV_PORT_DEFAULT = 14579


def _zmq_ports(r) -> set[int] | None:
    """The ports a P2pNcclConnector engine's workers bind (``kv_port`` + the worker's rank, ranks 0 .. TP x PP - 1:
    ``P2pNcclEngine(port_offset=rank)``), or ``None`` when they cannot be read (a kv_port or size not written)."""
    try:
        base = int(r.kv_transfer.get("kv_port", KV_PORT_DEFAULT))
    except (TypeError, ValueError):
        return None
    if r.tp is None or r.pp is None:
        return None
    return set(range(base, base + r.tp * r.pp))


@rule(
    id="p2p-nccl-kv-port-conflict", family="side-channel-port-conflict", severity="error",
    fields=("spec.kvTransfer.extraConfig", "spec.port"),
    source=("vllm distributed/kv_transfer/kv_connector/v1/p2p/p2p_nccl_engine.py P2pNcclEngine.__init__: each worker "
            "binds a ZMQ ROUTER on tcp://get_ip():(kv_port + rank) when the connector starts (0.10.1.1 lines 83-110, "
            "0.11.1 lines 91-123; p2p_nccl_connector.py passes port_offset=rank), kv_port defaulting to 14579; a second "
            "bind of one address fails (zmq.error.ZMQError: Address already in use, vllm#26628). Releases without "
            "P2pNcclConnector refuse the engine anyway. Judged on upstream images and host installs only, for engines "
            "of one pod or container and for hostNetwork pods bound to one node (two Compose services with "
            "network_mode: host on one host; vllm#21712's pair on one machine)"),
    example='two engines of one script on one host, both --kv-transfer-config {"kv_connector":"P2pNcclConnector",'
    '"kv_port":"21001",...}',
    without_connector=True, any_release=True,
)
def check_p2p_nccl_kv_ports(pair: PDPair) -> list[Violation]:
    """P2pNcclConnector engines sharing a network namespace bind disjoint ZMQ ports (kv_port + rank), apart from
    the other engine's HTTP port too. The namespace is shared by engines of one pod or one container, and by two
    hostNetwork pods bound to one node (:func:`~pdd_operator.compat.placement.same_node`, as two Compose services
    with ``network_mode: host`` on one host are): a port both such pods ask for as a host port is left out, the
    scheduler never places them together; where the scheduler decides, nothing is said. Engines of one role in one
    namespace (the three prefills of vLLM's 3P1D design page on one host, :attr:`PDPair.neighbours`) are compared
    with each other too: the bind does not depend on the role. Judged for upstream vLLM images and host installs (a
    script's ``vllm``), not for other images (a fork may bind otherwise)."""
    return _kv_ports_across_roles(pair) + _kv_ports_within_role(pair)


def _upstream(r) -> bool:
    """``r`` runs vLLM's own P2pNcclConnector: an upstream image or a host install (no image, a script's ``vllm``);
    a custom or plugin build may carry a P2pNcclConnector of its own."""
    return not r.image or image_repository(r.image) in UPSTREAM_REPOSITORIES


def _kv_ports_across_roles(pair: PDPair) -> list[Violation]:
    """The pair's prefill against its decode (:func:`check_p2p_nccl_kv_ports`)."""
    p, d = pair.roles
    bound = (not pair.shared_network and p.host_network and d.host_network
             and same_node(p, d, assume_hostname_is_name=False))
    if not (pair.shared_network or bound):
        return []
    if not all(_upstream(r) for r in (p, d)):
        return []
    zp = _zmq_ports(p) if p.connector == "P2pNcclConnector" else set()
    zd = _zmq_ports(d) if d.connector == "P2pNcclConnector" else set()
    if zp is None or zd is None or not (zp or zd):
        return []
    clash = sorted((zp & (zd | set(d.other_ports))) | (zd & set(p.other_ports)))
    if bound:
        clash = [port for port in clash if not (port in p.host_ports and port in d.host_ports)]
    if not clash:
        return []
    where = ("engines of one container" if pair.one_container else "containers of one pod" if pair.shared_network
             else "hostNetwork pods bound to one node")
    return [(
        f"Prefill and decode are {where} (one host's network namespace) and P2pNcclConnector binds its ZMQ socket on "
        f"kv_port + rank of each worker: port {', '.join(map(str, clash))} is bound twice, so the engine that starts "
        "second fails with 'zmq.error.ZMQError: Address already in use'.",
        fix_for(pair, "Give each role its own kv_port range (kv_port + TP x PP ports) apart from the HTTP ports.",
                "Give each engine a kv_port whose range kv_port .. kv_port + TP x PP - 1 meets neither the other's "
                "range nor its --port."),
    )]


def _kv_ports_within_role(pair: PDPair) -> list[Violation]:
    """The pair's prefill against the other prefill engines of its network namespace and its decode against the other
    decode engines of its own (:attr:`PDPair.neighbours`: the xPyD engines of one script's host or one pod, which no
    pair compares): each P2pNcclEngine binds kv_port + rank whatever its role, so two prefills of vLLM's 3P1D page
    given one kv_port collide as a prefill and a decode would (p2p_nccl_engine.py 0.13.0 lines 91, 125-127)."""
    out: list[Violation] = []
    for role, where, other in pair.neighbours:
        own = pair.prefill if role == "prefill" else pair.decode
        if own.connector != "P2pNcclConnector" or other.connector != "P2pNcclConnector":
            continue
        if not (_upstream(own) and _upstream(other)):
            continue
        zo, zn = _zmq_ports(own), _zmq_ports(other)
        if zo is None or zn is None:
            continue
        clash = sorted((zo & (zn | set(other.other_ports))) | (zn & set(own.other_ports)))
        if not clash:
            continue
        shared = "engines of one container" if pair.one_container else "containers of one pod"
        out.append((
            f"{role}: this {role} engine and the {role} engine {where} are {shared} (one network namespace) and "
            f"P2pNcclConnector binds its ZMQ socket on kv_port + rank of each worker: port "
            f"{', '.join(map(str, clash))} is bound twice, so the engine that starts second fails with "
            "'zmq.error.ZMQError: Address already in use'.",
            fix_for(pair, "Give each engine its own kv_port range (kv_port + TP x PP ports) apart from the HTTP ports.",
                    f"Give each {role} engine a kv_port whose range kv_port .. kv_port + TP x PP - 1 meets no other "
                    "engine's range nor --port on this host."),
        ))
    return out
