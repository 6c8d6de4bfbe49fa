"""How an engine pod stops without failing a request: its preStop hook and termination grace period.

When a pod is deleted (a rollout replacing it, a scale-down) Kubernetes sets its
``deletionTimestamp``, runs the container's preStop hook, then sends SIGTERM and, at the end of
``terminationGracePeriodSeconds`` (counted from the deletion, hook included), SIGKILL. The router
stops choosing a pod as soon as it is terminating or not Ready (:mod:`pdd_operator.router.discovery`),
so a request still reaches it only during the router's watch latency. The hook therefore waits
:data:`ROUTER_NOTICE_SECONDS`, then until vLLM reports no running or waiting request
(``vllm:num_requests_running`` + ``vllm:num_requests_waiting`` on ``/metrics`` = 0), at most
:func:`drain_seconds`; only then does vLLM get SIGTERM. An idle pod stops after the notice, a busy
one when its last request is done.
"""

from __future__ import annotations

import math

from pdd_operator.api.spec import PDDeploymentSpec

#: Seconds a stopping pod keeps serving before its requests are counted: the router's pod watch
#: must see the deletion first (an event, normally well under a second).
ROUTER_NOTICE_SECONDS = 5
#: Seconds vLLM gets after SIGTERM to shut down (free the GPU memory, close NIXL) before SIGKILL.
ENGINE_SHUTDOWN_SECONDS = 30
#: Default drain of a prefill pod: a prefill request is one forward pass of the prompt.
DEFAULT_PREFILL_DRAIN_SECONDS = 30
#: A slow decode, in tokens per second per request, for the default drain of a decode pod: a request
#: can generate up to ``model.maxModelLen`` tokens.
SLOW_DECODE_TOKENS_PER_SECOND = 20
#: Bounds of the derived decode drain, and its value when ``model.maxModelLen`` is unset.
MIN_DECODE_DRAIN_SECONDS, MAX_DECODE_DRAIN_SECONDS, DEFAULT_DECODE_DRAIN_SECONDS = 30, 600, 300


def drain_seconds(spec: PDDeploymentSpec, role: str) -> int:
    """Longest time (seconds) a stopping ``role`` pod waits for its requests: ``spec.<role>.drainSeconds``
    when set; else for prefill :data:`DEFAULT_PREFILL_DRAIN_SECONDS`, for decode ``maxModelLen`` tokens
    at :data:`SLOW_DECODE_TOKENS_PER_SECOND`, within [:data:`MIN_DECODE_DRAIN_SECONDS`,
    :data:`MAX_DECODE_DRAIN_SECONDS`] (:data:`DEFAULT_DECODE_DRAIN_SECONDS` without ``maxModelLen``).
    Raises ``KeyError`` for another role."""
    r = spec.role(role)
    if r.drain_seconds is not None:
        return r.drain_seconds
    if role == "prefill":
        return DEFAULT_PREFILL_DRAIN_SECONDS
    if spec.model.max_model_len is None:
        return DEFAULT_DECODE_DRAIN_SECONDS
    derived = math.ceil(spec.model.max_model_len / SLOW_DECODE_TOKENS_PER_SECOND)
    return max(MIN_DECODE_DRAIN_SECONDS, min(MAX_DECODE_DRAIN_SECONDS, derived))


def termination_grace_seconds(spec: PDDeploymentSpec, role: str) -> int:
    """``terminationGracePeriodSeconds`` of a ``role`` pod: the drain plus :data:`ENGINE_SHUTDOWN_SECONDS`."""
    return drain_seconds(spec, role) + ENGINE_SHUTDOWN_SECONDS


#: The preStop program (``python3 -c``; vLLM images have Python). The engine listens on the pod IP,
#: which the container has as ``VLLM_NIXL_SIDE_CHANNEL_HOST`` (the downward API). An unreachable
#: ``/metrics`` ends the wait: there is nothing left to drain.
_DRAIN_PROGRAM = """\
import os, re, time, urllib.request
host = os.environ.get("VLLM_NIXL_SIDE_CHANNEL_HOST") or "127.0.0.1"
host = "[" + host + "]" if ":" in host else host
end = time.monotonic() + {drain}
time.sleep({notice})
busy = re.compile(r"^vllm:num_requests_(?:running|waiting)(?:[{{][^}}]*[}}])? (\\S+)", re.M)
while time.monotonic() < end:
    try:
        text = urllib.request.urlopen("http://%s:{port}/metrics" % host, timeout=2).read().decode()
    except Exception:
        break
    if sum(float(v) for v in busy.findall(text)) == 0:
        break
    time.sleep(0.5)
"""


def pre_stop(spec: PDDeploymentSpec, role: str, http_port: int) -> dict | None:
    """The engine container's ``lifecycle.preStop`` (an exec handler running :data:`_DRAIN_PROGRAM`
    against ``http_port``), or ``None`` when the drain is 0 seconds."""
    drain = drain_seconds(spec, role)
    if drain == 0:
        return None
    program = _DRAIN_PROGRAM.format(drain=drain, notice=min(ROUTER_NOTICE_SECONDS, drain), port=http_port)
    return {"exec": {"command": ["python3", "-c", program]}}
