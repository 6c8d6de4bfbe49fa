#!/bin/bash
# vllm-project/vllm .buildkite/amd-disagg (v0.28.0): vllm_disagg.sh node mode, TP mode (WIDE_EP_MODE=0), 1P1D,
# DeepSeek-V3 from models.yaml, MoRIIOConnector (write mode, MORIIO_READ_MODE=0), cluster.sh's environment;
# run_xPyD_disagg.slurm starts one container per node.
# Image: vllm/vllm-openai-rocm:v0.28.0 (the CI default is :nightly; this is the release the script ships in).
export VLLM_USE_V1=1
export VLLM_ENGINE_READY_TIMEOUT_S=3600
export MORI_RDMA_DEVICES=rdma0,rdma1,rdma2,rdma3,rdma4,rdma5,rdma6,rdma7
export MORI_IB_GID_INDEX=1
export MORI_SHMEM_HEAP_SIZE=16G
export MORI_GPU_ARCHS=gfx950
export VLLM_ROCM_USE_AITER=1
export VLLM_ROCM_USE_AITER_MLA=1
export VLLM_ROCM_USE_AITER_MOE=1
export VLLM_ROCM_USE_AITER_RMSNORM=1
export VLLM_ROCM_USE_AITER_FUSION_SHARED_EXPERTS=0
IMAGE=vllm/vllm-openai-rocm:v0.28.0
MODEL_PATH=deepseek-ai/DeepSeek-V3

# node 0 (10.0.0.1): prefill, kv_producer
srun --nodelist=node0 --ntasks=1 docker run --rm --device /dev/dri --device /dev/kfd --device /dev/infiniband \
    --network host --ipc host --group-add video --privileged --shm-size 64G --ulimit memlock=-1 \
    -e VLLM_USE_V1 -e VLLM_ENGINE_READY_TIMEOUT_S -e MORI_RDMA_DEVICES -e MORI_IB_GID_INDEX -e MORI_SHMEM_HEAP_SIZE \
    -e MORI_GPU_ARCHS -e VLLM_ROCM_USE_AITER -e VLLM_ROCM_USE_AITER_MLA -e VLLM_ROCM_USE_AITER_MOE \
    -e VLLM_ROCM_USE_AITER_RMSNORM -e VLLM_ROCM_USE_AITER_FUSION_SHARED_EXPERTS \
    $IMAGE vllm serve $MODEL_PATH --host 10.0.0.1 --port 8100 --tensor-parallel-size 8 \
    --trust-remote-code --kv-cache-dtype fp8 --gpu-memory-utilization 0.85 \
    --kv-transfer-config '{"kv_connector": "MoRIIOConnector", "kv_role": "kv_producer", "kv_connector_extra_config": {"proxy_ip": "10.0.0.1", "proxy_ping_port": "36367", "http_port": "8100", "handshake_port": "6301", "notify_port": "61005"}}' &

# node 1 (10.0.0.2): decode, kv_consumer
srun --nodelist=node1 --ntasks=1 docker run --rm --device /dev/dri --device /dev/kfd --device /dev/infiniband \
    --network host --ipc host --group-add video --privileged --shm-size 64G --ulimit memlock=-1 \
    -e VLLM_USE_V1 -e VLLM_ENGINE_READY_TIMEOUT_S -e MORI_RDMA_DEVICES -e MORI_IB_GID_INDEX -e MORI_SHMEM_HEAP_SIZE \
    -e MORI_GPU_ARCHS -e VLLM_ROCM_USE_AITER -e VLLM_ROCM_USE_AITER_MLA -e VLLM_ROCM_USE_AITER_MOE \
    -e VLLM_ROCM_USE_AITER_RMSNORM -e VLLM_ROCM_USE_AITER_FUSION_SHARED_EXPERTS \
    $IMAGE vllm serve $MODEL_PATH --host 10.0.0.2 --port 8200 --tensor-parallel-size 8 \
    --trust-remote-code --kv-cache-dtype fp8 --gpu-memory-utilization 0.85 \
    --kv-transfer-config '{"kv_connector": "MoRIIOConnector", "kv_role": "kv_consumer", "kv_connector_extra_config": {"proxy_ip": "10.0.0.1", "proxy_ping_port": "36367", "http_port": "8200", "handshake_port": "6301", "notify_port": "61005"}}' &
wait
