#!/bin/bash
# Qwen3.5-397B-A17B 1P1D with MTP, the vllm-ascend tutorial's P/D section (5.5) on NVIDIA nodes with NixlConnector.
docker run --rm --gpus all --network host --ipc=host -e VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1 vllm/vllm-openai:v0.34.0 \
  vllm serve Qwen/Qwen3.5-397B-A17B --port 8100 --tensor-parallel-size 8 --max-model-len 32768 --trust-remote-code \
  --speculative-config '{"method": "qwen3_5_mtp", "num_speculative_tokens": 1}' \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
docker run --rm --gpus all --network host --ipc=host -e VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2 vllm/vllm-openai:v0.34.0 \
  vllm serve Qwen/Qwen3.5-397B-A17B --port 8200 --tensor-parallel-size 8 --max-model-len 32768 --trust-remote-code \
  --speculative-config '{"method": "qwen3_5_mtp", "num_speculative_tokens": 3}' \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
