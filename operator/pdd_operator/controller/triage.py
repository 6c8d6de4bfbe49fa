"""Which reconcile work a watch event asks for (pure): none, only a status update, or children to write.

The handlers (:mod:`pdd_operator.controller.handlers`) queue the owning PDDeployment at the
:class:`~pdd_operator.controller.workqueue.Priority` these functions return, or not at all (``None``):
the event cannot change anything a reconcile writes, children or status. Each ``None`` rests on what the
reconcile reads (:func:`pdd_operator.controller.reconcile.reconcile`), named per function:

- :func:`pdd_work`: a PDDeployment's change of anything but its status (the spec, labels, annotations,
  a deletion) is ``WRITE``; a change of nothing but its status is the operator's own write
  (:func:`~pdd_operator.controller.cache.status_only`): ``None``.
- :func:`child_work`: a child (Deployment, Service, the router's ServiceAccount, Role, RoleBinding)
  deleted, new to the cache (unless only the operator wrote it: its own create, :func:`written_only_by_us`,
  ``STATUS``), or changed in what the operator applies or compares (its spec, labels,
  the operator's own ``pdd-operator.dev/`` annotations) is ``WRITE``: it may have to be created again
  or its drift reverted. A change of other managers' annotations only (the Deployment controller's
  ``deployment.kubernetes.io/revision``) is neither applied nor read (:func:`foreign_annotations`).
  A change of the status is ``STATUS`` when the reconcile reads that status
  (:func:`~pdd_operator.controller.rollout.deployment_status_view` of an engine's or the router's
  Deployment, the only status reads) and it changed, else ``None``.
- :func:`pod_work`: a pod is read only through :func:`~pdd_operator.controller.pod_failures.unschedulable`,
  :func:`~pdd_operator.controller.pod_failures.pod_problems` and
  :func:`~pdd_operator.controller.status.preflight_results`; a pod for which all three return nothing
  (:func:`pod_inert`) adds nothing to any of them, so an event whose pod is inert before and after (a
  pod created, scheduled, started or ready without trouble) is ``None``; other changes of its view
  (:func:`~pdd_operator.controller.cache.pod_view`) are ``STATUS``, and so is a pod that starts to
  terminate or goes away, trouble or not: the rollout's retire order and the ``Ready`` condition count a
  revision slot's pods, Terminating ones included (:mod:`pdd_operator.controller.rollout`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pdd_operator.api.constants import FIELD_MANAGER, GROUP, LABEL_ROLE, ROLES
from pdd_operator.controller.cache import status_only, strip
from pdd_operator.controller.pod_failures import pod_problems, unschedulable
from pdd_operator.controller.rollout import deployment_status_view, terminating
from pdd_operator.controller.status import preflight_results
from pdd_operator.controller.workqueue import Priority
from pdd_operator.render.workloads import ROUTER

#: Annotations on a child that the operator writes or reads: its own, under its API group's prefix
#: (``pdd-operator.dev/generation``, ``/applied-hash``, the legacy ``/applied-spec``; render.workloads,
#: controller.kube). Every other annotation key is another manager's.
OWN_ANNOTATION_PREFIX = f"{GROUP}/"


def status_is_read(kind: str | None, labels: Mapping[str, str] | None) -> bool:
    """Whether a reconcile reads the status of a managed child of ``kind`` with ``labels``: only the
    Deployments' (prefill and decode, :meth:`~pdd_operator.controller.status.RoleObservation.from_deployment`
    and the rollout's slots; the router's, which ``Ready`` waits for); a change of nothing but the
    status of any other child (a Service, the router's RBAC) cannot change what the reconcile does.
    Pods are judged by :func:`pod_work` instead."""
    return kind == "Deployment" and (labels or {}).get(LABEL_ROLE) in (*ROLES, ROUTER)


def foreign_annotations(obj: Mapping[str, Any]) -> dict:
    """``obj`` without ``managedFields``, its status, resourceVersion and the annotations not under
    :data:`OWN_ANNOTATION_PREFIX`: what the operator applies or reads of a child besides its status.
    (Applying compares only the fields the operator renders, :func:`~pdd_operator.controller.kube.contains`,
    so another manager's annotation never makes a write; no reconcile reads one.)"""
    body = strip(obj)
    body.pop("status", None)
    meta = body["metadata"]
    meta.pop("resourceVersion", None)
    notes = {k: v for k, v in (meta.get("annotations") or {}).items() if str(k).startswith(OWN_ANNOTATION_PREFIX)}
    if notes:
        meta["annotations"] = notes
    else:
        meta.pop("annotations", None)
    return body


def written_only_by_us(obj: Mapping[str, Any]) -> bool:
    """Whether every field manager of ``obj`` (``metadata.managedFields``) is the operator's own
    (:data:`~pdd_operator.api.constants.FIELD_MANAGER`): an object only the operator has written, as a
    child is when the watch delivers its creation. Its reconcile wrote it (its answer is in the cache at
    once, or the apply failed and that reconcile is retried), so there is nothing to write for it."""
    fields = (obj.get("metadata") or {}).get("managedFields") or []
    return bool(fields) and all(isinstance(f, dict) and f.get("manager") == FIELD_MANAGER for f in fields)


def pdd_work(cached: Mapping[str, Any] | None, new: Mapping[str, Any]) -> Priority | None:
    """The work a PDDeployment's event asks for: ``WRITE`` unless it changed nothing but its status
    since ``cached`` (the cache's copy before the event, ``None``: new to it)."""
    return None if status_only(cached, new) else Priority.WRITE


def child_work(kind: str, cached: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> Priority | None:
    """The work a managed child's event asks for (see the module docstring). ``cached``: the cache's
    copy before the event (``None``: not cached); ``new``: the object now (``None``: deleted)."""
    if new is None:
        return Priority.WRITE
    if cached is None:  # the echo of the operator's own create, when it comes before the apply's answer
        return Priority.STATUS if written_only_by_us(new) else Priority.WRITE
    if foreign_annotations(cached) != foreign_annotations(new):
        return Priority.WRITE
    labels = (new.get("metadata") or {}).get("labels")
    if status_is_read(kind, labels) and deployment_status_view(cached) != deployment_status_view(new):
        return Priority.STATUS
    return None


def pod_inert(view: Mapping[str, Any] | None) -> bool:
    """Whether a pod (its :func:`~pdd_operator.controller.cache.pod_view`; ``None``: no pod) adds nothing
    to what a reconcile reads of pods: not unschedulable, no container that cannot run, no preflight
    verdict."""
    if view is None:
        return True
    pods = [dict(view)]
    return not unschedulable(pods) and not pod_problems(pods) and not preflight_results(pods)


def pod_work(cached: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> Priority | None:
    """The work a pod's event asks for: ``None`` when the pod is inert (:func:`pod_inert`) before and
    after or its view did not change, else ``STATUS``. ``cached``/``new``: its view before and now
    (``None``: not cached / deleted)."""
    if cached is not None and (new is None or (terminating(new) and not terminating(cached))):
        # A pod that starts to terminate or goes away changes its slot's pod count, which the rollout reads to
        # retire the previous slot's decode after its prefill, and status to hold Ready while a previous slot's
        # pod still stops (:func:`~pdd_operator.controller.rollout.observe`, ``SlotRole.gone``).
        return Priority.STATUS
    if pod_inert(cached) and pod_inert(new):
        return None
    def rest(view):
        if view is None:
            return None
        out = dict(view)
        out["metadata"] = {k: v for k, v in (view.get("metadata") or {}).items() if k != "resourceVersion"}
        return out
    return None if rest(cached) == rest(new) else Priority.STATUS
