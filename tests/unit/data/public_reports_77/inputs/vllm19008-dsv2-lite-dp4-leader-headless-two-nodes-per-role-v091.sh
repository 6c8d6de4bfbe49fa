#!/bin/bash
# vllm-project/vllm#19008 ("[Bugfix][Nixl] Fix DP Metadata Handshake", merged 2025-06-01, in vLLM 0.9.1): the PR's sample
# Justfile, recipes expanded. Each role is ONE data-parallel engine of DP 4 split over two launches, as over two nodes: a
# leader (DP ranks 0-1, API server) and a headless worker (--headless --data-parallel-start-rank 2, ranks 2-3), joined at
# --data-parallel-address / --data-parallel-rpc-port; here all on one 8-GPU host. DeepSeek-Coder-V2-Lite-Instruct with
# expert parallelism, NixlConnector kv_both. `just port N` is the Justfile's port_allocator.py (md5 of "rshaw:N"), its
# values written out: 5557 -> 4378, 5558 -> 53522, 5559 -> 14489, 5560 -> 50485, 5555 -> 46042, 5556 -> 61079,
# 8100 -> 29907, 8101 -> 14902, 8200 -> 37605, 8201 -> 46021.
# One change: each launch on its own node, as the recipes are meant for (prefill leader 10.0.2.11, prefill worker
# 10.0.2.12, decode leader 10.0.2.21, decode worker 10.0.2.22), --data-parallel-address the leader's IP and
# VLLM_NIXL_SIDE_CHANNEL_HOST the node's own IP.

# p_leader
ssh 10.0.2.11 "pip install vllm==0.9.1 && VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.2.11 VLLM_NIXL_SIDE_CHANNEL_PORT=4378 CUDA_VISIBLE_DEVICES=0,1 vllm serve deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct --port 29907 --disable-log-requests --enforce-eager --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}' --enable-expert-parallel --tensor-parallel-size 1 --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-address 10.0.2.11 --data-parallel-rpc-port 46042 --trust-remote-code" &

# p_worker
ssh 10.0.2.12 "pip install vllm==0.9.1 && VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.2.12 VLLM_NIXL_SIDE_CHANNEL_PORT=53522 CUDA_VISIBLE_DEVICES=0,1 vllm serve deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct --port 14902 --disable-log-requests --enforce-eager --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}' --enable-expert-parallel --tensor-parallel-size 1 --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-start-rank 2 --data-parallel-address 10.0.2.11 --data-parallel-rpc-port 46042 --headless --trust-remote-code" &

# d_leader
ssh 10.0.2.21 "pip install vllm==0.9.1 && VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.2.21 VLLM_NIXL_SIDE_CHANNEL_PORT=14489 CUDA_VISIBLE_DEVICES=0,1 vllm serve deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct --port 37605 --disable-log-requests --enforce-eager --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}' --enable-expert-parallel --tensor-parallel-size 1 --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-address 10.0.2.21 --data-parallel-rpc-port 61079 --trust-remote-code" &

# d_worker
ssh 10.0.2.22 "pip install vllm==0.9.1 && VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.2.22 VLLM_NIXL_SIDE_CHANNEL_PORT=50485 CUDA_VISIBLE_DEVICES=0,1 vllm serve deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct --port 46021 --disable-log-requests --enforce-eager --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}' --enable-expert-parallel --tensor-parallel-size 1 --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-start-rank 2 --data-parallel-address 10.0.2.21 --data-parallel-rpc-port 61079 --headless --trust-remote-code" &

# proxy
ssh 10.0.2.11 "python /home/rshaw/vllm/tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 54358 --prefiller-host 10.0.2.11 --prefiller-port 29907 --decoder-host 10.0.2.21 --decoder-port 37605" &
wait
