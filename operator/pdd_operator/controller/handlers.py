"""kopf handlers and the operator's informers: thin edges that feed the caches and the reconcile queue.

- kopf watches PDDeployments. The children the operator manages (Deployments, Services, the router's
  ServiceAccount, Role and RoleBinding), their pods and ConfigMaps are watched by the operator's own
  list-then-watch informers (:mod:`~pdd_operator.controller.informer`, one thread per kind and
  namespace, client-go's reflector semantics: a relist after "410 Gone" turns what went missing into
  deletions). The managed kinds are listed and watched with the label selector
  ``app.kubernetes.io/managed-by=pdd-operator`` **in the request**, so the apiserver sends only the
  operator's own objects, never every pod of the cluster. ConfigMaps carry no label of ours and are
  streamed unfiltered, but only the ones some PDDeployment references are kept
  (:mod:`pdd_operator.controller.cache`). Why not kopf for these: per watched object kopf keeps a
  ``ResourceMemory``, runs a worker task and builds kopf's ``Body`` and cause for every event, for
  handlers that only copy the object into the caches (bench/README.md: process CPU and RSS);
- what the watches deliver fills the caches (:mod:`~pdd_operator.controller.cache`), from which every
  reconcile reads: a no-op reconcile sends no request at all;
- every event of a PDDeployment, or of a child, pod or referenced ConfigMap of one, adds the
  PDDeployment's key to a :class:`~pdd_operator.controller.workqueue.WorkQueue`: a burst of events
  becomes one reconcile, one object is never reconciled twice at once, and a busy object never holds a
  thread that another object waits for. Each key is queued at the priority its event asks for
  (:mod:`~pdd_operator.controller.triage`: children to write before a status to update, the resync's
  round last), and an event that cannot change what a reconcile writes queues nothing. Status work is
  queued after a short window (:data:`STATUS_COALESCE_SECONDS`), so the status events of one change of
  the cluster are one reconcile; and a reconcile whose object's cached inputs did not change since one
  that had nothing to do returns at once (:class:`~pdd_operator.controller.reconcile.QuietMemo`: most of
  the resync's round). A reconcile that
  fails transiently (:func:`_reconcile_logged`)
  is retried with the queue's per-object exponential backoff. The watch event of the operator's own
  write (the resourceVersion it just got back) queues nothing. Worker threads start once every
  informer has handed over its first complete list and kopf's watch delivered every PDDeployment a
  metadata list then returned, so a restart never acts on half a picture;
- a resync loop lists every PDDeployment each period (one request) and queues them all, retrying what
  failed; no error ends it;
- kopf and the informers retry failed API requests and watches without limit (capped backoff), so an
  apiserver outage never ends the process; the liveness endpoint (``pdd run --liveness``) fails when
  kopf's watch has fallen behind, an informer is stuck, or the resync stopped
  (:mod:`pdd_operator.controller.health`).

Only ``on.event`` handlers are used: kopf then keeps no progress annotations or finalizers
on the objects, so the only writes are the operator's own (children it changed, status when it changed).

The validating admission webhook is in :mod:`pdd_operator.controller.webhook`; ``pdd run
--webhook-port`` registers it (:func:`~pdd_operator.controller.webhook.enable`) next to these.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
import os
import threading
import time
from concurrent.futures import Executor, Future

import kopf
import urllib3
from kubernetes.client.exceptions import ApiException

from pdd_operator import kubeclient
from pdd_operator.api.constants import GROUP, KIND, LABEL_INSTANCE, LABEL_MANAGED_BY, PLURAL, VERSION
from pdd_operator.controller import cache as caching
from pdd_operator.controller import informer as informer_module
from pdd_operator.controller import memory, workqueue
from pdd_operator.controller.cache import ClusterCache
from pdd_operator.controller.health import CappedBackoff, WatchHealth, informer_problem, liveness_failure
from pdd_operator.controller.informer import Informer, Resource, Transport
from pdd_operator.controller.kube import Kube
from pdd_operator.controller.metrics import (
    EVENT_TO_APPLY,
    RECONCILE_CPU,
    RECONCILE_DURATION,
    RECONCILE_ERRORS,
    RESYNC_ERRORS,
    WATCH_EVENTS,
)
from pdd_operator.controller.reconcile import (
    APPLY_THREADS,
    DEFERRED,
    RECORDER,
    Outcome,
    is_transient,
    reconcile,
    record_failure,
    waiting_pool,
)
from pdd_operator.controller.triage import child_work, pdd_work, pod_work
from pdd_operator.controller.workqueue import Priority, WorkQueue

log = logging.getLogger("pdd_operator")

RESYNC_SECONDS = float(os.environ.get("PDD_RESYNC_SECONDS", "60"))
#: Longest wait between two attempts of a failing API request of kopf's (watches included).
BACKOFF_CAP_SECONDS = float(os.environ.get("PDD_BACKOFF_CAP_SECONDS", "30"))
#: How long the watch may lag behind the resync's listing (or the resync not run) before liveness fails.
STUCK_SECONDS = float(os.environ.get("PDD_STUCK_SECONDS", str(max(120.0, 3 * RESYNC_SECONDS))))
HEALTH = WatchHealth(stuck_after=STUCK_SECONDS)
#: Reconcile worker threads. A reconcile mostly waits for the apiserver; since 2026-12-07 it does so off
#: its worker (``reconcile.waiting_pool``, at most ``reconcile.DEFERRED`` at once): a worker reads the
#: caches, checks, plans and compares, then takes the next key while the applies (on the shared pool of
#: ``reconcile.APPLY_THREADS``) and the status patch are answered. Before, a new object held its worker
#: for about 3 round trips. 32 and 64 workers were measured against 16 at N=1,000 (bench/README.md, 2026-12-06,
#: evening): the burst stayed bound by the apiserver's answers to the 16 apply threads (2.18x either
#: way), and the restart, the spec change and RSS came out worse, so 16 it is. Applies in flight stay
#: bounded by the apply pool whatever this number.
WORKERS = int(os.environ.get("PDD_WORKERS", "16"))
#: Seconds a status-only reconcile waits behind work that writes children before it is served with
#: that work (:class:`~pdd_operator.controller.workqueue.WorkQueue`'s ``promote_after``: the bound that
#: keeps status work from starving while creates keep coming).
STATUS_PROMOTE_SECONDS = float(os.environ.get("PDD_STATUS_PROMOTE_SECONDS", "10"))
#: Seconds over which status-only work of one PDDeployment is coalesced (the queue's ``status_delay``;
#: ``PDD_STATUS_COALESCE_SECONDS``, 0: at once): the Deployment controller's status updates of an object's
#: Deployments come within a fraction of a second of each other, and each asked for a full reconcile.
STATUS_COALESCE_SECONDS = float(os.environ.get("PDD_STATUS_COALESCE_SECONDS", str(workqueue.STATUS_DELAY_SECONDS)))
#: Of the reconciles that may wait for the apiserver off the workers (``reconcile.DEFERRED``), how many only work
#: that writes children may take (``PDD_WRITE_RESERVE``; the queue's ``write_reserve``): status patches waiting
#: for a slow apiserver never hold every place while a new object's children wait. A quarter by default.
WRITE_RESERVE = int(os.environ.get("PDD_WRITE_RESERVE", str(max(DEFERRED, 0) // 4)))
#: Objects per page of kopf's initial list of PDDeployments (``settings.watching.chunk_size``:
#: ``limit``/``continue``) and of the informers' lists; 0: kopf's one list of everything (the
#: informers then use :data:`~pdd_operator.controller.informer.PAGE`). A restart's memory peak is
#: what is parsed and held at once (bench/README.md, memory).
LIST_CHUNK = int(os.environ.get("PDD_LIST_CHUNK", "200"))
#: Seconds kopf keeps an object's worker task after its last event (``settings.queueing.idle_timeout``;
#: kopf's default is 5). The idle worker holds that event's whole body, ``managedFields`` included:
#: at a restart every listed object's body for 5 s, all of them at once. Our handlers only copy
#: the event into the caches and queue a reconcile, so a worker is cheap to start again.
WORKER_IDLE_SECONDS = float(os.environ.get("PDD_WORKER_IDLE_SECONDS", "0.5"))
#: The server-side label selector of every managed kind's list and watch.
MANAGED_SELECTOR = f"{LABEL_MANAGED_BY}=pdd-operator"
#: The kinds the informers watch, with their server-side label selector (None: unfiltered).
INFORMED: tuple[tuple[Resource, str | None], ...] = (
    (Resource("apps/v1", "deployments", "Deployment"), MANAGED_SELECTOR),
    (Resource("v1", "services", "Service"), MANAGED_SELECTOR),
    (Resource("v1", "serviceaccounts", "ServiceAccount"), MANAGED_SELECTOR),
    (Resource("rbac.authorization.k8s.io/v1", "roles", "Role"), MANAGED_SELECTOR),
    (Resource("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding"), MANAGED_SELECTOR),
    (Resource("v1", "pods", "Pod"), MANAGED_SELECTOR),
    (Resource("v1", "configmaps", "ConfigMap"), None),
)
#: How long an informer may read nothing at all before liveness fails: longer than a watch's whole
#: life (the apiserver ends it after WATCH_SERVER_SECONDS, the client drops a silent one
#: WATCH_MARGIN_SECONDS later) plus a connect and a list, so a healthy informer always reads within it.
INFORMER_SILENT_SECONDS = float(os.environ.get("PDD_INFORMER_SILENT_SECONDS", str(
    kubeclient.WATCH_SERVER_SECONDS + kubeclient.WATCH_MARGIN_SECONDS + kubeclient.CONNECT_SECONDS
    + kubeclient.READ_SECONDS)))
CACHE = ClusterCache()
#: The handlers whose every success kopf would log at INFO (one line per watch event: tens of
#: thousands at scale); their failures are still logged.
_QUIET_HANDLERS = ("pddeployment_event",)


class _QuietSuccesses(logging.Filter):
    """Drops kopf's "Handler 'x' succeeded." lines of :data:`_QUIET_HANDLERS`."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg if isinstance(record.msg, str) else ""
        return not (msg.endswith("succeeded.") and any(f"Handler '{h}'" in msg for h in _QUIET_HANDLERS))

