# vllm-project/recipes models/deepseek-ai/DeepSeek-V3.2.yaml + strategies/pd_cluster.yaml at cbf5e4d:
# pd_cluster on two 8xH200 nodes, TP 8 per role (base_args, no Hopper override); each command run on its own node.

pip install vllm==0.18.0
PREFILL_HOST_IP=10.0.0.11
DECODE_HOST_IP=10.0.0.12

# prefill node
VLLM_USE_NCCL_SYMM_MEM=1 NCCL_CUMEM_ENABLE=1 NCCL_MNNVL_ENABLE=1 NCCL_NVLS_ENABLE=1 UCX_NET_DEVICES=all \
VLLM_NIXL_SIDE_CHANNEL_PORT=5557 VLLM_NIXL_SIDE_CHANNEL_HOST=$PREFILL_HOST_IP \
vllm serve deepseek-ai/DeepSeek-V3.2 \
  --tensor-parallel-size 8 \
  --trust-remote-code \
  --kernel-config.enable_flashinfer_autotune=False \
  --port 8001 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}' \
  --enforce-eager

# decode node
VLLM_USE_NCCL_SYMM_MEM=1 NCCL_CUMEM_ENABLE=1 NCCL_MNNVL_ENABLE=1 NCCL_NVLS_ENABLE=1 UCX_NET_DEVICES=all \
VLLM_NIXL_SIDE_CHANNEL_PORT=5558 VLLM_NIXL_SIDE_CHANNEL_HOST=$DECODE_HOST_IP \
vllm serve deepseek-ai/DeepSeek-V3.2 \
  --tensor-parallel-size 8 \
  --trust-remote-code \
  --kernel-config.enable_flashinfer_autotune=False \
  --port 8002 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}' \
  --compilation-config '{"cudagraph_mode":"FULL_DECODE_ONLY"}'
