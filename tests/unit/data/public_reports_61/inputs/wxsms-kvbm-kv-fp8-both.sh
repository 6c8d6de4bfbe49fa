#!/bin/bash
pip install vllm==0.11.0
set -e
trap 'echo Cleaning up...; kill 0' EXIT

python -m dynamo.frontend --router-mode kv --http-port=8000 &

CUDA_VISIBLE_DEVICES=0 python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B --connector nixl --enforce-eager --kv-cache-dtype fp8 &

DYN_KVBM_CPU_CACHE_GB=20 \
CUDA_VISIBLE_DEVICES=1 \
  python3 -m dynamo.vllm \
    --model Qwen/Qwen3-0.6B \
    --is-prefill-worker \
    --connector kvbm nixl \
    --enforce-eager \
    --kv-cache-dtype fp8
