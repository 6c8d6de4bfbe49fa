# vllm-project/vllm#24718: MooncakeConnector 1P1D, Qwen2.5-7B-Instruct, run here on one host with two or three GPUs, toy proxy as load balancer
pip install vllm==0.12.0 mooncake-transfer-engine

# prefill
CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen2.5-7B-Instruct \
    --port 8100 \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}' &

# decode
CUDA_VISIBLE_DEVICES=1 vllm serve Qwen/Qwen2.5-7B-Instruct \
    --port 8200 \
    --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}' &

python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8000 \
    --prefiller-hosts 127.0.0.1 --prefiller-ports 8100 --decoder-hosts 127.0.0.1 --decoder-ports 8200
