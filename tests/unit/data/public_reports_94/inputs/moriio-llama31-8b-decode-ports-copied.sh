vllm-router --vllm-pd-disaggregation \
  --kv-connector moriio \
  --vllm-discovery-address 127.0.0.1:36431 \
  --port 10131 &

HIP_VISIBLE_DEVICES=0 vllm serve meta-llama/Llama-3.1-8B-Instruct \
  --port 20131 \
  --no-enable-prefix-caching \
  --enforce-eager \
  --max-model-len 1024 \
  --kv-transfer-config '{"kv_connector":"MoRIIOConnector","kv_role":"kv_producer","kv_connector_extra_config":{"proxy_ip":"127.0.0.1","proxy_ping_port":"36431","http_port":"20131","handshake_port":"6311","notify_port":"6111","backend":"xgmi","host_ip":"127.0.0.1","read_mode":"false"}}' &

HIP_VISIBLE_DEVICES=1 vllm serve meta-llama/Llama-3.1-8B-Instruct \
  --port 20132 \
  --no-enable-prefix-caching \
  --enforce-eager \
  --max-model-len 1024 \
  --kv-transfer-config '{"kv_connector":"MoRIIOConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"proxy_ip":"127.0.0.1","proxy_ping_port":"36431","http_port":"20132","handshake_port":"6311","notify_port":"6111","backend":"xgmi","host_ip":"127.0.0.1","read_mode":"false"}}' &

wait
