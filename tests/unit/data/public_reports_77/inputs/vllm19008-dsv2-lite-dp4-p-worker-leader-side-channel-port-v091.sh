#!/bin/bash
# vllm-project/vllm#19008 ("[Bugfix][Nixl] Fix DP Metadata Handshake", merged 2025-06-01, in vLLM 0.9.1): the PR's sample
# Justfile, recipes expanded. Each role is ONE data-parallel engine of DP 4 split over two launches, as over two nodes: a
# leader (DP ranks 0-1, API server) and a headless worker (--headless --data-parallel-start-rank 2, ranks 2-3), joined at
# --data-parallel-address / --data-parallel-rpc-port; here all on one 8-GPU host. DeepSeek-Coder-V2-Lite-Instruct with
# expert parallelism, NixlConnector kv_both. `just port N` is the Justfile's port_allocator.py (md5 of "rshaw:N"), its
# values written out: 5557 -> 4378, 5558 -> 53522, 5559 -> 14489, 5560 -> 50485, 5555 -> 46042, 5556 -> 61079,
# 8100 -> 29907, 8101 -> 14902, 8200 -> 37605, 8201 -> 46021.
# One change: the p_worker recipe copies the p_leader's side-channel line (VLLM_NIXL_SIDE_CHANNEL_PORT=$(just port 5557)).
MODEL=deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct
pip install vllm==0.9.1

# p_leader
VLLM_NIXL_SIDE_CHANNEL_PORT=4378 CUDA_VISIBLE_DEVICES=0,1 vllm serve $MODEL --port 29907 --disable-log-requests --enforce-eager --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' --enable-expert-parallel --tensor-parallel-size 1 --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-address 127.0.0.1 --data-parallel-rpc-port 46042 --trust-remote-code &

# p_worker
VLLM_NIXL_SIDE_CHANNEL_PORT=4378 CUDA_VISIBLE_DEVICES=2,3 vllm serve $MODEL --port 14902 --disable-log-requests --enforce-eager --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' --enable-expert-parallel --tensor-parallel-size 1 --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-start-rank 2 --data-parallel-address 127.0.0.1 --data-parallel-rpc-port 46042 --headless --trust-remote-code &

# d_leader
VLLM_NIXL_SIDE_CHANNEL_PORT=14489 CUDA_VISIBLE_DEVICES=4,5 vllm serve $MODEL --port 37605 --disable-log-requests --enforce-eager --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' --enable-expert-parallel --tensor-parallel-size 1 --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-address 127.0.0.1 --data-parallel-rpc-port 61079 --trust-remote-code &

# d_worker
VLLM_NIXL_SIDE_CHANNEL_PORT=50485 CUDA_VISIBLE_DEVICES=6,7 vllm serve $MODEL --port 46021 --disable-log-requests --enforce-eager --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' --enable-expert-parallel --tensor-parallel-size 1 --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-start-rank 2 --data-parallel-address 127.0.0.1 --data-parallel-rpc-port 61079 --headless --trust-remote-code &

# proxy
python /home/rshaw/vllm/tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 54358 --prefiller-port 29907 --decoder-port 37605 &
wait
