"""Reconcile one PDDeployment: check, render, apply, observe, report. Idempotent and level-based.

Called for every event of a PDDeployment or of one of its children and by the periodic resync, so it
must be cheap when nothing changed: it then sends no write at all.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import urllib3
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from pdd_operator.api.constants import ANNOTATION_APPLIED_SPEC_LEGACY, ROLES, SLOTS
from pdd_operator.api.messages import invalid_spec_findings
from pdd_operator.api.names import deployment_name
from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.api.status import Finding
from pdd_operator.compat.engine import CompatReport, evaluate, model_config_from_configmap, model_config_unavailable
from pdd_operator.controller.events import Event, EventFilter, transitions
from pdd_operator.controller.kube import Kube, api_error_text, applied_hash
from pdd_operator.controller.metrics import CHILD_APPLIES, RECONCILE_SKIPS, RECONCILES, STATUS_WRITES
from pdd_operator.controller.plan import apply_dependencies, apply_waves, last_good_spec, plan_children
from pdd_operator.controller.recorder import EventRecorder
from pdd_operator.controller.render_memo import RenderMemo
from pdd_operator.controller.rollout import slot_pods
from pdd_operator.controller.status import (
    RoleObservation,
    fold_status,
    preflight_results,
    progress_only,
    with_reconcile_error,
)
from pdd_operator.render.admission import admission_findings
from pdd_operator.render.workloads import (
    ROUTER,
    Owner,
    child_name,
    router_endpoint,
    router_selector_labels,
    selector_labels,
)

log = logging.getLogger(__name__)

def now_rfc3339() -> str:
    """Current UTC time as RFC 3339 with seconds precision (``metav1.Time``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def invalid_spec_report(exc: ValidationError) -> CompatReport:
    """Turn a spec that the models refuse into an error report naming each bad field.

    The CRD schema refuses most of these at admission; this covers objects that predate a schema
    change or got in another way, so the operator reports them instead of crashing. The findings
    are :func:`~pdd_operator.api.messages.invalid_spec_findings`, the ones the webhook and
    ``pdd check`` print.
    """
    return CompatReport(version="unknown", findings=invalid_spec_findings(exc))


#: An apply or read error is cut to this length in status (the apiserver's messages can list many fields).
MAX_ERROR_CHARS = 1000


def load_model_config(kube: Kube, namespace: str, spec: PDDeploymentSpec,
                      read_errors: list[str] | None = None) -> tuple[dict | None, Finding | None]:
    """Read the model's config.json from ``spec.model.configMapRef``.

    Returns ``(config, None)``, or ``(None, warning)`` when the ConfigMap or the key is missing, its
    text is not a usable config.json (:func:`~pdd_operator.compat.engine.model_config_from_configmap`),
    or the apiserver refuses the read (an API error other than 404, also appended to ``read_errors``):
    rules that need it then fall back to the spec fields and the name tables. Never raises for what the
    ConfigMap holds; raises ``ApiException`` only for errors of the apiserver itself (5xx, unreachable).
    """
    ref = spec.model.config_map_ref
    if ref is None:
        return None, None
    try:
        text = kube.config_map_value(namespace, ref.name, ref.key)
    except ApiException as exc:
        if not is_refusal(exc):
            raise
        error = f"ConfigMap {ref.name}: {api_error_text(exc)}"[:MAX_ERROR_CHARS]
        if read_errors is not None:
            read_errors.append(error)
        return None, model_config_unavailable(f"{error}; it cannot be read")
    return model_config_from_configmap(text, ref.name, ref.key)

def is_refusal(exc: ApiException) -> bool:
    """True for an answer of the apiserver about the request itself (4xx: invalid, forbidden, too
    large); False for conflicts and throttling (409, 429), its own failures and unreachability (5xx,
    no HTTP status), which a later reconcile retries as they are."""
    return exc.status is not None and 400 <= exc.status < 500 and exc.status not in (409, 429)


def is_transient(exc: BaseException) -> bool:
    """True for a failed reconcile that a retry alone may cure, which the work queue retries with
    per-object backoff: an API error that is not :func:`is_refusal` (409, 429, 5xx, no status), or
    the apiserver unreachable or not answering in time (urllib3's errors, ``OSError``). False for a
    refusal (403, 404, 422: waits for the next change or the resync) and anything else (a bug)."""
    if isinstance(exc, ApiException):
        return not is_refusal(exc)
    return isinstance(exc, urllib3.exceptions.HTTPError | OSError)



def check_spec(spec: PDDeploymentSpec, name: str, namespace: str, model_config: dict | None,
               problem: Finding | None) -> tuple[CompatReport, dict | None]:
    """The report for ``spec``: what the apiserver would refuse in its children
    (:func:`~pdd_operator.render.admission.admission_findings`; the webhook may be off), then the
    compatibility rules. A config.json that makes the rules or the renderer fail (values of the wrong
    type) is dropped with a warning and the spec is judged without it; returns the config used."""
    try:
        report = evaluate(spec, model_config=model_config)
        refused = admission_findings(name, namespace, spec, model_config)
    except Exception as exc:  # noqa: BLE001  (whatever a user's config.json makes the rules raise)
        if model_config is None:
            raise
        log.warning("%s/%s: config.json from spec.model.configMapRef cannot be used: %r", namespace, name, exc)
        problem = model_config_unavailable(f"The ConfigMap's config.json cannot be used ({type(exc).__name__}: {exc})")
        model_config = None
        report = evaluate(spec)
        refused = admission_findings(name, namespace, spec)
    extra = [problem] if problem is not None else []
    return replace(report, findings=[*refused, *report.findings, *extra]), model_config


class CheckMemo:
    """The recent results of :func:`check_spec`, so a reconcile of an unchanged spec (every child and
    pod event's) does not evaluate the rules again: they are a third of a no-op reconcile's CPU.

    Keyed by the PDDeployment's ``(namespace, name, uid, generation)``, the model's config.json and the
    ConfigMap problem: the apiserver raises ``metadata.generation`` on every change of the spec, so one
    generation of one object has one spec, and the rest of the check's inputs are in the key. At most
    ``size`` entries, least recently used dropped first; thread-safe (the reconcile workers share it).
    """

    def __init__(self, size: int = 4096) -> None:
        if size < 1:
            raise ValueError(f"a memo needs room for at least one entry, got {size}")
        self.size = size
        self._entries: OrderedDict[tuple, tuple[CompatReport, dict | None]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(namespace: str, name: str, uid: str | None, generation: int, model_config: dict | None,
            problem: Finding | None) -> tuple:
        """The memo key of one check (see the class docstring)."""
        return (namespace, name, uid, generation, CheckMemo.config_key(model_config),
                None if problem is None else problem.model_dump_json())

    @staticmethod
    def config_key(model_config: dict | None) -> str | None:
        """A model's config.json as it keys the memos (canonical JSON), ``None`` for none."""
        return None if model_config is None else json.dumps(model_config, sort_keys=True, default=str)

    def check(self, key: tuple, spec: PDDeploymentSpec, name: str, namespace: str, model_config: dict | None,
              problem: Finding | None) -> tuple[CompatReport, dict | None]:
        """:func:`check_spec` of the arguments, from the memo when ``key`` is in it."""
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
        if hit is None:
            hit = check_spec(spec, name, namespace, model_config, problem)
            with self._lock:
                self._entries[key] = hit
                while len(self._entries) > self.size:
                    self._entries.popitem(last=False)
        report, config = hit
        return replace(report, findings=list(report.findings)), config

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


#: The operator's :class:`CheckMemo` (one process, every reconcile worker).
CHECKS = CheckMemo()

#: The operator's :class:`~pdd_operator.controller.render_memo.RenderMemo`: a reconcile whose children
#: are all in place does not render them.
RENDERS = RenderMemo()


#: Threads that send every child apply (``PDD_APPLY_THREADS``), shared by all reconcile workers: the
#: process's bound on applies in flight. One reconcile's independent applies go at once; with more
#: workers than threads, applies wait for a free thread, never for another object's reconcile.
APPLY_THREADS = int(os.environ.get("PDD_APPLY_THREADS", "16"))
_pool: list[ThreadPoolExecutor] = []
_pool_lock = threading.Lock()


#: Reconciles that may wait for the apiserver off the queue's workers at once (``PDD_RECONCILE_DEFERRED``):
#: the threads of :func:`waiting_pool`, and the queue's ``max_deferred``. 0: every reconcile waits on its
#: worker (as before 2026-12-07).
DEFERRED = int(os.environ.get("PDD_RECONCILE_DEFERRED", "32"))
_waiters: list[ThreadPoolExecutor] = []


def waiting_pool() -> ThreadPoolExecutor | None:
    """The process's :data:`DEFERRED` threads in which reconciles wait for their applies and status
    patch (:func:`reconcile`'s ``waiters``), made at first use; ``None`` when :data:`DEFERRED` is 0."""
    if DEFERRED <= 0:
        return None
    with _pool_lock:
        if not _waiters:
            _waiters.append(ThreadPoolExecutor(max_workers=DEFERRED, thread_name_prefix="reconcile-wait"))
        return _waiters[0]


def apply_pool() -> ThreadPoolExecutor:
    """The process's pool of :data:`APPLY_THREADS` apply threads (made at first use)."""
    with _pool_lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(max_workers=max(1, APPLY_THREADS), thread_name_prefix="apply"))
        return _pool[0]


def apply_all(kube: Kube, children: list[dict]) -> tuple[int, list[str], float | None]:
    """Apply every child; one that the apiserver refuses does not stop the others.

    The children that differ from the cache (:meth:`~pdd_operator.controller.kube.Kube.apply_needed`,
    compared in the calling thread) are sent on :func:`apply_pool` as soon as what each needs
    (:func:`~pdd_operator.controller.plan.apply_dependencies`: a RoleBinding its Role, a Deployment
    its ServiceAccount; a child in place already is no reason to wait) has been answered, so a new
    object's children take 2 round trips on the longest chain (ServiceAccount then the router's
    Deployment), not the slowest of the first 7 plus a second round. Every apply goes through the pool,
    one child alone too, so the process never has more than :data:`APPLY_THREADS` applies in flight
    however many reconcile workers wait on them (bench/bench_scale.py gives its direct baseline as many).

    Returns ``(applies accepted, errors, first)``; each error is ``<Kind> <name>: <code> <reason>:
    <message>``, in the order of :func:`~pdd_operator.controller.plan.apply_waves` (waves in order,
    plan order within a wave) whatever order the answers came in; ``first`` is when
    (``time.monotonic()``) the comparisons began, ``None`` when no child needed a request. A refused
    child (:func:`is_refusal`) does not hold back what needs it (the apiserver says why in its own
    answer). An error of the apiserver itself (5xx, 409, 429, no answer) or any other exception stops
    every apply not yet sent and is raised once those in flight have ended (the reconcile is retried
    with backoff).
    """
    return send_applies(kube, pending_applies(kube, children), time.monotonic())


def pending_applies(kube: Kube, children: list[dict]) -> list[tuple[dict, dict | None, str]]:
    """The children that differ from the cache, each ``(child, live, digest)``
    (:meth:`~pdd_operator.controller.kube.Kube.apply_needed`; no request). Each child is hashed once here
    (the in-place memo, the comparison and the apply body all use it)."""
    return [(child, live, digest) for child in children for digest in [applied_hash(child)]
            for needed, live in [kube.apply_needed(child, digest)] if needed]


def send_applies(kube: Kube, pending: list[tuple[dict, dict | None, str]],
                 started: float) -> tuple[int, list[str], float | None]:
    """The sending half of :func:`apply_all`: ``pending`` from :func:`pending_applies`, compared at
    ``started``; returns as :func:`apply_all` does (``started`` as ``first``, ``None`` when nothing was
    pending)."""
    if not pending:
        return 0, [], None
    objs = [child for child, _, _ in pending]
    outcomes: dict[int, BaseException | None] = {}
    needs = apply_dependencies(objs)
    waiting = set(range(len(pending)))
    running: dict[Future, int] = {}
    failed = False
    while waiting or running:
        if not failed:
            for i in sorted(i for i in waiting if needs[i] <= outcomes.keys()):
                waiting.discard(i)
                running[apply_pool().submit(_send, kube, *pending[i])] = i
        if not running:
            break  # a failure stopped what is left
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        for future in done:
            i = running.pop(future)
            outcomes[i] = exc = future.result()  # _send returns every exception it meets
            failed = failed or (exc is not None and not (isinstance(exc, ApiException) and is_refusal(exc)))
    sent, errors, failure = 0, [], None
    for i in (i for wave in apply_waves(objs) for i in wave if i in outcomes):
        exc, child = outcomes[i], objs[i]
        if exc is None:
            sent += 1
        elif isinstance(exc, ApiException) and is_refusal(exc):
            errors.append(f"{child['kind']} {child['metadata']['name']}: {api_error_text(exc)}"[:MAX_ERROR_CHARS])
            log.warning("apply of %s %s/%s failed: %s", child["kind"], child["metadata"]["namespace"],
                        child["metadata"]["name"], errors[-1])
        elif failure is None:
            failure = exc
    if failure is not None:
        raise failure
    return sent, errors, started


def _send(kube: Kube, child: dict, live: dict | None, digest: str) -> BaseException | None:
    """:meth:`~pdd_operator.controller.kube.Kube.send_apply`; returns what it raised, ``None`` when it
    succeeded (a pool thread hands every outcome back to the reconcile)."""
    try:
        kube.send_apply(child, live, digest)
    except Exception as exc:  # noqa: BLE001  (apply_all sorts refusals from failures)
        return exc
    return None


def read_deployments(kube: Kube, namespace: str, name: str) -> dict[str, dict[str, dict | None]]:
    """The live engine Deployments, ``[slot][role]`` (``None`` where one does not exist)."""
    return {slot: {role: kube.get("Deployment", namespace, deployment_name(name, role, slot)) for role in ROLES}
            for slot in SLOTS}


def legacy_applied_specs(kube: Kube, namespace: str, name: str, deployments: dict[str, dict | None]) -> list[str]:
    """The ``pdd-operator.dev/applied-spec`` annotations of the surviving children (written by
    releases before ``status.appliedSpec``), for :func:`~pdd_operator.controller.plan.last_good_spec`."""
    children = [*deployments.values()] + [kube.get("Service", namespace, child_name(name, r)) for r in ROLES]
    return [raw for child in children
            if (raw := ((child or {}).get("metadata") or {}).get("annotations", {}).get(ANNOTATION_APPLIED_SPEC_LEGACY))]


#: Seconds a PDDeployment's :func:`~pdd_operator.controller.status.progress_only` status update waits after
#: its last status write and after it was first held (``PDD_PROGRESS_WRITE_SECONDS``; 0 writes every update
#: at once).
PROGRESS_WRITE_SECONDS = float(os.environ.get("PDD_PROGRESS_WRITE_SECONDS", "1.0"))


class StatusPacer:
    """Paces a PDDeployment's status writes that are only a rollout's progress (ready and updated
    counts: :func:`~pdd_operator.controller.status.progress_only`): such an update waits until ``window``
    seconds after the object's last status write *and* ``window`` seconds after the first reconcile
    that held it, and whatever the status is then (often Ready, a transition) is written in one patch.
    Transitions, a new generation and errors are never held back, and a progress update is never more
    than ``window`` seconds late (the time it was first held is kept until a write). So a create writes
    its status twice (the children applied, then Ready) instead of once per pod count, and a burst of
    pod events costs the apiserver one status write per window.

    Why the second bound: in a burst the pods of a new object come long after its first status write
    (the controller manager creates them at its own client rate), and the Deployment's ``updatedReplicas``
    (pods created, not Ready) arrives a tenth of a second before the pod's Ready (bench/README.md,
    2026-12-06, 23:03: a median gap of 0.1 s, 1.2 s at p90); timed from the last write alone, that
    update was written at once, the third status patch of every new object.

    State is in memory per object key (``(namespace, name)``), with ``clock`` (monotonic seconds, tests
    pass a fake one); thread-safe. Raises ``ValueError`` for a negative window.
    """

    def __init__(self, window: float = PROGRESS_WRITE_SECONDS, clock=time.monotonic) -> None:
        if window < 0:
            raise ValueError(f"the progress write window must be >= 0 seconds, got {window}")
        self.window, self._clock = window, clock
        self._written: dict[tuple[str, str], float] = {}
        self._held: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def hold(self, key: tuple[str, str], previous: dict, status: dict) -> float | None:
        """Seconds to wait before writing ``status`` over the stored ``previous``, or ``None``: write now."""
        if not self.window or not progress_only(previous, status):
            return None
        now = self._clock()
        with self._lock:
            at = self._written.get(key)
            first = self._held.setdefault(key, now)
        until = max(first, at if at is not None else first) + self.window
        return until - now if until > now else None

    def written(self, key: tuple[str, str]) -> None:
        """A status write of ``key`` succeeded now; forgets objects idle for longer than the window."""
        now = self._clock()
        with self._lock:
            self._written[key] = now
            self._held.pop(key, None)
            if len(self._written) > 4096:
                self._written = {k: t for k, t in self._written.items() if now - t < self.window}
            if len(self._held) > 4096:
                self._held = {k: t for k, t in self._held.items() if now - t < self.window}


#: The operator's :class:`StatusPacer`.
PACER = StatusPacer()


class QuietMemo:
    """The PDDeployments whose last reconcile had nothing to do, with the change epoch of their inputs it
    began at (:meth:`~pdd_operator.controller.cache.ClusterCache.epoch`) and whether their spec was
    compatible: a reconcile that begins at the same epoch reads the same objects and would do the same
    nothing, so it is skipped (:func:`reconcile`). Most reconciles are such: the periodic resync's rounds,
    and status work whose events changed nothing the status shows.

    Why that is sound: a reconcile is a function of what it reads from the caches (the PDDeployment with
    its status, its children, its pods' views, its ConfigMap) and of memos that depend only on those; the
    time enters a status only as the ``lastTransitionTime`` of a condition that changes, and nothing
    changed; a status update held back by :data:`PACER` and a read that went to the apiserver and failed
    are never recorded (:meth:`record` is called only for a reconcile that sent nothing, wrote nothing,
    held nothing and read nothing but the caches). Missed watch events are what the resync is for, and a
    reconcile from caches that missed them reads the same as the one before. That no status field depends on
    the clock is tested in ``tests/unit/test_quiet_memo_clock.py``: for each state of the fixtures (Ready,
    rolling out, past a progress deadline, Degraded for each reason, incompatible, invalid) a quiet reconcile
    run again a day later, every clock moved, writes nothing; a status that needs the time (an age, a deadline
    counted here) must come with a change of the epoch or a requeue, never a skip.

    At most ``size`` objects, the least recently recorded dropped first; thread-safe.
    """

    def __init__(self, size: int = 65_536) -> None:
        if size < 1:
            raise ValueError(f"a memo needs room for at least one entry, got {size}")
        self.size = size
        self._quiet: dict[tuple[str, str], tuple[tuple, bool]] = {}
        self._lock = threading.Lock()

    def quiet(self, key: tuple[str, str], epoch: tuple) -> bool | None:
        """Whether ``key``'s spec was compatible, if its last reconcile did nothing at ``epoch``; ``None``
        when a reconcile must run (never recorded, or the epoch moved)."""
        with self._lock:
            entry = self._quiet.get(key)
        return entry[1] if entry is not None and entry[0] == epoch else None

    def record(self, key: tuple[str, str], epoch: tuple, compatible: bool) -> None:
        """``key``'s reconcile that began at ``epoch`` did nothing."""
        with self._lock:
            self._quiet.pop(key, None)
            self._quiet[key] = (epoch, compatible)
            while len(self._quiet) > self.size:
                del self._quiet[next(iter(self._quiet))]

    def forget(self, key: tuple[str, str]) -> None:
        """A reconcile of ``key`` runs: what it does is not known yet."""
        with self._lock:
            self._quiet.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._quiet)


