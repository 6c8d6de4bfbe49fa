#!/bin/bash
# vllm-project/vllm issue #44688 ("[Performance]: Qwen3.6-35B-A3B-FP8 on RTX PRO 6000 Blackwell has very low decode
# throughput; missing FP8 MoE config for E=256,N=256"): the single RTX PRO 6000 command, tested on vLLM 0.22.1 and
# 0.21.0. One engine, FP8 checkpoint with --quantization fp8 and an FP8 KV cache; no KV connector, no P/D roles.
pip install vllm==0.22.1

vllm serve Qwen/Qwen3.6-35B-A3B-FP8 \
  --api-server-count 4 \
  --tensor-parallel-size 1 \
  --max-model-len 65536 \
  --max-num-seqs 128 \
  --max-num-batched-tokens 16384 \
  --kv-cache-dtype fp8 \
  --quantization fp8 \
  --gpu-memory-utilization 0.97 \
  --download-dir /root/autodl-tmp \
  --reasoning-parser qwen3 \
  --enable-auto-tool-choice \
  --tool-call-parser qwen3_coder \
  --mm-processor-cache-type shm \
  --mm-shm-cache-max-object-size-mb 256 \
  --enable-prefix-caching
