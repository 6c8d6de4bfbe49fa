#!/bin/bash
# SemiAnalysisAI/InferenceX benchmarks/multi_node/vllm_disagg_utils (d16bd211e): DeepSeek-R1-0528 FP8 on MI355X,
# 1P2D (one prefill node, two decode nodes, TP 8 each), NixlConnector over RIXL/UCX, vllm-router on the prefill node.
# job.slurm's docker run per node with server.sh's vllm serve for that node's role (models.yaml DeepSeek-R1-0528).
# Variant: vLLM's public ROCm image v0.25.0 on every node.
MODEL_PATH=deepseek-ai/DeepSeek-R1-0528
UCX_ENV="-e UCX_TLS=tcp,self,shm,rocm_ipc,rocm_copy,cma -e UCX_SOCKADDR_TLS_PRIORITY=tcp -e UCX_MEMTYPE_CACHE=y -e UCX_RNDV_SCHEME=get_zcopy -e UCX_RNDV_THRESH=4k -e UCX_ROCM_IPC_MIN_ZCOPY=0 -e UCX_LOG_LEVEL=warn -e HSA_ENABLE_SDMA=1 -e UCX_NET_DEVICES=benic1p1 -e UCX_IB_GID_INDEX=1"
MODEL_ENV="-e VLLM_USE_V1=1 -e VLLM_SERVER_DEV_MODE=0 -e VLLM_ROCM_USE_AITER=1 -e VLLM_ROCM_USE_AITER_PAGED_ATTN=0 -e VLLM_ROCM_USE_AITER_RMSNORM=1 -e VLLM_USE_AITER_TRITON_SILU_MUL=0"

# node 0 (192.168.1.10): prefill (kv_producer)
srun --nodelist=mi355x-node-0 --ntasks=1 docker run --rm --init --device /dev/dri --device /dev/kfd --device /dev/infiniband \
    --ulimit memlock=-1 --ulimit stack=67108864 --network host --ipc host --group-add video --cap-add SYS_PTRACE \
    --security-opt seccomp=unconfined --privileged --shm-size 128G -v /data/models:/models \
    $UCX_ENV $MODEL_ENV -e VLLM_NIXL_SIDE_CHANNEL_HOST=192.168.1.10 -e VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
    vllm/vllm-openai-rocm:v0.25.0 \
    vllm serve $MODEL_PATH --port 2584 --trust-remote-code \
        --kv-transfer-config '{"kv_connector": "NixlConnector", "kv_role": "kv_producer", "kv_load_failure_policy": "fail"}' \
        --tensor-parallel-size 8 --compilation-config '{"cudagraph_mode":"PIECEWISE"}' --no-enable-prefix-caching --block-size 1 &

# nodes 1 and 2 (192.168.1.11, 192.168.1.12): decode (kv_consumer)
for i in 1 2; do
srun --nodelist=mi355x-node-$i --ntasks=1 docker run --rm --init --device /dev/dri --device /dev/kfd --device /dev/infiniband \
    --ulimit memlock=-1 --ulimit stack=67108864 --network host --ipc host --group-add video --cap-add SYS_PTRACE \
    --security-opt seccomp=unconfined --privileged --shm-size 128G -v /data/models:/models \
    $UCX_ENV $MODEL_ENV -e VLLM_NIXL_SIDE_CHANNEL_HOST=192.168.1.1$i -e VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
    vllm/vllm-openai-rocm:v0.25.0 \
    vllm serve $MODEL_PATH --port 2584 --trust-remote-code \
        --kv-transfer-config '{"kv_connector": "NixlConnector", "kv_role": "kv_consumer", "kv_load_failure_policy": "fail"}' \
        --tensor-parallel-size 8 --compilation-config '{"cudagraph_mode":"PIECEWISE"}' --no-enable-prefix-caching --block-size 1 &
done
wait
