#!/bin/bash
# alexsun07/recipe sglang_pd_disagg_mooncake_qwen at 7e5d8c1: start_prefill.sh (node 10.2.224.31) and start_decode.sh
# (node 10.2.224.32), an SGLang prefill/decode pair of Qwen/Qwen3-235B-A22B-Instruct-2507-FP8 at TP 4 on AMD GPUs
# (SGLANG_USE_AITER=1) with the mooncake transfer backend over eight ionic RDMA devices. Both scripts as published, one
# after the other (the decode run over ssh on its own node), set -ex and the tee to the log files kept.
set -ex

export SGLANG_USE_AITER=1

# These env vars should adjust according to your environment
export GLOO_SOCKET_IFNAME=enp193s0f1np1
export SGLANG_HOST_IP=10.2.224.31
#export MC_GID_INDEX=2
export NCCL_IB_HCA=ionic_0,ionic_1,ionic_2,ionic_3,ionic_4,ionic_5,ionic_6,ionic_7
export NCCL_IB_TC=104
export NCCL_IB_FIFO_TC=184
export NCCL_IB_GID_INDEX=1
export NCCL_CROSS_NIC=0

# model: https://huggingface.co/Qwen/Qwen3-235B-A22B-Instruct-2507-FP8
python -m sglang.launch_server \
  --model-path Qwen/Qwen3-235B-A22B-Instruct-2507-FP8 \
  --tp-size 4 \
  --disaggregation-mode prefill \
  --disaggregation-ib-device ionic_0,ionic_1,ionic_2,ionic_3,ionic_4,ionic_5,ionic_6,ionic_7 \
  --disaggregation-transfer-backend mooncake \
  --load-balance-method round_robin \
  --host $SGLANG_HOST_IP \
  --port 30002 \
  --mem-fraction-static 0.5 \
  --disable-radix-cache \
  --trust-remote-code \
  2>&1 | tee log_prefill.log &

# start_decode.sh, on 10.2.224.32
ssh 10.2.224.32 'export SGLANG_USE_AITER=1 GLOO_SOCKET_IFNAME=enp193s0f1np1 SGLANG_HOST_IP=10.2.224.32 NCCL_IB_HCA=ionic_0,ionic_1,ionic_2,ionic_3,ionic_4,ionic_5,ionic_6,ionic_7 NCCL_IB_TC=104 NCCL_IB_FIFO_TC=184 NCCL_IB_GID_INDEX=1 NCCL_CROSS_NIC=0; python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B-Instruct-2507-FP8 --tp-size 4 --disaggregation-mode decode --disaggregation-ib-device ionic_0,ionic_1,ionic_2,ionic_3,ionic_4,ionic_5,ionic_6,ionic_7 --prefill-round-robin-balance --load-balance-method round_robin --host $SGLANG_HOST_IP --port 30003 --disaggregation-transfer-backend mooncake --mem-fraction-static 0.5 --disable-radix-cache --trust-remote-code 2>&1 | tee log_decode.log' &
wait