class NoDiffBase(kopf.DiffBaseStorage):
    """A diff-base storage that keeps and builds nothing.

    kopf builds every watched object's "essence" on every watch event (a ``copy.deepcopy`` of the
    whole body, managedFields and status included: ``kopf._core.reactor.processing._detect_causes``,
    kopf 1.45) to diff it for ``on.create``/``on.update``/``on.resume`` handlers and daemons. The
    operator has none (only ``on.event``, ``on.validate`` and lifecycle handlers), so the diff is never
    read. Building it costs 0.34 ms of CPU per event of a 7.5 KB Deployment (timed alone; py-spy put
    13% of the operator's samples in that deep copy during a burst of 200 creates), about 24 events per
    new PDDeployment. Registering such a handler later would need kopf's default storage back.
    """

    def build(self, *, body: kopf.Body, extra_fields=None) -> None:  # noqa: ARG002  (kopf's signature)
        return None

    def fetch(self, *, body: kopf.Body) -> None:  # noqa: ARG002
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence) -> None:  # noqa: ARG002
        return None


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
        # A pooled connection for every reconcile worker, apply thread (reconcile.apply_all) and thread in
        # which a reconcile waits for its status patch (reconcile.waiting_pool).
        _state["kube"] = Kube(kubeclient.load_config(pool_size=WORKERS + APPLY_THREADS + max(DEFERRED, 0) + 2),
                              cache=CACHE)
    return _state["kube"]


