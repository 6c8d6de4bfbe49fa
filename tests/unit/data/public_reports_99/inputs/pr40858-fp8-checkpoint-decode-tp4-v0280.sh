#!/bin/bash
# vllm-project/vllm PR #40858 ("[NIXL][TURBOQUANT] Support turboquant in NIXL KV connector"), comment of 2026-05-21:
# H200 NVL benchmark, one prefill and one decode on one host (GPUs 0 and 1), NixlConnector kv_producer / kv_consumer,
# TurboQuant KV cache on both, the handshake compatibility check turned off (enforce_handshake_compat false).
# vLLM 0.28.0; both roles serve the FP8 block-quantized re-publication, the decode at TP 4 (GPUs 1-4).
pip install vllm==0.28.0
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
  --kv-cache-dtype turboquant_4bit_nc \
  --kv-transfer-config \
      '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail",   "enable_permute_local_kv":"True","kv_connector_extra_config":{"enforce_handshake_compat":false}}' &

# decode
CUDA_VISIBLE_DEVICES=1,2,3,4 \
UCX_NET_DEVICES=all \
VLLM_NIXL_SIDE_CHANNEL_PORT=5659 \
vllm serve "$MODEL" \
  --host 127.0.0.1 --port 8200 \
  --tensor-parallel-size 4 \
  --max-model-len 10240 \
  --gpu-memory-utilization 0.9 \
  --no-enable-prefix-caching \
  --kv-cache-dtype turboquant_4bit_nc \
  --kv-transfer-config \
      '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail",   "enable_permute_local_kv":"True","kv_connector_extra_config":{"enforce_handshake_compat":false}}' &

python3 toy_proxy_server.py --port 8000 --prefiller-hosts 127.0.0.1 --prefiller-ports 8100 --decoder-hosts 127.0.0.1 --decoder-ports 8200 &
wait