#: The operator's :class:`QuietMemo`.
QUIET = QuietMemo()


#: Keeps a flapping PDDeployment from flooding its namespace with Events (one per operator process).
EVENTS = EventFilter()

#: Posts the operator's Events off the reconcile workers (one per operator process).
RECORDER = EventRecorder()


def post_events(kube: Kube, obj: dict, events: list[Event]) -> int:
    """Record ``events`` (from :func:`~pdd_operator.controller.events.transitions`) on the PDDeployment
    ``obj``, each one that :data:`EVENTS` lets through, for :data:`RECORDER` to post in the background;
    best effort. Returns how many were queued."""
    queued = 0
    for event in events:
        if EVENTS.allow(obj["metadata"].get("uid", ""), event, time.monotonic()):
            queued += int(RECORDER.record(kube.event, obj, event.type_, event.reason, event.message))
    return queued


@dataclass(frozen=True)
class Outcome:
    """What one reconcile did: child applies sent, whether status was written, and the verdict;
    ``first_apply_at``: when (``time.monotonic()``) the first child apply that sent a request began;
    ``requeue_after``: seconds after which the object must be reconciled again (a status update that
    :data:`PACER` held back), ``None`` when nothing waits."""

    applied: int = 0
    status_written: bool = False
    compatible: bool = True
    found: bool = True
    first_apply_at: float | None = None
    requeue_after: float | None = None


