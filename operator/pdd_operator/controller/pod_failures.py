"""Why the pods of one part of a PDDeployment (``prefill``, ``decode`` or ``router``) cannot run, from
the slim pod view the cache keeps (:func:`~pdd_operator.controller.cache.pod_view`): pure functions, one
definition for the engines' pods and the router's.

- :func:`unschedulable` — the scheduler's verdict on a pod it cannot place (its ``PodScheduled``
  condition with reason ``Unschedulable``), with the pod's name;
- :func:`pod_problems` — containers that cannot start or keep crashing
  (:data:`~pdd_operator.api.constants.CONTAINER_FAILURE_REASONS`);
- :func:`fix_fields` — which ``spec`` fields of the PDDeployment decide such a failure, so a condition
  message names what to change (``spec.router.nodeSelector``, ``spec.engine.image``, ...).

The message texts matched by :func:`fix_fields` are kube-scheduler's filter plugins'
(``pkg/scheduler/framework/plugins``: nodeaffinity ``node(s) didn't match Pod's node affinity/selector``,
tainttoleration ``node(s) had untolerated taint``, noderesources ``Insufficient <resource>``,
interpodaffinity, podtopologyspread, nodeports), the kubelet's container waiting reasons, and the
ServiceAccount admission plugin's refusal (``serviceaccount "<name>" not found``) that a ReplicaSet
reports as its ``ReplicaFailure`` condition.
"""

from __future__ import annotations

import re

from pdd_operator.api.constants import CONTAINER_FAILURE_REASONS
from pdd_operator.render.workloads import ROUTER

#: The longest container message a condition quotes (a crash's last log line can be long).
MESSAGE_CHARS = 300


