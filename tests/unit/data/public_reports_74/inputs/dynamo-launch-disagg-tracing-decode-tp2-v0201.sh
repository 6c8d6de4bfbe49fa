#!/bin/bash
# ai-dynamo/dynamo examples/backends/vllm/launch/disagg_tracing.sh at 4abbc81 (launched by tests/serve/test_vllm.py):
# Dynamo frontend + one decode and one prefill dynamo.vllm worker on two GPUs of one host, NIXL between them.
# The script runs inside Dynamo's vLLM runtime; the vLLM pin below is the one of vllm-runtime 1.2.0.
# variant: the decode worker on GPUs 0 and 2 with --tensor-parallel-size 2, the prefill on GPU 1 with TP 1
pip install vllm==0.20.1
set -e

MODEL="Qwen/Qwen3-0.6B"

export DYN_LOGGING_JSONL=true
export OTEL_EXPORT_ENABLED=true
export OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="${OTEL_EXPORTER_OTLP_TRACES_ENDPOINT:-http://localhost:4317}"

HTTP_PORT="${DYN_HTTP_PORT:-8000}"

# run ingress
export OTEL_SERVICE_NAME=dynamo-frontend
python -m dynamo.frontend &

# --enforce-eager is added for quick deployment. for production use, need to remove this flag
export OTEL_SERVICE_NAME=dynamo-worker-decode
DYN_SYSTEM_PORT=${DYN_SYSTEM_PORT1:-8081} \
CUDA_VISIBLE_DEVICES=0,2 python3 -m dynamo.vllm \
    --model "$MODEL" \
    --tensor-parallel-size 2 \
    --enforce-eager \
    --otlp-traces-endpoint="$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" \
    --disaggregation-mode decode \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

export OTEL_SERVICE_NAME=dynamo-worker-prefill
DYN_SYSTEM_PORT=${DYN_SYSTEM_PORT2:-8082} \
VLLM_NIXL_SIDE_CHANNEL_PORT=20097 \
CUDA_VISIBLE_DEVICES=1 python3 -m dynamo.vllm \
    --model "$MODEL" \
    --enforce-eager \
    --otlp-traces-endpoint="$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" \
    --disaggregation-mode prefill \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' \
    --kv-events-config '{"publisher":"zmq","topic":"kv-events","endpoint":"tcp://*:20081","enable_kv_cache_events":true}' &

wait
