#!/bin/bash
# SemiAnalysisAI/InferenceX PR #1762 ("minimaxm3-fp8-mi355x-vllm-disagg", merged 2026-06-14): MiniMax-M3 MXFP8 P/D on
# MI355X with the MoRI-IO KV connector on the day-zero ROCm image vllm/vllm-openai-rocm:minimax-m3, the asymmetric
# "1P TP4 + 1D TP8" layout (server_vllm.sh rewrites models_vllm.yaml's --tensor-parallel-size 8 placeholder to each
# role's TP). Filled: the flags as the PR and its sibling #1914 name them (--block-size 128, --language-model-only,
# --no-enable-prefix-caching), hosts and ports; the proxy and benchmark left out.

# prefill node (10.0.0.1), GPUs 0-3
docker run --rm --network host --ipc host --device /dev/kfd --device /dev/dri --device /dev/infiniband \
    --group-add video --cap-add IPC_LOCK -e HIP_VISIBLE_DEVICES=0,1,2,3 -e VLLM_ROCM_USE_AITER=1 \
    -v /data/hf:/root/.cache/huggingface \
    vllm/vllm-openai-rocm:minimax-m3 \
    vllm serve MiniMaxAI/MiniMax-M3-MXFP8 --port 8100 --trust-remote-code --tensor-parallel-size 4 \
    --block-size 128 --language-model-only --no-enable-prefix-caching --gpu-memory-utilization 0.90 \
    --kv-transfer-config '{"kv_connector":"MoRIIOConnector","kv_role":"kv_producer","kv_connector_extra_config":{"proxy_ip":"10.0.0.1","proxy_ping_port":"36367","http_port":"8100"}}' &

# decode node (10.0.0.2), GPUs 0-7
docker run --rm --network host --ipc host --device /dev/kfd --device /dev/dri --device /dev/infiniband \
    --group-add video --cap-add IPC_LOCK -e VLLM_ROCM_USE_AITER=1 \
    -v /data/hf:/root/.cache/huggingface \
    vllm/vllm-openai-rocm:minimax-m3 \
    vllm serve MiniMaxAI/MiniMax-M3-MXFP8 --port 8200 --trust-remote-code --tensor-parallel-size 8 \
    --block-size 128 --language-model-only --no-enable-prefix-caching --gpu-memory-utilization 0.90 \
    --kv-transfer-config '{"kv_connector":"MoRIIOConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"proxy_ip":"10.0.0.1","proxy_ping_port":"36367","http_port":"8200"}}' &
wait
