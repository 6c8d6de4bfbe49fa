# vllm-project/recipes models/zai-org/GLM-5.1.yaml at c001551: PD with TileRT (decode on TileRT, prefill on vLLM)
# Both containers from vllm/vllm-openai:nightly with `pip install tilert --no-deps`; each command in its own container.

# 2. TileRT decode server (not vLLM)
python3 -m tilert.pd_vllm.decode_server \
  --engine tilert --model glm5 \
  --model-weights-dir /models/tilert-glm5.1 \
  --with-mtp --max-seq-len 202752 \
  --kv-cache-dtype fp8 \
  --ctrl-port 5556 --http-port 5557

# 3. vLLM prefill server
vllm serve /models/GLM-5.1-FP8 \
  --served-model-name glm5.1 \
  --port 8000 \
  --tensor-parallel-size 8 \
  --enforce-eager \
  --trust-remote-code \
  --return-tokens-as-token-ids \
  --gpu-memory-utilization 0.5 \
  --kv-cache-dtype fp8_ds_mla \
  --speculative-config '{"method": "mtp", "num_speculative_tokens": 1}' \
  --kv-transfer-config '{
    "kv_connector": "TileRTConnector",
    "kv_connector_module_path": "tilert.pd_vllm.prefill_connector",
    "kv_role": "kv_producer",
    "kv_connector_extra_config": {
      "tilert_host": "10.0.0.12",
      "tilert_ctrl_port": 5556,
      "tilert_model": "glm5",
      "tilert_max_seq_len": 202752
    }
  }'

# 4. PD router
python3 -m tilert.pd_vllm.pd_router \
  --vllm-url http://10.0.0.11:8000 \
  --decode 10.0.0.12:5556:5557 \
  --model-path /models/GLM-5.1-FP8 \
  --port 23333
