"""kopf handlers: thin edges that route events to :func:`~pdd_operator.controller.reconcile.reconcile`.

- every event of a PDDeployment reconciles it (level-based: the handler does not look at the diff);
- every event of a Deployment, Service or pod the operator manages reconciles its owner, so a child
  deleted by hand comes back and status follows the pods;
- a resync loop reconciles every PDDeployment periodically, retrying what failed.

Only ``on.event`` handlers are used: kopf then keeps no progress annotations or finalizers on the
objects, so the only writes are the operator's own (children it changed, status when it changed).

The validating admission webhook is in :mod:`pdd_operator.controller.webhook`; ``pdd run
--webhook-port`` registers it (:func:`~pdd_operator.controller.webhook.enable`) next to these.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading

import kopf
from kubernetes.client.exceptions import ApiException

from pdd_operator.api.constants import GROUP, LABEL_INSTANCE, LABEL_MANAGED_BY, PLURAL, VERSION
from pdd_operator.controller.kube import Kube
from pdd_operator.controller.metrics import RECONCILE_ERRORS
from pdd_operator.controller.reconcile import reconcile

log = logging.getLogger("pdd_operator")

RESYNC_SECONDS = float(os.environ.get("PDD_RESYNC_SECONDS", "60"))
_MANAGED = {LABEL_MANAGED_BY: "pdd-operator"}

_state: dict = {}


def watch_namespaces(namespaces: list[str]) -> None:
    """Serve only ``namespaces`` (``pdd run -n``); empty: all. Call before ``kopf.run``."""
    _state["namespaces"] = tuple(namespaces)


def elect_leader(elector) -> None:
    """Reconcile only while ``elector`` (a :class:`~pdd_operator.controller.leader.LeaderElector`) leads;
    it runs in a thread from startup, and becoming the leader starts a full resync at once. Call
    before ``kopf.run``."""
    _state["elector"] = elector


def leading() -> bool:
    """Whether this replica may reconcile: always without leader election."""
    elector = _state.get("elector")
    return elector is None or elector.leading


def _kube() -> Kube:
    if "kube" not in _state:
        _state["kube"] = Kube()
    return _state["kube"]


def _reconcile_logged(namespace: str, name: str) -> None:
    if not leading():
        return  # the leader reconciles; this replica only serves the webhook
    try:
        reconcile(_kube(), namespace, name)
    except ApiException as exc:
        RECONCILE_ERRORS.inc()
        # Conflicts (409) and transient API errors: the next event or the resync retries.
        log.warning("reconcile of %s/%s failed: %s %s", namespace, name, exc.status, exc.reason)


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_) -> None:
    """Operator-wide settings, and the periodic resync."""
    settings.peering.standalone = True
    # No Events, and no watching of CRDs and Namespaces: the RBAC (controller/rbac.py) grants neither.
    # Without scanning kopf serves exactly the namespaces it was given and the kinds found at startup.
    settings.posting.enabled = False
    settings.scanning.disabled = True
    settings.watching.server_timeout = 300
    settings.networking.error_backoffs = [1, 2, 5, 10]
    loop = asyncio.get_running_loop()
    _state["wake"] = asyncio.Event()
    elector = _state.get("elector")
    if elector is not None:
        wake = _state["wake"]
        elector.on_start_leading = lambda: loop.call_soon_threadsafe(wake.set)
        _state["elector_thread"] = threading.Thread(target=elector.run, name="leader-election", daemon=True)
        _state["elector_thread"].start()
    _state["resync"] = loop.create_task(_resync_forever())


@kopf.on.cleanup()
async def stop(**_) -> None:
    task = _state.pop("resync", None)
    if task is not None:
        task.cancel()
    elector = _state.get("elector")
    if elector is not None:
        elector.stop()


async def _resync_forever() -> None:
    loop = asyncio.get_running_loop()
    wake: asyncio.Event = _state["wake"]
    while True:
        try:
            await asyncio.wait_for(wake.wait(), RESYNC_SECONDS)
        except TimeoutError:
            pass
        wake.clear()
        if not leading():
            continue
        try:
            items = await loop.run_in_executor(None, _kube().list_pdds, _state.get("namespaces", ()))
        except ApiException as exc:
            log.warning("resync list failed: %s %s", exc.status, exc.reason)
            continue
        for item in items:
            meta = item["metadata"]
            await loop.run_in_executor(None, _reconcile_logged, meta["namespace"], meta["name"])


@kopf.on.event(GROUP, VERSION, PLURAL)
def pddeployment_event(type: str | None, name: str, namespace: str, **_) -> None:
    """Any change of a PDDeployment (and the initial listing at startup): reconcile it."""
    if type == "DELETED":
        return  # children go with it through garbage collection (ownerReferences)
    _reconcile_logged(namespace, name)


@kopf.on.event("apps", "v1", "deployments", labels=_MANAGED)
@kopf.on.event("", "v1", "services", labels=_MANAGED)
@kopf.on.event("", "v1", "pods", labels=_MANAGED)
def child_event(labels: dict, namespace: str, **_) -> None:
    """A managed Deployment, Service or pod changed or was deleted: reconcile its PDDeployment.

    Pods matter for what Deployments do not say: the scheduler's reason for a Pending pod and the
    preflight verdicts (KVTransportReady).
    """
    owner = labels.get(LABEL_INSTANCE)
    if owner:
        _reconcile_logged(namespace, owner)
