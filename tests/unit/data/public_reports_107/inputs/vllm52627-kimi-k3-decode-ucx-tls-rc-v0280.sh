#!/bin/bash
# vllm-project/vllm issue #52627 ("[Bug]: Kimi-K3 silent output corruption in 1P1D NIXL Direct-PD disaggregated
# deployment"): pure NIXL 1P1D, Kimi-K3 with TP 8 on each of two 8-GPU machines (prefill 10.218.104.1:30000, decode
# 10.218.104.2), FP8 KV cache, hybrid KV cache manager on, DSpark speculative decoding (3 tokens), vLLM 0.28.0 (the
# reporter's 2026-09-07 comment). The prefill script as reported; the decode script is the reporter's second
# vllm serve line, started here over ssh on the decode machine.
# One change: the decode's UCX_TLS=rc (cuda_copy dropped).

pip install vllm==0.28.0

export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
export VLLM_NIXL_SIDE_CHANNEL_HOST=10.218.104.1
export VLLM_NIXL_SIDE_CHANNEL_PORT=5557
export VLLM_SSM_CONV_STATE_LAYOUT=DS
export UCX_TLS=rc,cuda_copy
export NCCL_DMABUF_ENABLE=0
export VLLM_ALLREDUCE_USE_FLASHINFER=1
export VLLM_USE_V2_MODEL_RUNNER=1

# Machine 1: prefill
vllm serve /modules/Kimi-K3 \
  --host 0.0.0.0 \
  --port 30000 \
  --served-model-name kimi3 \
  --trust-remote-code \
  --tensor-parallel-size 8 \
  --enable-prefix-caching \
  --kv-cache-dtype fp8 \
  --attention-config '{"mla_prefill_backend":"FLASHINFER","use_prefill_query_quantization":true}' \
  --speculative-config '{"model":"/modules/Kimi-K3-DSpark","num_speculative_tokens":3,"attention_backend":"FLASHINFER_MLA","method":"dspark","draft_sample_method":"probabilistic","rejection_sample_method":"block"}' \
  --load-format fastsafetensors \
  --no-enable-flashinfer-autotune \
  --chat-template-content-format=string \
  --no-disable-hybrid-kv-cache-manager \
  --gpu-memory-utilization 0.93 \
  --enforce-eager \
  --max-num-batched-tokens 16384 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}' \
  --enable-auto-tool-choice \
  --tool-call-parser kimi_k3 \
  --reasoning-parser kimi_k3 > prefill.log 2>&1 &

# Machine 2: decode
ssh root@10.218.104.2 "pip install vllm==0.28.0 && CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 VLLM_NIXL_SIDE_CHANNEL_HOST=10.218.104.2 VLLM_NIXL_SIDE_CHANNEL_PORT=5557 VLLM_SSM_CONV_STATE_LAYOUT=DS UCX_TLS=rc NCCL_DMABUF_ENABLE=0 VLLM_ALLREDUCE_USE_FLASHINFER=1 VLLM_USE_V2_MODEL_RUNNER=1 vllm serve /modules/Kimi-K3 --host 0.0.0.0 --port 30000 --served-model-name kimi3 --trust-remote-code --tensor-parallel-size 8 --no-enable-prefix-caching --enable-prompt-tokens-details --kv-cache-dtype fp8 --attention-config '{\"mla_prefill_backend\":\"FLASHINFER\",\"use_prefill_query_quantization\":true}' --speculative-config '{\"model\":\"/modules/Kimi-K3-DSpark\",\"num_speculative_tokens\":3,\"attention_backend\":\"FLASHINFER_MLA\",\"method\":\"dspark\",\"draft_sample_method\":\"probabilistic\",\"rejection_sample_method\":\"block\"}' --load-format fastsafetensors --no-enable-flashinfer-autotune --chat-template-content-format=string --no-disable-hybrid-kv-cache-manager --gpu-memory-utilization 0.93 --enforce-eager --max-num-batched-tokens 16384 --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_consumer\"}' --enable-auto-tool-choice --tool-call-parser kimi_k3 --reasoning-parser kimi_k3 > decode.log 2>&1" &
