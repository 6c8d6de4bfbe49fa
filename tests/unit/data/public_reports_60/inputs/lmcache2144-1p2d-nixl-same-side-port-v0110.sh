# LMCache/LMCache#2144: 1P2D Qwen2.5-0.5B on one host, vLLM 0.11.0 (LMCache 0.3.7), UCX_TLS=cuda_ipc,cuda_copy,tcp
pip install vllm==0.11.0 lmcache==0.3.7
UCX_TLS=cuda_ipc,cuda_copy,tcp  CUDA_VISIBLE_DEVICES=0,1 VLLM_ENABLE_V1_MULTIPROCESSING=1 VLLM_WORKER_MULTIPROC_METHOD=spawn \
    vllm serve /models/Qwen2.5-0.5B-Instruct/ --port 7100 --load-format dummy --tensor-parallel-size 1 --disable-log-requests \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}' &
UCX_TLS=cuda_ipc,cuda_copy,tcp  CUDA_VISIBLE_DEVICES=4,5 VLLM_ENABLE_V1_MULTIPROCESSING=1 VLLM_WORKER_MULTIPROC_METHOD=spawn \
    vllm serve /models/Qwen2.5-0.5B-Instruct/ --port 7200 --load-format dummy --tensor-parallel-size 1 --disable-log-requests \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}' &
UCX_TLS=cuda_ipc,cuda_copy,tcp  CUDA_VISIBLE_DEVICES=6,7 VLLM_ENABLE_V1_MULTIPROCESSING=1 VLLM_WORKER_MULTIPROC_METHOD=spawn \
    vllm serve /models/Qwen2.5-0.5B-Instruct/ --port 7250 --load-format dummy --tensor-parallel-size 1 --disable-log-requests \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}' &
