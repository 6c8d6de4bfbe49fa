"""The P/D proxy in front of a NIXL pair speaks NixlConnector's request protocol (``kv_transfer_params``).

What the proxies found beside the engines speak is read in :mod:`pdd_operator.compat.pd_proxy`.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.pd_proxy import PROTOCOLS, served_connectors
from pdd_operator.compat.rules.base import Violation, fix_for, rule

#: What each protocol does to a NixlConnector pair, for messages.
_EFFECT = {
    "nixl-v1": ("writes do_remote_decode, do_remote_prefill and the remote_* fields at the top level of the request "
                "body, where vLLM ignores them (it reads kv_transfer_params only)"),
    "prefill-then-decode": ("sends the prefill a max_tokens 1 copy and the decode the request, neither with "
                            "kv_transfer_params"),
    "p2p-request-id": ("speaks P2pNcclConnector's protocol: no kv_transfer_params, the peers' ZMQ addresses in the "
                       "request id, and it routes only to engines a P2pNcclConnector registered with it, so it "
                       "finds no NIXL engine and answers every request with an error"),
}


@rule(
    id="pd-proxy-protocol", family="pd-proxy-protocol", severity="warning",
    fields=("spec.prefill", "spec.decode"),
    source=("vllm NixlConnector (pull) moves KV only for requests whose kv_transfer_params say so: the OpenAI request "
            "field kv_transfer_params (entrypoints/openai/protocol.py, 0.9.0-0.34.0; 0.10.0 CompletionRequest line "
            "1039, unknown top-level fields only logged, OpenAIBaseModel extra='allow' line 49); request_finished "
            "returns no transfer without them (0.10.0 v1/nixl_connector.py line 305; 0.20.0 nixl/scheduler.py line "
            "464) and get_num_new_matched_tokens loads only on do_remote_prefill (0.10.0 line 229, 0.20.0 scheduler.py "
            "line 290). llm-d routing sidecar v0.2.0 internal/proxy: connector_nixlv2.go sends kv_transfer_params, "
            "connector_nixl.go top-level fields (lines 70, 114-163), connector_lmcache.go none (lines 52-53); vLLM "
            "examples: disagg_proxy_p2p_nccl_xpyd.py (0.11.0 lines 37-60, 135-170), disagg_proxy_demo.py (0.9.1 "
            "lines 258, 295; 0.34.0 lines 254, 291)"),
    example="a decode pod whose routing sidecar runs -connector=nixl (or lmcache) in front of NixlConnector engines",
)
def check_pd_proxy_protocol(pair: PDPair) -> list[Violation]:
    """The P/D proxy found beside a NixlConnector (pull) pair passes ``kv_transfer_params``.

    A warning, once per proxy whose protocol (:data:`~pdd_operator.compat.pd_proxy.PROTOCOLS`) drives none of the
    connectors the engines run (a MultiConnector's children counted): requests succeed, but no KV moves through
    NIXL and the decode recomputes every prompt (or, for the P2P NCCL example's proxy, requests fail at the proxy).
    Push pairs and proxies whose protocol is not read are not judged.
    """
    if any(r.push or not r.nixl for r in pair.roles):
        return []
    running = set().union(*(served_connectors(r.kv_transfer_written) for r in pair.roles))
    out: list[Violation] = []
    for proxy in dict.fromkeys(p for r in pair.roles for p in r.proxies):
        if PROTOCOLS.get(proxy.protocol, frozenset({"NixlConnector"})) & running:
            continue
        out.append((
            f"The P/D proxy {proxy.what} {_EFFECT.get(proxy.protocol, 'speaks another protocol')}. The engines' "
            "NixlConnector moves KV only for requests that carry kv_transfer_params (do_remote_decode to the "
            "prefill, the prefill's answer to the decode)"
            + (": the pair serves nothing through this proxy." if proxy.protocol == "p2p-request-id" else
               ", so no KV moves through NIXL and the decode recomputes every prompt."),
            fix_for(pair, "Put a proxy that speaks kv_transfer_params in front of the pair.",
                    "Run a proxy that passes kv_transfer_params: the llm-d routing sidecar with -connector=nixlv2 "
                    "(--kv-connector=nixlv2 in llm-d-inference-scheduler's pd-sidecar), vLLM's toy_proxy_server.py, "
                    "or a router in NIXL P/D mode."),
        ))
    return out
