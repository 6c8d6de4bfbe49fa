#!/bin/bash
# vllm-project/vllm#20980: one prefill and one decode instance, each a vLLM engine (TP 2, Ray executor) on its own
# node's Ray cluster, NixlConnector between them.

# prefill instance on 10.18.2.19
pip install vllm==0.20.0
ray start --head --port 6379
RAY_DEDUP_LOGS=0 GLOO_SOCKET_IFNAME=eth0 NCCL_NET_GDR_LEVEL=SYS NCCL_IB_DISABLE=0 NCCL_CUMEM_ENABLE=0 NCCL_IC_HCA=mlx5 NCCL_DEBUG=TRACE VLLM_LOGGING_LEVEL=DEBUG VLLM_NIXL_SIDE_CHANNEL_HOST=10.18.2.19 VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve /models/Qwen3-8B --served-model-name "qwen3" --port 8100 --enforce-eager --disable-log-requests --gpu-memory-utilization 0.9 --tensor-parallel-size 2 --distributed-executor-backend ray --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' > prefill.log 2>&1 &

# decode instance on 10.18.2.20, started over ssh
ssh 10.18.2.20 "pip install vllm==0.20.0 && ray start --head --port 6379 && RAY_DEDUP_LOGS=0 GLOO_SOCKET_IFNAME=eth0 NCCL_NET_GDR_LEVEL=SYS NCCL_IB_DISABLE=0 NCCL_CUMEM_ENABLE=0 NCCL_IC_HCA=mlx5 NCCL_DEBUG=TRACE VLLM_LOGGING_LEVEL=DEBUG VLLM_NIXL_SIDE_CHANNEL_HOST=10.18.2.20 VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve /models/Qwen3-8B --enforce-eager --served-model-name \"qwen3\" --port 8100 --disable-log-requests --gpu-memory-utilization 0.9 --tensor-parallel-size 2 --distributed-executor-backend ray --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}' > decode.log 2>&1" &
wait
