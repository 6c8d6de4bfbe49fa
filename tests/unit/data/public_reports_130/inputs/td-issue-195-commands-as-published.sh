## First node

GPU 0:

VLLM_WORKER_MULTIPROC_METHOD=spawn CUDA_VISIBLE_DEVICES=0 python3 -m disaggregated.prefill_worker \
    --model deepseek-ai/DeepSeek-R1-Distill-Llama-8B \
    --max-model-len 100 \
    --gpu-memory-utilization 0.8 \
    --enforce-eager \
    --kv-transfer-config \
    '{"kv_connector":"PyNcclConnector","kv_role":"kv_producer","kv_rank":0,"kv_parallel_size":3, "kv_consumers_tensor_parallel_size": 2, "kv_producers_tensor_parallel_size": 1, "kv_ip":"10.52.49.165"}' &

GPU 1:

VLLM_WORKER_MULTIPROC_METHOD=spawn CUDA_VISIBLE_DEVICES=1 python3 -m disaggregated.prefill_worker \
    --model deepseek-ai/DeepSeek-R1-Distill-Llama-8B \
    --max-model-len 100 \
    --gpu-memory-utilization 0.8 \
    --enforce-eager \
    --kv-transfer-config \
    '{"kv_connector":"PyNcclConnector","kv_role":"kv_producer","kv_rank":1,"kv_parallel_size":3, "kv_consumers_tensor_parallel_size": 2, "kv_producers_tensor_parallel_size": 1,"kv_ip":"10.52.49.165"}' &

## Second node

GPU 2, 3:

VLLM_WORKER_MULTIPROC_METHOD=spawn CUDA_VISIBLE_DEVICES=2,3 python3 -m disaggregated.decode_worker     --model deepseek-ai/DeepSeek-R1-Distill-Llama-8B     --max-model-len 100     --gpu-memory-utilization 0.8     --enforce-eager     --tensor-parallel-size 2     --kv-transfer-config     '{"kv_connector":"PyNcclConnector","kv_role":"kv_consumer","kv_rank":0,"kv_parallel_size":2,"kv_ip":"10.52.49.165"}'
