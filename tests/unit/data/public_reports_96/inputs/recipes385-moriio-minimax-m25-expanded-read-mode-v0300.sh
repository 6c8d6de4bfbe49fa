#!/bin/bash
# vllm-project/recipes PR #385 ("Update MiniMax-M2.md for Dis inference on AMD GPU", MiniMax/MiniMax-M2.md as the PR
# writes it, 2026-04-24): MiniMaxAI/MiniMax-M2.5 P/D on AMD GPUs with MoRIIOConnector, one `vllm serve` per node, the
# prefill node (NODE0) also running the proxy. The launch lines past --kv-transfer-config are filled: TP 4 (the recipe's
# ROCm TP4 line) and --block-size 32 (the PR's prefill block), run in vLLM's ROCm image v0.30.0.
# As the expanded variant, one change: both roles add "read_mode": true to kv_connector_extra_config (MoRIIO's READ
# mode, as vLLM's MoRI-IO guide shows it).

# prefill node (NODE0, 10.0.0.1)
docker run --rm --network host --ipc host --device /dev/kfd --device /dev/dri --device /dev/infiniband \
    --group-add video --cap-add IPC_LOCK -e VLLM_ROCM_USE_AITER=1 -v /data/hf:/root/.cache/huggingface \
    vllm/vllm-openai-rocm:v0.30.0 \
    vllm serve MiniMaxAI/MiniMax-M2.5 \
    --port 8000 \
    --trust-remote-code \
    --kv-transfer-config '{"kv_connector": "MoRIIOConnector", "kv_role": "kv_producer", "kv_connector_extra_config": {"proxy_ip": "10.0.0.1", "proxy_ping_port": "36367", "http_port": "8000", "read_mode": true}}' \
    --tensor-parallel-size 4 \
    --block-size 32

# decode node (10.0.0.2)
docker run --rm --network host --ipc host --device /dev/kfd --device /dev/dri --device /dev/infiniband \
    --group-add video --cap-add IPC_LOCK -e VLLM_ROCM_USE_AITER=1 -v /data/hf:/root/.cache/huggingface \
    vllm/vllm-openai-rocm:v0.30.0 \
    vllm serve MiniMaxAI/MiniMax-M2.5 \
    --port 8000 \
    --trust-remote-code \
    --kv-transfer-config '{"kv_connector": "MoRIIOConnector", "kv_role": "kv_consumer", "kv_connector_extra_config": {"proxy_ip": "10.0.0.1", "proxy_ping_port": "36367", "http_port": "8000", "read_mode": true}}' \
    --tensor-parallel-size 4 \
    --block-size 32
