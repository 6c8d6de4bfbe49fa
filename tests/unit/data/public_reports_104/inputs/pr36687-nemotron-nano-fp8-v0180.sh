#!/bin/bash
# vllm-project/vllm PR #36687 ("[PD][Nixl] Add support for hybrid SSM-FA models", merged 2026-03): its test
# recipe, "usual P/D command" for both engines and "usual toy_proxy_server.py command", run as one prefill and one
# decode on one host. vLLM 0.18.0, the first release with the PR.
pip install vllm==0.18.0
MODEL="nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8"

# prefill
CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
vllm serve "$MODEL" \
  --port 8100 \
  --trust-remote-code \
  --block-size 64 \
  --no-enable-prefix-caching \
  --no-disable-hybrid-kv-cache-manager \
  --mamba-ssm-cache-dtype float16 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

# decode
CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 \
vllm serve "$MODEL" \
  --port 8200 \
  --trust-remote-code \
  --block-size 64 \
  --no-enable-prefix-caching \
  --no-disable-hybrid-kv-cache-manager \
  --mamba-ssm-cache-dtype float16 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

python3 tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8000 \
  --prefiller-hosts localhost --prefiller-ports 8100 \
  --decoder-hosts localhost --decoder-ports 8200 &
wait
