#!/usr/bin/env bash
# vllm-project/router py_test/e2e/pd_disagg_vllm/rocm/run_nixl_rocm_accuracy_test.sh (5a48429): same-host ROCm
# P/D over NixlConnector (UCX), a TP1 prefill and a TP2 decode on one MI300-class host, vllm-router in front.
# Image: vllm/vllm-openai-rocm:v0.34.0 (the runner executes inside it).
set -Eeuo pipefail

# --- inlined from rocm/_pd_rocm_common.sh (sourced by the runner): shared defaults and the GPU split ---
: "${MODEL_NAMES:=Qwen/Qwen3-0.6B}"
: "${PREFILLER_TP_SIZE:=1}"
: "${DECODER_TP_SIZE:=2}"
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

KV_BUFFER_DEVICE=${KV_BUFFER_DEVICE:-"cuda"}
NIXL_BACKENDS=${NIXL_BACKENDS:-'["UCX"]'}
PREFILL_NIXL_PORT=${PREFILL_NIXL_PORT:-9100}
DECODE_NIXL_PORT=${DECODE_NIXL_PORT:-9200}
PREFILL_NIXL_HTTP_PORT=${PREFILL_NIXL_HTTP_PORT:-8097}
DECODE_NIXL_HTTP_PORT=${DECODE_NIXL_HTTP_PORT:-8098}
LOG_DIR=${LOG_DIR:-/tmp/vllm-router-nixl-rocm}

mkdir -p "${LOG_DIR}"

make_kv_config() {
  local http_port=$1

  printf '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_buffer_device":"%s","kv_connector_extra_config":{"backends":%s,"http_port":%s}}' \
    "${KV_BUFFER_DEVICE}" \
    "${NIXL_BACKENDS}" \
    "${http_port}"
}

PREFILL_KV_CONFIG=$(make_kv_config "${PREFILL_NIXL_HTTP_PORT}")
DECODE_KV_CONFIG=$(make_kv_config "${DECODE_NIXL_HTTP_PORT}")

HIP_VISIBLE_DEVICES="${PREFILL_GPUS}" \
VLLM_USE_V1=1 \
VLLM_ROCM_USE_AITER=1 \
VLLM_LOGGING_LEVEL=INFO \
VLLM_NIXL_SIDE_CHANNEL_HOST=0.0.0.0 \
VLLM_NIXL_SIDE_CHANNEL_PORT="${PREFILL_NIXL_PORT}" \
UCX_TLS=all \
UCX_NET_DEVICES=all \
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
VLLM_USE_V1=1 \
VLLM_ROCM_USE_AITER=1 \
VLLM_LOGGING_LEVEL=INFO \
VLLM_NIXL_SIDE_CHANNEL_HOST=0.0.0.0 \
VLLM_NIXL_SIDE_CHANNEL_PORT="${DECODE_NIXL_PORT}" \
UCX_TLS=all \
UCX_NET_DEVICES=all \
vllm serve "${MODEL_NAMES}" \
  --port "${DECODE_PORT}" \
  --tensor-parallel-size "${DECODER_TP_SIZE}" \
  --block-size "${BLOCK_SIZE}" \
  --gpu-memory-utilization "${GPU_MEMORY_UTILIZATION}" \
  --enforce-eager \
  --kv-transfer-config "${DECODE_KV_CONFIG}" \
  >"${LOG_DIR}/decode.log" 2>&1 &
DECODE_PID=$!

"${ROUTER_BIN}" \
  --port "${ROUTER_PORT}" \
  --policy power_of_two \
  --vllm-pd-disaggregation \
  --kv-connector nixl \
  --prefill "http://127.0.0.1:${PREFILL_PORT}" \
  --decode "http://127.0.0.1:${DECODE_PORT}" \
  --worker-startup-check-interval 1 \
  >"${LOG_DIR}/router.log" 2>&1 &
ROUTER_PID=$!

wait
