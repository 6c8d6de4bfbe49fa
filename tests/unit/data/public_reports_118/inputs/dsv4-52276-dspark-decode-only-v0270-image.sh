#!/bin/bash
# vllm-project/vllm issue #52276 ("DeepSeek-V4 NIXL failure returns corrupted reasoning with empty content"):
# both roles on vllm/vllm-openai:v0.27.0-cu129-ubuntu2404 (the reporter overlaid source 793ca6998, vLLM
# 0.26.1rc1.dev657), TP 8 on each, NixlConnector with HMA, DSpark (7 tokens) on the decode only.
MODEL=deepseek-ai/DeepSeek-V4-Flash

docker run -d --gpus '"device=0,1,2,3,4,5,6,7"' --ipc=host --network host --name dsv4-prefill \
  -e VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.11 -e VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
  vllm/vllm-openai:v0.27.0-cu129-ubuntu2404 "$MODEL" \
  --port 8100 \
  --tensor-parallel-size 8 \
  --trust-remote-code \
  --reasoning-parser deepseek_v4 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}'

docker run -d --gpus '"device=0,1,2,3,4,5,6,7"' --ipc=host --network host --name dsv4-decode \
  -e VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.12 -e VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
  -e VLLM_USE_V2_MODEL_RUNNER=1 \
  vllm/vllm-openai:v0.27.0-cu129-ubuntu2404 "$MODEL" \
  --port 8200 \
  --tensor-parallel-size 8 \
  --trust-remote-code \
  --reasoning-parser deepseek_v4 \
  --speculative-config '{"method":"dspark","num_speculative_tokens":7}' \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}'
