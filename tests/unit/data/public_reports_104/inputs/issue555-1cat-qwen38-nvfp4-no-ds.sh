#!/bin/bash
# 1CatAI/1Cat-vLLM issue #555 ("[Bug]: P/D disaggregation attempt failed"): a prefill and a decode instance of the
# 1Cat-vLLM 1.5.0 fork (a vLLM fork for V100 GPUs) on one host, a local NVFP4 checkpoint of Qwen3.8-27B, NIXL.
# One change: no VLLM_SSM_CONV_STATE_LAYOUT export on either instance.

# prefill instance
source /1Cat-vLLM-1.5.0/bin/activate

export VLLM_NIXL_SIDE_CHANNEL_PORT=5550
export CUDA_VISIBLE_DEVICES=1,2

vllm serve /data/models/RadixArk_Qwen3.8-27B-NVFP4-BF16-LMHead \
  --served-model-name qwen3.8-27b \
  --trust-remote-code \
  --dtype half \
  --tensor-parallel-size 2 \
  --attention-backend FLASH_ATTN_V100 \
  --kv-cache-dtype fp8_e5m2 \
  --max-model-len 262144 \
  --gpu-memory-utilization 0.80 \
  --max-num-batched-tokens 4096 \
  --generation-config auto \
  --override-generation-config '{"temperature": 0.6}' \
  --max-num-seqs 1 \
  --enable-prefix-caching \
  --mamba-cache-mode align \
  --enable-auto-tool-choice \
  --tool-call-parser qwen3_coder \
  --reasoning-parser qwen3 \
  --speculative-config '{"method":"dflash","model":"/data/models/incoai_Qwen3.8-27B-DFlash2","revision":"dedf8df68adfb1afeaf7b7480c0a0243108177b4","kv_cache_dtype":"auto","draft_sample_method":"probabilistic"}' \
  --default-chat-template-kwargs '{"enable_thinking":true, "reasoning_effort": "xhigh"}' \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}' \
  --host 127.0.0.1 \
  --port 8100 &

# decode instance
source /1Cat-vLLM-1.5.0/bin/activate

export VLLM_NIXL_SIDE_CHANNEL_PORT=5551
export CUDA_VISIBLE_DEVICES=3,4

vllm serve /data/models/RadixArk_Qwen3.8-27B-NVFP4-BF16-LMHead \
  --served-model-name qwen3.8-27b \
  --trust-remote-code \
  --dtype half \
  --tensor-parallel-size 2 \
  --attention-backend FLASH_ATTN_V100 \
  --kv-cache-dtype fp8_e5m2 \
  --max-model-len 262144 \
  --gpu-memory-utilization 0.80 \
  --max-num-batched-tokens 4096 \
  --generation-config auto \
  --override-generation-config '{"temperature": 0.6}' \
  --max-num-seqs 1 \
  --enable-prefix-caching \
  --mamba-cache-mode align \
  --enable-auto-tool-choice \
  --tool-call-parser qwen3_coder \
  --reasoning-parser qwen3 \
  --speculative-config '{"method":"dflash","model":"/data/models/incoai_Qwen3.8-27B-DFlash2","revision":"dedf8df68adfb1afeaf7b7480c0a0243108177b4","kv_cache_dtype":"auto","draft_sample_method":"probabilistic"}' \
  --default-chat-template-kwargs '{"enable_thinking":true, "reasoning_effort": "xhigh"}' \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}' \
  --host 127.0.0.1 \
  --port 8200 &
wait