def _live(pods: list[dict]) -> list[dict]:
    """``pods`` without those being deleted, in name order (so a message does not depend on list order)."""
    return sorted((p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")),
                  key=lambda p: str((p.get("metadata") or {}).get("name", "")))


def unschedulable(pods: list[dict]) -> str:
    """``pod P: <scheduler message>`` of the first pod (by name) the scheduler cannot place, or ``""``.

    ``pods``: pod objects or their cache views (``status.conditions`` of type ``PodScheduled``, reason
    ``Unschedulable``); pods being deleted are skipped. Example: ``pod m-router-5c9d-x2: 0/3 nodes are
    available: 3 node(s) didn't match Pod's node affinity/selector.``"""
    for pod in _live(pods):
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if isinstance(cond, dict) and cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
                name = (pod.get("metadata") or {}).get("name", "?")
                return f"pod {name}: {' '.join(str(cond.get('message') or 'Unschedulable').split())}"
    return ""


def pod_problems(pods: list[dict]) -> list[str]:
    """Why containers of ``pods`` cannot run, one line each, in pod name order: ``pod P container C:
    CreateContainerConfigError: secret "hf-token" not found``; for a crash loop, the last termination
    instead of the kubelet's back-off text (which changes with every restart): ``CrashLoopBackOff (last
    exit 137, OOMKilled)``. Only :data:`~pdd_operator.api.constants.CONTAINER_FAILURE_REASONS` count;
    pods being deleted are skipped. Messages are cut at :data:`MESSAGE_CHARS` characters."""
    out = []
    for pod in _live(pods):
        meta = pod.get("metadata") or {}
        status = pod.get("status") or {}
        for st in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
            if not isinstance(st, dict):
                continue
            waiting = (st.get("state") or {}).get("waiting")
            if not isinstance(waiting, dict) or waiting.get("reason") not in CONTAINER_FAILURE_REASONS:
                continue
            reason = waiting["reason"]
            if reason == "CrashLoopBackOff":
                last = ((st.get("lastState") or {}).get("terminated") or {})
                detail = ", ".join(str(x) for x in (f"last exit {last.get('exitCode')}" if "exitCode" in last else None,
                                                    last.get("reason"), last.get("message")) if x)
                text = f"{reason} ({detail})" if detail else reason
            else:
                text = f"{reason}: {waiting['message']}" if waiting.get("message") else reason
            line = f"pod {meta.get('name', '?')} container {st.get('name', '?')}: {' '.join(str(text).split())}"
            line = line[:MESSAGE_CHARS]
            if line not in out:
                out.append(line)
    return out


#: Resources set through ``spec.<part>.resources`` (the rest are extended resources the operator adds).
_PLAIN_RESOURCES = ("cpu", "memory", "ephemeral-storage", "hugepages-")
_INSUFFICIENT = re.compile(r"Insufficient ([A-Za-z0-9./_-]+)")


def _resource_fields(part: str, resource: str) -> list[str]:
    if resource.startswith(_PLAIN_RESOURCES):
        return [f"spec.{part}.resources"]
    if part == ROUTER:
        return []
    if resource == "nvidia.com/gpu":  # TP x PP per pod (render.workloads)
        return [f"spec.{part}.tensorParallelSize", f"spec.{part}.pipelineParallelSize"]
    return ["spec.network.rdma.resourceName"]  # the only other extended resource an engine requests


def fix_fields(part: str, text: str) -> list[str]:
    """The ``spec`` fields that decide the failure ``text`` of a pod of ``part`` (``prefill``, ``decode``
    or ``router``), in a fixed order, without repeats; ``[]`` when the text names nothing a field sets
    (a crash whose log is the clue).

    ``text``: a line of :func:`unschedulable`, :func:`pod_problems` or a ``ReplicaFailure`` message.
    Scheduling: node selector or affinity -> ``spec.<part>.nodeSelector`` (engines also
    ``spec.placement.gpuProduct``, which selects ``nvidia.com/gpu.product``); a taint ->
    ``spec.<part>.tolerations``; ``Insufficient cpu|memory`` -> ``spec.<part>.resources``, ``Insufficient
    nvidia.com/gpu`` -> the role's tensor and pipeline parallel sizes, another extended resource ->
    ``spec.network.rdma.resourceName``; pod (anti-)affinity or topology spread -> ``spec.placement``; host
    ports -> ``spec.network.hostNetwork``. Containers: an image that cannot be pulled -> ``spec.router.image``
    (router) or ``spec.engine.image`` and ``spec.engine.imagePullSecrets``; an OOM kill ->
    ``spec.<part>.resources``; a Secret an engine cannot find -> ``spec.model.hfTokenSecretRef`` and
    ``spec.<part>.env`` (the two places an engine names a Secret). A missing
    ServiceAccount -> ``spec.router.serviceAccountName`` (the engines run under the namespace's default)."""
    engine = part != ROUTER
    out: list[str] = []
    if "node affinity/selector" in text:
        out += [f"spec.{part}.nodeSelector"] + (["spec.placement.gpuProduct"] if engine else [])
    if "untolerated taint" in text or "that the pod didn't tolerate" in text:
        out.append(f"spec.{part}.tolerations")
    for resource in _INSUFFICIENT.findall(text):
        out += _resource_fields(part, resource)
    if engine and ("pod affinity" in text or "anti-affinity" in text or "topology spread" in text):
        out.append("spec.placement")
    if engine and "free ports" in text:
        out.append("spec.network.hostNetwork")
    if any(reason in text for reason in ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")):
        out += [f"spec.{ROUTER}.image"] if not engine else ["spec.engine.image", "spec.engine.imagePullSecrets"]
    if "OOMKilled" in text:
        out.append(f"spec.{part}.resources")
    if engine and "CreateContainerConfigError" in text and "secret" in text:
        out += ["spec.model.hfTokenSecretRef", f"spec.{part}.env"]
    if not engine and "serviceaccount" in text.lower() and "not found" in text:
        out.append(f"spec.{ROUTER}.serviceAccountName")
    return list(dict.fromkeys(out))


def with_fix(part: str, text: str) -> str:
    """``<part>: <text>``, followed by `` (fix: <fields>)`` when :func:`fix_fields` names any: one entry
    of a condition message, e.g. ``router: pod m-router-x: 0/3 nodes are available: 3 node(s) didn't match
    Pod's node affinity/selector. (fix: spec.router.nodeSelector)``."""
    fields = fix_fields(part, text)
    return f"{part}: {text}" + (f" (fix: {', '.join(fields)})" if fields else "")
