HIP_VISIBLE_DEVICES=0,1,2,3 vllm serve MiniMaxAI/MiniMax-M3-MXFP8 \
  --host 0.0.0.0 \
  --port 8100 \
  --tensor-parallel-size 4 \
  --block-size 128 \
  --trust-remote-code \
  --kv-transfer-config '{
    "kv_connector": "MoRIIOConnector",
    "kv_role": "kv_producer",
    "kv_connector_extra_config": {
      "host_ip": "165.245.143.170",
      "proxy_ip": "127.0.0.1",
      "proxy_ping_port": 36367,
      "http_port": 8100,
      "handshake_port": 6301,
      "notify_port": 6105,
      "read_mode": true,
      "backend": "rdma"
    }
  }'

HIP_VISIBLE_DEVICES=0,1,2,3 vllm serve MiniMaxAI/MiniMax-M3-MXFP8 \
  --block-size 128 \
  --host 0.0.0.0 \
  --port 8200 \
 --tensor-parallel-size 4 \
 --trust-remote-code \
 --kv-transfer-config '{
    "kv_connector": "MoRIIOConnector",
    "kv_role": "kv_consumer",
    "kv_connector_extra_config": {
      "host_ip": "165.245.143.171",
      "proxy_ip": "127.0.0.1",
      "proxy_ping_port": 36367,
      "http_port": 8200,
      "handshake_port": 6301,
      "notify_port": 6105,
      "read_mode": true,
      "backend": "rdma"
    }
  }'
