#!/bin/bash
set -xe
# vllm-project/vllm v0.34.0 tests/v1/kv_connector/nixl_integration/run_mamba_prefix_cache_test.sh
# (1P1D Mamba hybrid prefix-cache test), its defaults filled in; run as a user runs it on one host.
# Changes from the 0.26.0 copy: the decode without prefix caching.
pip install vllm==0.26.0
MODEL="ibm-granite/granite-4.0-h-tiny"
GPU_MEMORY_UTILIZATION=0.8
KV_CONFIG='{"kv_connector":"NixlConnector","kv_role":"kv_both"}'

# Start prefill instance
CUDA_VISIBLE_DEVICES=0 \
VLLM_SSM_CONV_STATE_LAYOUT=DS \
VLLM_KV_CACHE_LAYOUT=HND \
VLLM_NIXL_SIDE_CHANNEL_PORT=5559 \
vllm serve "$MODEL" \
  --port 8001 \
  --enforce-eager \
  --gpu-memory-utilization "$GPU_MEMORY_UTILIZATION" \
  --max-model-len 16384 \
  --block-size 128 \
  --trust-remote-code \
  --enable-prefix-caching \
  --kv-transfer-config "$KV_CONFIG" \
  --attention-backend FLASHINFER &

# Start decode instance
CUDA_VISIBLE_DEVICES=1 \
VLLM_SSM_CONV_STATE_LAYOUT=DS \
VLLM_KV_CACHE_LAYOUT=HND \
VLLM_NIXL_SIDE_CHANNEL_PORT=6000 \
vllm serve "$MODEL" \
  --port 8002 \
  --enforce-eager \
  --gpu-memory-utilization "$GPU_MEMORY_UTILIZATION" \
  --max-model-len 16384 \
  --block-size 128 \
  --trust-remote-code \
  --no-enable-prefix-caching \
  --kv-transfer-config "$KV_CONFIG" \
  --attention-backend FLASHINFER &

# Start proxy
python3 tests/v1/kv_connector/nixl_integration/toy_proxy_server.py \
  --port 8192 \
  --prefiller-ports 8001 \
  --decoder-ports 8002 &
wait
