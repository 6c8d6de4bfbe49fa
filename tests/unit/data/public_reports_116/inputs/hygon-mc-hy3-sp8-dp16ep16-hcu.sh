# HYGON-AI/inference-cookbook-das docs/frameworks/mooncake.md (中文), "vLLM PD 分离" -- "P：SP8  D：DP16EP16 (1P1D)" as published, on Hygon HCU (prefill 10.16.1.15, decode head 10.16.1.16, decode headless 10.16.1.18)
docker pull harbor.sourcefind.cn:5443/dcu/admin/base/vllm:0.18.1-ubuntu22.04-dtk26.04-py3.10
# KV Producer（Prefill）
export VLLM_HCU_USE_CUSTOM_FLASH_ATTN=1
export GPU_MAX_HW_QUEUES=4
export VLLM_HCU_USE_LIGHTOP_MOE_ALIGN=1
export LMSLIM_USE_LIGHTOP=1
export HIPBLASLT_TUNING_OVERRIDE_FILE=/workspace/rocblas/hipblaslt.config
export ROCBLAS_TENSILE_LIBPATH=/workspace/rocblas/rocblas_hy3_fp8_zmy
export MC_ENABLE_DEST_DEVICE_AFFINITY=1
LMSLIM_USE_FUSED_RMS_QUANT=1 \
VLLM_HCU_USE_FUSED_QKV_SPLIT_RMS_ROPE_KVSTORE=0 \
vllm serve /models/Hy3-CHANNEL-FP8-w8a8-sero-ignore-from-script3 \
    --speculative-config.method mtp \
    --speculative-config.num_speculative_tokens 2 \
    --max-model-len 65536 \
    --max-num-batched-tokens 8192 \
    --max-num-seqs 128 \
    --dtype bfloat16 \
    --tensor-parallel-size 8 \
    --no-enable-prefix-caching \
    --tool-call-parser hy_v3 \
    --reasoning-parser hy_v3 \
    --enable-auto-tool-choice \
    --enable-custom-sp \
    --enforce-eager \
    --kv_cache_dtype fp8_e4m3 \
    --port 8010 \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}'

# KV Consumer（Decode）
# 10.16.1.16:
export VLLM_HOST_IP=10.16.1.16
export NCCL_SOCKET_IFNAME=ens14f0
export GLOO_SOCKET_IFNAME=ens14f0
export HIP_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
export VLLM_RPC_TIMEOUT=1800000
export VLLM_ROCM_USE_AITER=0
export VLLM_HCU_USE_FLASHMLA=1
export VLLM_HCU_DISABLE_DSA=0
export NCCL_NET_GDR_LEVEL=7
export NCCL_IB_HCA=mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1
export VLLM_MOE_DP_CHUNK_SIZE=128
export VLLM_USE_LIGHTOP=1
export VLLM_HCU_USE_CUSTOM_FLASH_ATTN=1
export GPU_MAX_HW_QUEUES=4
export MC_ENABLE_DEST_DEVICE_AFFINITY=1
vllm serve /models/Hy3-CHANNEL-FP8-w8a8-sero-ignore-from-script3 \
    --trust-remote-code \
    -dp 16 \
    -tp 1 \
    --enable-expert-parallel \
    --disable-custom-all-reduce \
    --dtype bfloat16 \
    --enable-chunked-prefill \
    --max-model-len 53000 \
    --enable-prefix-caching \
    --block-size 64 \
    --gpu-memory-utilization 0.89 \
    --data-parallel-size-local 8 \
    --data-parallel-address 10.16.1.16 \
    --data-parallel-rpc-port 1127 \
    --data-parallel-start-rank 0 \
    --kv-cache-dtype fp8_e4m3 \
    -q slimquant_marlin \
    --max-num-seqs 256 \
    --all2all_backend=deepep_low_latency \
    --speculative_config '{"method":"mtp","num_speculative_tokens":2, "quantization": "slimquant_marlin"}' \
    --port 8020 \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}'
# 10.16.1.18:
export VLLM_HOST_IP=10.16.1.18
vllm serve /models/Hy3-CHANNEL-FP8-w8a8-sero-ignore-from-script3 \
    --trust-remote-code \
    -dp 16 \
    -tp 1 \
    --enable-expert-parallel \
    --disable-custom-all-reduce \
    --dtype bfloat16 \
    --enable-chunked-prefill \
    --max-model-len 53000 \
    --enable-prefix-caching \
    --block-size 64 \
    --gpu-memory-utilization 0.89 \
    --data-parallel-size-local 8 \
    --data-parallel-address 10.16.1.16 \
    --data-parallel-rpc-port 1127 \
    --data-parallel-start-rank 8 \
    --kv-cache-dtype fp8_e4m3 \
    -q slimquant_marlin \
    --max-num-seqs 256 \
    --headless \
    --all2all_backend=deepep_low_latency \
    --speculative_config '{"method":"mtp","num_speculative_tokens":2, "quantization": "slimquant_marlin"}' \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}'

# Mooncake Connector Proxy
python3 /workspace/vllm/examples/online_serving/disaggregated_serving/mooncake_connector/mooncake_connector_proxy.py \
    --prefill "http://10.16.1.15:8010" "8998" \
    --decode "http://10.16.1.16:8020" \
    --port 8000
