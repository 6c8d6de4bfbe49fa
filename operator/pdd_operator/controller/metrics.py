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
