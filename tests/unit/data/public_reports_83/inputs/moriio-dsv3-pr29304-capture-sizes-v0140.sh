#!/bin/bash
# vllm-project/vllm PR #29304 ([ROCm][PD] add moriio kv connector), the description's 1P1D launch commands:
# DeepSeek-V3 on two 8-GPU MI300X nodes, DP 8 x TP 1 with expert parallel per role, MoRIIOConnector producer/consumer,
# each command run in vLLM's ROCm image on its own node. The proxy (examples/.../moriio_toy_proxy_server.py) is left out.
# Run on vllm/vllm-openai-rocm:v0.14.0; one change: the decode's --cuda-graph-sizes written as --cudagraph-capture-sizes.
MODEL_PATH=/mnt/m2m_nobackup/models/deepseek-ai/DeepSeek-V3
PROXY_IP=10.0.0.10

# prefill node (10.0.0.11)
docker run --rm --network host --ipc host --device /dev/kfd --device /dev/dri --device /dev/infiniband \
    --group-add video --cap-add IPC_LOCK --shm-size 64G -v /mnt/m2m_nobackup:/mnt/m2m_nobackup \
    -e VLLM_ALL2ALL_BACKEND=naive -e VLLM_USE_V1=1 -e VLLM_ROCM_USE_AITER=1 \
    vllm/vllm-openai-rocm:v0.14.0 \
    vllm serve $MODEL_PATH \
     -tp 1 \
     -dp 8 \
     --enable-expert-parallel \
     --port 20005 \
     --block-size 1 \
     --no-enable-prefix-caching \
     --max-num-batched-tokens 4096 \
     --distributed-executor-backend mp \
     --gpu_memory_utilization 0.85 \
     --max-model-len 4096 \
     --enforce-eager \
     --max_num_seqs 64 \
     --no-enable-prefix-caching \
     --kv-transfer-config '{"kv_connector":"MoRIIOConnector","kv_role":"kv_producer","kv_connector_extra_config":{"proxy_ip":"10.0.0.10","proxy_ping_port":"36367","http_port":"20005"}}'

# decode node (10.0.0.12)
docker run --rm --network host --ipc host --device /dev/kfd --device /dev/dri --device /dev/infiniband \
    --group-add video --cap-add IPC_LOCK --shm-size 64G -v /mnt/m2m_nobackup:/mnt/m2m_nobackup \
    -e VLLM_ALL2ALL_BACKEND=naive -e VLLM_USE_V1=1 -e VLLM_ROCM_USE_AITER=1 \
    vllm/vllm-openai-rocm:v0.14.0 \
    vllm serve $MODEL_PATH \
     -tp 1 \
     -dp 8 \
     --enable-expert-parallel \
     --port 40005 \
     --block-size 1 \
     --no-enable-prefix-caching \
     --max-num-batched-tokens 4096 \
     --distributed-executor-backend mp \
     --gpu_memory_utilization 0.85 \
     --max-model-len 8200 \
     --cudagraph-capture-sizes 1 256 \
     --trust-remote-code \
     --max_num_seqs 256 \
     --kv-transfer-config '{"kv_connector":"MoRIIOConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"proxy_ip":"10.0.0.10","proxy_ping_port":"36367","http_port":"40005"}}'
