#!/bin/bash
# vllm-project/vllm issue #50714 ("[Bug]: NixlConnector rejects packed hybrid KV cache after HMA rewrites block size"):
# deepseek-ai/DeepSeek-V4-Flash-0731 at revision 7872f01b, one NVIDIA B300 per engine, TP 1, FP8 KV cache, hybrid KV
# cache manager on, NIXL over UCX with a CUDA KV buffer, {"use_fp4_indexer_cache": true}, image vllm/vllm-openai:v0.26.0.
# The report gives the server arguments once for both engines; the roles, ports and GPUs are filled in.

IMAGE=vllm/vllm-openai:v0.26.0
MODEL=deepseek-ai/DeepSeek-V4-Flash-0731
REV=7872f01b1d1fe23eabc4c98b48bffcef5a386062

# prefill (GPU 0)
docker run -d --name dsv4-prefill --gpus '"device=0"' --network host --ipc host \
  -v ~/.cache/huggingface:/root/.cache/huggingface \
  -e VLLM_NIXL_SIDE_CHANNEL_HOST=127.0.0.1 -e VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
  $IMAGE $MODEL --revision $REV \
  --port 8100 \
  --tensor-parallel-size 1 \
  --kv-cache-dtype fp8 \
  --block-size 256 \
  --gpu-memory-utilization 0.85 \
  --max-model-len 131072 \
  --enable-chunked-prefill \
  --enable-prefix-caching \
  --no-disable-hybrid-kv-cache-manager \
  --attention-config '{"use_fp4_indexer_cache": true}' \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_buffer_device":"cuda"}'

# decode (GPU 1)
docker run -d --name dsv4-decode --gpus '"device=1"' --network host --ipc host \
  -v ~/.cache/huggingface:/root/.cache/huggingface \
  -e VLLM_NIXL_SIDE_CHANNEL_HOST=127.0.0.1 -e VLLM_NIXL_SIDE_CHANNEL_PORT=5601 \
  $IMAGE $MODEL --revision $REV \
  --port 8200 \
  --tensor-parallel-size 1 \
  --kv-cache-dtype fp8 \
  --block-size 256 \
  --gpu-memory-utilization 0.85 \
  --max-model-len 131072 \
  --enable-chunked-prefill \
  --enable-prefix-caching \
  --no-disable-hybrid-kv-cache-manager \
  --attention-config '{"use_fp4_indexer_cache": true}' \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_buffer_device":"cuda"}'
