#!/bin/bash
# LMCache/LMCache docs/source/mp/disaggregated_prefill.rst (commit 404357358626f1e03b6b727c43e695fd92d0fff8),
# "Running a deployment" as published: MultiConnector [NixlConnector + LMCacheMPConnector] on a prefill host
# (10.0.0.11) and a decode host (10.0.0.12), one LMCache server per instance, vllm-router in P/D mode.
# Filled: <model> = meta-llama/Llama-3.1-8B-Instruct, <PREFILL_IP>/<DECODE_IP>, the pip pin.
pip install vllm==0.26.0 "lmcache[nixl]"
MODEL=meta-llama/Llama-3.1-8B-Instruct

# Step 1 + 2, on the prefill host (10.0.0.11)
ssh 10.0.0.11 "lmcache server \
    --port 6555 --http-port 8090 \
    --l1-size-gb 100 --eviction-policy LRU --chunk-size 256 \
    --instance-id prefiller" &

ssh 10.0.0.11 "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.11 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
UCX_NET_DEVICES=all NCCL_CUMEM_ENABLE=1 \
vllm serve $MODEL \
    --port 8001 --tensor-parallel-size 1 \
    --kv-transfer-config '{\"kv_connector\":\"MultiConnector\",\"kv_role\":\"kv_producer\",\"kv_connector_extra_config\":{\"connectors\":[{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_producer\",\"kv_load_failure_policy\":\"fail\"},{\"kv_connector\":\"LMCacheMPConnector\",\"kv_role\":\"kv_both\",\"kv_connector_extra_config\":{\"lmcache.mp.host\":\"tcp://localhost\",\"lmcache.mp.port\":6555}}]}}'" &

# Step 3 + 4, on the decode host (10.0.0.12)
ssh 10.0.0.12 "lmcache server \
    --port 6556 --http-port 8091 \
    --l1-size-gb 100 --eviction-policy LRU --chunk-size 256 \
    --instance-id decoder" &

ssh 10.0.0.12 "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.12 VLLM_NIXL_SIDE_CHANNEL_PORT=5558 \
UCX_NET_DEVICES=all NCCL_CUMEM_ENABLE=1 \
vllm serve $MODEL \
    --port 8002 --tensor-parallel-size 1 \
    --kv-transfer-config '{\"kv_connector\":\"MultiConnector\",\"kv_role\":\"kv_consumer\",\"kv_connector_extra_config\":{\"connectors\":[{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_consumer\",\"kv_load_failure_policy\":\"fail\"},{\"kv_connector\":\"LMCacheMPConnector\",\"kv_role\":\"kv_both\",\"kv_connector_extra_config\":{\"lmcache.mp.host\":\"tcp://localhost\",\"lmcache.mp.port\":6556}}]}}'" &

# Step 5, router
vllm-router \
    --policy round_robin \
    --vllm-pd-disaggregation \
    --prefill http://10.0.0.11:8001 \
    --decode http://10.0.0.12:8002 \
    --host 0.0.0.0 --port 30000
