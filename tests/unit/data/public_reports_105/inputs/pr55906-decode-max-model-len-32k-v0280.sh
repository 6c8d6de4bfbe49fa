#!/bin/bash
# vllm-project/vllm PR #55906 ("[Docs] Avoid CUDA IPC fallback in same host NIXL Docker deployments"):
# prefill and decode in two containers on one 2 x H100 SXM5 host, vLLM v0.28.0, Qwen/Qwen3-0.6B, NixlConnector
# kv_producer / kv_consumer, a shared PID namespace (--pid=container:pd-namespace) and mutual GPU visibility (both
# containers get GPUs 0 and 1, CUDA_VISIBLE_DEVICES picks each engine's own), so that UCX can use CUDA IPC.
# One change: the decode caps its context at 32K (--max-model-len 32768).

IMAGE=vllm/vllm-openai:v0.28.0

# the namespace holder
docker run -d --name pd-namespace --network host --ipc host --entrypoint sleep $IMAGE infinity

# prefill (GPU 0)
docker run -d --name vllm-prefill \
  --pid=container:pd-namespace --network host --ipc host \
  --gpus '"device=0,1"' \
  -v ~/.cache/huggingface:/root/.cache/huggingface \
  -e CUDA_VISIBLE_DEVICES=0 -e VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
  -e UCX_LOG_LEVEL=debug \
  $IMAGE Qwen/Qwen3-0.6B \
  --port 8100 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'

# decode (GPU 1)
docker run -d --name vllm-decode \
  --pid=container:pd-namespace --network host --ipc host \
  --gpus '"device=0,1"' \
  -v ~/.cache/huggingface:/root/.cache/huggingface \
  -e CUDA_VISIBLE_DEVICES=1 -e VLLM_NIXL_SIDE_CHANNEL_PORT=5601 \
  -e UCX_LOG_LEVEL=debug \
  $IMAGE Qwen/Qwen3-0.6B \
  --port 8200 --max-model-len 32768 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'

# proxy (vLLM's toy proxy, from a checkout of the same release)
python3 tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8000 \
  --prefiller-hosts localhost --prefiller-ports 8100 \
  --decoder-hosts localhost --decoder-ports 8200
