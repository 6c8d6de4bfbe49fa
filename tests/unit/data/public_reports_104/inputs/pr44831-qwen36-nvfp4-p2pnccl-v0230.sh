#!/bin/bash
# vllm-project/vllm PR #44831 ("[Core]P2P NCCL connector: add hybrid SSM/Mamba model support", closed unmerged):
# its test plan on 4x RTX 5090 (GPUs 4-7), Qwen3.6-35B-A3B-NVFP4 (compressed-tensors), the xPyD proxy with
# HTTP 10001 / ZMQ 30001 and VLLM_SSM_CONV_STATE_LAYOUT=DS, one prefill and one decode. On vLLM 0.23.0, the last release that ships P2pNcclConnector, without the PR.
pip install vllm==0.23.0
export VLLM_SSM_CONV_STATE_LAYOUT=DS
export VLLM_DISABLE_REQUEST_ID_RANDOMIZATION=1
MODEL=/data/models/Qwen3.6-35B-A3B-NVFP4

# 1. proxy
python3 examples/online_serving/disaggregated_serving_p2p_nccl_xpyd/disagg_proxy_p2p_nccl_xpyd.py &

# 2. prefill server
CUDA_VISIBLE_DEVICES=4 vllm serve $MODEL \
  --host 0.0.0.0 --port 20003 \
  --served-model-name base_model \
  --max-model-len 16384 \
  --gpu-memory-utilization 0.85 \
  --trust-remote-code \
  --kv-transfer-config '{"kv_connector":"P2pNcclConnector","kv_role":"kv_producer","kv_buffer_size":"1e1","kv_port":"21001","kv_connector_extra_config":{"proxy_ip":"127.0.0.1","proxy_port":"30001","http_port":"20003","send_type":"PUT_ASYNC"}}' > prefill.log 2>&1 &

# 3. decode server
CUDA_VISIBLE_DEVICES=5 vllm serve $MODEL \
  --host 0.0.0.0 --port 20005 \
  --served-model-name base_model \
  --max-model-len 16384 \
  --gpu-memory-utilization 0.85 \
  --trust-remote-code \
  --kv-transfer-config '{"kv_connector":"P2pNcclConnector","kv_role":"kv_consumer","kv_buffer_size":"8e9","kv_port":"22001","kv_connector_extra_config":{"proxy_ip":"127.0.0.1","proxy_port":"30001","http_port":"20005","send_type":"PUT_ASYNC"}}' > decode.log 2>&1 &
wait
