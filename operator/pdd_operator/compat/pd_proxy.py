"""The P/D proxy in front of a pair and the request protocol it speaks.

A P/D pair serves nothing by itself: a proxy sends each request to a prefill engine and then to a decode engine, and
what it puts in those two requests decides whether the decode finds the prefill's KV. vLLM's ``NixlConnector``
(pull) moves KV only for requests that carry ``kv_transfer_params`` (the OpenAI request field, vLLM 0.9.0-0.34.0
``entrypoints/openai/protocol.py``; 0.10.0 ``CompletionRequest.kv_transfer_params`` line 1039): the prefill gets
``{"do_remote_decode": true, ...}`` and answers with ``remote_engine_id``/``remote_block_ids``/``remote_host``/
``remote_port`` (plus ``remote_request_id`` from 0.13.0, ``tp_size`` and later fields), which the proxy hands to the
decode; a request without them is served as a plain one (0.10.0 ``nixl_connector.py`` ``request_finished`` line 305:
no params -> no transfer; ``get_num_new_matched_tokens`` loads only on ``do_remote_prefill``). A proxy that passes the
prefill's ``kv_transfer_params`` through as they come serves every release; one that speaks another protocol moves no
KV through NIXL, and the decode recomputes every prompt.

The proxies read here, and the protocol (:data:`PROTOCOLS`) each speaks:

- llm-d's routing sidecar (llm-d/llm-d-routing-sidecar, later ``cmd/pd-sidecar`` of llm-d-inference-scheduler), a
  container beside the decode engine with ``-vllm-port``; its ``-connector``/``--kv-connector``
  (:data:`SIDECAR_CONNECTORS`): ``nixlv2`` sends ``kv_transfer_params`` (v0.2.0 ``internal/proxy/connector_nixlv2.go``
  lines 71-82, 124-145); ``nixl`` (its v1 protocol) writes ``do_remote_decode``/``do_remote_prefill`` and the
  ``remote_*`` fields at the top level of the body (``connector_nixl.go`` lines 70, 114-163), which no upstream vLLM
  release reads (0.10.0 ``protocol.py`` ``extra="allow"``, line 49: logged as ignored); ``lmcache`` sends the prefill
  a ``max_tokens`` 1 copy and the decode the request, neither with ``kv_transfer_params`` (``connector_lmcache.go``
  lines 52-53). Without the flag: ``nixl`` up to sidecar v0.2.0 (``main.go`` line 33), ``nixlv2`` from v0.3.0
  (66d51e2, #53) and in llm-d-inference-scheduler's ``pd-sidecar`` (:func:`_sidecar_default`);
- the proxies vLLM's examples start in a script: ``toy_proxy_server.py`` (``tests/v1/kv_connector/nixl_integration``,
  ``kv_transfer_params``), ``disagg_proxy_p2p_nccl_xpyd.py`` (the P2P NCCL example: no ``kv_transfer_params``, the
  peers' ZMQ addresses in the ``X-Request-Id``, 0.11.0 lines 157-170, and only engines a ``P2pNcclEngine`` registered
  with it, lines 37-60), ``disagg_proxy_demo.py`` (``max_tokens`` 1 to the prefill, then the request to the decode,
  no ``kv_transfer_params``: 0.9.1 lines 258, 295; 0.34.0 lines 254, 291), :data:`SCRIPT_PROXIES`.

Other proxies (routers of their own images, gateways) are not read: nothing is said of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pdd_operator.compat.pod_ports import runs_vllm

#: The request protocols, and the KV connectors (as named in ``kv_connector``) whose transfer each one drives.
#: ``kv_transfer_params``: vLLM's NixlConnector (pull) protocol; ``nixl-v1``: llm-d's first protocol, fields at the
#: top level of the body (llm-d's own vLLM build of spring 2025, no upstream release); ``prefill-then-decode``: a
#: ``max_tokens`` 1 prefill and the unchanged request to the decode (LMCache's own PD transfer, keyed by the tokens);
#: ``p2p-request-id``: the P2P NCCL example's peers in the request id (``P2pNcclConnector.parse_request_id``).
PROTOCOLS: dict[str, frozenset[str]] = {
    "kv_transfer_params": frozenset({"NixlConnector"}),
    "nixl-v1": frozenset(),
    "prefill-then-decode": frozenset({"LMCacheConnectorV1"}),
    "p2p-request-id": frozenset({"P2pNcclConnector"}),
}

#: llm-d routing sidecar ``-connector`` (``--kv-connector`` in llm-d-inference-scheduler's ``pd-sidecar``) values
#: whose protocol was read (llm-d-routing-sidecar v0.2.0 ``internal/proxy``); others (``shared-storage``, ``sglang``)
#: are not judged.
SIDECAR_CONNECTORS = {"nixlv2": "kv_transfer_params", "nixl": "nixl-v1", "lmcache": "prefill-then-decode"}

#: Programs of vLLM's examples that a script starts as its P/D proxy, and their protocol.
SCRIPT_PROXIES = {"toy_proxy_server.py": "kv_transfer_params",
                  "disagg_proxy_p2p_nccl_xpyd.py": "p2p-request-id",
                  "disagg_proxy_demo.py": "prefill-then-decode"}

_CONNECTOR_FLAGS = ("-connector", "--connector", "-kv-connector", "--kv-connector")
_SIDECAR_IMAGE = re.compile(r"(routing-sidecar|pd-sidecar)(?::v?(\d+)\.(\d+)(?:\.(\d+))?)?")


@dataclass(frozen=True)
class Proxy:
    """A P/D proxy found beside an engine.

    Attributes:
        what: how it is named in the user's files, for messages (``container routing-proxy (llm-d routing sidecar,
            -connector=nixl)``, ``python3 disagg_proxy_p2p_nccl_xpyd.py``).
        protocol: a key of :data:`PROTOCOLS`.
    """

    what: str
    protocol: str


def _flag_value(words: Sequence[str], names: Sequence[str]) -> str | None:
    """The value of the last of Go-style flags ``names`` in ``words`` (``-f=v``, ``--f=v``, ``-f v``), or ``None``."""
    value = None
    for i, word in enumerate(words):
        name, eq, rest = word.partition("=")
        if name in names:
            value = rest if eq else (words[i + 1] if i + 1 < len(words) else None)
    return value


def _sidecar_default(image: str) -> str | None:
    """The routing sidecar's ``-connector`` when none is given, from its image tag: ``nixl`` up to v0.2.x,
    ``nixlv2`` from v0.3.0 (llm-d-routing-sidecar 66d51e2) and for llm-d-inference-scheduler's ``pd-sidecar``;
    ``None`` when the tag is not a release (the default is then not known)."""
    match = _SIDECAR_IMAGE.search(image)
    if match is None or match.group(2) is None:
        return "nixlv2" if match is not None and match.group(1) == "pd-sidecar" else None
    return "nixl" if (int(match.group(2)), int(match.group(3))) < (0, 3) else "nixlv2"


def routing_sidecar_image(container: dict) -> bool:
    """Whether ``container``'s image is llm-d's routing sidecar (``routing-sidecar``/``pd-sidecar``): a proxy in front
    of the pod's engine that starts no engine itself, whatever its protocol."""
    return isinstance(container, dict) and bool(_SIDECAR_IMAGE.search(str(container.get("image") or "")))


