# ai-dynamo/nixl#699: vLLM NixlConnector with NIXL's Mooncake transfer-engine plugin as the backend (after nixl#493), 1P1D on one host
pip install vllm==0.11.0
CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve Qwen/Qwen3-8B \
    --port 8100 --tensor-parallel-size 1 --enforce-eager \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_connector_extra_config":{"backends":["MOONCAKE"]}}' &

CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve Qwen/Qwen3-8B \
    --port 8200 --tensor-parallel-size 1 --enforce-eager \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &
