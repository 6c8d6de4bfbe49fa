#!/bin/bash
# LMCache/LMCache issue #4614 ("LMCache vLLM adapter retrieves full prompt KV despite scheduler N-1 load on full-prompt
# hit", 2026-08-17, reproducing vllm-project/vllm#52617 on vLLM 0.26.0): LMCache P/D over NIXL, one prefill (sender)
# and one decode (receiver) on one host, LMCacheConnectorV1 kv_producer / kv_consumer, each engine reading its LMCache
# config file. Filled: the model (meta-llama/Llama-3.1-8B-Instruct), GPUs and ports; the proxy left out.
# As the issue runs it.

pip install vllm==0.26.0 lmcache
export LMCACHE_USE_EXPERIMENTAL=True
export PYTHONHASHSEED=123
export UCX_TLS=cuda_ipc,cuda_copy,tcp
export VLLM_ENABLE_V1_MULTIPROCESSING=1
export VLLM_WORKER_MULTIPROC_METHOD=spawn
export VLLM_USE_FLASHINFER_SAMPLER=0

cat > lmcache_prefill.yaml <<'YAML'
local_cpu: false
max_local_cpu_size: 0
remote_serde: null
enable_pd: true
transfer_channel: "nixl"
pd_role: "sender"
pd_buffer_size: 1073741824
pd_buffer_device: "cuda"
nixl_backends: [UCX]
pd_proxy_host: "127.0.0.1"
pd_proxy_port: 7500
YAML

cat > lmcache_decode.yaml <<'YAML'
local_cpu: false
max_local_cpu_size: 0
remote_serde: null
enable_pd: true
transfer_channel: "nixl"
pd_role: "receiver"
pd_buffer_size: 1073741824
pd_buffer_device: "cuda"
nixl_backends: [UCX]
pd_peer_host: "127.0.0.1"
pd_peer_init_port: 7300
pd_peer_alloc_port: 7400
YAML

LMCACHE_CONFIG_FILE=lmcache_prefill.yaml CUDA_VISIBLE_DEVICES=0 \
  vllm serve meta-llama/Llama-3.1-8B-Instruct --port 7100 --enforce-eager --no-enable-prefix-caching \
  --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_producer"}' &

LMCACHE_CONFIG_FILE=lmcache_decode.yaml CUDA_VISIBLE_DEVICES=1 \
  vllm serve meta-llama/Llama-3.1-8B-Instruct --port 7200 --enforce-eager --no-enable-prefix-caching \
  --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_consumer"}' &
wait
