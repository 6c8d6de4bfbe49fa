#!/bin/bash
#SBATCH --job-name=gym-swebench_pro
#SBATCH --account=acct
#SBATCH --chdir=/jobs/swebench_pro
#SBATCH --partition=batch
#SBATCH --nodes=10
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=4
#
# NVIDIA-NeMo/Gym tests/unit_tests/fixtures/pd_swebench_pro_data_parallel.sh (at 52eb372): the sbatch script Gym's
# Slurm launcher renders for a P/D policy as one data-parallel vLLM instance per role (prefill DP 4 over 4 nodes,
# decode DP 6 over 6 nodes, TP 4 per rank, --data-parallel-size-local 1, the ranks after the first --headless),
# Pyxis/Enroot containers (srun --container-image), NIXL side channel host from $(hostname) on every node,
# SLURM_NODEID picking the API-server rank, vllm-router in front.
# Filled: the image pinned to vllm/vllm-openai:v0.34.0 (Pyxis pulls the Docker Hub tag), /ckpt as meta-llama/Llama-3.3-70B-Instruct. The DP head addresses exported as GYM_PREFILL_DP_HEAD / GYM_DECODE_DP_HEAD (the published script passes ${gym_nodes[0]} / ${gym_nodes[4]} inside the srun'd shell, where the array does not exist). One change: --kv-cache-dtype fp8 on every prefill rank.
# The otel collector, the health-wait loops and the gym eval driver are left out.

# Resolve the head node IP for multi-node vLLM services (spanning nodes via Ray).
nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")
nodes_array=($nodes)
head_node_hostname=${nodes_array[0]}
head_node_ip=$(getent hosts "$head_node_hostname" | awk '{print $1}')
export HEAD_NODE_IP="$head_node_ip"
export RAY_HEAD_NODE_IP="$head_node_ip:6379"
echo "Head node IP address: $HEAD_NODE_IP"
gym_nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))
export GYM_POOL_PREFILL_NODES="$(IFS=,; echo "${gym_nodes[*]:0:4}")"
export GYM_POOL_DECODE_NODES="$(IFS=,; echo "${gym_nodes[*]:4:6}")"
export GYM_PREFILL_DP_HEAD="${gym_nodes[0]}"
export GYM_DECODE_DP_HEAD="${gym_nodes[4]}"

# service: policy-prefill
srun --overlap --nodelist="${GYM_POOL_PREFILL_NODES}" --nodes=4 --ntasks=4 --no-container-mount-home --container-image=vllm/vllm-openai:v0.34.0 --output=logs/policy-prefill-$SLURM_JOB_ID.log bash -c 'export VLLM_NIXL_SIDE_CHANNEL_HOST=$(hostname)
export VLLM_NIXL_SIDE_CHANNEL_PORT=5600
exec bash -lc '"'"'
    if [ "$SLURM_NODEID" = "0" ]; then
        vllm serve meta-llama/Llama-3.3-70B-Instruct --port 8001 --tensor-parallel-size 4 --served-model-name super35 --max-model-len 131072 --kv-transfer-config '"'"'"'"'"'"'"'"'{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}'"'"'"'"'"'"'"'"' --data-parallel-size 4 --data-parallel-size-local 1 --data-parallel-address ${GYM_PREFILL_DP_HEAD} --data-parallel-rpc-port 13345 --kv-cache-dtype fp8
    else
        vllm serve meta-llama/Llama-3.3-70B-Instruct --port 8001 --tensor-parallel-size 4 --served-model-name super35 --max-model-len 131072 --kv-transfer-config '"'"'"'"'"'"'"'"'{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}'"'"'"'"'"'"'"'"' --data-parallel-size 4 --data-parallel-size-local 1 --data-parallel-address ${GYM_PREFILL_DP_HEAD} --data-parallel-rpc-port 13345 --headless --data-parallel-start-rank $(( SLURM_NODEID * 1 )) --kv-cache-dtype fp8
    fi
'"'"'' &
POLICY_PREFILL_PID=$!

# service: policy-decode
env UCX_TLS=rc,cuda_copy srun --overlap --nodelist="${GYM_POOL_DECODE_NODES}" --nodes=6 --ntasks=6 --no-container-mount-home --container-image=vllm/vllm-openai:v0.34.0 --output=logs/policy-decode-$SLURM_JOB_ID.log bash -c 'export VLLM_NIXL_SIDE_CHANNEL_HOST=$(hostname)
export VLLM_NIXL_SIDE_CHANNEL_PORT=5601
export NCCL_DEBUG=WARN
exec bash -lc '"'"'
    if [ "$SLURM_NODEID" = "0" ]; then
        vllm serve meta-llama/Llama-3.3-70B-Instruct --port 8002 --tensor-parallel-size 4 --served-model-name super35 --kv-transfer-config '"'"'"'"'"'"'"'"'{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}'"'"'"'"'"'"'"'"' --data-parallel-size 6 --data-parallel-size-local 1 --data-parallel-address ${GYM_DECODE_DP_HEAD} --data-parallel-rpc-port 13346
    else
        vllm serve meta-llama/Llama-3.3-70B-Instruct --port 8002 --tensor-parallel-size 4 --served-model-name super35 --kv-transfer-config '"'"'"'"'"'"'"'"'{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}'"'"'"'"'"'"'"'"' --data-parallel-size 6 --data-parallel-size-local 1 --data-parallel-address ${GYM_DECODE_DP_HEAD} --data-parallel-rpc-port 13346 --headless --data-parallel-start-rank $(( SLURM_NODEID * 1 ))
    fi
'"'"'' &
POLICY_DECODE_PID=$!

# service: policy
srun --overlap --nodelist="${gym_nodes[0]}" --nodes=1 --ntasks=1 --no-container-mount-home --container-image=vllm/vllm-openai:v0.34.0 --output=logs/policy-$SLURM_JOB_ID.log vllm-router --prefill-policy cache_aware --decode-policy cache_aware --vllm-pd-disaggregation --prefill "http://${gym_nodes[0]}:8001" --decode "http://${gym_nodes[4]}:8002" --host 0.0.0.0 --port 8000 --intra-node-data-parallel-size 1 --request-timeout-secs 86400 --log-level error &
POLICY_PID=$!

wait $POLICY_PID