def _queue() -> WorkQueue:
    if "queue" not in _state:
        _state["queue"] = WorkQueue(
            lambda key, queued_at: _reconcile_logged(*key, queued_at=queued_at, waiters=waiting_pool()),
            workers=WORKERS, retry_cap=BACKOFF_CAP_SECONDS, promote_after=STATUS_PROMOTE_SECONDS,
            max_deferred=DEFERRED, status_delay=STATUS_COALESCE_SECONDS, write_reserve=WRITE_RESERVE)
    return _state["queue"]


def enqueue(namespace: str, name: str, priority: Priority = Priority.WRITE) -> None:
    """Queue a reconcile of one PDDeployment (coalesced with any already waiting) at ``priority``
    (:class:`~pdd_operator.controller.workqueue.Priority`: ``WRITE`` when children may have to be
    written, ``STATUS`` when only the status can change)."""
    _queue().add((namespace, name), priority)


def _reconcile_logged(namespace: str, name: str, queued_at: float | None = None,
                      waiters: Executor | None = None) -> bool | Future[bool]:
    """Reconcile one PDDeployment; no exception leaves. Returns True when the reconcile should be
    retried with the queue's per-object backoff: a transient API error (409 conflict, 429, 5xx, the
    apiserver unreachable or timing out: :func:`~pdd_operator.controller.reconcile.is_transient`).
    False otherwise: done, or a failure a retry alone does not cure (a 4xx refusal such as 403 or
    404, or a bug), which waits for the next event or the periodic resync. A child the apiserver
    refuses (422) never gets here: the reconcile reports it as Degraded/ApplyFailed and succeeds.

    With ``waiters`` (:func:`~pdd_operator.controller.reconcile.waiting_pool`) a reconcile that must wait
    for the apiserver goes on there and a ``Future`` of the same answer is returned (the queue's
    deferred key: the worker takes the next key meanwhile); its CPU time is then the worker's part.

    Its wall and CPU time are observed in ``pdd_reconcile_duration_seconds`` and
    ``pdd_reconcile_cpu_seconds``, and, when it applied a child, the time from ``queued_at`` (the
    ``time.monotonic()`` of the event that queued it) to that apply in ``pdd_event_to_apply_seconds``.

    API errors (conflicts, the apiserver away) are logged. Anything else is a bug or an input the
    operator does not handle yet: logged with its traceback and reported in the object's status
    (Degraded, reason ReconcileError) so it is visible where the user looks.
    """
    if not leading():
        return False  # the leader reconciles; this replica only serves the webhook
    started, cpu = time.monotonic(), time.thread_time()
    _IN_FLIGHT.__enter__()
    try:
        outcome = reconcile(_kube(), namespace, name, waiters)
    except Exception as exc:  # noqa: BLE001  (sorted in _settle)
        return _settle(namespace, name, queued_at, started, cpu, None, exc)
    if not isinstance(outcome, Future):
        return _settle(namespace, name, queued_at, started, cpu, outcome, None)
    RECONCILE_CPU.observe(time.thread_time() - cpu)
    answer: Future[bool] = Future()

    def done(future: Future) -> None:
        try:
            exc = future.exception()
            answer.set_result(_settle(namespace, name, queued_at, started, None,
                                      None if exc is not None else future.result(), exc))
        except BaseException as exc:  # noqa: BLE001  (the key must end: the queue waits for this future)
            answer.set_exception(exc)
    outcome.add_done_callback(done)
    return answer


