#!/bin/bash
# vllm-project/vllm v0.30.0 tests/v1/kv_connector/mooncake_integration/run_accuracy_test.sh with its defaults:
# Qwen/Qwen3-0.6B, one prefill and one decode on one GPU each of one host, MooncakeConnector producer/consumer over
# the RoCE HCA mlx5_12, block size 128, TP 1, GPU_MEMORY_UTILIZATION 0.2, no VLLM_SERVE_EXTRA_ARGS.
# Variant: the script's own VLLM_SERVE_EXTRA_ARGS example (--max-model-len 2048) given to the decode only.
pip install vllm==0.30.0 mooncake-transfer-engine

# prefill
CUDA_VISIBLE_DEVICES=0 \
VLLM_MOONCAKE_BOOTSTRAP_PORT=8998 \
vllm serve Qwen/Qwen3-0.6B \
    --port 8100 \
    --enforce-eager \
    --block-size 128 \
    --gpu-memory-utilization 0.2 \
    --tensor-parallel-size 1 \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_producer","kv_connector_extra_config":{"device_name":"mlx5_12"}}' &

# decode
CUDA_VISIBLE_DEVICES=1 \
vllm serve Qwen/Qwen3-0.6B \
    --port 8200 \
    --enforce-eager \
    --block-size 128 \
    --gpu-memory-utilization 0.2 \
    --tensor-parallel-size 1 \
    --max-model-len 2048 \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"device_name":"mlx5_12"}}' &

python3 /workspace/vllm/examples/disaggregated/mooncake_connector/mooncake_connector_proxy.py \
    --prefill http://localhost:8100 8998 --decode http://localhost:8200 --port 8192 &
wait
