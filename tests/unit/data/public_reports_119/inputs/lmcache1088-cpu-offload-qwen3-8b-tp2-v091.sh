#!/bin/bash
# LMCache/LMCache issue #1088 ("Failed to start vLLM with TP=2"): the reporter's command as published
# (lmcache 0.3.1.post, vllm 0.9.1), one engine, LMCacheConnectorV1 kv_both with a CPU-offload config file.
# Filled: the pip pins the issue names.
pip install vllm==0.9.1 lmcache==0.3.1.post1

LMCACHE_CONFIG_FILE="/mnt/lmcachetest/lmcache_config/cpu_offload.yaml"  vllm serve /mnt/models/Qwen3-8B  --gpu-memory-utilization 0.8 --port 8000 --enable_prefix_caching  --tensor-parallel-size 2 --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1", "kv_role":"kv_both"}'
