CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5567 vllm serve /workspace/models/qwen2.5_7B \
  --port 20001 \
  --tensor-parallel-size 1 \
  --enforce-eager \
  --block-size 16 \
  --enable-log-requests \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5667 viztracer -o decode.json vllm serve /workspace/models/qwen2.5_7B \
  --port 20002 \
  --tensor-parallel-size 1 \
  --enforce-eager \
  --block-size 16 \
  --enable-log-requests \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
