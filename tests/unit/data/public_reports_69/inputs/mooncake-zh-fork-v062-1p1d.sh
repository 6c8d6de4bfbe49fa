# kvcache-ai/Mooncake doc/zh/vllm-integration.md (vLLM 分布式预填充/解码分离演示, kvcache-ai/vllm mooncake-integration branch, vllm 0.6.2), 运行示例
git clone git@github.com:kvcache-ai/vllm.git
cd vllm
git checkout mooncake-integration
pip3 uninstall vllm -y
pip3 install vllm==0.6.2
pip3 uninstall torchvision -y
python3 python_only_dev.py
etcd --listen-client-urls http://0.0.0.0:2379 --advertise-client-urls http://localhost:2379 &
# 2. 在预填充侧运行（KVCache生产者）
VLLM_HOST_IP="192.168.0.137" VLLM_PORT="51000" MASTER_ADDR="192.168.0.137" MASTER_PORT="54324" MOONCAKE_CONFIG_PATH=./mooncake.json VLLM_DISTRIBUTED_KV_ROLE=producer VLLM_USE_MODELSCOPE=True python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4 --port 8100 --max-model-len 10000 --gpu-memory-utilization 0.95 &
# 3. 在解码侧运行（KVCache消费者）
VLLM_HOST_IP="192.168.0.137" VLLM_PORT="51000" MASTER_ADDR="192.168.0.137" MASTER_PORT="54324" MOONCAKE_CONFIG_PATH=./mooncake.json VLLM_DISTRIBUTED_KV_ROLE=consumer VLLM_USE_MODELSCOPE=True python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4 --port 8200 --max-model-len 10000 --gpu-memory-utilization 0.95 &
# 4. 在一个节点上启动代理服务器
python3 proxy_server.py
