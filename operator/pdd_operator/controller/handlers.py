"""kopf handlers: thin edges that route events to :func:`~pdd_operator.controller.reconcile.reconcile`.

- every event of a PDDeployment reconciles it (level-based: the handler does not look at the diff);
- every event of a child the operator manages (Deployment, Service, the router's ServiceAccount,
  Role and RoleBinding) or of its pods reconciles the owner, so a child deleted or edited by hand is
  restored at once and status follows the pods;
- a resync loop reconciles every PDDeployment periodically, retrying what failed; no error ends it;
- kopf retries failed API requests and watches without limit (capped backoff), so an apiserver
  outage never ends the process; the liveness endpoint (``pdd run --liveness``) fails when the
  watch has fallen behind or the resync stopped (:mod:`pdd_operator.controller.health`).

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
import time

import kopf
import urllib3
from kubernetes.client.exceptions import ApiException

from pdd_operator.api.constants import GROUP, KIND, LABEL_INSTANCE, LABEL_MANAGED_BY, PLURAL, VERSION
from pdd_operator.api.names import label_value
from pdd_operator.controller.health import CappedBackoff, WatchHealth
from pdd_operator.controller.kube import Kube
from pdd_operator.controller.metrics import RECONCILE_ERRORS, RESYNC_ERRORS
from pdd_operator.controller.reconcile import reconcile, record_failure

log = logging.getLogger("pdd_operator")

RESYNC_SECONDS = float(os.environ.get("PDD_RESYNC_SECONDS", "60"))
#: Longest wait between two attempts of a failing API request of kopf's (watches included).
BACKOFF_CAP_SECONDS = float(os.environ.get("PDD_BACKOFF_CAP_SECONDS", "30"))
#: How long the watch may lag behind the resync's listing (or the resync not run) before liveness fails.
STUCK_SECONDS = float(os.environ.get("PDD_STUCK_SECONDS", str(max(120.0, 3 * RESYNC_SECONDS))))
HEALTH = WatchHealth(stuck_after=STUCK_SECONDS)
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


class _InFlight:
    """Counts the reconciles running now, so a stopping leader can wait for them to end before it
    releases its Lease (another replica would otherwise reconcile the same object at once)."""

    def __init__(self) -> None:
        self._count, self._cond = 0, threading.Condition()

    def __enter__(self) -> None:
        with self._cond:
            self._count += 1

    def __exit__(self, *_exc) -> None:
        with self._cond:
            self._count -= 1
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until no reconcile runs; True when none does."""
        with self._cond:
            return self._cond.wait_for(lambda: self._count == 0, timeout)


_IN_FLIGHT = _InFlight()
#: How long a stopping leader waits for its running reconciles before it releases the Lease anyway.
RELEASE_WAIT_SECONDS = 10.0


def leading() -> bool:
    """Whether this replica may reconcile: always without leader election."""
    elector = _state.get("elector")
    return elector is None or elector.leading


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
    if not leading():
        return  # the leader reconciles; this replica only serves the webhook
    try:
        with _IN_FLIGHT:
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
    # No Events, and no watching of CRDs and Namespaces: the RBAC (controller/rbac.py) grants neither.
    # Without scanning kopf serves exactly the namespaces it was given and the kinds found at startup.
    settings.posting.enabled = False
    settings.scanning.disabled = True
    settings.watching.server_timeout = 300
    # kopf re-raises an API error once its backoff sequence is used up, and the operator then exits
    # (a finite list such as [1, 2, 5, 10] gives up after ~18 s of apiserver errors). Unbounded,
    # capped: every request and watch waits for the apiserver as long as it takes.
    settings.networking.error_backoffs = CappedBackoff(first=1.0, cap=BACKOFF_CAP_SECONDS)
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
    """At shutdown: end the resync and, with leader election, stop leading and release the Lease."""
    task = _state.pop("resync", None)
    if task is not None:
        task.cancel()
    elector = _state.get("elector")
    if elector is not None:
        # Stop leading, let the election thread and the running reconciles end, then release the
        # Lease so the next replica takes over at once (client-go's ReleaseOnCancel).
        elector.stop()
        thread = _state.get("elector_thread")
        if thread is not None:
            await asyncio.to_thread(thread.join, RELEASE_WAIT_SECONDS)
        if not await asyncio.to_thread(_IN_FLIGHT.wait_idle, RELEASE_WAIT_SECONDS):
            log.warning("leader election: a reconcile still runs after %ss; releasing the Lease anyway",
                        RELEASE_WAIT_SECONDS)
        await asyncio.to_thread(elector.release)


