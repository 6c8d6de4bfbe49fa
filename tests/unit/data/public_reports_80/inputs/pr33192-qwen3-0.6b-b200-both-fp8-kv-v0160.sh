#!/bin/bash
# vllm-project/vllm#33192 ("[Bugfix] Disable TRTLLM attention when KV transfer is enabled"): the PR's manual test on a
# DGX B200, Qwen/Qwen3-0.6B with NixlConnector kv_both, --enforce-eager, --block-size 64, gpu-memory-utilization 0.3
# (FlashInfer is the default backend on Blackwell). The PR shows the prefill launch; the decode is the same launch on
# GPU 1 with its own HTTP and side-channel ports, behind toy_proxy_server.py, on the release that carries the fix (0.16.0).
# One change: both engines add --kv-cache-dtype fp8.
set -xe

pip install vllm==0.16.0

CUDA_VISIBLE_DEVICES=0 \
VLLM_NIXL_SIDE_CHANNEL_PORT=5559 \
vllm serve Qwen/Qwen3-0.6B \
  --port 8100 \
  --enforce-eager \
  --block-size 64 \
  --gpu-memory-utilization 0.3 --kv-cache-dtype fp8 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

CUDA_VISIBLE_DEVICES=1 \
VLLM_NIXL_SIDE_CHANNEL_PORT=5659 \
vllm serve Qwen/Qwen3-0.6B \
  --port 8200 \
  --enforce-eager \
  --block-size 64 \
  --gpu-memory-utilization 0.3 --kv-cache-dtype fp8 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

python3 tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8192 \
  --prefiller-hosts localhost --prefiller-ports 8100 \
  --decoder-hosts localhost --decoder-ports 8200
