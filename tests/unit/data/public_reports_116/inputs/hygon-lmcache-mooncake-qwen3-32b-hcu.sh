# HYGON-AI/inference-cookbook-das docs/frameworks/mooncake.md (中文), "LMCache with Mooncake Backend / 启动 vLLM" as published, on Hygon HCU
docker pull harbor.sourcefind.cn:5443/dcu/admin/base/vllm:0.18.1-ubuntu22.04-dtk26.04-py3.10
# lmcache_config.yaml: remote_url "mooncakestore://127.0.0.1:50051/", local_cpu False, protocol tcp
nohup mooncake_master --enable_http_metadata_server=true \
    --rpc_port=50051 \
    --enable_offload=true > mooncake.log 2>&1 &

export VLLM_LOGGING_LEVEL=INFO
export LMCACHE_LOG_LEVEL=INFO
export PYTHONHASHSEED=0
export LMCACHE_CONFIG_FILE=lmcache_config.yaml

nohup vllm serve /llm/models/Qwen3-32B \
    --max-log-len 64 \
    --tensor-parallel-size 2 \
    --port 8000 \
    --gpu-memory-utilization 0.85 \
    --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}' \
    --trust-remote-code \
    --disable-custom-all-reduce \
    --disable-log-requests \
    --pipeline-parallel-size 1 \
    --served-model-name "Qwen3-32B" \
    > vllm_running.log 2>&1 &
