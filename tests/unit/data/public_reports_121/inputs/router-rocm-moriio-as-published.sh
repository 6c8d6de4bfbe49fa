#!/usr/bin/env bash
# vllm-project/router py_test/e2e/pd_disagg_vllm/rocm/run_moriio_accuracy_test.sh (5a48429): same-host ROCm
# P/D over MoRIIOConnector (XGMI backend), a TP1 prefill and a TP1 decode on one MI300-class host,
# vllm-router in MoRI-IO discovery mode in front.
# Image: the lane's pinned ROCm vLLM image (not named in this script).
set -Eeuo pipefail

# --- inlined from rocm/_pd_rocm_common.sh (sourced by the runner): shared defaults and the GPU split ---
: "${MODEL_NAMES:=Qwen/Qwen3-0.6B}"
: "${PREFILLER_TP_SIZE:=1}"
: "${DECODER_TP_SIZE:=1}"
: "${GPU_MEMORY_UTILIZATION:=0.6}"
: "${BLOCK_SIZE:=16}"
: "${ENGINE_STARTUP_TIMEOUT:=900}"
: "${ROUTER_STARTUP_TIMEOUT:=180}"
: "${PREFILL_PORT:=8100}"
: "${DECODE_PORT:=8200}"
: "${ROUTER_PORT:=8300}"
PREFILL_GPUS=$(seq -s, 0 $((PREFILLER_TP_SIZE - 1)))
DECODE_GPUS=$(seq -s, ${PREFILLER_TP_SIZE} $((PREFILLER_TP_SIZE + DECODER_TP_SIZE - 1)))
ROUTER_BIN=${ROUTER_BIN:-vllm-router}
# --- end of inlined part ---

MORIIO_READ_MODE=${MORIIO_READ_MODE:-"true"}
MORIIO_BACKEND=${MORIIO_BACKEND:-"xgmi"}
PROXY_PING_PORT=${PROXY_PING_PORT:-36367}
PREFILL_HANDSHAKE_PORT=${PREFILL_HANDSHAKE_PORT:-6301}
DECODE_HANDSHAKE_PORT=${DECODE_HANDSHAKE_PORT:-7301}
PREFILL_NOTIFY_PORT=${PREFILL_NOTIFY_PORT:-61005}
DECODE_NOTIFY_PORT=${DECODE_NOTIFY_PORT:-62005}
LOG_DIR=${LOG_DIR:-/tmp/vllm-router-moriio}

mkdir -p "${LOG_DIR}"

make_kv_config() {
  local role=$1
  local http_port=$2
  local handshake_port=$3
  local notify_port=$4

  printf '{"kv_connector":"MoRIIOConnector","kv_role":"%s","kv_connector_extra_config":{"proxy_ip":"127.0.0.1","proxy_ping_port":%s,"http_port":%s,"handshake_port":%s,"notify_port":%s,"read_mode":%s,"backend":"%s"}}' \
    "${role}" \
    "${PROXY_PING_PORT}" \
    "${http_port}" \
    "${handshake_port}" \
    "${notify_port}" \
    "${MORIIO_READ_MODE}" \
    "${MORIIO_BACKEND}"
}

PREFILL_KV_CONFIG=$(make_kv_config \
  kv_producer "${PREFILL_PORT}" "${PREFILL_HANDSHAKE_PORT}" "${PREFILL_NOTIFY_PORT}")
DECODE_KV_CONFIG=$(make_kv_config \
  kv_consumer "${DECODE_PORT}" "${DECODE_HANDSHAKE_PORT}" "${DECODE_NOTIFY_PORT}")

"${ROUTER_BIN}" \
  --port "${ROUTER_PORT}" \
  --policy consistent_hash \
  --prefill-policy consistent_hash \
  --decode-policy consistent_hash \
  --vllm-pd-disaggregation \
  --kv-connector moriio \
  --vllm-discovery-address "0.0.0.0:${PROXY_PING_PORT}" \
  --worker-startup-check-interval 1 \
  >"${LOG_DIR}/router.log" 2>&1 &
ROUTER_PID=$!

HIP_VISIBLE_DEVICES="${PREFILL_GPUS}" \
VLLM_ROCM_USE_AITER=1 \
VLLM_LOGGING_LEVEL=INFO \
vllm serve "${MODEL_NAMES}" \
  --port "${PREFILL_PORT}" \
  --tensor-parallel-size "${PREFILLER_TP_SIZE}" \
  --block-size "${BLOCK_SIZE}" \
  --gpu-memory-utilization "${GPU_MEMORY_UTILIZATION}" \
  --enforce-eager \
  --kv-transfer-config "${PREFILL_KV_CONFIG}" \
  >"${LOG_DIR}/prefill.log" 2>&1 &
PREFILL_PID=$!

HIP_VISIBLE_DEVICES="${DECODE_GPUS}" \
VLLM_ROCM_USE_AITER=1 \
VLLM_LOGGING_LEVEL=INFO \
vllm serve "${MODEL_NAMES}" \
  --port "${DECODE_PORT}" \
  --tensor-parallel-size "${DECODER_TP_SIZE}" \
  --block-size "${BLOCK_SIZE}" \
  --gpu-memory-utilization "${GPU_MEMORY_UTILIZATION}" \
  --enforce-eager \
  --kv-transfer-config "${DECODE_KV_CONFIG}" \
  >"${LOG_DIR}/decode.log" 2>&1 &
DECODE_PID=$!

wait
