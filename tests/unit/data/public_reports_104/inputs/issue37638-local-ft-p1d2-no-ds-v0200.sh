#!/bin/bash
# vllm-project/vllm issue #37638 ("[Tracking Issue]: Mamba Heterogeneous TP for NIXL P/D Disaggregation"):
# prefill TP 1 / decode TP 2 ("1p2d"), validated with lm_eval gsm8k on Nemotron-Nano-30B-A3B-FP8 after the 3-read
# conv-state transfer with the DS layout (#37635) merged. The user's fine-tune of the model from a local directory, and no VLLM_SSM_CONV_STATE_LAYOUT (copied from PR #36687's recipe).
pip install vllm==0.20.0
export VLLM_NIXL_SIDE_CHANNEL_HOST=127.0.0.1
MODEL="/models/my-nano-ft"

CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
vllm serve "$MODEL" --port 8100 \
  --tensor-parallel-size 1 \
  --trust-remote-code \
  --max-model-len 8192 \
  --gpu-memory-utilization 0.8 \
  --no-enable-prefix-caching \
  --no-disable-hybrid-kv-cache-manager \
  --no-async-scheduling \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}' > prefill.log 2>&1 &

CUDA_VISIBLE_DEVICES=1,2 VLLM_NIXL_SIDE_CHANNEL_PORT=5610 \
vllm serve "$MODEL" --port 8200 \
  --tensor-parallel-size 2 \
  --trust-remote-code \
  --max-model-len 8192 \
  --gpu-memory-utilization 0.8 \
  --no-enable-prefix-caching \
  --no-disable-hybrid-kv-cache-manager \
  --no-async-scheduling \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}' > decode.log 2>&1 &

python3 tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8192 \
  --prefiller-hosts localhost --prefiller-ports 8100 \
  --decoder-hosts localhost --decoder-ports 8200 &
wait
