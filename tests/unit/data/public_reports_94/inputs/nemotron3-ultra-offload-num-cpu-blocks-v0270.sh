# prefill nodes (three of them, one engine each; this one is 10.0.0.11)
docker run --rm --gpus all --network host --ipc host \
  --device /dev/infiniband --cap-add IPC_LOCK --ulimit memlock=-1 \
  -v /models:/models \
  -e VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.11 \
  -e VLLM_SSM_CONV_STATE_LAYOUT=DS \
  vllm/vllm-openai:v0.27.0 \
  --model /models/RedHatAI/NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8-block \
  --tensor-parallel-size 8 \
  --kv-cache-dtype fp8 \
  --enable-prefix-caching \
  --trust-remote-code \
  --port 8000 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'

# decode node (10.0.0.14)
docker run --rm --gpus all --network host --ipc host \
  --device /dev/infiniband --cap-add IPC_LOCK --ulimit memlock=-1 \
  -v /models:/models \
  -e VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.14 \
  -e VLLM_SSM_CONV_STATE_LAYOUT=DS \
  vllm/vllm-openai:v0.27.0 \
  --model /models/RedHatAI/NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8-block \
  --tensor-parallel-size 8 \
  --kv-cache-dtype fp8 \
  --enable-prefix-caching \
  --trust-remote-code \
  --port 8000 \
  --kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_consumer"},{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"block_size":64,"num_cpu_blocks":100000,"lazy_offload":true}}]}}'
