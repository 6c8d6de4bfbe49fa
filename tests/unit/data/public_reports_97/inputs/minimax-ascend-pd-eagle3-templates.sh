#!/usr/bin/env bash
# MiniMax-M2.5 w8a8 QuaRot - PD separation, vllm-ascend external_online_dp templates (prefill then decode),
# each called by launch_online_dp.py with $1 visible_devices, $2 port, $3 dp_size, $4 dp_rank, $5 dp_address,
# $6 dp_rpc_port, $7 tp_size.
MODEL_PATH="${MODEL_PATH:-/path/to/weight/MiniMax-M2.5-w8a8-QuaRot}"
EAGLE_MODEL_PATH="${EAGLE_MODEL_PATH:-/path/to/weight/MiniMax-M2.5-eagle-model-0318}"
export ASCEND_RT_VISIBLE_DEVICES=$1

# prefill node
vllm serve "$MODEL_PATH" \
    --host 0.0.0.0 \
    --port $2 \
    --data-parallel-size $3 \
    --data-parallel-rank $4 \
    --data-parallel-address $5 \
    --data-parallel-rpc-port $6 \
    --tensor-parallel-size $7 \
    --enable-expert-parallel \
    --served-model-name minimax \
    --max-model-len 200000 \
    --max-num-batched-tokens 16384 \
    --max-num-seqs 64 \
    --trust-remote-code \
    --gpu-memory-utilization 0.75 \
    --quantization ascend \
    --enforce-eager \
    --speculative_config "{\"method\": \"eagle3\", \"model\": \"$EAGLE_MODEL_PATH\", \"num_speculative_tokens\": 1}" \
    --additional-config '{"enable_cpu_binding":true}' \
    --kv-transfer-config \
        '{"kv_connector": "MooncakeConnectorV1",
        "kv_role": "kv_producer",
        "kv_port": "35880",
        "engine_id": "0",
        "kv_connector_extra_config": {
             "use_ascend_direct": true,
             "prefill": {"dp_size": 2, "tp_size": 8},
             "decode":  {"dp_size": 2, "tp_size": 8}
        }}'

# decode node
vllm serve "$MODEL_PATH" \
    --host 0.0.0.0 \
    --port $2 \
    --data-parallel-size $3 \
    --data-parallel-rank $4 \
    --data-parallel-address $5 \
    --data-parallel-rpc-port $6 \
    --tensor-parallel-size $7 \
    --enable-expert-parallel \
    --served-model-name minimax \
    --max-model-len 200000 \
    --max-num-batched-tokens 16384 \
    --max-num-seqs 16 \
    --trust-remote-code \
    --no-enable-prefix-caching \
    --gpu-memory-utilization 0.75 \
    --quantization ascend \
    --compilation-config '{"cudagraph_mode":"FULL_DECODE_ONLY"}' \
    --speculative_config "{\"method\": \"eagle3\", \"model\": \"$EAGLE_MODEL_PATH\", \"num_speculative_tokens\": 3}" \
    --additional-config '{"enable_cpu_binding":true}' \
    --kv-transfer-config \
        '{"kv_connector": "MooncakeConnectorV1",
        "kv_role": "kv_consumer",
        "kv_port": "56900",
        "engine_id": "1",
        "kv_connector_extra_config": {
             "use_ascend_direct": true,
             "prefill": {"dp_size": 2, "tp_size": 8},
             "decode":  {"dp_size": 2, "tp_size": 8}
        }}'
