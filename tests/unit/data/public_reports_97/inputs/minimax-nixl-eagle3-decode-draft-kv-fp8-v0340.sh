#!/bin/bash
# MiniMax-M2.5 1P1D (DP2/TP8/EP16 per role) from vllm-ascend's minimax_m2_pd templates, on NVIDIA nodes with NixlConnector.
# prefill node (10.0.0.1)
docker run --rm --gpus all --network host --ipc=host -v /models:/models -e VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1 vllm/vllm-openai:v0.34.0 \
  vllm serve MiniMaxAI/MiniMax-M2.5 --port 8100 --data-parallel-size 2 --tensor-parallel-size 8 --enable-expert-parallel \
  --served-model-name minimax --max-model-len 200000 --max-num-batched-tokens 16384 --max-num-seqs 64 --trust-remote-code \
  --gpu-memory-utilization 0.75 --enforce-eager \
  --speculative-config '{"method": "eagle3", "model": "/models/MiniMax-M2.5-eagle-model-0318", "num_speculative_tokens": 1}' \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
# decode node (10.0.0.2)
docker run --rm --gpus all --network host --ipc=host -v /models:/models -e VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2 vllm/vllm-openai:v0.34.0 \
  vllm serve MiniMaxAI/MiniMax-M2.5 --port 8200 --data-parallel-size 2 --tensor-parallel-size 8 --enable-expert-parallel \
  --served-model-name minimax --max-model-len 200000 --max-num-batched-tokens 16384 --max-num-seqs 16 --trust-remote-code \
  --no-enable-prefix-caching --gpu-memory-utilization 0.75 --compilation-config '{"cudagraph_mode":"FULL_DECODE_ONLY"}' \
  --speculative-config '{"method": "eagle3", "model": "/models/MiniMax-M2.5-eagle-model-0318", "num_speculative_tokens": 3, "kv_cache_dtype": "fp8"}' \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