def _settle(namespace: str, name: str, queued_at: float | None, started: float, cpu: float | None,
            outcome: Outcome | None, exc: BaseException | None) -> bool:
    """The end of :func:`_reconcile_logged`: its metrics, a held status update's timer and what a
    failure (``exc``) means; leaves ``_IN_FLIGHT``. ``cpu``: the ``thread_time()`` the run began at,
    ``None`` when its CPU was observed already."""
    try:
        if exc is not None:
            raise exc
        assert outcome is not None
        if queued_at is not None and outcome.first_apply_at is not None:
            EVENT_TO_APPLY.observe(outcome.first_apply_at - queued_at)
        if outcome.requeue_after is not None:  # a progress-only status update waits (reconcile.StatusPacer)
            _queue().add_after((namespace, name), outcome.requeue_after, Priority.STATUS)
    except ApiException as exc:
        RECONCILE_ERRORS.inc()
        retry = is_transient(exc)
        log.warning("reconcile of %s/%s failed: %s %s%s", namespace, name, exc.status, exc.reason,
                    "; retrying with backoff" if retry else "")
        return retry
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        RECONCILE_ERRORS.inc()
        log.warning("reconcile of %s/%s failed: the apiserver cannot be reached (%s); retrying with backoff",
                    namespace, name, exc)
        return is_transient(exc)
    except Exception as exc:  # noqa: BLE001  (see _reconcile_logged's docstring)
        RECONCILE_ERRORS.inc()
        log.exception("reconcile of %s/%s failed", namespace, name)
        record_failure(_kube(), namespace, name, f"The operator failed to reconcile this object: "
                       f"{type(exc).__name__}: {exc}. It retries on every change and resync.")
    finally:
        if cpu is not None:
            RECONCILE_CPU.observe(time.thread_time() - cpu)
        RECONCILE_DURATION.observe(time.monotonic() - started)
        _IN_FLIGHT.__exit__(None, None, None)
    return False


