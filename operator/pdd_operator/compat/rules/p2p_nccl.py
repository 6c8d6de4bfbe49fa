"""What vLLM's P2pNcclConnector refuses when its engine starts (``P2pNcclEngine.__init__``): an engine-alone rule,
so it holds although the KV path of a P2pNccl pair is not what these rules describe (such a pair stays "not checked"
otherwise, :func:`pdd_operator.compat.engine._foreign_connector`)."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.versions import fmt

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
    without_connector=True,
)
def check_p2p_nccl_http_port(pair: PDPair) -> list[Violation]:
    """A P2pNcclConnector engine names its HTTP port in kv_connector_extra_config where vLLM reads it."""
    out: list[Violation] = []
    proxy_only = pair.at_least(HTTP_PORT_ONLY_WITH_PROXY_SINCE)
    for r in pair.roles:
        if r.connector != "P2pNcclConnector" or "http_port" in r.extra:
            continue
        registers = _set(r.extra, "proxy_ip") and _set(r.extra, "proxy_port")
        if proxy_only and not registers:
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
