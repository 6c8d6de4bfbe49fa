#!/bin/bash
# vllm-project/vllm PR #55906 ("[Docs] Avoid CUDA IPC fallback in same host NIXL Docker deployments"):
# prefill and decode in two containers on one 2 x H100 SXM5 host, vLLM v0.28.0, Qwen/Qwen3-0.6B, NixlConnector
# kv_producer / kv_consumer, a shared PID namespace (--pid=container:pd-namespace) and mutual GPU visibility (both
# containers get GPUs 0 and 1, CUDA_VISIBLE_DEVICES picks each engine's own), so that UCX can use CUDA IPC.
# One change: a one-GPU workstation: both containers get GPU 0 (CUDA_VISIBLE_DEVICES=0) and each engine half of it
# (--gpu-memory-utilization 0.45).

IMAGE=vllm/vllm-openai:v0.28.0

# the namespace holder
docker run -d --name pd-namespace --network host --ipc host --entrypoint sleep $IMAGE infinity

# prefill (GPU 0)
docker run -d --name vllm-prefill \
  --pid=container:pd-namespace --network host --ipc host \
  --gpus '"device=0"' \
  -v ~/.cache/huggingface:/root/.cache/huggingface \
  -e CUDA_VISIBLE_DEVICES=0 -e VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
  -e UCX_LOG_LEVEL=debug \
  $IMAGE Qwen/Qwen3-0.6B \
  --port 8100 --gpu-memory-utilization 0.45 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'

# decode (GPU 0 too)
docker run -d --name vllm-decode \
  --pid=container:pd-namespace --network host --ipc host \
  --gpus '"device=0"' \
  -v ~/.cache/huggingface:/root/.cache/huggingface \
  -e CUDA_VISIBLE_DEVICES=0 -e VLLM_NIXL_SIDE_CHANNEL_PORT=5601 \
  -e UCX_LOG_LEVEL=debug \
  $IMAGE Qwen/Qwen3-0.6B \
  --port 8200 --gpu-memory-utilization 0.45 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'

# proxy (vLLM's toy proxy, from a checkout of the same release)
python3 tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8000 \
  --prefiller-hosts localhost --prefiller-ports 8100 \
  --decoder-hosts localhost --decoder-ports 8200
