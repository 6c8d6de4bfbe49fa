#!/bin/bash
# kvcache-ai/Mooncake mooncake-wheel/mooncake/README.md (commit 90efc26694fd5c95f9711727b1ef66cf92333813),
# "mooncake_connector_v1" demo: Qwen/Qwen2.5-7B-Instruct, a prefill node (192.168.0.2) and a decode node (192.168.0.3),
# MooncakeConnector producer/consumer, the toy proxy from vLLM's nixl_integration tests.
# Run in vllm/vllm-openai:v0.31.0 on both nodes; otherwise as published (module path kept).


# prefill node (192.168.0.2)
docker run --rm --gpus '"device=0"' --network host --ipc host --device /dev/infiniband --cap-add IPC_LOCK -v /root/.cache/huggingface:/root/.cache/huggingface \
    vllm/vllm-openai:v0.31.0 \
    vllm serve Qwen/Qwen2.5-7B-Instruct --port 8010 --kv-transfer-config '{"kv_connector":"MooncakeConnector", "kv_role":"kv_producer", "kv_connector_module_path":"mooncake.mooncake_connector_v1"}' &

# decode node (192.168.0.3)
docker run --rm --gpus '"device=0"' --network host --ipc host --device /dev/infiniband --cap-add IPC_LOCK -v /root/.cache/huggingface:/root/.cache/huggingface \
    vllm/vllm-openai:v0.31.0 \
    vllm serve Qwen/Qwen2.5-7B-Instruct --port 8020 --kv-transfer-config '{"kv_connector":"MooncakeConnector", "kv_role":"kv_consumer", "kv_connector_module_path":"mooncake.mooncake_connector_v1"}' &

# proxy (on 192.168.0.2)
python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --prefiller-host 192.168.0.2 --prefiller-port 8010 --decoder-host 192.168.0.3 --decoder-port 8020 &
wait
