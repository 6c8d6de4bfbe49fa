# docs.vllm.tw (zh-TW) NixlConnector 用法指南, 基本用法(在同一主機上) -- decode TP 2
pip install vllm==0.11.0 nixl
export UCX_TLS=all
export UCX_NET_DEVICES=all
# 1st GPU as prefiller
CUDA_VISIBLE_DEVICES=0 \
UCX_NET_DEVICES=all \
VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
vllm serve Qwen/Qwen3-0.6B \
  --port 8100 \
  --enforce-eager \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &
# 2nd GPU as decoder
CUDA_VISIBLE_DEVICES=1,2 \
UCX_NET_DEVICES=all \
VLLM_NIXL_SIDE_CHANNEL_PORT=5601 \
vllm serve Qwen/Qwen3-0.6B \
  --port 8200 \
  --enforce-eager --tensor-parallel-size 2 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &
python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8192 --prefiller-hosts localhost --prefiller-ports 8100 --decoder-hosts localhost --decoder-ports 8200
