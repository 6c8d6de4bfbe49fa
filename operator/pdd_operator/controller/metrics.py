"""Prometheus metrics of the operator (served by ``pdd run --metrics-port``)."""

from prometheus_client import Counter

RECONCILES = Counter(
    "pdd_reconcile_total", "Reconciles of PDDeployments, by outcome.", ["outcome"],
)
CHILD_APPLIES = Counter("pdd_child_applies_total", "Server-side applies of child objects sent.")
STATUS_WRITES = Counter("pdd_status_writes_total", "PDDeployment status patches sent.")
RECONCILE_ERRORS = Counter("pdd_reconcile_errors_total", "Reconciles that failed with an API error.")
RESYNC_ERRORS = Counter("pdd_resync_errors_total", "Resync rounds that failed (and were retried next period).")
