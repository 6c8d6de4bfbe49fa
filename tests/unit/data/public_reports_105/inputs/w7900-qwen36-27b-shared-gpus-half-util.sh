#!/bin/bash
# ROCm/legacy-rocm-build issue #6566 ("Native same-host HIP IPC transport for NIXL/vLLM on Radeon PRO W7900"):
# 8 x Radeon PRO W7900 48 GiB (gfx1100) in one workstation, inside the ROCm vLLM container (vLLM 0.23.1.dev1, NIXL 1.4,
# UCX 1.22 with rocm_copy/rocm_ipc), Qwen3.6-27B BF16 prefill/decode disaggregation over NixlConnector, 64K context.
# One change: four cards lent elsewhere, both roles on GPUs 0-3, each with --gpu-memory-utilization 0.45.
# Launch lines filled: the issue gives the setup and the transfer path, not its commands.
# The Mamba (Gated DeltaNet) conv state moves over NIXL only in vLLM's DS layout (startup assert otherwise).
export VLLM_SSM_CONV_STATE_LAYOUT=DS

MODEL=Qwen/Qwen3.6-27B

# prefill: GPUs 0-3
HIP_VISIBLE_DEVICES=0,1,2,3 \
VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
vllm serve $MODEL \
  --host 127.0.0.1 --port 8100 \
  --tensor-parallel-size 4 \
  --max-model-len 65536 \
  --gpu-memory-utilization 0.45 \
  --no-enable-prefix-caching \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}' > prefill.log 2>&1 &

# decode
HIP_VISIBLE_DEVICES=0,1,2,3 \
VLLM_NIXL_SIDE_CHANNEL_PORT=5601 \
vllm serve $MODEL \
  --host 127.0.0.1 --port 8200 \
  --tensor-parallel-size 4 \
  --max-model-len 65536 \
  --gpu-memory-utilization 0.45 \  --no-enable-prefix-caching \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}' > decode.log 2>&1 &

python3 toy_proxy_server.py --port 8000 \
  --prefiller-hosts 127.0.0.1 --prefiller-ports 8100 \
  --decoder-hosts 127.0.0.1 --decoder-ports 8200
