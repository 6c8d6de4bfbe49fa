# vllm-project/vllm#20613: NixlConnector and LMCacheConnectorV1 together in a MultiConnector, Qwen3-1.7B, TP 2 per engine
pip install vllm==0.9.2 lmcache
python3 tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8000 --prefiller-port 8100 --decoder-port 8200 &

VLLM_LOGGING_LEVEL=DEBUG LMCACHE_CHUNK_SIZE=256 LMCACHE_LOCAL_CPU=True LMCACHE_MAX_LOCAL_CPU_SIZE=30.0 LMCACHE_LOG_LEVEL=INFO CUDA_VISIBLE_DEVICES=0,1 VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve /models/Qwen3-1.7B --served-model-name "qwen3" --port 8100 --disable-log-requests --gpu-memory-utilization 0.9 --tensor-parallel-size 2 --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

VLLM_LOGGING_LEVEL=DEBUG LMCACHE_CHUNK_SIZE=256 LMCACHE_LOCAL_CPU=True LMCACHE_MAX_LOCAL_CPU_SIZE=30.0 LMCACHE_LOG_LEVEL=INFO CUDA_VISIBLE_DEVICES=2,3 VLLM_NIXL_SIDE_CHANNEL_PORT=5659 vllm serve /weights/Qwen3-1.7B --served-model-name "qwen3" --port 8200 --disable-log-requests --gpu-memory-utilization 0.9 --tensor-parallel-size 2 --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &
