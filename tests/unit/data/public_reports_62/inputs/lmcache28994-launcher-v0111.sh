# vllm-project/vllm#28994: examples/others/lmcache/disagg_prefill_lmcache_v1/disagg_vllm_launcher.sh (vLLM image v0.11.1, LMCache 0.3.9)
pip install vllm==0.11.1 lmcache==0.3.9
export PYTHONHASHSEED=123
UCX_TLS=cuda_ipc,cuda_copy,tcp LMCACHE_CONFIG_FILE=configs/lmcache-prefiller-config.yaml LMCACHE_USE_EXPERIMENTAL=True \
    VLLM_ENABLE_V1_MULTIPROCESSING=1 VLLM_WORKER_MULTIPROC_METHOD=spawn CUDA_VISIBLE_DEVICES=0 \
    vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8100 --enforce-eager \
    --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_producer","kv_connector_extra_config": {"discard_partial_chunks": false, "lmcache_rpc_port": "producer1"}}' &
UCX_TLS=cuda_ipc,cuda_copy,tcp LMCACHE_CONFIG_FILE=configs/lmcache-decoder-config.yaml LMCACHE_USE_EXPERIMENTAL=True \
    VLLM_ENABLE_V1_MULTIPROCESSING=1 VLLM_WORKER_MULTIPROC_METHOD=spawn CUDA_VISIBLE_DEVICES=1 \
    vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8200 --enforce-eager \
    --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_consumer","kv_connector_extra_config": {"discard_partial_chunks": false, "lmcache_rpc_port": "consumer1"}}' &
python3 disagg_proxy_server.py --host localhost --port 9000 --prefiller-host localhost --prefiller-port 8100 --decoder-host localhost --decoder-port 8200 &
