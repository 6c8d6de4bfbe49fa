# HYGON-AI/inference-cookbook-das docs/frameworks/mooncake.md (中文), "vLLM PD 分离" -- "P、D 单实例单节点(1P1D)" as published, on Hygon HCU
docker pull harbor.sourcefind.cn:5443/dcu/admin/base/vllm:0.18.1-ubuntu22.04-dtk26.04-py3.10
# KV Producer（Prefill）
vllm serve Qwen3/Qwen3-8B \
    --port 8010 \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}' &

# KV Consumer（Decode）
HIP_VISIBLE_DEVICES=1 vllm serve Qwen3/Qwen3-8B \
    --port 8020 \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}' &

# Mooncake Connector Proxy
# mooncake_connector_proxy.py 在 vllm 源码中：
# https://developer.sourcefind.cn/codes/OpenDAS/vllm/-/tree/v0.18.1/examples/online_serving/disaggregated_serving/mooncake_connector
python3 vllm/examples/online_serving/disaggregated_serving/mooncake_connector/mooncake_connector_proxy.py \
    --prefill "http://0.0.0.0:8010" "8998" \
    --decode "http://0.0.0.0:8020" \
    --port 8000
