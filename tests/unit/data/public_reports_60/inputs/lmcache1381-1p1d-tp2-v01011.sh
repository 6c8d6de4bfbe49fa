# LMCache/LMCache#1381: LMCache 0.3.3 1P1D (examples/disagg_prefill/1p1d) with Meta-Llama-3.1-8B-Instruct at tensor parallel 2
pip install vllm==0.10.1.1 lmcache==0.3.3
UCX_TLS=cuda_ipc,cuda_copy,tcp LMCACHE_CONFIG_FILE=configs/lmcache-prefiller-config.yaml CUDA_VISIBLE_DEVICES=0,1 \
    vllm serve meta-llama/Llama-3.1-8B-Instruct --port 7100 --tensor-parallel-size 2 --disable-log-requests --enforce-eager \
    --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_producer","kv_connector_extra_config":{"discard_partial_chunks":false,"lmcache_rpc_port":"producer1"}}' &
UCX_TLS=cuda_ipc,cuda_copy,tcp LMCACHE_CONFIG_FILE=configs/lmcache-decoder-config.yaml CUDA_VISIBLE_DEVICES=2,3 \
    vllm serve meta-llama/Llama-3.1-8B-Instruct --port 7200 --tensor-parallel-size 2 --disable-log-requests --enforce-eager \
    --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_consumer","kv_connector_extra_config":{"discard_partial_chunks":false,"lmcache_rpc_port":"consumer1"}}' &
