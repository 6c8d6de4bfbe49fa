#!/bin/bash
# SemiAnalysisAI/InferenceX benchmarks/multi_node/amd_utils (c1e663584): MiniMax-M3-MXFP4 on MI355X, vllm-disagg 1P1D,
# TP 4 per worker (amd-master.yaml minimaxm3-fp4-mi355x-vllm-disagg), MoRIIOConnector in read mode, vllm-router on node 0.
# server_vllm.sh's vllm serve per role with models_vllm.yaml's MiniMax-M3-MXFP4 flags and env, in job.slurm's container.
IMAGE=vllm/vllm-openai-rocm:nightly-2dfaae752b4db0d43cfc0715c780e33be030d0f1
MODEL_PATH=amd/MiniMax-M3-MXFP4
NODE0_ADDR=10.20.0.1
COMMON_ENV="-e VLLM_USE_V1=1 -e VLLM_ROCM_USE_AITER=1 -e VLLM_ROCM_USE_AITER_MOE=1 -e VLLM_ROCM_USE_AITER_FUSION_SHARED_EXPERTS=1 -e VLLM_USE_BREAKABLE_CUDAGRAPH=0 -e VLLM_ENGINE_READY_TIMEOUT_S=3600 -e VLLM_NIXL_SIDE_CHANNEL_PORT=5600"
FLAGS="--tensor-parallel-size 4 --max-num-batched-tokens 32768 --max-num-seqs 512 --block-size 128 --language-model-only --attention-backend TRITON_ATTN --moe-backend aiter --no-enable-prefix-caching --gpu-memory-utilization 0.90 --tool-call-parser minimax_m3 --reasoning-parser minimax_m3 --enable-auto-tool-choice"

# node 0: prefill (kv_producer), GPUs 0-3
srun --nodelist=mi355x-0 --ntasks=1 docker run --rm --device /dev/dri --device /dev/kfd --device /dev/infiniband --network host --ipc host \
    --group-add video --privileged --shm-size 128G --ulimit memlock=-1 $COMMON_ENV -e VLLM_NIXL_SIDE_CHANNEL_HOST=10.20.0.1 \
    -e VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=INT4 -e VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB=2048 -e HIP_VISIBLE_DEVICES=0,1,2,3 \
    $IMAGE vllm serve $MODEL_PATH --served-model-name MiniMax-M3-MXFP4 --port 2584 --trust-remote-code \
    --kv-transfer-config '{"kv_connector": "MoRIIOConnector", "kv_role": "kv_producer", "kv_connector_extra_config": {"proxy_ip": "10.20.0.1", "proxy_ping_port": "36367", "http_port": "2584", "read_mode": true}}' \
    $FLAGS &

# node 1: decode (kv_consumer), GPUs 0-3
srun --nodelist=mi355x-1 --ntasks=1 docker run --rm --device /dev/dri --device /dev/kfd --device /dev/infiniband --network host --ipc host \
    --group-add video --privileged --shm-size 128G --ulimit memlock=-1 $COMMON_ENV -e VLLM_NIXL_SIDE_CHANNEL_HOST=10.20.0.2 \
    -e HIP_VISIBLE_DEVICES=0,1,2,3 \
    $IMAGE vllm serve $MODEL_PATH --served-model-name MiniMax-M3-MXFP4 --port 2584 --trust-remote-code \
    --kv-transfer-config '{"kv_connector": "MoRIIOConnector", "kv_role": "kv_consumer", "kv_connector_extra_config": {"proxy_ip": "10.20.0.1", "proxy_ping_port": "36367", "http_port": "2584", "read_mode": true}}' \
    $FLAGS &
wait
