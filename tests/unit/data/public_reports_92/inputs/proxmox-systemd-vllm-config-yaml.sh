#!/usr/bin/env bash
# The vLLM LXC's systemd unit as proposed in the issue:
#   /etc/systemd/system/vllm.service
#   [Service]
#   ExecStart=/opt/vllm/bin/vllm serve --config /etc/vllm/config.yaml
# Every engine setting (model, parallelism, KV cache, connector) lives in /etc/vllm/config.yaml.
exec /opt/vllm/bin/vllm serve --config /etc/vllm/config.yaml
