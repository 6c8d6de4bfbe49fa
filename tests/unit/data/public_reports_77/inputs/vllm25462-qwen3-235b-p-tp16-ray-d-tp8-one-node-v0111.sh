#!/bin/bash
# vllm-project/vllm#25462 ("How Do I use Ray to deploy a multi node TP Disaggregated Prefilling?"): 1P1D where prefill and
# decode each run tensor parallelism only, across two 8-GPU nodes (TP 16) on a Ray cluster, NixlConnector between them
# ("ray + 2 nodes + 16TP + any kv connector fails"). As the vllm==0.11.1 entry, one change: the decode fits on one node (TP 8 on 10.0.0.21, no Ray worker node).
# Prefill Ray cluster: 10.0.0.11 (head) + 10.0.0.12; decode on 10.0.0.21 alone.

# prefill: Ray head, then the worker node joins, then vllm serve on the head
ssh 10.0.0.11 "pip install vllm==0.11.1 && ray start --head --port 6379 --node-ip-address 10.0.0.11 --num-gpus 8"
ssh 10.0.0.12 "pip install vllm==0.11.1 && ray start --address 10.0.0.11:6379 --node-ip-address 10.0.0.12 --num-gpus 8"
ssh 10.0.0.11 "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.11 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 UCX_NET_DEVICES=all vllm serve Qwen/Qwen3-235B-A22B --port 8100 --tensor-parallel-size 16 --distributed-executor-backend ray --max-model-len 32768 --gpu-memory-utilization 0.9 --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_producer\"}' > prefill.log 2>&1" &

# decode: one 8-GPU node
ssh 10.0.0.21 "pip install vllm==0.11.1 && ray start --head --port 6379 --node-ip-address 10.0.0.21 --num-gpus 8"
ssh 10.0.0.21 "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.21 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 UCX_NET_DEVICES=all vllm serve Qwen/Qwen3-235B-A22B --port 8200 --tensor-parallel-size 8 --max-model-len 32768 --gpu-memory-utilization 0.9 --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_consumer\"}' > decode.log 2>&1" &
wait
