#!/bin/bash
# The DLC EFA NIXL P/D test's two launchers run on ONE host (the decode launcher started
# locally instead of on the worker node over SSH, WORKER_IP = this host).
# Decode: test/efa/scripts/nixl_disagg_pd_decode.sh (1ae88a80); prefill:
# test/efa/scripts/nixl_disagg_pd.sh (f1dfcaed), both as published.
set -ex

MODEL=${1:-facebook/opt-125m}
LOG_DIR=/test/efa/logs
mkdir -p "${LOG_DIR}"

# --- nixl_disagg_pd_decode.sh ---
DECODE_LOG="${LOG_DIR}/decode.log"
DECODE_PORT=8200
SIDE_CHANNEL_PORT=5659
KV_CONFIG='{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"backends":["LIBFABRIC"]}}'
nohup env CUDA_VISIBLE_DEVICES=0 \
    FI_PROVIDER=efa \
    UCX_NET_DEVICES=all \
    VLLM_NIXL_SIDE_CHANNEL_PORT=${SIDE_CHANNEL_PORT} \
    vllm serve "${MODEL}" \
        --host 0.0.0.0 \
        --port ${DECODE_PORT} \
        --enforce-eager \
        --gpu-memory-utilization 0.5 \
        --kv-transfer-config "${KV_CONFIG}" \
    >"${DECODE_LOG}" 2>&1 &
echo $! >"${LOG_DIR}/decode.pid"
disown
sleep 1

# --- nixl_disagg_pd.sh (WORKER_IP = this host) ---
WORKER_IP=$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1)
PREFILL_LOG="${LOG_DIR}/prefill.log"
PROXY_LOG="${LOG_DIR}/proxy.log"
PREFILL_PORT=8100
DECODE_PORT=8200
PROXY_PORT=8192
SIDE_CHANNEL_PORT=5559
KV_CONFIG='{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_connector_extra_config":{"backends":["LIBFABRIC"]}}'
SIDE_CHANNEL_HOST=$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1)

CUDA_VISIBLE_DEVICES=0 \
FI_PROVIDER=efa \
UCX_NET_DEVICES=all \
VLLM_NIXL_SIDE_CHANNEL_PORT=${SIDE_CHANNEL_PORT} \
VLLM_NIXL_SIDE_CHANNEL_HOST=${SIDE_CHANNEL_HOST} \
vllm serve "${MODEL}" \
    --port ${PREFILL_PORT} \
    --enforce-eager \
    --gpu-memory-utilization 0.5 \
    --kv-transfer-config "${KV_CONFIG}" \
    >"${PREFILL_LOG}" 2>&1 &
PREFILL_PID=$!

for i in $(seq 1 90); do
    if curl -sf "http://127.0.0.1:${PREFILL_PORT}/health" >/dev/null; then
        echo "prefill ready"
        break
    fi
    sleep 2
done

python3 /test/efa/scripts/toy_proxy_server.py \
    --port ${PROXY_PORT} \
    --prefill-url "http://127.0.0.1:${PREFILL_PORT}" \
    --decode-url "http://${WORKER_IP}:${DECODE_PORT}" \
    >"${PROXY_LOG}" 2>&1 &
