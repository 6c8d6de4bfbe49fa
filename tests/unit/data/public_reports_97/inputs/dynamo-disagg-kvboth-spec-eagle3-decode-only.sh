#!/bin/bash
# agg_spec_decoding.sh split into a prefill and a decode worker (--disaggregation-mode), each with the
# --kv-transfer-config Dynamo 1.x asks for.
set -e
trap 'echo Cleaning up...; kill 0' EXIT

python -m dynamo.frontend --http-port=8000 &

DYN_SYSTEM_ENABLED=true DYN_SYSTEM_PORT=8081 \
CUDA_VISIBLE_DEVICES=0 python -m dynamo.vllm \
    --model meta-llama/Meta-Llama-3.1-8B-Instruct \
    --enforce-eager \
    --disaggregation-mode decode \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' \
    --speculative_config '{"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "draft_tensor_parallel_size": 1, "num_speculative_tokens": 2, "method": "eagle3"}' \
    --gpu-memory-utilization 0.8 &

DYN_SYSTEM_ENABLED=true DYN_SYSTEM_PORT=8082 \
VLLM_NIXL_SIDE_CHANNEL_PORT=20097 \
CUDA_VISIBLE_DEVICES=1 python -m dynamo.vllm \
    --model meta-llama/Meta-Llama-3.1-8B-Instruct \
    --enforce-eager \
    --disaggregation-mode prefill \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' \
    --gpu-memory-utilization 0.8 &
wait
