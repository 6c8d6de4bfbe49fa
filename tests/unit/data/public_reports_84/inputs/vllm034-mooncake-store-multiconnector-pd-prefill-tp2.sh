#!/bin/bash
# vllm-project/vllm docs/features/mooncake_store_connector_usage.md at v0.34.0, "disaggregated prefill-decode mode":
# MultiConnector of MooncakeConnector (P2P transfer) + MooncakeStoreConnector (shared pool) on a prefiller node and a
# decoder node, Llama-3.1-8B-Instruct.
# Variant: the prefiller runs TP 2 (--tensor-parallel-size 2), the decoder TP 1.
pip install vllm==0.34.0 mooncake-transfer-engine

# Prefiller node
MOONCAKE_CONFIG_PATH=mooncake_config.json \
VLLM_MOONCAKE_BOOTSTRAP_PORT=50052 \
vllm serve meta-llama/Llama-3.1-8B-Instruct \
    --port 8100 \
    --tensor-parallel-size 2 \
    --kv-transfer-config '{
        "kv_connector": "MultiConnector",
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {
            "connectors": [
                {"kv_connector": "MooncakeConnector", "kv_role": "kv_producer"},
                {"kv_connector": "MooncakeStoreConnector", "kv_role": "kv_both"}
            ]
        }
    }'

# Decoder node
MOONCAKE_CONFIG_PATH=mooncake_config.json \
VLLM_MOONCAKE_BOOTSTRAP_PORT=50053 \
vllm serve meta-llama/Llama-3.1-8B-Instruct \
    --port 8200 \
    --kv-transfer-config '{
        "kv_connector": "MultiConnector",
        "kv_role": "kv_consumer",
        "kv_connector_extra_config": {
            "connectors": [
                {"kv_connector": "MooncakeConnector", "kv_role": "kv_consumer"},
                {"kv_connector": "MooncakeStoreConnector", "kv_role": "kv_consumer"}
            ]
        }
    }'