def reconcile(kube: Kube, namespace: str, name: str, waiters: Executor | None = None) -> Outcome | Future[Outcome]:
    """Bring one PDDeployment's children and status in line with its spec.

    Compatible spec: render the children and apply those that differ from the live objects.
    Incompatible spec: touch no child (they keep running the last compatible generation) and report
    why. Either way the status is recomputed and written only when it differs (an update that is only
    a rollout's progress may wait for :data:`PACER`'s window: ``Outcome.requeue_after``). Raises the client's
    ``ApiException`` on API errors (callers retry); never raises for a bad spec.

    With ``waiters`` (an executor: :func:`waiting_pool`), what waits for the apiserver is handed to it
    and a ``Future`` of the outcome is returned: the reads, the check, the plan and the comparisons with
    the caches run in the caller's thread, then the applies (on :func:`apply_pool`, as always), the status
    fold and the status patch in a waiting thread; a reconcile with nothing to apply folds its status
    here and hands over only its patch (none, or one :data:`PACER` holds: the outcome is returned
    as is). The caller's thread is then free for other work while the apiserver answers
    (:class:`~pdd_operator.controller.workqueue.WorkQueue`: a deferred key). The future raises
    what the reconcile would have raised.

    A reconcile that begins at the change epoch of its inputs at which the last one had nothing to do
    (:class:`QuietMemo`) reads nothing and returns at once (counted as ``unchanged`` or ``incompatible``
    as that one was, and in ``pdd_reconcile_skips_total``).

    Callers run at most one reconcile of an object at a time (the operator's
    :class:`~pdd_operator.controller.workqueue.WorkQueue` guarantees it, a deferred one included): two
    at once could both apply and both write status from the same read.
    """
    quiet_key = (namespace, name)
    epoch = kube.epoch(namespace, name)  # before any read: a change meanwhile moves it
    if epoch is not None and (compatible := QUIET.quiet(quiet_key, epoch)) is not None:
        RECONCILES.labels("unchanged" if compatible else "incompatible").inc()
        RECONCILE_SKIPS.inc()
        return Outcome(compatible=compatible)
    QUIET.forget(quiet_key)
    obj = kube.get_pdd(namespace, name)
    if obj is None or obj["metadata"].get("deletionTimestamp"):
        RECONCILES.labels("gone").inc()
        return Outcome(found=False)
    meta = obj["metadata"]
    generation = int(meta.get("generation") or 1)
    previous = obj.get("status") or {}
    model_config = None
    config_key = None
    read_errors: list[str] = []
    try:
        spec = PDDeploymentSpec.model_validate(obj.get("spec") or {})
    except ValidationError as exc:
        spec, report = None, invalid_spec_report(exc)
    else:
        model_config, problem = load_model_config(kube, namespace, spec, read_errors)
        key = CHECKS.key(namespace, name, meta.get("uid"), generation, model_config, problem)
        report, model_config = CHECKS.check(key, spec, name, namespace, model_config, problem)
        config_key = key[4] if model_config is not None else None  # the config the check kept, as keyed

    deployments = read_deployments(kube, namespace, name)
    # Both slots' pods, Terminating ones included: the rollout retires a slot's decode only once its
    # prefill has none left, and status counts them (a Deployment's status does not count Terminating pods).
    pods = {role: kube.list_pods(namespace, selector_labels(name, role)) for role in ROLES}
    last_good = None
    if spec is None or not report.compatible:
        legacy = ([] if previous.get("appliedSpec")
                  else legacy_applied_specs(kube, namespace, name, deployments[SLOTS[0]]))
        last_good = last_good_spec(previous, legacy)
    plan = plan_children(name=name, namespace=namespace, uid=meta["uid"], generation=generation, spec=spec,
                         report=report, previous_status=previous, last_good=last_good, model_config=model_config,
                         deployments=deployments, pods=pods, render=RENDERS.renderer(kube, config_key))
    compared_at = time.monotonic()
    pending = pending_applies(kube, plan.children)

    def observe(applied: int, apply_errors: list[str]) -> dict:
        """The status after the applies (from the caches: no request)."""
        nonlocal deployments
        applied_generation, applied_spec = plan.recorded(applied_ok=not apply_errors)
        target = plan.target
        if applied:
            deployments = read_deployments(kube, namespace, name)
        desired = spec or target
        # The other slot's pods count whatever the step (a retired slot's pods may still be stopping).
        active = plan.step.active
        other = next(s for s in SLOTS if s != active)
        observations = {
            role: RoleObservation.from_deployment(
                deployments[active][role], pods[role],
                desired=desired.role(role).replicas if desired is not None else 0,
            ).with_previous(deployments[other][role], slot_pods(pods[role], other))
            for role in ROLES
        }
        has_router = target is not None and target.router.replicas > 0
        router = None
        if has_router:
            router = RoleObservation.from_deployment(
                kube.get("Deployment", namespace, child_name(name, ROUTER)),
                kube.list_pods(namespace, router_selector_labels(name)), desired=target.router.replicas)
        preflight = None
        if desired is not None and desired.network.preflight.policy != "Disabled":
            preflight = preflight_results([p for role in ROLES for p in pods[role]])
        status = fold_status(
            generation=generation, previous=previous, report=report,
            applied_generation=applied_generation, observations=observations, now=now_rfc3339(),
            preflight=preflight, apply_errors=[*read_errors, *apply_errors],
            fallback=target.router.fallback if has_router else None, router=router,
            # The router the children run, not the current spec's: a spec refused before anything was
            # applied has no router Service, so it publishes no endpoint.
            endpoint=router_endpoint(Owner(name=name, namespace=namespace), target) if has_router else None,
        )
        if applied_spec is not None:
            status["appliedSpec"] = applied_spec
        return status

    def write(applied: int, first_apply_at: float | None, status: dict, held: float | None) -> Outcome:
        """Patch ``status`` unless it is the stored one or :data:`PACER` holds it; count the outcome."""
        written = False
        if status != previous and held is None:
            removed = {k: None for k in previous if k not in status}
            kube.patch_status(namespace, name, {**status, **removed}, meta.get("resourceVersion"))
            PACER.written((namespace, name))
            written = True
            post_events(kube, obj, transitions(previous, status))
            log.info(
                "status of %s/%s: %s", namespace, name,
                ", ".join(f"{c['type']}={c['status']}" + (f" ({c['reason']})" if c["type"] == "Degraded"
                                                         and c["status"] == "True" else "")
                          for c in status["conditions"]),
            )
        CHILD_APPLIES.inc(applied)
        STATUS_WRITES.inc(int(written))
        if not report.compatible:
            RECONCILES.labels("incompatible").inc()
        elif applied or written:
            RECONCILES.labels("changed").inc()
        else:
            RECONCILES.labels("unchanged").inc()
        return Outcome(applied=applied, status_written=written, compatible=report.compatible,
                       first_apply_at=first_apply_at, requeue_after=held)

    def hold(status: dict) -> float | None:
        return PACER.hold((namespace, name), previous, status) if status != previous else None

    def finish() -> Outcome:
        """Send the applies, then fold and write the status (in a waiting thread when deferred)."""
        applied, apply_errors, first_apply_at = send_applies(kube, pending, compared_at)
        status = observe(applied, apply_errors)
        return write(applied, first_apply_at, status, hold(status))

    if pending:
        return finish() if waiters is None else waiters.submit(finish)
    # Nothing to apply: the status is folded here, and only its patch, if one is due, waits off the worker.
    status = observe(0, [])
    held = hold(status)
    if status == previous and held is None and epoch is not None and not read_errors:
        QUIET.record(quiet_key, epoch, report.compatible)  # nothing to do: the same epoch needs no reconcile
    if waiters is None or status == previous or held is not None:
        return write(0, None, status, held)
    return waiters.submit(write, 0, None, status, held)


def record_failure(kube: Kube, namespace: str, name: str, message: str) -> bool:
    """Say in status that a reconcile failed unexpectedly: Degraded=True, reason ReconcileError, with
    ``message``, and an Event. The other conditions stay as they are; the next successful reconcile
    recomputes everything. Best effort: returns False when the status cannot be written either."""
    try:
        obj = kube.get_pdd(namespace, name)
        if obj is None:
            return False
        previous = obj.get("status") or {}
        generation = int(obj["metadata"].get("generation") or 1)
        conditions = with_reconcile_error(previous.get("conditions") or [], generation, message[:MAX_ERROR_CHARS],
                                          now_rfc3339())
        if conditions == previous.get("conditions"):
            return True
        kube.patch_status(namespace, name, {**previous, "conditions": conditions}, obj["metadata"].get("resourceVersion"))
        RECORDER.record(kube.event, obj, "Warning", "ReconcileError", message)
        return True
    except Exception as exc:  # noqa: BLE001  (reporting must not fail the caller)
        log.warning("cannot record the failed reconcile of %s/%s: %s", namespace, name, exc)
        return False
