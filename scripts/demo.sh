#!/usr/bin/env bash
# The main job end to end on the embedded local cluster:
#   build or reuse the control-plane binaries, start the cluster (fake H200 GPU nodes with RDMA),
#   install the CRD, start the operator, apply examples/nemotron-nano-pd.yaml, and wait until
#   `kubectl get pdd` says Ready. The cluster and the operator stay up; `make down` stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
EXAMPLE="${1:-examples/nemotron-nano-pd.yaml}"

bash scripts/bootstrap.sh
bash dev/cluster/cluster.sh up >/dev/null
eval "$(bash dev/cluster/cluster.sh env)"
STATE="$(dirname "$KUBECONFIG")"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Installing the PDDeployment CRD"
bash dev/cluster/cluster.sh crd

step "Starting the operator (log: $STATE/operator.log)"
if [[ -f "$STATE/operator.pid" ]] && kill -0 "$(cat "$STATE/operator.pid")" 2>/dev/null; then
  echo "already running (pid $(cat "$STATE/operator.pid"))"
else
  nohup .venv/bin/pdd run >"$STATE/operator.log" 2>&1 &
  echo $! > "$STATE/operator.pid"
  echo "pid $(cat "$STATE/operator.pid")"
fi

step "Nodes: GPU nodes with nvidia.com/gpu and rdma/ib, one CPU-only node"
kubectl get nodes -o custom-columns='NAME:.metadata.name,GPU:.status.allocatable.nvidia\.com/gpu,RDMA:.status.allocatable.rdma/ib,PRODUCT:.metadata.labels.nvidia\.com/gpu\.product,RACK:.metadata.labels.network\.topology\.kubernetes\.io/block'

step "kubectl apply -f $EXAMPLE"
kubectl apply -f "$EXAMPLE"
name="$(.venv/bin/python -c 'import sys,yaml; print(yaml.safe_load(open(sys.argv[1]))["metadata"]["name"])' "$EXAMPLE")"

step "kubectl wait --for=condition=Ready pdd/$name"
kubectl wait --for=condition=Ready --timeout=180s "pdd/$name"

step "kubectl get pdd -o wide"
kubectl get pdd -o wide
step "kubectl get deployments,services,pods -o wide"
kubectl get deployments,services -l "app.kubernetes.io/instance=$name"
kubectl get pods -l "app.kubernetes.io/instance=$name" -o wide
step "The prefill pod's vLLM command line"
kubectl get pods -l "app.kubernetes.io/instance=$name,app.kubernetes.io/component=prefill" \
  -o jsonpath='{.items[0].spec.containers[0].command} {.items[0].spec.containers[0].args}{"\n"}'

cat <<MSG

The cluster and the operator are still running. Try:
  eval "\$(bash dev/cluster/cluster.sh env)"
  kubectl get pdd $name -o yaml        # status: conditions, replicas, compatibility findings
  kubectl explain pdd.spec.prefill
  make down                             # stop the operator and the cluster
MSG
