#!/bin/bash
# Both servers (AMD MI308X): the container the question starts, Mooncake installed inside it
docker run -it -v /home:/home -v /mnt:/mnt --cap-add=SYS_PTRACE --security-opt seccomp=unconfined --device=/dev/kfd --device=/dev/dri --group-add video --ipc=host --name vllm_alan-mooncake --shm-size 1024G --entrypoint=/bin/bash vllm/vllm-openai-rocm:v0.10.1.1

# Prefiller Node (192.168.0.2), inside the container:
vllm serve Qwen/Qwen2.5-7B-Instruct \
  --port 8010 \
  --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}'

# Decoder Node (192.168.0.3), inside the container:
vllm serve Qwen/Qwen2.5-7B-Instruct \
  --port 8020 \
  --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}'

# Proxy Server (in vllm root directory):
python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8000 --prefiller-hosts 192.168.0.2 --prefiller-ports 8010 --decoder-hosts 192.168.0.3 --decoder-ports 8020
