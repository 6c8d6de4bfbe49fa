#!/usr/bin/env bash
# Stop the demo operator (if running) and the local cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
if eval "$(bash dev/cluster/cluster.sh env 2>/dev/null)" && [[ -n "${KUBECONFIG:-}" ]]; then
  pidfile="$(dirname "$KUBECONFIG")/operator.pid"
  if [[ -f "$pidfile" ]]; then
    kill "$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile"
  fi
fi
bash dev/cluster/cluster.sh down
