"""The ports other containers of an engine's pod listen on: a proxy or routing sidecar that an operator adds beside
the engine (llm-d's routing sidecar, Modelplane's pd-sidecar) shares the pod's network namespace, so it and the
engine cannot both bind one port.

Kubernetes runs all containers of a pod, and the init containers with ``restartPolicy: Always`` (native sidecars)
beside them, in one network namespace (Kubernetes docs, "Pods": "containers in a Pod ... share ... IP address and
port space"); a second ``bind`` of the same TCP port fails with EADDRINUSE. A container's ``ports[].containerPort``
is the port it declares it listens on.
"""

from __future__ import annotations

import re

from pdd_operator.vllm.versions import is_vllm_image

#: A word of a command line that starts vLLM: the ``vllm`` CLI (also by path), its API server module, or a
#: worker that wraps it (Dynamo's ``dynamo.vllm``). ``--vllm-port`` (a routing sidecar's flag) is none of them.
_STARTS_VLLM = re.compile(r"^(?:\S*/)?vllm$|^vllm\.entrypoints|^dynamo\.vllm$")


def runs_vllm(container: dict) -> bool:
    """``container`` starts a vLLM engine (its image is a vLLM image or a word of its command starts vLLM): its
    ports are the engine's own, which the engine rules compare (``listener-port-conflict``)."""
    words = " ".join(str(x) for x in (container.get("command") or []) + (container.get("args") or [])).split()
    return is_vllm_image(str(container.get("image") or "")) or any(_STARTS_VLLM.search(w) for w in words)


def sidecar_ports(container: dict, pod_spec: dict | None) -> tuple[tuple[str, int], ...]:
    """``(container name, port)`` for each TCP ``containerPort`` declared by another container of the pod that
    runs beside ``container`` (``containers`` and init containers with ``restartPolicy: Always``) and starts no
    vLLM engine itself; ``()`` without a pod spec."""
    if not isinstance(pod_spec, dict):
        return ()
    others = [c for c in pod_spec.get("containers") or [] if isinstance(c, dict)]
    others += [c for c in pod_spec.get("initContainers") or []
               if isinstance(c, dict) and c.get("restartPolicy") == "Always"]
    out = []
    for other in others:
        if other is container or other.get("name") == container.get("name") or runs_vllm(other):
            continue
        for port in other.get("ports") or []:
            if not isinstance(port, dict) or str(port.get("protocol", "TCP")).upper() != "TCP":
                continue
            number = port.get("containerPort")
            if isinstance(number, int) or (isinstance(number, str) and number.isdigit()):
                out.append((str(other.get("name", "?")), int(number)))
    return tuple(out)
