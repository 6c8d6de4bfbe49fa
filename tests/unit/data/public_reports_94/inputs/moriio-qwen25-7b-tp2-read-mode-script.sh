#!/usr/bin/env bash
# 1p1d homogeneous TP=2 (AMD MI3xx, MoRIIO/XGMI READ mode) — prefill TP=2 + decode TP=2.
set -o pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
mkdir -p logs && rm -f logs/*.log
touch logs/proxy.log logs/prefill_0.log logs/decode_0.log

PIDS=()
trap 'echo; echo "[run] stopping..."; kill "${PIDS[@]:-}" 2>/dev/null; pkill -P $$ 2>/dev/null; wait 2>/dev/null; exit' INT TERM

PROXY=$(find /vllm-workspace /app /workspace /opt /usr/local /code /root -maxdepth 8 \
    -name 'moriio_toy_proxy_server.py' -print -quit 2>/dev/null || true)
[ -f "$PROXY" ] || { echo "ERROR: moriio_toy_proxy_server.py not found." >&2; exit 1; }

export VLLM_ROCM_USE_AITER=1 MORI_IO_ENABLE_NOTIFICATION=0 VLLM_MORIIO_CONNECTOR_READ_MODE=1
export VLLM_USE_TRITON_AWQ=1 VLLM_ROCM_USE_AITER_MOE=1 AITER_ONLINE_TUNE=1

MODEL=Qwen/Qwen2.5-7B-Instruct
COMMON=(
    --tensor-parallel-size 2
    --gpu-memory-utilization 0.85
    --max-model-len 10240
    --max-num-batched-tokens 32768
    --max-num-seqs 128
    --no-enable-prefix-caching
    --trust-remote-code
    --kv-cache-dtype fp8
)

kv() {
    printf '{"kv_connector":"MoRIIOConnector","kv_role":"%s","kv_connector_extra_config":{"backend":"xgmi","proxy_ip":"127.0.0.1","proxy_ping_port":"36367","http_port":"%s","handshake_port":"%s","notify_port":"%s"}}' "$@"
}

python "$PROXY" --port 10001 > logs/proxy.log 2>&1 & PIDS+=($!)

HIP_VISIBLE_DEVICES=0,1 \
    vllm serve "$MODEL" "${COMMON[@]}" \
        --host 0.0.0.0 --port 8100 --kv-transfer-config "$(kv kv_producer 8100 6301 6105)" \
    > logs/prefill_0.log 2>&1 & PIDS+=($!)

HIP_VISIBLE_DEVICES=2,3 \
    vllm serve "$MODEL" "${COMMON[@]}" \
        --host 0.0.0.0 --port 8200 --kv-transfer-config "$(kv kv_consumer 8200 7301 7105)" \
    > logs/decode_0.log 2>&1 & PIDS+=($!)

wait
