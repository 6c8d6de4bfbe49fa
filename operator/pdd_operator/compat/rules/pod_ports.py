"""An engine and another container of its pod (an operator's routing or proxy sidecar) listening on one port."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule


@rule(
    id="pod-port-conflict", family="side-channel-port-conflict", severity="error",
    fields=("spec.port",),
    source=("vllm serve binds --port (vllm/entrypoints/openai/api_server.py, default 8000; the KV events endpoint "
            "its own); the containers of a pod, and init containers with restartPolicy Always, share one network "
            "namespace (Kubernetes docs, Pods), so a second bind of the port fails (EADDRINUSE). Operators add such "
            "a container: Modelplane's pd-sidecar on 8000 in the decode pod, with the engine expected on 8001 "
            "unless its args name --port (modelplaneai/modelplane functions/compose-model-replica/function/"
            "routing.py _add_sidecar_to_decode, _DECODE_ENGINE_PORT, at 90ba117)"),
    example="a decode pod with vllm serve (no --port: 8000) and a routing sidecar declaring containerPort 8000",
    without_connector=True,
)
def check_pod_port_conflict(pair: PDPair) -> list[Violation]:
    """No other container of an engine's pod listens on the engine's HTTP or KV-events port."""
    out: list[Violation] = []
    for r in pair.roles:
        clash = sorted({(name, port) for name, port in r.sidecar_ports if port in r.other_ports})
        if not clash:
            continue
        name, port = clash[0]
        out.append((
            f"{r.role}: the engine listens on port {port} (vLLM's --port defaults to 8000) and so does the "
            f"container {name!r} of its pod: one network namespace, so whichever binds second fails with "
            "'Address already in use' and the pod does not become ready.",
            fix_for(pair, "Give the engine its own spec.port, away from the sidecar's.",
                    f"Give the {r.role} engine a --port that no other container of its pod uses (Modelplane's "
                    "decode engine: --port=8001, where its pd-sidecar forwards)."),
        ))
    return out
