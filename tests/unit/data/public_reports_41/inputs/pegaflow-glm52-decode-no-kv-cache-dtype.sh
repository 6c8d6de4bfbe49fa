# Prefill
PYTHONHASHSEED=42 \
VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.11 \
VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
vllm serve GLM-5.2-FP8 \
  --served-model-name glm-5.2 \
  --host 0.0.0.0 \
  --port 8000 \
  --tensor-parallel-size 8 \
  --enable-expert-parallel \
  --kv-cache-dtype fp8 \
  --speculative-config.method mtp \
  --speculative-config.num_speculative_tokens 2 \
  --enable-prefix-caching \
  --trust-remote-code \
  --kv-transfer-config '{
    "kv_connector": "MultiConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {
      "connectors": [
        {
          "kv_connector": "NixlConnector",
          "kv_role": "kv_producer"
        },
        {
          "kv_connector": "PegaKVConnector",
          "kv_role": "kv_both",
          "kv_connector_module_path": "pegaflow.connector",
          "kv_connector_extra_config": {
            "pegaflow.host": "http://10.0.0.11",
            "pegaflow.port": 50055,
            "pegaflow.mode": "read_write"
          }
        }
      ]
    }
  }'

# Decode
PYTHONHASHSEED=42 \
VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.12 \
VLLM_NIXL_SIDE_CHANNEL_PORT=5601 \
vllm serve GLM-5.2-FP8 \
  --served-model-name glm-5.2 \
  --host 0.0.0.0 \
  --port 8001 \
  --tensor-parallel-size 8 \
  --enable-expert-parallel \
  --speculative-config.method mtp \
  --speculative-config.num_speculative_tokens 2 \
  --enable-prefix-caching \
  --trust-remote-code \
  --kv-transfer-config '{
    "kv_connector": "MultiConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {
      "connectors": [
        {
          "kv_connector": "NixlConnector",
          "kv_role": "kv_consumer",
          "kv_connector_extra_config": {
            "kv_recompute_threshold": 0
          }
        },
        {
          "kv_connector": "PegaKVConnector",
          "kv_role": "kv_both",
          "kv_connector_module_path": "pegaflow.connector",
          "kv_connector_extra_config": {
            "pegaflow.host": "http://10.0.0.12",
            "pegaflow.port": 50055,
            "pegaflow.mode": "save_only"
          }
        }
      ]
    }
  }'