@kopf.on.probe(id="watch")
def watch_probe(**_) -> str:
    """The liveness endpoint's check (``pdd run --liveness``): fails (HTTP 500) when the resync loop
    stopped running or the PDDeployment watch has fallen behind what the apiserver lists
    (:class:`~pdd_operator.controller.health.WatchHealth`); restarting the operator is the cure for both."""
    problem = HEALTH.problem(time.monotonic())
    if problem:
        raise kopf.PermanentError(problem)
    return "ok"


async def _resync_forever() -> None:
    """Reconcile every PDDeployment each :data:`RESYNC_SECONDS` (at once when this replica starts leading),
    whatever fails: no exception but cancellation ends the loop (a failed list is logged and tried again
    next period). A replica that does not lead only serves the webhook and skips the round."""
    wake: asyncio.Event = _state["wake"]
    while True:
        try:
            await asyncio.wait_for(wake.wait(), RESYNC_SECONDS)
        except TimeoutError:
            pass
        wake.clear()
        HEALTH.resync_ran(time.monotonic())
        if not leading():
            continue
        try:
            await resync_once()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001  (API errors, the apiserver away, anything else: retry)
            RESYNC_ERRORS.inc()
            log.warning("resync failed, retrying in %ss: %s", RESYNC_SECONDS, exc, exc_info=not _is_api_error(exc))


async def resync_once() -> None:
    """List every watched PDDeployment and reconcile each (one failing does not stop the others)."""
    loop = asyncio.get_running_loop()
    items = await loop.run_in_executor(None, _kube().list_pdds, _state.get("namespaces", ()))
    HEALTH.listed([(_key(item), item["metadata"].get("resourceVersion")) for item in items], time.monotonic())
    for item in items:
        meta = item["metadata"]
        await loop.run_in_executor(None, _reconcile_logged, meta["namespace"], meta["name"])


def _key(obj: dict) -> tuple[str, str]:
    return obj["metadata"]["namespace"], obj["metadata"]["name"]


def _is_api_error(exc: BaseException) -> bool:
    return isinstance(exc, ApiException | urllib3.exceptions.HTTPError | OSError)


@kopf.on.event(GROUP, VERSION, PLURAL)
def pddeployment_event(type: str | None, name: str, namespace: str, meta: dict, **_) -> None:
    """Any change of a PDDeployment (and the initial listing at startup): reconcile it."""
    HEALTH.watched((namespace, name), None if type == "DELETED" else meta.get("resourceVersion"), time.monotonic())
    if type == "DELETED":
        return  # children go with it through garbage collection (ownerReferences)
    _reconcile_logged(namespace, name)


@kopf.on.event("apps", "v1", "deployments", labels=_MANAGED)
@kopf.on.event("", "v1", "services", labels=_MANAGED)
@kopf.on.event("", "v1", "serviceaccounts", labels=_MANAGED)
@kopf.on.event("rbac.authorization.k8s.io", "v1", "roles", labels=_MANAGED)
@kopf.on.event("rbac.authorization.k8s.io", "v1", "rolebindings", labels=_MANAGED)
@kopf.on.event("", "v1", "pods", labels=_MANAGED)
def child_event(labels: dict, meta: dict, namespace: str, **_) -> None:
    """A managed child (Deployment, Service, the router's ServiceAccount, Role, RoleBinding) or pod
    changed or was deleted: reconcile its PDDeployment.

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
    return [item["metadata"]["name"] for item in kube.list_pdds((namespace,))
            if label_value(item["metadata"]["name"]) == value]
