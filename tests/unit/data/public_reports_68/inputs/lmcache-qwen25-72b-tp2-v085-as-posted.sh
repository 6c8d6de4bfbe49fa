# vllm 0.8.5 base docker image (vllm/vllm-openai:v0.8.5), 8x H200
  UCX_TLS=cuda_ipc,cuda_copy,tcp \
  LMCACHE_CONFIG_FILE=/workspace/examples/lmcache/disagg_prefill_lmcache_v1/configs/lmcache-prefiller-config.yaml \
  LMCACHE_USE_EXPERIMENTAL=True \
  VLLM_ENABLE_V1_MULTIPROCESSING=1 \
  VLLM_WORKER_MULTIPROC_METHOD=spawn \
  CUDA_VISIBLE_DEVICES=0,1 \
  VLLM_USE_V1=1 \
    /opt/venv/bin/vllm serve /xxbucket/prod/models/QWEN-25-72B-INSTRUCT/Qwen2.5-72B-Instruct \
    --served-model-name llm \
    --port 8100 \
    --max-model-len 6400 \
    --max-num-batched-tokens 6400 \
    --max-num-seqs 48 \
    --block-size 128 \
    --gpu-memory-utilization 0.95 \
    --tensor-parallel-size 2 \
    --max_seq_len_to_capture 6400 \
    --enforce-eager \
    --trust-remote-code \
    --kv-transfer-config \
    '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_producer","kv_connector_extra_config": {"discard_partial_chunks": false, "lmcache_rpc_port": "producer1"}}' > /prefiller.log 2>&1 &

  UCX_TLS=cuda_ipc,cuda_copy,tcp \
  LMCACHE_CONFIG_FILE=/workspace/examples/lmcache/disagg_prefill_lmcache_v1/configs/lmcache-decoder-config.yaml \
  LMCACHE_USE_EXPERIMENTAL=True \
  VLLM_ENABLE_V1_MULTIPROCESSING=1 \
  VLLM_WORKER_MULTIPROC_METHOD=spawn \
  CUDA_VISIBLE_DEVICES=2,3 \
  VLLM_USE_V1=1 \
    /opt/venv/bin/vllm serve /xxbucket/prod/models/QWEN-25-72B-INSTRUCT/Qwen2.5-72B-Instruct \
    --served-model-name llm \
    --port 8200 \
    --max-model-len 6400 \
    --max-num-batched-tokens 6400 \
    --max-num-seqs 48 \
    --block-size 128 \
    --gpu-memory-utilization 0.95 \
    --tensor-parallel-size 2 \
    --max_seq_len_to_capture 6400 \
    --enforce-eager \
    --trust-remote-code \
    --kv-transfer-config \
    '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_consumer","kv_connector_extra_config": {"discard_partial_chunks": false, "lmcache_rpc_port": "consumer1"}}' > /decoder.log 2>&1 &
