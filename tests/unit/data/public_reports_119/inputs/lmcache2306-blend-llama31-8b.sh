#!/bin/bash
# LMCache/LMCache issue #2306 ("ValueError: vllm model for vllm-instance not found."): the reporter's command as
# published (LMCache benchmarks/multi_doc_qa, CacheBlend config), one engine, LMCacheConnectorV1 kv_both.
LMCACHE_CONFIG_FILE=lmcache_blend.yaml vllm serve Meta-Llama-3.1-8B-Instruct --gpu-memory-utilization 0.8 --port 8000 --no-enable-prefix-caching --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1", "kv_role":"kv_both"}'
