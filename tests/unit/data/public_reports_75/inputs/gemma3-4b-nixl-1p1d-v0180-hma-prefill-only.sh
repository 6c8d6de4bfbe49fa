# vllm-project/vllm#23079 ("[P/D][Nixl] Make kv cache register compatible with hybrid memory allocator"): the PR's
# case, google/gemma-3-4b-it (full + sliding-window attention, 34 layers), one prefill and one decode vLLM on one
# host with NixlConnector, run the way vLLM's nixl_integration test scripts run a 1P1D pair (one GPU each, a
# side-channel port per engine, toy_proxy_server.py in front).
# On vLLM 0.18.0; ONE CHANGE from the previous: only the prefill passes --no-disable-hybrid-kv-cache-manager.
pip install vllm==0.18.0
CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve google/gemma-3-4b-it --port 8100 --enforce-eager --gpu-memory-utilization 0.8 --max-model-len 8192 --no-disable-hybrid-kv-cache-manager --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &
CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5659 vllm serve google/gemma-3-4b-it --port 8200 --enforce-eager --gpu-memory-utilization 0.8 --max-model-len 8192 --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &
python3 tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8192 --prefiller-hosts localhost --prefiller-ports 8100 --decoder-hosts localhost --decoder-ports 8200 &
wait
