#!/bin/bash
# vllm-project/vllm#19280 ("[V1][Kernel] Flashinfer HND KV cache layout"): its test launch sets the KV layout by
# environment next to VLLM_ATTENTION_BACKEND=FLASHINFER (FLASHINFER_KV_CACHE_LAYOUT=HND, since renamed VLLM_KV_CACHE_LAYOUT).
# Launched as tests/v1/kv_connector/nixl_integration/run_accuracy_test.sh launches its engines (one host, prefill TP 1 on
# GPU 0, decode TP 2 on GPUs 1,2, distinct HTTP and side-channel ports, toy_proxy_server.py in front), Qwen/Qwen3-0.6B.
# One change: the prefill sets VLLM_KV_CACHE_LAYOUT=NHD (the layout FlashInfer used before the PR), the decode keeps HND.
set -xe

pip install vllm==0.10.2
MODEL=Qwen/Qwen3-0.6B

CUDA_VISIBLE_DEVICES=0 VLLM_ATTENTION_BACKEND=FLASHINFER VLLM_KV_CACHE_LAYOUT=NHD VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve $MODEL \
  --port 8100 \
  --enforce-eager \
  --gpu-memory-utilization 0.2 \
  --tensor-parallel-size 1 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

CUDA_VISIBLE_DEVICES=1,2 VLLM_ATTENTION_BACKEND=FLASHINFER VLLM_KV_CACHE_LAYOUT=HND VLLM_NIXL_SIDE_CHANNEL_PORT=5659 vllm serve $MODEL \
  --port 8200 \
  --enforce-eager \
  --gpu-memory-utilization 0.2 \
  --tensor-parallel-size 2 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

python3 tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8192 \
  --prefiller-hosts localhost --prefiller-ports 8100 \
  --decoder-hosts localhost --decoder-ports 8200