def memory_settings(settings: kopf.OperatorSettings) -> None:
    """kopf's settings that bound a restart's memory peak: the initial lists in pages of
    :data:`LIST_CHUNK` and per-object workers ended :data:`WORKER_IDLE_SECONDS` after their last event."""
    settings.watching.chunk_size = LIST_CHUNK or None
    settings.queueing.idle_timeout = WORKER_IDLE_SECONDS


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_) -> None:
    """Operator-wide settings, and the periodic resync."""
    settings.peering.standalone = True
    # No Events, and no watching of CRDs and Namespaces: the RBAC (controller/rbac.py) grants neither.
    # Without scanning kopf serves exactly the namespaces it was given and the kinds found at startup.
    settings.posting.enabled = False
    settings.scanning.disabled = True
    settings.persistence.diffbase_storage = NoDiffBase()
    # Timeouts on kopf's own requests (aiohttp), as on the operator's (pdd_operator.kubeclient): a
    # dead connection fails and is retried with the capped backoff below instead of hanging. A watch
    # ends server-side after WATCH_SERVER_SECONDS, client-side after the margin; kopf also drops a
    # watch silent for settings.watching.inactivity_timeout (70 s; bookmarks come every 60 s).
    # settings.networking.request_timeout stays kopf's 300 s: it bounds a request's whole duration,
    # and kopf's initial list of thousands of pods on a loaded apiserver took longer than 65 s (the
    # restart with 1,100 PDDeployments then relisted forever; bench/README.md).
    settings.networking.connect_timeout = kubeclient.CONNECT_SECONDS
    settings.watching.connect_timeout = kubeclient.CONNECT_SECONDS
    settings.watching.server_timeout = kubeclient.WATCH_SERVER_SECONDS
    settings.watching.client_timeout = kubeclient.WATCH_SERVER_SECONDS + kubeclient.WATCH_MARGIN_SECONDS
    memory_settings(settings)
    objects_log = logging.getLogger("kopf.objects")
    if not any(isinstance(f, _QuietSuccesses) for f in objects_log.filters):
        objects_log.addFilter(_QuietSuccesses())
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
    queue = _queue()
    queue.hold_until(CACHE.ready)  # set once the watches delivered everything listed at startup
    queue.start()
    _state["informers"] = start_informers(_state.get("namespaces", ()))
    _state["fill"] = loop.create_task(_fill_caches())
    _state["release"] = loop.create_task(_release_memory_after_bursts(queue))


@kopf.on.cleanup()
async def stop(**_) -> None:
    """At shutdown: end the resync, the cache filling and the reconcile workers and, with leader election,
    stop leading and release the Lease."""
    for name in ("resync", "fill", "release"):
        task = _state.pop(name, None)
        if task is not None:
            task.cancel()
    for informer in _state.pop("informers", []):
        informer.stop()
    transport = _state.pop("transport", None)
    if transport is not None:
        transport.close()
    queue = _state.get("queue")
    if queue is not None:
        await asyncio.get_running_loop().run_in_executor(None, queue.stop)
    # the Events the last reconciles recorded (posted in the background: controller/recorder.py)
    await asyncio.get_running_loop().run_in_executor(None, RECORDER.stop)
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


#: Seconds the liveness probe waits for the apiserver's answer to a fresh request: well inside the
#: chart's livenessProbe ``timeoutSeconds`` (5), or a hung apiserver would time the probe itself out
#: and the kubelet would restart the operator anyway.
PROBE_TIMEOUT_SECONDS = 2.0


def apiserver_answers() -> bool:
    """Whether the apiserver answers ``GET /readyz`` with 200 on a fresh request within
    :data:`PROBE_TIMEOUT_SECONDS` (:meth:`~pdd_operator.controller.kube.Kube.ready`)."""
    return _kube().ready(PROBE_TIMEOUT_SECONDS)


