#!/bin/bash
set -ex
# vllm-project/vllm v0.34.0 tests/v1/kv_connector/nixl_integration/spec_decode_acceptance_test.sh
# (NixlConnector P/D + spec decode acceptance test), one prefill and one decode at TP 1, with the values of
# config_sweep_spec_decode_test.sh's eagle3 configuration filled in.
# One change: no --speculative-config on the prefill.
pip install vllm==0.34.0

env CUDA_VISIBLE_DEVICES=0 \
  VLLM_KV_CACHE_LAYOUT='LBHNC' \
  UCX_NET_DEVICES=all \
  VLLM_NIXL_SIDE_CHANNEL_HOST=127.0.0.1 \
  VLLM_NIXL_SIDE_CHANNEL_PORT=5559 \
  vllm serve "meta-llama/Llama-3.1-8B-Instruct" \
  --port 8100 \
  --enforce-eager \
  --max-model-len 16384 \
  --block-size 16 \
  --gpu-memory-utilization 0.7 \
  --tensor-parallel-size 1 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}' \
  --attention-backend FLASH_ATTN &

env CUDA_VISIBLE_DEVICES=1 \
  VLLM_KV_CACHE_LAYOUT='LBHNC' \
  UCX_NET_DEVICES=all \
  VLLM_NIXL_SIDE_CHANNEL_HOST=127.0.0.1 \
  VLLM_NIXL_SIDE_CHANNEL_PORT=5659 \
  vllm serve "meta-llama/Llama-3.1-8B-Instruct" \
  --port 8200 \
  --enforce-eager \
  --max-model-len 16384 \
  --block-size 16 \
  --gpu-memory-utilization 0.7 \
  --tensor-parallel-size 1 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}' \
  --speculative-config '{"method":"eagle3","model":"RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3","num_speculative_tokens":3,"max_model_len":16384}' \
  --attention-backend FLASH_ATTN &

python3 tests/v1/kv_connector/nixl_integration/toy_proxy_server.py \
  --port 8192 \
  --prefiller-hosts 127.0.0.1 \
  --prefiller-ports 8100 \
  --decoder-hosts 127.0.0.1 \
  --decoder-ports 8200 &
wait
