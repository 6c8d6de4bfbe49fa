# HYGON-AI/inference-cookbook-das docs/frameworks/mooncake.md (中文), "vLLM PD 分离 / P、D 单实例单节点(1P1D)" copied to upstream vLLM on NVIDIA GPUs (CUDA_VISIBLE_DEVICES for HIP_VISIBLE_DEVICES) -- release 0.12.0
pip install vllm==0.12.0
# KV Producer（Prefill）
vllm serve Qwen/Qwen3-8B \
    --port 8010 \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}' &

# KV Consumer（Decode）
CUDA_VISIBLE_DEVICES=1 vllm serve Qwen/Qwen3-8B \
    --port 8020 \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}' &

# Mooncake Connector Proxy
python3 vllm/examples/online_serving/disaggregated_serving/mooncake_connector/mooncake_connector_proxy.py \
    --prefill "http://0.0.0.0:8010" "8998" \
    --decode "http://0.0.0.0:8020" \
    --port 8000