@kopf.on.probe(id="watch")
def watch_probe(**_) -> str:
    """The liveness endpoint's check (``pdd run --liveness``): fails (HTTP 500) when the resync loop
    stopped running, the PDDeployment watch has fallen behind what the apiserver lists
    (:class:`~pdd_operator.controller.health.WatchHealth`) or an informer is stuck
    (:func:`~pdd_operator.controller.health.informer_problem`) while the apiserver answers: restarting the
    operator is the cure for both. While the apiserver is not ready either (hung, away, its etcd away), it stays live
    (:func:`~pdd_operator.controller.health.liveness_failure`)."""
    now = time.monotonic()
    problem = HEALTH.problem(now) or next(filter(None, (
        informer_problem(i.name, i.progress_at, i.failing_since, i.last_error, i.started_at, now, STUCK_SECONDS,
                         INFORMER_SILENT_SECONDS) for i in _state.get("informers", []))), None)
    failure = liveness_failure(problem, apiserver_answers)
    if failure:
        raise kopf.PermanentError(failure)
    if problem:
        log.warning("liveness: %s; the apiserver does not answer either, so a restart would not help", problem)
        return f"waiting for the apiserver: {problem}"
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


#: Seconds the reconcile queue must stay idle after a burst before the freed heap is released: kopf's
#: per-object workers of the burst end :data:`WORKER_IDLE_SECONDS` after their object's last event
#: (``settings.queueing.idle_timeout``; up to 5 s when set so), and their memory is free only then.
RELEASE_AFTER_SECONDS = 10.0


async def _release_memory_after_bursts(queue: WorkQueue) -> None:
    """Once the caches are filled, after each burst of reconciles (the queue busy, then idle for
    :data:`RELEASE_AFTER_SECONDS`), hand the freed heap back to the OS (:func:`memory.release`): a
    restart's peak would otherwise stay in the process's RSS. Runs until cancelled, whatever fails."""
    loop = asyncio.get_running_loop()
    busy, idle_since = True, None  # the start itself is the first burst
    while True:
        await asyncio.sleep(1.0)
        if not queue.idle() or not CACHE.ready.is_set():
            busy, idle_since = True, None
            continue
        idle_since = idle_since or time.monotonic()
        if busy and time.monotonic() - idle_since >= RELEASE_AFTER_SECONDS:
            busy = False
            try:
                await loop.run_in_executor(None, memory.release)
            except Exception:  # noqa: BLE001  (a diagnostic nicety: never end the loop)
                log.exception("releasing freed memory failed")


async def _fill_caches() -> None:
    """Wait until every informer has handed over its first complete list, then list the metadata of
    the PDDeployments and wait until kopf's watch delivered all of them
    (:meth:`~pdd_operator.controller.cache.ClusterCache.expect`); list again every few seconds while
    one is missing (deleted in between), and retry a failed list."""
    loop = asyncio.get_running_loop()
    namespaces = _state.get("namespaces", ())
    started = time.monotonic()
    while not all(i.synced.is_set() for i in _state.get("informers", [])):
        await asyncio.sleep(0.1)
    synced = time.monotonic()
    while not CACHE.ready.is_set():
        try:
            items, _ = await loop.run_in_executor(None, _kube().list_metadata, KIND, namespaces, None)
            CACHE.expect({KIND: set(items)})
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001  (the apiserver away: try again)
            log.warning("cannot list what the caches must hold, retrying: %s", exc, exc_info=not _is_api_error(exc))
        for _ in range(50):
            if CACHE.ready.is_set():
                break
            await asyncio.sleep(0.1)
    log.info("caches filled in %.1fs (informers synced in %.1fs); reconciling", time.monotonic() - started,
             synced - started)


