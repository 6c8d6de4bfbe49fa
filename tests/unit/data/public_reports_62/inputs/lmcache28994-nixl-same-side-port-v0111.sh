# vllm-project/vllm#28994: the LMCache P/D example with LMCache swapped for vLLM's own NixlConnector (vLLM 0.11.1), one host, two GPUs
pip install vllm==0.11.1
export PYTHONHASHSEED=123
UCX_TLS=cuda_ipc,cuda_copy,tcp VLLM_ENABLE_V1_MULTIPROCESSING=1 VLLM_WORKER_MULTIPROC_METHOD=spawn CUDA_VISIBLE_DEVICES=0 \
    vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8100 --enforce-eager \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}' &
UCX_TLS=cuda_ipc,cuda_copy,tcp VLLM_ENABLE_V1_MULTIPROCESSING=1 VLLM_WORKER_MULTIPROC_METHOD=spawn CUDA_VISIBLE_DEVICES=1 \
    vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8200 --enforce-eager \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}' &
python3 toy_proxy_server.py --port 9000 --prefiller-port 8100 --decoder-port 8200 &
