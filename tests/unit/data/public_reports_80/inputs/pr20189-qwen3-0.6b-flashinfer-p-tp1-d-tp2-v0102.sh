#!/bin/bash
# vllm-project/vllm#20189 ("[Nixl] Heterogeneous TP support FlashInfer"): its test, VLLM_ATTENTION_BACKEND=FLASHINFER with
# PREFILLER_TP_SIZE=1 DECODER_TP_SIZE=2 in run_accuracy_test.sh.
# Launched as tests/v1/kv_connector/nixl_integration/run_accuracy_test.sh launches its engines (one host, prefill TP 1 on
# GPU 0, decode TP 2 on GPUs 1,2, distinct HTTP and side-channel ports, toy_proxy_server.py in front), Qwen/Qwen3-0.6B.
# AS PUBLISHED, on the first release that carries the PR (0.10.2).
set -xe

pip install vllm==0.10.2
MODEL=Qwen/Qwen3-0.6B

CUDA_VISIBLE_DEVICES=0 VLLM_ATTENTION_BACKEND=FLASHINFER VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve $MODEL \
  --port 8100 \
  --enforce-eager \
  --gpu-memory-utilization 0.2 \
  --tensor-parallel-size 1 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

CUDA_VISIBLE_DEVICES=1,2 VLLM_ATTENTION_BACKEND=FLASHINFER VLLM_NIXL_SIDE_CHANNEL_PORT=5659 vllm serve $MODEL \
  --port 8200 \
  --enforce-eager \
  --gpu-memory-utilization 0.2 \
  --tensor-parallel-size 2 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

python3 tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8192 \
  --prefiller-hosts localhost --prefiller-ports 8100 \
  --decoder-hosts localhost --decoder-ports 8200
