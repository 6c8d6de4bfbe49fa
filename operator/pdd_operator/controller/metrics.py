"""Prometheus metrics of the operator (served by ``pdd run --metrics-port``)."""

from prometheus_client import Counter, Gauge, Histogram

RECONCILES = Counter(
    "pdd_reconcile_total", "Reconciles of PDDeployments, by outcome.", ["outcome"],
)
CHILD_APPLIES = Counter("pdd_child_applies_total", "Server-side applies of child objects sent.")
STATUS_WRITES = Counter("pdd_status_writes_total", "PDDeployment status patches sent.")
RECONCILE_ERRORS = Counter("pdd_reconcile_errors_total", "Reconciles that failed with an API error.")
EVENTS_DROPPED = Counter(
    "pdd_events_dropped_total",
    "Events not posted because the event queue was full (controller/recorder.py; status says the same).",
)
RESYNC_ERRORS = Counter("pdd_resync_errors_total", "Resync rounds that failed (and were retried next period).")
WEBHOOK_CERT_EXPIRY = Gauge(
    "pdd_webhook_certificate_expiry_timestamp_seconds",
    "When the webhook's certificate expires (Unix time), by certificate: ca or serving. The operator renews "
    "the serving certificate when a third of its lifetime is left; alert when this is under 7 days away.",
    ["certificate"],
)
API_REQUESTS = Counter(
    "pdd_api_requests_total",
    "Requests the operator's reconciles sent to the apiserver, by verb (get, list, apply, patch, create) and "
    "resource. kopf's own list and watch requests of the cached kinds are not counted here.",
    ["verb", "resource"],
)
CACHE_MISSES = Counter(
    "pdd_cache_fallback_reads_total",
    "Reads that the caches could not answer and went to the apiserver, by resource.", ["resource"],
)
WATCH_EVENTS = Counter(
    "pdd_watch_events_total",
    "Watch events the operator's handlers received, by kind and what they did: queued_write (a reconcile of "
    "the owner that may write children: a new object, a spec change, a child deleted or edited), queued_status "
    "(a reconcile that can only update the status: a status it reads changed), own (the echo of the operator's "
    "own write, already in the cache) or unchanged (nothing a reconcile writes or reads of the object changed: "
    "controller/triage.py).",
    ["kind", "outcome"],
)
QUEUE_ADDS = Counter("pdd_workqueue_adds_total", "Keys added to the reconcile queue (before coalescing).")
RECONCILE_SKIPS = Counter(
    "pdd_reconcile_skips_total",
    "Reconciles that began at the change epoch of their object's cached inputs at which the last one had nothing "
    "to do, and so read and did nothing (controller/reconcile.py QuietMemo); also counted in pdd_reconcile_total.")
QUEUE_COALESCED = Counter(
    "pdd_workqueue_status_coalesced_total",
    "Status-only adds of a key that did not wait, queued after the status window (PDD_STATUS_COALESCE_SECONDS) "
    "instead of at once, so the status events of one change become one reconcile (controller/workqueue.py).")
QUEUE_DEPTH = Gauge("pdd_workqueue_depth", "PDDeployments waiting in the reconcile queue.")
QUEUE_WORKER_SECONDS = Counter(
    "pdd_workqueue_worker_seconds_total",
    "Seconds the reconcile queue's worker threads spent processing keys (over a window, divided by the window "
    "and the number of workers: their occupancy). A reconcile that goes on off the workers (its applies and "
    "status patch: controller/workqueue.py) counts only its time on the worker.",
)
QUEUE_DEFERRED = Gauge(
    "pdd_workqueue_deferred",
    "Reconciles that go on off the queue's workers now (waiting for their applies or status patch); at most "
    "PDD_RECONCILE_DEFERRED.",
)
QUEUE_RETRIES = Counter(
    "pdd_workqueue_retries_total",
    "Reconciles requeued with per-object exponential backoff after a transient failure (an API error the "
    "apiserver may not repeat: 409, 429, 5xx, no answer); client-go's workqueue_retries_total.",
)

#: Buckets of the operator's own latencies, in seconds: from a millisecond (a reconcile from the
#: caches) to five minutes (a burst queued behind a slow apiserver).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
                   300.0)
QUEUE_PROMOTIONS = Counter(
    "pdd_workqueue_promotions_total",
    "Status-only reconciles that waited the queue's promote_after (PDD_STATUS_PROMOTE_SECONDS) behind work that "
    "writes children and were then served with it (the fairness bound of controller/workqueue.py).",
)
QUEUE_WAIT = Histogram(
    "pdd_workqueue_wait_seconds",
    "How long a PDDeployment waited in the reconcile queue: from the event (or resync) that queued it to "
    "a worker taking it.", buckets=LATENCY_BUCKETS,
)
QUEUE_PRIORITY_WAIT = Histogram(
    "pdd_workqueue_priority_wait_seconds",
    "pdd_workqueue_wait_seconds by the priority a key was served at: write (children may have to be written: "
    "a new object, a spec change, drift), status (only the status can change) or resync (the periodic "
    "resync's round); a status key promoted after waiting is counted as write.", ["priority"], buckets=LATENCY_BUCKETS,
)
RECONCILE_DURATION = Histogram(
    "pdd_reconcile_duration_seconds", "Wall time of one reconcile (its API requests included).",
    buckets=LATENCY_BUCKETS,
)
RECONCILE_CPU = Histogram(
    "pdd_reconcile_cpu_seconds",
    "CPU time of one reconcile's thread (time.thread_time): checking, rendering, comparing with the caches, "
    "encoding requests; not the time spent waiting for the apiserver or for the GIL.", buckets=LATENCY_BUCKETS,
)
EVENT_TO_APPLY = Histogram(
    "pdd_event_to_apply_seconds",
    "From the event that queued a PDDeployment (as the operator's handler saw it) to the first child apply "
    "request its reconcile sent; reconciles that applied nothing are not counted.", buckets=LATENCY_BUCKETS,
)
API_REQUEST_DURATION = Histogram(
    "pdd_api_request_duration_seconds",
    "Time the apiserver took to answer the operator's reconcile requests, by verb (apply, patch).",
    ["verb"], buckets=LATENCY_BUCKETS,
)
