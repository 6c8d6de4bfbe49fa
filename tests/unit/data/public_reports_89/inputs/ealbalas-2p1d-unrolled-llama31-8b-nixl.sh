#!/usr/bin/env bash
# ealbalas/disaggregated-prefill-decode-research experiments/run_experiment.sh with configs/ratios/2p1d.env
# (two prefills on GPUs 0-1, one decode on GPU 2, all on one PACE ICE node), the loops unrolled; model
# Llama-3.1-8B-Instruct as utils/download_model.sh pulls it (the script serves the local copy $MODEL).
pip install vllm==0.17.0
export UCX_NET_DEVICES=all

python toy_proxy_server.py \
  --port 8192 \
  --prefiller-hosts localhost localhost \
  --prefiller-ports 8100 8101 \
  --decoder-hosts localhost \
  --decoder-ports 8200 &

# prefill_0
CUDA_VISIBLE_DEVICES=0 \
VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
vllm serve meta-llama/Llama-3.1-8B-Instruct \
  --port 8100 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

# prefill_1
CUDA_VISIBLE_DEVICES=1 \
VLLM_NIXL_SIDE_CHANNEL_PORT=5601 \
vllm serve meta-llama/Llama-3.1-8B-Instruct \
  --port 8101 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

# decode_0
CUDA_VISIBLE_DEVICES=2 \
VLLM_NIXL_SIDE_CHANNEL_PORT=5700 \
vllm serve meta-llama/Llama-3.1-8B-Instruct \
  --port 8200 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

wait
