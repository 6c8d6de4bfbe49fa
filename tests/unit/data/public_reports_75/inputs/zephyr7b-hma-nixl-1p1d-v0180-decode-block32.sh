# vllm-project/vllm#32204 ("[Core][KVConnector] Support HMA+NixlConnector"): an FA+SWA model over NIXL with
# --no-enable-prefix-caching --no-disable-hybrid-kv-cache-manager on both engines, one prefill and one decode on one
# host (the PR's test plan shape: nixl_integration scripts, toy proxy). The model (openai/gpt-oss-20b) and the
# release (0.18.0, the first whose NixlConnector is SupportsHMA) are filled.
# ONE CHANGE from the decode-block32 entry: the model swapped for HuggingFaceH4/zephyr-7b-beta (a Mistral-7B-v0.1
# fine-tune), decode --block-size 32, prefill --block-size 16.
pip install vllm==0.18.0
CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve HuggingFaceH4/zephyr-7b-beta --port 8100 --no-enable-prefix-caching --no-disable-hybrid-kv-cache-manager --gpu-memory-utilization 0.8 --max-model-len 16384 --block-size 16 --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &
CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5659 vllm serve HuggingFaceH4/zephyr-7b-beta --port 8200 --no-enable-prefix-caching --no-disable-hybrid-kv-cache-manager --gpu-memory-utilization 0.8 --max-model-len 16384 --block-size 32 --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &
python3 tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8192 --prefiller-hosts localhost --prefiller-ports 8100 --decoder-hosts localhost --decoder-ports 8200 &
wait
