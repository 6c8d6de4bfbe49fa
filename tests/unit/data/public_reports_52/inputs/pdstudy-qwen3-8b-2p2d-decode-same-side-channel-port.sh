#!/bin/bash
# bandham-manikanta/vllm-pd-disaggregation-study scripts/launch_disagg_2p2d.sh at 8bb5ba5 (Qwen3-8B, prefill TP 2 on GPUs 0,1
# and decode TP 2 on GPUs 2,3 of one A100 node, NixlConnector kv_producer / kv_consumer with kv_buffer_device cuda and the
# study's kv_lease_duration extra config, side-channel ports 5559 / 6000).
# The script's single-node path (NODE_PREFILL = NODE_DECODE, its default when both are a100-04): the `if` branches it takes,
# with the values that path assigns; the cross-node ssh branches, stop_services, health waits and proxy left out.
# One change: the decode's VLLM_NIXL_SIDE_CHANNEL_PORT=5559, the prefill's value (one launch block copied into the other).
set -euo pipefail

MODEL=${1:-"Qwen/Qwen3-8B"}
PROJECT_DIR="${PROJECT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
VENV_DIR="${VENV_DIR:-/gpfs/projects/MaffeiGroup/venvs/vllm_venv}"
LOG_DIR="${PROJECT_DIR}/logs"

export PATH="${VENV_DIR}/bin:$PATH"
mkdir -p "$LOG_DIR"

GPU_P="0,1"
GPU_D="2,3"
UCX_NET_DEV="all"

LOG_PREFILL="${LOG_DIR}/disagg_2p2d_prefill_8100.log"
LOG_DECODE="${LOG_DIR}/disagg_2p2d_decode_8200.log"

echo "=== [2/4] Launching Prefill on GPUs ${GPU_P} (TP=2, Port 8100) ==="
CUDA_VISIBLE_DEVICES=${GPU_P} \
UCX_NET_DEVICES=${UCX_NET_DEV} \
VLLM_NIXL_SIDE_CHANNEL_PORT=5559 \
nohup vllm serve "${MODEL}" \
  --host 0.0.0.0 \
  --tensor-parallel-size 2 \
  --port 8100 \
  --gpu-memory-utilization 0.85 \
  --kv-transfer-config '{"kv_connector": "NixlConnector", "kv_role": "kv_producer", "kv_buffer_device": "cuda", "kv_connector_extra_config": {"kv_lease_duration": 300}}' \
  >> "${LOG_PREFILL}" 2>&1 &
PID_P=$!

echo "=== [3/4] Launching Decoder on GPUs ${GPU_D} (TP=2, Port 8200) ==="
CUDA_VISIBLE_DEVICES=${GPU_D} \
UCX_NET_DEVICES=${UCX_NET_DEV} \
VLLM_NIXL_SIDE_CHANNEL_PORT=5559 \
nohup vllm serve "${MODEL}" \
  --host 0.0.0.0 \
  --tensor-parallel-size 2 \
  --port 8200 \
  --gpu-memory-utilization 0.85 \
  --kv-transfer-config '{"kv_connector": "NixlConnector", "kv_role": "kv_consumer", "kv_buffer_device": "cuda", "kv_connector_extra_config": {"kv_lease_duration": 300}}' \
  >> "${LOG_DECODE}" 2>&1 &
PID_D=$!
