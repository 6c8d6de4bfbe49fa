#!/bin/bash
# vllm-project/vllm#40826 ("[NIXL] Support heterogeneous split_k_and_v policies for NIXL workers"): the PR's test plan,
# Qwen/Qwen3-30B-A3B-Thinking-2507-FP8 on one H200 NVL host, prefill on GPU 0 and decode on GPU 1, TP 1 each,
# NixlConnector kv_both, prefix caching off, toy_proxy_server.py in front. Run on the release vllm/vllm-openai:v0.20.0.
# One change: the decode drops --attention-backend TRITON_ATTN, so both engines run the default backend.
set -xe

pip install vllm==0.20.0
export MODEL="Qwen/Qwen3-30B-A3B-Thinking-2507-FP8"

# prefill
CUDA_VISIBLE_DEVICES=0 \
UCX_NET_DEVICES=all \
VLLM_NIXL_SIDE_CHANNEL_PORT=5559 \
vllm serve "$MODEL" \
  --host 127.0.0.1 --port 8100 \
  --tensor-parallel-size 1 \
  --max-model-len 10240 \
  --gpu-memory-utilization 0.9 \
  --no-enable-prefix-caching \
  --kv-transfer-config \
      '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

# decode
CUDA_VISIBLE_DEVICES=1 \
UCX_NET_DEVICES=all \
VLLM_NIXL_SIDE_CHANNEL_PORT=5659 \
vllm serve "$MODEL" \
  --host 127.0.0.1 --port 8200 \
  --tensor-parallel-size 1 \
  --max-model-len 10240 \
  --gpu-memory-utilization 0.9 \
  --no-enable-prefix-caching \
  --kv-transfer-config \
      '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

python3 tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8192 \
  --prefiller-hosts 127.0.0.1 --prefiller-ports 8100 \
  --decoder-hosts 127.0.0.1 --decoder-ports 8200
