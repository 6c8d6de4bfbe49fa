#!/bin/bash
# kvcache-ai/Mooncake mooncake-wheel/mooncake/README.md (commit 90efc26694fd5c95f9711727b1ef66cf92333813),
# "mooncake_connector_v1" demo: Qwen/Qwen2.5-7B-Instruct, a prefill node (192.168.0.2) and a decode node (192.168.0.3),
# MooncakeConnector producer/consumer, the toy proxy from vLLM's nixl_integration tests.
# In-tree MooncakeConnector on vllm/vllm-openai:v0.34.0, one change from the published demo: the decode runs
# --tensor-parallel-size 2 (prefill TP 1).


# prefill node (192.168.0.2)
docker run --rm --gpus '"device=0"' --network host --ipc host --device /dev/infiniband --cap-add IPC_LOCK -v /root/.cache/huggingface:/root/.cache/huggingface \
    vllm/vllm-openai:v0.34.0 \
    vllm serve Qwen/Qwen2.5-7B-Instruct --port 8010 --kv-transfer-config '{"kv_connector":"MooncakeConnector", "kv_role":"kv_producer"}' &

# decode node (192.168.0.3)
docker run --rm --gpus '"device=0,1"' --network host --ipc host --device /dev/infiniband --cap-add IPC_LOCK -v /root/.cache/huggingface:/root/.cache/huggingface \
    vllm/vllm-openai:v0.34.0 \
    vllm serve Qwen/Qwen2.5-7B-Instruct --port 8020 --tensor-parallel-size 2 --kv-transfer-config '{"kv_connector":"MooncakeConnector", "kv_role":"kv_consumer"}' &

# proxy (on 192.168.0.2)
python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --prefiller-host 192.168.0.2 --prefiller-port 8010 --decoder-host 192.168.0.3 --decoder-port 8020 &
wait
