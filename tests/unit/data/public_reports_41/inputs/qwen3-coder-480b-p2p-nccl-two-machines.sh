CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 VLLM_USE_V1=1 vllm serve /model \
    --host 0.0.0.0 \
    --port 20003 \
    --tensor-parallel-size 8 \
    --max-model-len 131072 \
    --trust-remote-code \
    --gpu-memory-utilization 0.85 \
    --enable-expert-parallel \
    --kv-transfer-config \
    "{\"kv_connector\":\"P2pNcclConnector\",\"kv_role\":\"kv_producer\",\"kv_buffer_size\":\"1e1\",\"kv_port\":\"21001\",\"kv_connector_extra_config\":{\"proxy_ip\":\"0.0.0.0\",\"proxy_port\":\"30001\",\"http_port\":\"20003\",\"send_type\":\"PUT_ASYNC\",\"nccl_num_channels\":\"16\"}}"
VLLM_USE_V1=1 CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 vllm serve /model \
    --host 0.0.0.0 \
    --port 21003 \
    --tensor-parallel-size 8 \
    --max-model-len 131072 \
    --trust-remote-code \
    --gpu-memory-utilization 0.85 \
    --enable-expert-parallel \
    --kv-transfer-config \
    "{\"kv_connector\":\"P2pNcclConnector\",\"kv_role\":\"kv_consumer\",\"kv_buffer_size\":\"8e9\",\"kv_port\":\"22001\",\"kv_connector_extra_config\":{\"proxy_ip\":\"10.94.130.184\",\"proxy_port\":\"30001\",\"http_port\":\"21003\",\"send_type\":\"PUT_ASYNC\",\"nccl_num_channels\":\"16\"}}"
