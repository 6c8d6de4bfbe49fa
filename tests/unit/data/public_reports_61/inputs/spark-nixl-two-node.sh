#!/bin/bash
# Two DGX Spark nodes (GB10, one GPU each) joined by RoCE; commands as the notebook builds them.
VENV_PATH=$HOME/src/github.com/elizabetht/spark/.venv
MODEL_PATH=/home/nvidia/.cache/huggingface/hub/models--meta-llama--Llama-3.1-8B-Instruct/snapshots/0e9e39f249a16976918f6564b8830bc894c89659
$VENV_PATH/bin/pip install vllm==0.13.0 --extra-index-url https://wheels.vllm.ai/0.13.0/cu130 --extra-index-url https://download.pytorch.org/whl/cu130

# Step 4: prefill instance on spark-01 (192.168.100.10)
. $VENV_PATH/bin/activate && CUDA_HOME=/usr/local/cuda-13.0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  VLLM_NIXL_SIDE_CHANNEL_HOST=192.168.100.10 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
  vllm serve $MODEL_PATH --port 8100 --gpu-memory-utilization 0.3 \
  --kv-transfer-config '{"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_ip": "192.168.100.10", "kv_port": 5600}' \
  --tensor-parallel-size 1 > /tmp/vllm_prefill.log 2>&1 &

# Step 5: decode instance on spark-02 (192.168.100.11), started over ssh
ssh nvidia@192.168.100.11 ". $VENV_PATH/bin/activate && CUDA_HOME=/usr/local/cuda-13.0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NIXL_SIDE_CHANNEL_HOST=192.168.100.11 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve $MODEL_PATH --port 8200 --gpu-memory-utilization 0.3 --kv-transfer-config '{\"kv_connector\": \"NixlConnector\", \"kv_role\": \"kv_both\", \"kv_ip\": \"192.168.100.11\", \"kv_port\": 5600}' --tensor-parallel-size 1 > /tmp/vllm_decode.log 2>&1" &
