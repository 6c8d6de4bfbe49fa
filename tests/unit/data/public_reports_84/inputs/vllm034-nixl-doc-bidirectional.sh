#!/bin/bash
# vllm-project/vllm docs/features/nixl_connector_usage.md at v0.34.0, "Bidirectional KV Transfer (Multi-turn)":
# bidirectional_kv_xfer on both P and D, with <MODEL> as the guide's basic example's Qwen/Qwen3-0.6B and the basic
# example's GPUs and side-channel ports.
pip install vllm==0.34.0

# Prefill instance
CUDA_VISIBLE_DEVICES=0 UCX_NET_DEVICES=all VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
vllm serve Qwen/Qwen3-0.6B --port 8100 \
  --kv-transfer-config '{
    "kv_connector": "NixlConnector",
    "kv_role": "kv_producer",
    "kv_connector_extra_config": {
      "bidirectional_kv_xfer": true
    }
  }' &

# Decode instance
CUDA_VISIBLE_DEVICES=1 UCX_NET_DEVICES=all VLLM_NIXL_SIDE_CHANNEL_PORT=5601 \
vllm serve Qwen/Qwen3-0.6B --port 8200 \
  --kv-transfer-config '{
    "kv_connector": "NixlConnector",
    "kv_role": "kv_consumer",
    "kv_connector_extra_config": {
      "bidirectional_kv_xfer": true
    }
  }' &
wait
