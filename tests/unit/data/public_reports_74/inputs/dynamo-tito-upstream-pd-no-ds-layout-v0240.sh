#!/bin/bash
# ai-dynamo/dynamo tests/serve/tito_parity/run_pd_three_way.py at 1efd538: the upstream vLLM P/D reference pair the
# parity runner cold-starts (upstream_worker_command + upstream_pd_pair; constants of run_parity.py: max len 4096,
# 4 seqs, 4 GiB KV), both engines on the one visible GPU, decode first; the README names vLLM 0.24.0 and Qwen3.5-2B.
# variant: the two vllm serve commands copied without the runner's environment: VLLM_SSM_CONV_STATE_LAYOUT unset
pip install vllm==0.24.0
export CUDA_VISIBLE_DEVICES=0
MODEL=Qwen/Qwen3.5-2B

# decode (started first; the runner waits for it to be healthy)
VLLM_NIXL_SIDE_CHANNEL_PORT=18004 \
vllm serve $MODEL \
  --served-model-name $MODEL \
  --port 19001 \
  --tensor-parallel-size 1 \
  --max-model-len 4096 \
  --max-num-seqs 4 \
  --max-num-batched-tokens 4096 \
  --kv-cache-memory-bytes 4294967296 \
  --no-enable-prefix-caching \
  --enforce-eager \
  --generation-config vllm \
  --mm-processor-cache-gb 0 \
  --gpu-memory-utilization 0.01 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

# prefill
VLLM_NIXL_SIDE_CHANNEL_PORT=18005 \
vllm serve $MODEL \
  --served-model-name $MODEL \
  --port 19000 \
  --tensor-parallel-size 1 \
  --max-model-len 4096 \
  --max-num-seqs 4 \
  --max-num-batched-tokens 4096 \
  --kv-cache-memory-bytes 4294967296 \
  --no-enable-prefix-caching \
  --enforce-eager \
  --generation-config vllm \
  --mm-processor-cache-gb 0 \
  --gpu-memory-utilization 0.01 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

wait
