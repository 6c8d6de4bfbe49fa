# HYGON-AI/inference-cookbook-das docs/frameworks/mooncake.md (中文), "vLLM PD 分离" -- "P：PP16  D：TP8 (1P1D)" as published, on Hygon HCU (prefill over Ray on 10.16.1.15 + 10.16.1.16, decode 10.16.1.18)
docker pull harbor.sourcefind.cn:5443/dcu/admin/base/vllm:0.18.1-ubuntu22.04-dtk26.04-py3.10
# KV Producer（Prefill）
# 10.16.1.15:
export VLLM_HCU_USE_FLASHMLA=1
export LMSLIM_USE_GLOBAL_MOE_CACHE=1
export VLLM_DP_MASTER_IP=10.16.1.15
export MC_ENABLE_DEST_DEVICE_AFFINITY=1
ray start --head --node-ip-address=10.16.1.15  --port=1255 --num-gpus=8 --num-cpus=32
# 10.16.1.16:
#   ray start --address=10.16.1.15:1255  --num-gpus=8 --num-cpus=32
# 10.16.1.15:
vllm serve /models/v2_6/GLM-w4a8-V2_6_test \
    --trust-remote-code \
    -pp 16 \
    --dtype bfloat16 \
    --max-model-len 65536 \
    --max-num-batched-tokens 8192 \
    --max-num-seqs 64 \
    --kv-cache-dtype fp8_ds_mla \
    --gpu-memory-utilization 0.9 \
    --distributed-executor-backend ray \
    --enforce-eager \
    -cc '{"inductor_compile_config":{"combo_kernels": false}}' \
    --port 9348 \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}'

# KV Consumer（Decode）
export VLLM_HCU_USE_FLASHMLA=1
export LMSLIM_USE_GLOBAL_MOE_CACHE=1
export VLLM_DP_MASTER_IP=10.16.1.15
export MC_ENABLE_DEST_DEVICE_AFFINITY=1
vllm serve /models/v2_6/GLM-w4a8-V2_6_test \
    --trust-remote-code \
    -tp 8 \
    --dtype bfloat16 \
    --max-model-len 65536 \
    --max-num-batched-tokens 8192 \
    --max-num-seqs 64 \
    --kv-cache-dtype fp8_ds_mla \
    --gpu-memory-utilization 0.9 \
    -cc '{"inductor_compile_config":{"combo_kernels": false}}' \
    --port 9349 \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}'

# Mooncake Connector Proxy
python3 /workspace/vllm/examples/online_serving/disaggregated_serving/mooncake_connector/mooncake_connector_proxy.py \
    --prefill "http://10.16.1.15:9348" "8998" \
    --decode "http://10.16.1.18:9349" \
    --port 8000
