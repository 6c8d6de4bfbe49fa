#!/bin/bash
# ai-dynamo/dynamo lib/sidecar/vllm/launch/disagg_lora.sh (350347e): prefill/decode LoRA serving with NIXL on 2 GPUs of
# one host, each role a vLLM Rust frontend (vllm-rs serve ... -- <engine args>) with a Dynamo gRPC sidecar; adapters
# are loaded at run time on BOTH workers through the sidecars' /v1/loras. The script's defaults, expanded
# (MAX_MODEL_LEN 4096, MAX_CONCURRENT_SEQS 2, MAX_LORAS 4, MAX_LORA_RANK 64, no GPU_MEM_ARGS from gpu_utils.sh).
pip install vllm==0.34.0 ai-dynamo
MODEL=Qwen/Qwen3-0.6B
export DYN_LORA_ENABLED=true
export VLLM_ALLOW_RUNTIME_LORA_UPDATING=true
export DYN_LORA_PATH=/tmp/dynamo_loras_minio
export VLLM_RUNTIME_LORA_ALLOWED_PATH_PREFIXES=/tmp/dynamo_loras_minio:/root/.cache/huggingface/hub

python -m dynamo.frontend &

# decode
CUDA_VISIBLE_DEVICES=0 \
VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
vllm-rs serve "$MODEL" \
    --host 127.0.0.1 \
    --port 8100 \
    --grpc-port 50051 \
    --max-model-len 4096 \
    -- \
    --enforce-eager \
    --max-num-seqs 2 \
    --enable-lora \
    --max-loras 4 \
    --max-lora-rank 64 \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' \
    --kv-cache-memory-bytes 1119388000 --gpu-memory-utilization 0.01 &

# prefill
CUDA_VISIBLE_DEVICES=1 \
VLLM_NIXL_SIDE_CHANNEL_PORT=20097 \
vllm-rs serve "$MODEL" \
    --host 127.0.0.1 \
    --port 8110 \
    --grpc-port 50052 \
    --max-model-len 4096 \
    -- \
    --enforce-eager \
    --max-num-seqs 2 \
    --enable-lora \
    --max-loras 4 \
    --max-lora-rank 64 \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' \
    --kv-events-config '{"publisher":"zmq","topic":"kv-events","endpoint":"ipc:///tmp/dynamo-vllm-kv.abc123/events","enable_kv_cache_events":true}' \
    --kv-cache-memory-bytes 1119388000 --gpu-memory-utilization 0.01 &

DYN_SYSTEM_PORT=8081 dynamo-vllm-sidecar --grpc-endpoint 127.0.0.1:50051 --disaggregation-mode decode &
DYN_SYSTEM_PORT=8082 dynamo-vllm-sidecar --grpc-endpoint 127.0.0.1:50052 --component prefill --disaggregation-mode prefill &
wait
