#!/bin/bash
# ddps-lab/vllm-disaggregation disagg-exp/launch_configs.sh, "configC1" (same-node P/D on a 4x T4 g4dn node:
# prefill TP=2 on GPUs 0,1, decode TP=2 on GPUs 2,3, P2pNcclConnector PUT_ASYNC), the prefill and decode
# functions unrolled into one script with the script's defaults; the repository is a vLLM fork at
# v0.21.0-51-g054d1ee7 installed editable, here the release it is based on.
pip install vllm==0.21.0
export PYTHONHASHSEED=123
export VLLM_DISABLE_REQUEST_ID_RANDOMIZATION=1
export VLLM_HOST_IP=127.0.0.1
export NCCL_IB_DISABLE=1
export NCCL_SOCKET_IFNAME=enp39s0
export NCCL_DEBUG=WARN
export NCCL_CUMEM_ENABLE=0

# prefill
CUDA_VISIBLE_DEVICES=0,1 vllm serve \
    --model Qwen/Qwen2.5-3B-Instruct \
    --served-model-name qwen2.5-3b \
    --max-model-len 4096 \
    --gpu-memory-utilization 0.82 \
    --no-enable-prefix-caching \
    --dtype half \
    --max-num-seqs 512 \
    --no-enable-chunked-prefill \
    --tensor-parallel-size 2 \
    --pipeline-parallel-size 1 \
    --port 8100 \
    --kv-transfer-config '{"kv_connector":"P2pNcclConnector","kv_role":"kv_producer","kv_rank":0,"kv_parallel_size":2,"kv_buffer_size":"1e1","kv_port":"14600","kv_connector_extra_config":{"proxy_ip":"127.0.0.1","proxy_port":"30001","http_ip":"127.0.0.1","http_port":"8100","send_type":"PUT_ASYNC","nccl_num_channels":"8","mem_pool_size_gb":"8"}}' &

# decode
CUDA_VISIBLE_DEVICES=2,3 vllm serve \
    --model Qwen/Qwen2.5-3B-Instruct \
    --served-model-name qwen2.5-3b \
    --max-model-len 4096 \
    --gpu-memory-utilization 0.82 \
    --no-enable-prefix-caching \
    --dtype half \
    --max-num-seqs 512 \
    --tensor-parallel-size 1 \
    --pipeline-parallel-size 1 \
    --port 8200 \
    --kv-transfer-config '{"kv_connector":"P2pNcclConnector","kv_role":"kv_consumer","kv_rank":1,"kv_parallel_size":2,"kv_buffer_size":"2e9","kv_port":"14700","kv_connector_extra_config":{"proxy_ip":"127.0.0.1","proxy_port":"30001","http_ip":"127.0.0.1","http_port":"8200","send_type":"PUT_ASYNC","nccl_num_channels":"8","mem_pool_size_gb":"8"}}' &

wait
