#!/bin/bash
# prefill node (prefill_ip)
docker run --gpus all --network host --ipc=host -v /data/llama2:/data/llama2 \
  -e VLLM_LOGGING_LEVEL=DEBUG \
  vllm/vllm-openai:v0.9.2 \
  --model /data/llama2/ --tensor-parallel-size 4 --pipeline-parallel-size 2  --trust-remote-code --gpu-memory-utilization 0.8 --max-model-len 35000 --enforce-eager  --served-model-name llama --port 8100  --kv-transfer-config '{"kv_connector":"PyNcclConnector","kv_role":"kv_producer","kv_rank":0,"kv_parallel_size":2,"kv_buffer_size":5e9, "kv_ip":"prefill_ip"}'

# decode node
docker run --gpus all --network host --ipc=host -v /data/llama2:/data/llama2 \
  -e VLLM_LOGGING_LEVEL=DEBUG \
  vllm/vllm-openai:v0.9.2 \
  --model /data/llama2/ --tensor-parallel-size 4 --pipeline-parallel-size 2  --trust-remote-code --gpu-memory-utilization 0.8 --max-model-len 35000 --enforce-eager  --served-model-name llama --port 8100  --kv-transfer-config '{"kv_connector":"PyNcclConnector","kv_role":"kv_consumer","kv_rank":1,"kv_parallel_size":2,"kv_buffer_size":5e9, "kv_ip":"prefill_ip"}'
