#!/bin/bash
# vllm-project/vllm PR #33884 ("[Bugfix][DeepSeek-V3.2] fix fp8 kvcache type cast", 2026-02-05), its test plan:
# GB200, DeepSeek-V3.2-NVFP4 (ModelOpt NVFP4) from a local copy, FP8 KV cache, TP 2 x DP 2 per node, no expert
# parallelism, sleep mode, NixlConnector kv_both with kv_buffer_device cuda. The source gives one node's command;
# filled: the same command on a second node as the other role of the P/D pair (prefill on 10.0.8.12, decode on
# 10.0.8.10, each its own DP master address and VLLM_NIXL_SIDE_CHANNEL_HOST), the image tag, and the toy proxy.
# vLLM 0.16.0; the prefill node spells its KV cache dtype fp8_e4m3 (the decode keeps fp8).
pip install vllm==0.16.0

# prefill node (10.0.8.12)
VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.8.12 vllm serve --port=35496 --gpu-memory-utilization=0.85 --kv-cache-dtype=fp8_e4m3 --tokenizer-mode=deepseek_v32 --no-enable-expert-parallel --enable-sleep-mode --model /root/workspaces/models/DeepSeek-V3.2-NVFP4 --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_buffer_device":"cuda"}' -tp 2 -dp 2 -dpl 2 -dpa 10.0.8.12 -dpr 0

# decode node (10.0.8.10)
VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.8.10 vllm serve --port=35496 --gpu-memory-utilization=0.85 --kv-cache-dtype=fp8 --tokenizer-mode=deepseek_v32 --no-enable-expert-parallel --enable-sleep-mode --model /root/workspaces/models/DeepSeek-V3.2-NVFP4 --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_buffer_device":"cuda"}' -tp 2 -dp 2 -dpl 2 -dpa 10.0.8.10 -dpr 0

# proxy
python3 toy_proxy_server.py --port 8000 --prefiller-hosts 10.0.8.12 --prefiller-ports 35496 --decoder-hosts 10.0.8.10 --decoder-ports 35496
