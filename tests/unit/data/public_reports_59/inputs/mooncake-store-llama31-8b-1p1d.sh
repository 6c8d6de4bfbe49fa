#!/bin/bash
set -eux

apt-get install --yes iproute2

LOCAL_IP=$(ip route get 1.2.3.4 | cut -d' ' -f7)
MODEL="meta-llama/Meta-Llama-3.1-8B-Instruct"

etcd --listen-client-urls http://${LOCAL_IP}:2379 --advertise-client-urls http://${LOCAL_IP}:2379 &
mooncake_master --port 50001 &

# start_vllm "instance_1" 8100 "0" kv_producer 0 ""
CUDA_VISIBLE_DEVICES=0 LD_LIBRARY_PATH=/usr/local/lib/:$LD_LIBRARY_PATH MOONCAKE_CONFIG_PATH=./mooncake.json vllm serve meta-llama/Meta-Llama-3.1-8B-Instruct \
    --port 8100 \
    --max-model-len 12000 \
    --max-num-batched-tokens 12000 \
    --gpu-memory-utilization 0.95 \
    --kv-transfer-config '{"kv_connector":"MooncakeStoreConnector", "kv_role":"kv_producer", "kv_rank":0, "kv_parallel_size":2}' &

# start_vllm "instance_2" 8200 "4" kv_consumer 1 ""
CUDA_VISIBLE_DEVICES=4 LD_LIBRARY_PATH=/usr/local/lib/:$LD_LIBRARY_PATH MOONCAKE_CONFIG_PATH=./mooncake.json vllm serve meta-llama/Meta-Llama-3.1-8B-Instruct \
    --port 8200 \
    --max-model-len 12000 \
    --max-num-batched-tokens 12000 \
    --gpu-memory-utilization 0.95 \
    --kv-transfer-config '{"kv_connector":"MooncakeStoreConnector", "kv_role":"kv_consumer", "kv_rank":1, "kv_parallel_size":2}' &