def sidecar_proxy(container: dict) -> Proxy | None:
    """``container`` as an llm-d routing sidecar (its image names ``routing-sidecar``/``pd-sidecar``, or its
    arguments give ``-vllm-port``) with a protocol read (:data:`SIDECAR_CONNECTORS`), else ``None``."""
    if not isinstance(container, dict) or runs_vllm(container):
        return None
    words = [str(x) for x in (container.get("command") or []) + (container.get("args") or [])]
    image = str(container.get("image") or "")
    if not (_SIDECAR_IMAGE.search(image) or any(w.lstrip("-").partition("=")[0] == "vllm-port" for w in words)):
        return None
    connector = _flag_value(words, _CONNECTOR_FLAGS)
    shown = f"-connector={connector}" if connector else "no -connector"
    connector = connector or _sidecar_default(image)
    if connector not in SIDECAR_CONNECTORS:
        return None
    return Proxy(f"container {container.get('name', '?')} (llm-d routing sidecar {image or '?'}, {shown})",
                 SIDECAR_CONNECTORS[connector])


def pod_proxies(container: dict, pod_spec: dict | None) -> tuple[Proxy, ...]:
    """The routing sidecars (:func:`sidecar_proxy`) among the other containers of ``container``'s pod: its
    ``containers`` and native-sidecar ``initContainers`` (``restartPolicy: Always``); ``()`` without a pod spec."""
    if not isinstance(pod_spec, dict):
        return ()
    others = [c for c in pod_spec.get("containers") or [] if isinstance(c, dict)]
    others += [c for c in pod_spec.get("initContainers") or []
               if isinstance(c, dict) and c.get("restartPolicy") == "Always"]
    found = (sidecar_proxy(c) for c in others if c is not container and c.get("name") != container.get("name"))
    return tuple(p for p in found if p is not None)


def command_proxy(words: Sequence[str]) -> Proxy | None:
    """The proxy a script's command ``words`` start (:attr:`~pdd_operator.vllm.script.Launch.proxies`): a program
    of :data:`SCRIPT_PROXIES`, or the routing sidecar's binary (``llm-d-routing-sidecar -connector=...``); else
    ``None``."""
    for word in words:
        program = word.rsplit("/", 1)[-1]
        if program in SCRIPT_PROXIES:
            return Proxy(" ".join(words[: words.index(word) + 1]), SCRIPT_PROXIES[program])
        if "routing-sidecar" in program or "pd-sidecar" in program:
            connector = _flag_value(words, _CONNECTOR_FLAGS) or _sidecar_default(program)
            if connector in SIDECAR_CONNECTORS:
                return Proxy(" ".join(words), SIDECAR_CONNECTORS[connector])
            return None
    return None


def served_connectors(kv_transfer_written: dict) -> set[str]:
    """The connectors an engine's ``--kv-transfer-config`` (as written) runs: its ``kv_connector`` and, for a
    MultiConnector (or another wrapper of that shape), each child's in ``kv_connector_extra_config.connectors``."""
    out = {str(kv_transfer_written.get("kv_connector") or "")}
    extra = kv_transfer_written.get("kv_connector_extra_config")
    for child in (extra.get("connectors") if isinstance(extra, dict) else None) or []:
        if isinstance(child, dict) and child.get("kv_connector"):
            out.add(str(child["kv_connector"]))
    return out - {""}
