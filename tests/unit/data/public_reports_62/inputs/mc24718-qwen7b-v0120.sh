# vllm-project/vllm#24718: MooncakeConnector 1P1D, Qwen2.5-7B-Instruct, two A10 servers, toy proxy as load balancer
pip install vllm==0.12.0 mooncake-transfer-engine

# prefill (server A)
CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen2.5-7B-Instruct \
    --port 8100 \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}' &

# decode (server B)
CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen2.5-7B-Instruct \
    --port 8200 \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}' &

python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8000 \
    --prefiller-hosts 10.0.0.1 --prefiller-ports 8100 --decoder-hosts 10.0.0.2 --decoder-ports 8200
