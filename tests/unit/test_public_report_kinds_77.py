"""Variants of what the seventy-seventh public-report set (tests/unit/data/public_reports_77) taught, with negative
controls: one prefill or decode instance spanning several nodes.

- A host script that builds a Ray cluster over several hosts (``ray start --head`` on one, ``ray start --address
  HEAD:PORT`` on the others, :func:`pdd_operator.compat.script_inputs.ray_clusters`) gives the engine it starts on
  the head that pod group: its ranks span nodes where they exceed the head's GPUs (``side-channel-host-per-node``
  before vLLM 0.11.1) and have the group's GPUs in all (``parallelism-gpu-count``).
- A LeaderWorkerSet whose ``workerTemplate`` asks fewer GPUs than its ``leaderTemplate`` gives a Ray engine the
  leader's GPUs plus the workers' (``parallelism-gpu-count``), not the leader's count times the group size.
- A ``vllm serve --headless`` worker serves the role of the leader whose data-parallel group it joins
  (``--data-parallel-address`` / ``--data-parallel-rpc-port``), so a script naming only the leaders' ports to its
  proxy is checked; its side-channel ports are its own engine cores' (the local index on vLLM 0.9.1, the global rank
  from 0.9.2), compared with the other engines of its role on the host (``same-role-port-conflict``).
- A literal ``engine_id`` in ``--kv-transfer-config`` on a role with several instances (``nixl-engine-id-shared``).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.script_inputs import ray_clusters
from tests.unit.cli_check import check_text
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
#: The same, as written inside a double-quoted ``ssh HOST "..."`` command.
SSH_KV_P, SSH_KV_D = (kv.replace('"', '\\"') for kv in (KV_P, KV_D))


def _script(tmp_path, capsys, text: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, "run.sh")


# --- a host script's Ray cluster over several hosts ----------------------------------------------------------


def _ray_script(version: str, tp: int = 12, pp: int = 1, join: bool = True, head_gpus: int = 8,
                model: str = "meta-llama/Llama-3.1-70B-Instruct") -> str:
    lines = ["#!/bin/bash",
             f'ssh 10.1.0.1 "pip install vllm=={version} && ray start --head --port 6379 --num-gpus {head_gpus}"']
    if join:
        lines.append(f'ssh 10.1.0.2 "pip install vllm=={version} && ray start --address 10.1.0.1:6379 --num-gpus 8"')
    lines.append(f"ssh 10.1.0.1 \"VLLM_NIXL_SIDE_CHANNEL_HOST=10.1.0.1 vllm serve {model} --port 8100 "
                 f"--tensor-parallel-size {tp} --pipeline-parallel-size {pp} --distributed-executor-backend ray "
                 f"--kv-transfer-config '{SSH_KV_P}'\" &")
    lines.append(f"ssh 10.1.0.3 \"pip install vllm=={version} && VLLM_NIXL_SIDE_CHANNEL_HOST=10.1.0.3 vllm serve "
                 f"{model} --port 8200 --tensor-parallel-size 8 --kv-transfer-config '{SSH_KV_D}'\" &")
    return "\n".join(lines) + "\nwait\n"


def test_ray_clusters_reads_heads_and_the_hosts_that_join_them():
    text = ("ssh a \"ray start --head --node-ip-address 10.0.0.1 --num-gpus 4\"\n"
            "ssh b \"ray start --address=10.0.0.1:6379 --num-gpus 2\"\n"
            "ssh c \"ray start --head\"\n"
            "# ssh d \"ray start --address c:6379\"\n")
    assert ray_clusters(text) == {"a": (4, [2])}  # c: only a commented-out join


@pytest.mark.parametrize(("version", "tp", "pp", "join", "expected"), [
    ("0.10.1.1", 12, 1, True, True),   # 12 ranks > the head's 8: ranks on the second host bind the head's address
    ("0.11.0", 8, 2, True, True),      # PP over the two hosts
    ("0.11.1", 12, 1, True, False),    # one listener, in the scheduler
    ("0.10.1.1", 8, 1, True, False),   # the ranks fit on the head
    ("0.10.1.1", 12, 1, False, False),  # no other host joins: the engine cannot span (parallelism-gpu-count says it)
])
def test_a_scripts_ray_cluster_over_hosts_spans_the_side_channel_host(tmp_path, capsys, version, tp, pp, join, expected):
    _, out = _script(tmp_path, capsys, _ray_script(version, tp, pp, join))
    assert ("side-channel-host-per-node" in rules(out, "error")) is expected


@pytest.mark.parametrize(("tp", "expected"), [(24, True), (16, False), (12, False)])
def test_a_scripts_ray_cluster_has_the_gpus_of_all_its_hosts(tmp_path, capsys, tp, expected):
    _, out = _script(tmp_path, capsys, _ray_script("0.11.1", tp=tp))
    assert ("parallelism-gpu-count" in rules(out, "error")) is expected


# --- a LeaderWorkerSet whose worker pods hold fewer GPUs than its leader ---------------------------------------


def _lws(name, role, kv, image, size=2, leader_gpus="8", worker_gpus="8", tp=16, leader=True):
    serve = (f"bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader --ray_cluster_size=$(LWS_GROUP_SIZE); "
             f"vllm serve deepseek-ai/DeepSeek-V3 --port 8080 --tensor-parallel-size {tp} "
             f"--distributed-executor-backend ray --kv-transfer-config '{kv}'")
    worker = {"spec": {"containers": [{
        "name": "vllm-worker", "image": image, "command": ["sh", "-c",
        "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh worker --ray_address=$(LWS_LEADER_ADDRESS)"],
        "resources": {"limits": {"nvidia.com/gpu": worker_gpus}}}]}}
    lead = {"metadata": {"labels": {"app": "dsv3", "role": role}}, "spec": {"containers": [{
        "name": "vllm-leader", "image": image, "command": ["sh", "-c", serve], "env": [POD_IP],
        "resources": {"limits": {"nvidia.com/gpu": leader_gpus}}}]}}
    lwt = {"size": size, "workerTemplate": worker}
    if leader:
        lwt["leaderTemplate"] = lead
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": f"{name}-{role}", "labels": {"app": "dsv3", "role": role}},
            "spec": {"replicas": 1, "leaderWorkerTemplate": lwt}}


@pytest.mark.parametrize(("size", "worker_gpus", "tp", "expected"), [
    (2, "4", 16, True),    # 8 + 4 = 12 GPUs for 16 ranks
    (2, "8", 16, False),
    (3, "4", 16, False),   # 8 + 4 + 4
    (3, "2", 16, True),    # 8 + 2 + 2
    (2, "4", 12, False),   # 12 ranks on 8 + 4
])
def test_an_lws_ray_group_counts_its_worker_pods_own_gpus(tmp_path, capsys, size, worker_gpus, tp, expected):
    image = "vllm/vllm-openai:v0.11.1"
    docs = [_lws("dsv3", "prefill", KV_P, image, size=size, worker_gpus=worker_gpus, tp=tp),
            _lws("dsv3", "decode", KV_D, image, size=size, worker_gpus=worker_gpus, tp=tp)]
    _, out = check(tmp_path, capsys, *docs)
    assert ("parallelism-gpu-count" in rules(out, "error")) is expected


# --- headless data-parallel workers in a host script ------------------------------------------------------------


def _dp_script(version: str, p_worker_port: int = 6600, worker_rpc: int = 13345, two_hosts: bool = False) -> str:
    model = "Qwen/Qwen3-30B-A3B"
    common = ("--enable-expert-parallel --data-parallel-size 4 --data-parallel-size-local 2 "
              "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'")
    w_host = "ssh 10.2.0.2 " if two_hosts else ""
    lines = [
        "#!/bin/bash", f"pip install vllm=={version}",
        f"VLLM_NIXL_SIDE_CHANNEL_PORT=6500 CUDA_VISIBLE_DEVICES=0,1 vllm serve {model} --port 8100 {common} "
        "--data-parallel-address 127.0.0.1 --data-parallel-rpc-port 13345 &",
        f"{w_host}VLLM_NIXL_SIDE_CHANNEL_PORT={p_worker_port} CUDA_VISIBLE_DEVICES=2,3 vllm serve {model} {common} "
        f"--data-parallel-start-rank 2 --data-parallel-address 127.0.0.1 --data-parallel-rpc-port {worker_rpc} "
        "--headless &",
        f"VLLM_NIXL_SIDE_CHANNEL_PORT=7500 CUDA_VISIBLE_DEVICES=4,5 vllm serve {model} --port 8200 {common} "
        "--data-parallel-address 127.0.0.1 --data-parallel-rpc-port 13346 &",
        f"VLLM_NIXL_SIDE_CHANNEL_PORT=7600 CUDA_VISIBLE_DEVICES=6,7 vllm serve {model} {common} "
        "--data-parallel-start-rank 2 --data-parallel-address 127.0.0.1 --data-parallel-rpc-port 13346 --headless &",
        "python toy_proxy_server.py --port 9000 --prefiller-port 8100 --decoder-port 8200 &", "wait"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("version", ["0.9.1", "0.11.1", "0.20.1"])
def test_a_headless_worker_serves_the_role_of_the_leader_it_joins(tmp_path, capsys, version):
    code, out = _script(tmp_path, capsys, _dp_script(version))
    assert not out.get("notChecked"), out.get("notChecked")
    assert code in (0, 1) and len(out["results"]) >= 2


def test_a_headless_worker_of_no_named_leader_stays_unjudged(tmp_path, capsys):
    _, out = _script(tmp_path, capsys, _dp_script("0.11.1", worker_rpc=14000))
    assert any("role" in n["reason"] for n in out["notChecked"])


@pytest.mark.parametrize(("version", "expected"), [
    ("0.9.1", True),     # local indices: the worker's ranks 2-3 bind 6500 and 6501, as the leader's 0-1
    ("0.9.2", False),    # global ranks: 6502 and 6503
    ("0.11.1", False),   # one port per DP rank: base + 2, base + 3
])
def test_a_headless_worker_copying_its_leaders_side_channel_base(tmp_path, capsys, version, expected):
    _, out = _script(tmp_path, capsys, _dp_script(version, p_worker_port=6500))
    assert ("same-role-port-conflict" in rules(out, "error")) is expected


def test_a_headless_worker_with_its_own_side_channel_base_does_not_clash(tmp_path, capsys):
    _, out = _script(tmp_path, capsys, _dp_script("0.9.1"))
    assert "same-role-port-conflict" not in rules(out)


# --- a literal engine_id on a role of several instances ---------------------------------------------------------


def _pair(p_kv: dict, d_kv: dict, p_replicas=1, d_replicas=1, image="vllm/vllm-openai:v0.20.1"):
    docs = []
    for role, kv, replicas in (("prefill", p_kv, p_replicas), ("decode", d_kv, d_replicas)):
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": ["Qwen/Qwen3-8B", "--kv-transfer-config", json.dumps(kv)], "env": [POD_IP],
             "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        w = workload(f"q-{role}", role, c, app="q")
        w["spec"]["replicas"] = replicas
        docs.append(w)
    return docs


NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


@pytest.mark.parametrize(("p_kv", "d_kv", "p_rep", "d_rep", "expected"), [
    ({**NIXL, "engine_id": "prefill-0"}, NIXL, 2, 1, True),
    ({**NIXL, "engine_id": "prefill-0"}, NIXL, 1, 1, False),      # one instance
    (NIXL, NIXL, 3, 1, False),                                    # vLLM draws an id per instance
    (NIXL, {**NIXL, "engine_id": "decode-0"}, 1, 2, False),       # pull: nobody dials the decode by its id
    (NIXL, {**NIXL, "engine_id": "decode-0",
            "kv_connector_extra_config": {"bidirectional_kv_xfer": True}}, 1, 2, True),
])
def test_a_written_engine_id_on_a_role_of_several_instances(tmp_path, capsys, p_kv, d_kv, p_rep, d_rep, expected):
    _, out = check(tmp_path, capsys, *_pair(p_kv, d_kv, p_rep, d_rep))
    assert ("nixl-engine-id-shared" in rules(out, "error")) is expected
