"""Prometheus metrics of the operator (served by ``pdd run --metrics-port``)."""

from prometheus_client import Counter, Gauge

RECONCILES = Counter(
    "pdd_reconcile_total", "Reconciles of PDDeployments, by outcome.", ["outcome"],
)
CHILD_APPLIES = Counter("pdd_child_applies_total", "Server-side applies of child objects sent.")
STATUS_WRITES = Counter("pdd_status_writes_total", "PDDeployment status patches sent.")
RECONCILE_ERRORS = Counter("pdd_reconcile_errors_total", "Reconciles that failed with an API error.")
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
QUEUE_ADDS = Counter("pdd_workqueue_adds_total", "Keys added to the reconcile queue (before coalescing).")
QUEUE_DEPTH = Gauge("pdd_workqueue_depth", "PDDeployments waiting in the reconcile queue.")
