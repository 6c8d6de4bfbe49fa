#!/bin/bash
# vllm-project/vllm docs/features/disagg_prefill.md at 0047fb9 ("MultiConnector: ... such as:" NixlConnector next to
# ExampleConnector with shared_storage_path local_storage), launched as the page's NixlConnector example
# (tests/v1/kv_connector/nixl_integration/run_accuracy_test.sh) launches its engines: one host, prefill on GPU 0 and
# decode on GPU 1, distinct HTTP and NIXL side-channel ports, toy_proxy_server.py in front.
# One change from the v0160 entry: the decode runs plain NixlConnector (the MultiConnector only on the prefill).
set -xe

pip install vllm==0.16.0
MODEL=meta-llama/Llama-3.1-8B-Instruct
GIT_ROOT=$(git rev-parse --show-toplevel)

PREFILL_KV='{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"ExampleConnector","kv_role":"kv_both","kv_connector_extra_config":{"shared_storage_path":"local_storage"}}]}}'
DECODE_KV='{"kv_connector":"NixlConnector","kv_role":"kv_both"}'

CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve $MODEL \
  --port 8100 \
  --enforce-eager \
  --gpu-memory-utilization 0.8 \
  --kv-transfer-config "$PREFILL_KV" &

CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5659 vllm serve $MODEL \
  --port 8200 \
  --enforce-eager \
  --gpu-memory-utilization 0.8 \
  --kv-transfer-config "$DECODE_KV" &

python3 ${GIT_ROOT}/tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8192 \
  --prefiller-hosts localhost --prefiller-ports 8100 \
  --decoder-hosts localhost --decoder-ports 8200
