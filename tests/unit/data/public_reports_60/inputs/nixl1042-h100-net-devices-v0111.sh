# ai-dynamo/nixl#1042: 1P1D NixlConnector on one host with two H100 80GB (NVLink), NIXL 0.7.1 / UCX 1.19 built from source
pip install vllm==0.11.1 nixl==0.7.1
export UCX_TLS=cuda_ipc,cuda_copy,tcp,sm,self

CUDA_VISIBLE_DEVICES=0 UCX_NET_DEVICES=mlx5_0:1 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve meta-llama/Llama-3.1-8B-Instruct \
    --port 8100 \
    --tensor-parallel-size 1 \
    --gpu-memory-utilization 0.9  \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &

CUDA_VISIBLE_DEVICES=1 UCX_NET_DEVICES=mlx5_1:1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve meta-llama/Llama-3.1-8B-Instruct \
    --port 8200 \
    --tensor-parallel-size 1 \
    --gpu-memory-utilization 0.9  \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' &
