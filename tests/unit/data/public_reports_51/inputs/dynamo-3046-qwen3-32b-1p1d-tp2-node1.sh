#!/bin/bash
# Dynamo v0.4.1 (pip install "ai-dynamo[vllm]==0.4.1"), node1 of two: one prefill and one decode worker of
# Qwen3-32B, TP 2 each, and the frontend with the KV router. node2 runs the same two workers (no frontend).
MODEL=/root/.cache/huggingface/hub/models--Qwen--Qwen3-32B/snapshots/9216db5781bf21249d130ec9da846c4624c16137

python -m dynamo.frontend --router-mode kv --http-port 8090 &

CUDA_VISIBLE_DEVICES=0,1 python -m dynamo.vllm \
  --served-model-name "Qwen/Qwen3-32B" \
  --model "$MODEL" \
  --tensor-parallel-size 2 \
  --block-size 64 &

CUDA_VISIBLE_DEVICES=2,3 python -m dynamo.vllm \
  --served-model-name "Qwen/Qwen3-32B" \
  --model "$MODEL" \
  --tensor-parallel-size 2 \
  --block-size 64 \
  --is-prefill-worker &

wait
