#!/bin/bash
# vllm-project/vllm v0.30.0 tests/v1/ec_connector/integration/run_epd_correctness_test.sh, its 1P1D baseline
# (run_baseline_1p1d): Qwen2.5-VL-3B-Instruct, one prefill and one decode on one GPU each of one host, NixlConnector
# producer/consumer, the script's defaults (MAX_MODEL_LEN 10240, GPU_MEMORY_UTILIZATION 0.7, MAX_NUM_SEQS 128).
# Variant: the decode alone gets --dtype float16 (the prefill keeps the checkpoint's bfloat16).
pip install vllm==0.30.0
MODEL=Qwen/Qwen2.5-VL-3B-Instruct
GIT_ROOT=/workspace/vllm

# prefill
CUDA_VISIBLE_DEVICES=0 \
VLLM_NIXL_SIDE_CHANNEL_PORT=5559 \
vllm serve "$MODEL" \
    --port 8100 \
    --max-model-len 10240 \
    --enforce-eager \
    --gpu-memory-utilization 0.7 \
    --enable-request-id-headers \
    --max-num-seqs 128 \
    --allowed-local-media-path "${GIT_ROOT}"/tests/v1/ec_connector/integration \
    --kv-transfer-config '{
        "kv_connector": "NixlConnector",
        "kv_role": "kv_producer"
    }' \
    > /tmp/1p1d_prefill.log 2>&1 &

# decode
CUDA_VISIBLE_DEVICES=1 \
VLLM_NIXL_SIDE_CHANNEL_PORT=6000 \
vllm serve "$MODEL" \
    --port 8200 \
    --max-model-len 10240 \
    --enforce-eager \
    --dtype float16 \
    --gpu-memory-utilization 0.7 \
    --enable-request-id-headers \
    --max-num-seqs 128 \
    --allowed-local-media-path "${GIT_ROOT}"/tests/v1/ec_connector/integration \
    --kv-transfer-config '{
        "kv_connector": "NixlConnector",
        "kv_role": "kv_consumer"
    }' \
    > /tmp/1p1d_decode.log 2>&1 &

python "${GIT_ROOT}"/tests/v1/kv_connector/nixl_integration/toy_proxy_server.py \
    --host 0.0.0.0 --port 8000 --prefiller-ports 8100 --decoder-ports 8200 &
wait
