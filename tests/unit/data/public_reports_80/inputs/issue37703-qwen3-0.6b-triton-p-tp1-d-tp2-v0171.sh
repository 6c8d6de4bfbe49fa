#!/bin/bash
# vllm-project/vllm#37703 ("[Bug][NIXL]: TRITON_ATTN ignores VLLM_KV_CACHE_LAYOUT=HND, breaks heterogeneous TP with NIXL"):
# heterogeneous TP with NIXL on an NVIDIA host with the Triton backend named on both engines and VLLM_KV_CACHE_LAYOUT=HND,
# prefill TP 1 and decode TP 2 as the fix's sweep (PREFILLER_TP_SIZE=1 DECODER_TP_SIZE=2,
# VLLM_SERVE_EXTRA_ARGS=--attention-backend,TRITON_ATTN), run_accuracy_test.sh's default model Qwen/Qwen3-0.6B.
# AS PUBLISHED, on the release the report ran (0.17.2rc1.dev: vLLM 0.17.1).
set -xe

pip install vllm==0.17.1
MODEL=Qwen/Qwen3-0.6B

CUDA_VISIBLE_DEVICES=0 VLLM_KV_CACHE_LAYOUT=HND VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve $MODEL \
  --port 8100 \
  --enforce-eager \
  --gpu-memory-utilization 0.6 \
  --tensor-parallel-size 1 \
  --attention-backend TRITON_ATTN \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

CUDA_VISIBLE_DEVICES=1,2 VLLM_KV_CACHE_LAYOUT=HND VLLM_NIXL_SIDE_CHANNEL_PORT=5659 vllm serve $MODEL \
  --port 8200 \
  --enforce-eager \
  --gpu-memory-utilization 0.6 \
  --tensor-parallel-size 2 \
  --attention-backend TRITON_ATTN \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

python3 tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8192 \
  --prefiller-hosts localhost --prefiller-ports 8100 \
  --decoder-hosts localhost --decoder-ports 8200