def start_informers(namespaces: tuple[str, ...]) -> list[Informer]:
    """Start one :class:`~pdd_operator.controller.informer.Informer` per :data:`INFORMED` kind and
    namespace (all namespaces when ``namespaces`` is empty), on an API client of their own whose
    connection pool holds every watch. Returns them (started)."""
    base = _kube().api_client.configuration
    conf = copy.copy(base)
    conf.connection_pool_maxsize = max(conf.connection_pool_maxsize or 1, len(INFORMED) * max(1, len(namespaces)) + 2)
    transport = _state["transport"] = Transport(kubeclient.TimeoutApiClient(conf))
    informers = []
    for resource, selector in INFORMED:
        for namespace in namespaces or (None,):
            informer = Informer(resource, transport, informer_event, namespace=namespace, label_selector=selector,
                                page=LIST_CHUNK or informer_module.PAGE,
                                on_relisted=functools.partial(_relisted, resource.kind),
                                backoff=CappedBackoff(first=1.0, cap=BACKOFF_CAP_SECONDS))
            informer.start()
            informers.append(informer)
    return informers


def _relisted(kind: str, listed: dict, version: str | None) -> None:
    """After an informer's complete list: drop the caches' own writes (and anything else) of objects
    that list lacks (:meth:`~pdd_operator.controller.cache.ClusterCache.prune`) and queue their owners."""
    try:
        list_version = int(version) if version is not None else None
    except ValueError:
        list_version = None
    owners = CACHE.prune(kind, listed, list_version)
    if owners:
        log.info("a relist of %s found objects of %d PDDeployment(s) gone; reconciling them", kind, len(owners))
    for key in sorted(owners):
        enqueue(*key)


async def resync_once() -> None:
    """List the metadata of every watched PDDeployment (the watch's health is judged by it) and queue
    each for a reconcile from the caches; first drop from the caches the PDDeployments whose deletion
    kopf's watch missed (kopf relists without turning what went missing into deletions; the
    informers of the other kinds do: :mod:`~pdd_operator.controller.informer`)."""
    loop = asyncio.get_running_loop()
    namespaces = _state.get("namespaces", ())
    listed, version = await loop.run_in_executor(None, _kube().list_metadata, KIND, namespaces)
    HEALTH.listed(list(listed.items()), time.monotonic())
    owners: set[tuple[str, str]] = set()
    if CACHE.ready.is_set():
        owners = CACHE.prune(KIND, listed, version)
    for key in sorted(listed):
        enqueue(*key, Priority.RESYNC)  # the safety net: most find nothing to do (controller-runtime: LowPriority)
    for key in sorted(owners - set(listed)):
        enqueue(*key, Priority.WRITE)


def _key(obj: dict) -> tuple[str, str]:
    return obj["metadata"]["namespace"], obj["metadata"]["name"]


def _is_api_error(exc: BaseException) -> bool:
    return isinstance(exc, ApiException | urllib3.exceptions.HTTPError | OSError)


# --- events -> the reconcile queue ---------------------------------------------------------------

@kopf.on.event(GROUP, VERSION, PLURAL)
async def pddeployment_event(type: str | None, body: kopf.Body, name: str, namespace: str, meta: dict,
                             **kwargs) -> None:
    """Any change of a PDDeployment (and the initial listing at startup): queue its reconcile as work
    that may write children, unless the change is the status the operator just wrote (its echo, or any
    change of nothing but the status: :func:`~pdd_operator.controller.triage.pdd_work`; the operator is
    the status's only writer, and a status written by someone else is recomputed at the next reconcile
    or resync)."""
    if type == "DELETED":
        CACHE.observe(KIND, body, deleted=True)
        HEALTH.watched((namespace, name), None, time.monotonic())
        CACHE.settle(KIND, namespace, name, None)
        return  # children go with it through garbage collection (ownerReferences)
    _, cached = CACHE.observe_change(KIND, body)
    version = meta.get("resourceVersion")
    HEALTH.watched((namespace, name), version, time.monotonic())
    own = CACHE.settle(KIND, namespace, name, version)
    work = None if own else pdd_work(cached(), body)  # the copy it replaced is decoded only here
    WATCH_EVENTS.labels(KIND, "own" if own else _outcome(work)).inc()
    if work is not None:
        enqueue(namespace, name, work)


def _outcome(work: Priority | None) -> str:
    """The ``pdd_watch_events_total`` outcome of an event that asked for ``work``."""
    return "unchanged" if work is None else f"queued_{work.name.lower()}"


