#!/bin/bash
# Heterogeneous PD Disaggregation on CUDA+Gaudi Multi-Node System
# (vllm-project/vllm-gaudi docs/features/heterogeneous_pd.md, "Launching Services", filled with validated configuration 2: prefill HND block 16, decode NHD block 128)

# ---- For the prefill (CUDA) service ----
# Configuration
VLLM_KV_CACHE_LAYOUT="HND"
HOST="10.0.0.11"
PORT="8100"
BLOCK="16"
MODEL=Qwen/Qwen3-0.6B

# Exports
export VLLM_KV_CACHE_LAYOUT
export UCX_TLS=ib,rc,cuda_copy # Proper ucx config
export UCX_MEMTYPE_CACHE=0
export LD_LIBRARY_PATH="/tmp/ucx_install/lib:/opt/nvidia/nvda_nixl/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH}"
export VLLM_NIXL_SIDE_CHANNEL_HOST=$HOST

vllm serve $MODEL \
  --port $PORT \
  --gpu-memory-utilization 0.8 \
  --block-size $BLOCK \
  --kv-transfer-config '{"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_buffer_device": "cuda", "kv_connector_extra_config": {"enforce_handshake_compat": false}}'

# ---- For the decode (Gaudi) service ----
# Configuration
VLLM_KV_CACHE_LAYOUT="NHD"
HOST="10.0.0.12"
PORT="8200"
BLOCK="128"
MODEL=Qwen/Qwen3-0.6B

# Exports
export VLLM_KV_CACHE_LAYOUT
export UCX_TLS=ib,rc,gaudi_gdr # Proper ucx config
export UCX_MEMTYPE_CACHE=0
export LD_LIBRARY_PATH="/tmp/ucx_install/lib:/opt/nvidia/nvda_nixl/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH}"
export VLLM_NIXL_SIDE_CHANNEL_HOST=$HOST

vllm serve $MODEL \
  --port $PORT \
  --gpu-memory-utilization 0.8 \
  --block-size $BLOCK \
  --kv-transfer-config '{"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_buffer_device": "hpu", "enable_permute_local_kv": "True", "kv_connector_extra_config": {"enforce_handshake_compat": false}}'
