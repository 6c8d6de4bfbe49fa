# vllm-project/vllm#42931: examples/disaggregated/p2p_nccl_xpyd/disagg_example_p2p_nccl_xpyd.sh, 1P1D, Qwen2.5-0.5B-Instruct, 2x A100-40GB
pip install vllm==0.24.0

python3 disagg_proxy_p2p_nccl_xpyd.py &

CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen2.5-0.5B-Instruct \
    --host 0.0.0.0 --port 20003 --tensor-parallel-size 1 --seed 1024 \
    --dtype float16 --max-model-len 10000 --max-num-batched-tokens 10000 --max-num-seqs 256 \
    --trust-remote-code --gpu-memory-utilization 0.9 \
    --kv-transfer-config \
    '{"kv_connector":"P2pNcclConnector","kv_role":"kv_producer","kv_buffer_size":"1e1","kv_port":"21001","kv_connector_extra_config":{"proxy_ip":"0.0.0.0","proxy_port":"30001","http_port":"20003","send_type":"PUT_ASYNC","nccl_num_channels":"16"}}' > prefill1.log 2>&1 &

CUDA_VISIBLE_DEVICES=1 vllm serve Qwen/Qwen2.5-0.5B-Instruct \
    --host 0.0.0.0 --port 20005 --tensor-parallel-size 1 --seed 1024 \
    --dtype float16 --max-model-len 10000 --max-num-batched-tokens 10000 --max-num-seqs 256 \
    --trust-remote-code --gpu-memory-utilization 0.7 \
    --kv-transfer-config \
    '{"kv_connector":"P2pNcclConnector","kv_role":"kv_consumer","kv_buffer_size":"8e9","kv_port":"22001","kv_connector_extra_config":{"proxy_ip":"0.0.0.0","proxy_port":"30001","http_port":"20005","send_type":"PUT_ASYNC","nccl_num_channels":"16"}}' > decode1.log 2>&1 &