def informer_event(type_: str, body: dict) -> None:
    """An informer's event (:data:`~pdd_operator.controller.informer.Handler`): a ConfigMap goes to
    :func:`config_map_event`, every other kind to :func:`child_event`. Runs in the informer's thread."""
    if body.get("kind") == "ConfigMap":
        config_map_event(type_, body)
    else:
        child_event(type_, body)


def child_event(type_: str, body: dict) -> None:
    """A managed child (Deployment, Service, the router's ServiceAccount, Role, RoleBinding) or pod
    changed or was deleted: queue its PDDeployment at the priority the change asks for
    (:func:`~pdd_operator.controller.triage.child_work`, :func:`~pdd_operator.controller.triage.pod_work`:
    ``WRITE`` for a child deleted or edited, ``STATUS`` for a status the reconcile reads), unless this is
    the operator's own apply coming back, nothing the cache keeps of it changed
    (:meth:`~pdd_operator.controller.cache.ClusterCache.observe`), or the change cannot change what a
    reconcile writes (a status no reconcile reads, a pod that stays free of trouble, another manager's
    annotation). A deletion an informer's relist found comes without the object
    (:func:`~pdd_operator.controller.informer.tombstone`): its owner is found from what the cache held.

    Pods matter for what Deployments do not say: the scheduler's reason for a Pending pod, containers
    that cannot run and the preflight verdicts (KVTransportReady).
    """
    kind = body.get("kind")
    meta = body.get("metadata") or {}
    namespace, name = meta.get("namespace"), meta.get("name")
    deleted = type_ == "DELETED"
    if deleted:
        if "labels" not in meta and "ownerReferences" not in meta:
            meta = (CACHE.last_known(kind, namespace, name) or {}).get("metadata") or meta
        if kind == "Pod":
            work = pod_work(CACHE.last_known(kind, namespace, name), None)
        else:
            work = child_work(kind, CACHE.child(kind, namespace, name), None)
        CACHE.observe(kind, body, deleted=True)
        CACHE.settle(kind, namespace, name, None)
    else:
        # Indexed first; the copy it replaced is decoded and compared only for an event that changed what
        # the cache keeps and is not the echo of the operator's own write (most events are either).
        changed, cached = CACHE.observe_change(kind, body)
        if CACHE.settle(kind, namespace, name, meta.get("resourceVersion")):
            WATCH_EVENTS.labels(kind, "own").inc()
            return
        work = None
        if changed:
            work = (pod_work(cached(), caching.pod_view(body)) if kind == "Pod"
                    else child_work(kind, cached(), body))
    labels = meta.get("labels") or {}
    WATCH_EVENTS.labels(kind, _outcome(work)).inc()
    if work is None:
        return
    for owner in owner_names(namespace, labels, meta.get("ownerReferences") or []):
        enqueue(namespace, owner, work)


def config_map_event(type_: str, body: dict) -> None:
    """A ConfigMap changed (what the cache keeps of it: a referenced one): queue the PDDeployments
    that read their model's config.json from it (``WRITE``: the config decides rendered flags)."""
    meta = body.get("metadata") or {}
    namespace, name = meta.get("namespace"), meta.get("name")
    deleted = type_ == "DELETED"
    changed = CACHE.observe("ConfigMap", body, deleted=deleted)
    CACHE.settle("ConfigMap", namespace, name, None if deleted else meta.get("resourceVersion"))
    if not changed:  # unreferenced, or listed again unchanged
        return
    for owner in sorted(CACHE.referenced(namespace, name)):
        enqueue(namespace, owner, Priority.WRITE)


def owner_names(namespace: str, labels: dict, owner_references: list[dict]) -> list[str]:
    """The PDDeployment(s) a managed object belongs to.

    A child's controller ownerReference names its PDDeployment. A pod's owner is a ReplicaSet, so its
    instance label is used: the PDDeployment name itself, or for names that are not valid label
    values its :func:`~pdd_operator.api.names.label_value`, looked up in the cache.
    """
    owner = caching.owner_of({"metadata": {"ownerReferences": owner_references}})
    if owner is not None:
        return [owner]
    value = labels.get(LABEL_INSTANCE)
    if not value:
        return []
    return CACHE.pdd_names_by_instance(namespace, value)
