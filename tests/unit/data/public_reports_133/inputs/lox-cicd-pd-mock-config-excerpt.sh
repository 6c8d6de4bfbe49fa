#!/bin/bash
# cicd/vllm-pd-disagg/config.sh — P/D disaggregation CICD scenario
# Tests P/D orchestration using mock_vllm.py (no GPU required)
# mock_vllm.py simulates OpenAI-compatible API with prefill/decode roles;
# validates sockproxy C routing, body rewriting, and P/D state machine.
# To switch to real vLLM (GPU testbed): swap mock_vllm.py for real vLLM servers on the EP hosts.
#
# Topology:
#   l3h1  (10.10.10.1/24)   ── llb1 (loxilb, 10.10.10.254/24)   [+ llb2 .253 for Phase L]
#   l3ep1 (31.31.31.1/24)   ── llb1 (31.31.31.254/24)  [prefill, epRole=1, --ep-idx 1]
#   l3ep2 (32.32.32.1/24)   ── llb1 (32.32.32.254/24)  [decode,  epRole=2, --ep-idx 2]
#   l3ep3 (33.33.33.1/24)   ── llb1 (33.33.33.254/24)  [prefill, --ep-idx 3]
#   l3ep4 (34.34.34.1/24)   ── llb1 (34.34.34.254/24)  [decode,  --ep-idx 4]
#
# LB rules: port 2020 / 2021 / 2022 / 2023 (see end of file)
#
# Phase L extension (sockproxy HA sync):
#   - llb2 spawned and wired identically with .253 addresses on every subnet.
#   - HA wired via loxilb cluster keepalive flags (canonical pattern per
#     cicd/common.sh:get_llb_peerIP + pkg/loxinet/utils.go:KAString2Mode):
#       --cluster=<PEER_IP>  --self=<0|1>  --ka=<PEER_IP>:<SELF_IP>
#     sync flows over port 22222 (default sync port). Role election runs over
#     BFD (started by --ka): cluster.go assigns initial role from --self
#     ordinal (0 ⇒ MASTER, 1 ⇒ BACKUP) and switches over on BFD heartbeat
#     loss to peer. No separate BFD/cistate REST POSTs needed.
#   - iptables DNAT on l3h1 maps virtual master IP 10.10.10.99 → 10.10.10.254 initially;
#     validation.sh Phase L re-writes this rule after each failover via `update_master_dnat`.
#   - All four mock_vllm.py spawns pass `--ep-idx N` so X-Prefill-Ep / X-Decode-Ep response
#     headers are populated for restore_rate measurement.

source ../common.sh
exec < /dev/null

echo "#########################################"
echo "Starting mock vLLM on l3ep1 (prefill role)"
echo "#########################################"

docker cp "$(dirname "$0")/mock_vllm.py" l3ep1:/tmp/mock_vllm.py
# pass --ep-idx so X-Prefill-Ep response header carries ep1 identity.
$dexec l3ep1 bash -c "nohup python3 /tmp/mock_vllm.py --role prefill --port 8000 --nixl-port 9001 --ep-idx 1 > /tmp/vllm-server1.log 2>&1 &"

echo "Waiting for mock vLLM to start on l3ep1..."
sleep 3
$dexec l3ep1 curl -sf http://localhost:8000/health || echo "WARNING: mock vLLM on l3ep1 did not respond to /health"

echo "#########################################"
echo "Starting mock vLLM on l3ep2 (decode role)"
echo "#########################################"

docker cp "$(dirname "$0")/mock_vllm.py" l3ep2:/tmp/mock_vllm.py
# pass --ep-idx so X-Decode-Ep response header carries ep2 identity.
$dexec l3ep2 bash -c "nohup python3 /tmp/mock_vllm.py --role decode --port 8000 --nixl-port 9002 --ep-idx 2 > /tmp/vllm-server2.log 2>&1 &"

echo "Waiting for mock vLLM to start on l3ep2..."
sleep 3
$dexec l3ep2 curl -sf http://localhost:8000/health || echo "WARNING: mock vLLM on l3ep2 did not respond to /health"
