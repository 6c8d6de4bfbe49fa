# prefill node (8 x H20): TP=1 / PP=8
docker run --rm --gpus all --network host --ipc host \
  --device /dev/infiniband --cap-add IPC_LOCK --ulimit memlock=-1 \
  -v /data00:/data00 \
  vllm/vllm-openai:v0.23.0 \
  /data00/DeepSeek-V4-Flash \
  --host 0.0.0.0 \
  --port 8000 \
  --served-model-name DeepSeek-V4-Flash \
  --trust-remote-code \
  --kv-cache-dtype fp8 \
  --block-size 256 \
  --data-parallel-size 1 \
  --tensor-parallel-size 1 \
  --pipeline-parallel-size 8 \
  --tokenizer-mode deepseek_v4 \
  --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}'

# decode node (8 x H20): TP=8 / PP=1
docker run --rm --gpus all --network host --ipc host \
  --device /dev/infiniband --cap-add IPC_LOCK --ulimit memlock=-1 \
  -v /data00:/data00 \
  vllm/vllm-openai:v0.23.0 \
  /data00/DeepSeek-V4-Flash \
  --host 0.0.0.0 \
  --port 8000 \
  --served-model-name DeepSeek-V4-Flash \
  --trust-remote-code \
  --kv-cache-dtype fp8 \
  --block-size 256 \
  --data-parallel-size 1 \
  --tensor-parallel-size 8 \
  --pipeline-parallel-size 1 \
  --tokenizer-mode deepseek_v4 \
  --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}'
