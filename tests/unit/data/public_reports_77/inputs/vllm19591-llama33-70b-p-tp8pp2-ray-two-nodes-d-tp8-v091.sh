#!/bin/bash
# vllm-project/vllm#19591 ("[P/D][Feature] Support using NIXL together with PP", opened 2025-06-13, not merged): "NIXLConnector
# only supports single-node usage and cannot be used across multiple nodes, especially in combination with PP". The shape
# it describes on vLLM 0.9.1: a prefill instance of TP 8 x PP 2 over two 8-GPU nodes (Ray executor, one PP stage per node)
# and a decode instance of TP 8 on one node, NixlConnector kv_producer / kv_consumer.

# prefill: Ray cluster 10.0.1.11 (head) + 10.0.1.12
ssh 10.0.1.11 "pip install vllm==0.9.1 && ray start --head --port 6379 --node-ip-address 10.0.1.11 --num-gpus 8"
ssh 10.0.1.12 "pip install vllm==0.9.1 && ray start --address 10.0.1.11:6379 --node-ip-address 10.0.1.12 --num-gpus 8"
ssh 10.0.1.11 "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.1.11 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve meta-llama/Llama-3.3-70B-Instruct --port 8100 --tensor-parallel-size 8 --pipeline-parallel-size 2 --distributed-executor-backend ray --max-model-len 16384 --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_producer\"}' > prefill.log 2>&1" &

# decode: one node
ssh 10.0.1.21 "pip install vllm==0.9.1 && VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.1.21 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve meta-llama/Llama-3.3-70B-Instruct --port 8200 --tensor-parallel-size 8 --max-model-len 16384 --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_consumer\"}' > decode.log 2>&1" &
wait
