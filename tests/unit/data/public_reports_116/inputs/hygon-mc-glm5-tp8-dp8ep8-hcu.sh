# HYGON-AI/inference-cookbook-das docs/frameworks/mooncake.md (中文), "vLLM PD 分离" -- "P：TP8  D：DP8EP8 (1P1D)" as published, on Hygon HCU (prefill 10.16.1.15, decode 10.16.1.16)
docker pull harbor.sourcefind.cn:5443/dcu/admin/base/vllm:0.18.1-ubuntu22.04-dtk26.04-py3.10
# KV Producer（Prefill）
vllm serve /models/vllm-w8a8-models/GLM-5-W8A8 \
    -q slimquant_marlin \
    --trust-remote-code \
    --dtype bfloat16 \
    --max-model-len 65536 \
    --max-num-batched-tokens 8192 \
    --enforce-eager \
    -tp 8 \
    --port 9348 \
    --gpu-memory-utilization 0.92 \
    --max-num-seqs 64 \
    --enable-prefix-caching \
    --block-size 64 \
    --kv-cache-dtype fp8_ds_mla \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}'

# KV Consumer（Decode）
export NCCL_NET_GDR_LEVEL=7
export NCCL_SDMA_COPY_ENABLE=0
export NCCL_IB_HCA=mlx5_0:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1
export ROCSHMEM_HEAP_SIZE=4000000000
export ROCSHMEM_TOPO_FILE_FORCE=/workspace/topo.config
export USE_SPE_MQP=1
export ROCSHMEM_SQ_SIZE=1024
export ROCSHMEM_GDA_NUM_QPS_DEFAULT_CTX=256
export VLLM_MOE_DP_CHUNK_SIZE=128
export VLLM_HCU_ALL2ALL_BACKEND=deepep_low_latency
export VLLM_HCU_USE_FLASHMLA=1
export MC_ENABLE_DEST_DEVICE_AFFINITY=1

vllm serve /models/vllm-w8a8-models/GLM-5-W8A8  \
    -q slimquant_marlin \
    --trust-remote-code \
    --dtype bfloat16 \
    --max-model-len 65536 \
    --max-num-batched-tokens 128 \
    -dp 8 \
    --port 9349 \
    --max-num-seqs 64 \
    --gpu-memory-utilization 0.92 \
    --block-size 64 \
    --kv-cache-dtype fp8_ds_mla \
    --enable-expert-parallel \
    --all2all-backend deepep_low_latency \
    --disable-custom-all-reduce \
    --enable-chunked-prefill \
    --enable-prefix-caching \
    -cc '{"inductor_compile_config":{"combo_kernels": false}}' \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}'

# Mooncake Connector Proxy
python3 /workspace/vllm/examples/online_serving/disaggregated_serving/mooncake_connector/mooncake_connector_proxy.py \
    --prefill "http://10.16.1.15:9348" "8998" \
    --decode "http://10.16.1.16:9349" \
    --port 8000
