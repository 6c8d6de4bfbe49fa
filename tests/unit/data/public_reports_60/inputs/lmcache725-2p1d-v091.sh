# LMCache/LMCache#725: 2P1D with LMCache's NIXL PD backend (docs.lmcache.ai disaggregated_prefill/nixl/xpyd), vLLM 0.9.1
pip install vllm==0.9.1 lmcache
LMCACHE_CONFIG_FILE=configs/lmcache-prefiller-1-config.yaml CUDA_VISIBLE_DEVICES=0 UCX_TLS=cuda_ipc,cuda_copy,tcp \
  vllm serve /root/models/Qwen/Qwen2.5-14B-Instruct-AWQ --port 8100 --enforce-eager --disable-log-requests \
  --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_producer","kv_connector_extra_config":{"discard_partial_chunks":false,"lmcache_rpc_port":"producer1"}}' &
LMCACHE_CONFIG_FILE=configs/lmcache-prefiller-2-config.yaml CUDA_VISIBLE_DEVICES=1 UCX_TLS=cuda_ipc,cuda_copy,tcp \
  vllm serve /root/models/Qwen/Qwen2.5-14B-Instruct-AWQ --port 8101 --enforce-eager --disable-log-requests \
  --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_producer","kv_connector_extra_config":{"discard_partial_chunks":false,"lmcache_rpc_port":"producer2"}}' &
LMCACHE_CONFIG_FILE=configs/lmcache-decoder-config.yaml CUDA_VISIBLE_DEVICES=2 UCX_TLS=cuda_ipc,cuda_copy,tcp \
  vllm serve /root/models/Qwen/Qwen2.5-14B-Instruct-AWQ --port 8200 --enforce-eager --disable-log-requests \
  --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_consumer","kv_connector_extra_config":{"discard_partial_chunks":false,"lmcache_rpc_port":"consumer1"}}' &
