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

import kopf
import urllib3
from kubernetes.client.exceptions import ApiException

from pdd_operator.api.constants import GROUP, KIND, LABEL_INSTANCE, LABEL_MANAGED_BY, PLURAL, VERSION
from pdd_operator.api.names import label_value
from pdd_operator.controller.kube import Kube
from pdd_operator.controller.metrics import RECONCILE_ERRORS
from pdd_operator.controller.reconcile import reconcile, record_failure

log = logging.getLogger("pdd_operator")

RESYNC_SECONDS = float(os.environ.get("PDD_RESYNC_SECONDS", "60"))
_MANAGED = {LABEL_MANAGED_BY: "pdd-operator"}

_state: dict = {}


def _kube() -> Kube:
    if "kube" not in _state:
        _state["kube"] = Kube()
    return _state["kube"]


def _reconcile_logged(namespace: str, name: str) -> None:
    """Reconcile one PDDeployment; no exception leaves (the next event or the resync retries).

    API errors (conflicts, the apiserver away) are logged. Anything else is a bug or an input the
    operator does not handle yet: logged with its traceback and reported in the object's status
    (Degraded, reason ReconcileError) so it is visible where the user looks.
    """
    try:
        reconcile(_kube(), namespace, name)
    except ApiException as exc:
        RECONCILE_ERRORS.inc()
        log.warning("reconcile of %s/%s failed: %s %s", namespace, name, exc.status, exc.reason)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        RECONCILE_ERRORS.inc()
        log.warning("reconcile of %s/%s failed: the apiserver cannot be reached (%s)", namespace, name, exc)
    except Exception as exc:  # noqa: BLE001  (see the docstring)
        RECONCILE_ERRORS.inc()
        log.exception("reconcile of %s/%s failed", namespace, name)
        record_failure(_kube(), namespace, name, f"The operator failed to reconcile this object: "
                       f"{type(exc).__name__}: {exc}. It retries on every change and resync.")


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_) -> None:
    """Operator-wide settings, and the periodic resync."""
    settings.peering.standalone = True
    settings.posting.enabled = False
    settings.watching.server_timeout = 300
    settings.networking.error_backoffs = [1, 2, 5, 10]
    _state["resync"] = asyncio.get_running_loop().create_task(_resync_forever())


@kopf.on.cleanup()
async def stop(**_) -> None:
    task = _state.pop("resync", None)
    if task is not None:
        task.cancel()


async def _resync_forever() -> None:
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(RESYNC_SECONDS)
        try:
            items = await loop.run_in_executor(None, _kube().list_pdds)
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
def child_event(labels: dict, meta: dict, namespace: str, **_) -> None:
    """A managed Deployment, Service or pod changed or was deleted: reconcile its PDDeployment.

    Pods matter for what Deployments do not say: the scheduler's reason for a Pending pod and the
    preflight verdicts (KVTransportReady).
    """
    for name in owner_names(namespace, labels, meta.get("ownerReferences") or []):
        _reconcile_logged(namespace, name)


def owner_names(namespace: str, labels: dict, owner_references: list[dict]) -> list[str]:
    """The PDDeployment(s) a managed object belongs to.

    A child's controller ownerReference names its PDDeployment. A pod's owner is a ReplicaSet, so its
    instance label is used: the PDDeployment name itself, or for names that are not valid label
    values its :func:`~pdd_operator.api.names.label_value`, which is resolved by listing the
    namespace's PDDeployments (only when no PDDeployment has the label as its name).
    """
    for ref in owner_references:
        if ref.get("kind") == KIND and ref.get("apiVersion", "").startswith(GROUP + "/") and ref.get("name"):
            return [ref["name"]]
    value = labels.get(LABEL_INSTANCE)
    if not value:
        return []
    kube = _kube()
    if kube.get_pdd(namespace, value) is not None:
        return [value]
    return [item["metadata"]["name"] for item in kube.list_pdds(namespace)
            if label_value(item["metadata"]["name"]) == value]
