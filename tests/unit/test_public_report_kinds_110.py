"""Variants of what the hundred-and-tenth public-report set (tests/unit/data/public_reports_110: a user's
LeaderWorkerSet rewrite of llm-d's wide-EP guide, one ``vllm serve`` per GPU, each an external-LB data-parallel rank)
taught, with negative controls.

1. DP ranks a pod starts are the sum over its script's launches of one data-parallel group. The group check of
   ``parallelism-gpu-count`` counted one external-LB rank per pod, so two 8-GPU pods running eight ranks each for
   ``--data-parallel-size 16`` were refused ("ranks 2 to 15 never start"): a false refusal on every valid variant.
2. A device plugin hands a pod n GPUs, which its container sees as devices 0 to n-1: a ``CUDA_VISIBLE_DEVICES``
   ordinal at or past n names none (0.26.0 v1/worker/gpu_worker.py init_device), as for a container handed some of
   its host's GPUs. Eight launches pinned to GPUs 0-7 in a pod requesting 4 passed.
3. ``PYTORCH_ALLOC_CONF`` (PyTorch 2.9+, vLLM 0.11.1+) is the allocator variable PyTorch reads first (vLLM 0.34.0
   vllm/device_allocator/alloc_conf.py ``ALLOC_CONF_ENV_VARS``), while vLLM's startup refusal reads only
   ``PYTORCH_CUDA_ALLOC_CONF`` (config/vllm.py 0.26.0 lines 916-918): expandable segments under the newer name start
   and break NIXL's RDMA registrations (vllm#41237). Only the older name was read.
4. ``VLLM_NIXL_SIDE_CHANNEL_HOST`` set to ``$(LWS_LEADER_ADDRESS)`` in a group whose every pod runs its own DP
   engine cores: the other pods' listeners bind and advertise the leader's address (nixl/base_scheduler.py 0.26.0
   lines 275-308, pull_scheduler.py line 275). It was taken for a literal address and not judged.
5. More DP ranks started over a LeaderWorkerSet group than ``--data-parallel-size``: ParallelConfig refuses a rank at or
   past the size (config/parallel.py 0.26.0 lines 858-862). No rule compared them (``data-parallel-rank-out-of-range``).
"""

from __future__ import annotations

import json

import yaml

from pdd_operator.cli import main
from pdd_operator.compat.manifests import pod_dp_ranks
from pdd_operator.compat.pair import RoleConfig
from pdd_operator.compat.rules.memory import allocator_conf_fault

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
POD_IP = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
MOE = "Qwen/Qwen3-30B-A3B"


def _per_gpu_script(gpus: int, dp: int, flags: str = "", port: int = 8000, loop: bool = False) -> str:
    """A bash script that starts one vllm serve per GPU, each an external-LB rank of one DP group."""
    common = (f"--data-parallel-size {dp} --data-parallel-address ${{LWS_LEADER_ADDRESS}} --data-parallel-rpc-port 5555 "
              f"--enable-expert-parallel --kv-transfer-config '{KV}' {flags}")
    head = f"START_RANK=$(( ${{LWS_WORKER_INDEX:-0}} * {gpus} ))\n"
    if loop:
        return head + (f"for i in $(seq 0 {gpus - 1}); do\n"
                       f"  CUDA_VISIBLE_DEVICES=$i vllm serve {MOE} --port $(({port} + i)) "
                       f"--data-parallel-rank $((START_RANK + i)) {common} &\ndone\nwait\n")
    return head + "".join(f"CUDA_VISIBLE_DEVICES={i} vllm serve {MOE} --port {port + i} "
                          f"--data-parallel-rank $((START_RANK + {i})) {common} &\n" for i in range(gpus)) + "wait\n"


def _lws(role: str, script: str, gpus: int, image: str = "vllm/vllm-openai:v0.26.0", env: list | None = None,
         size: int = 2, extra_resources: dict | None = None, security: dict | None = None) -> dict:
    resources = {"nvidia.com/gpu": str(gpus), **(extra_resources or {})}
    container = {"name": "vllm", "image": image, "command": ["/bin/bash", "-c"], "args": [script],
                 "env": env if env is not None else [POD_IP], "resources": {"limits": resources, "requests": resources}}
    if security:
        container["securityContext"] = security
    labels = {"app": "moe", "llm-d.ai/role": role}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": f"moe-{role}", "labels": labels},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": size, "workerTemplate": {
                "metadata": {"labels": labels}, "spec": {"containers": [container]}}}}}


def _report(tmp_path, capsys, *docs: dict) -> tuple[int, list[dict]]:
    path = tmp_path / "pd.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    return code, [f for r in out.get("results", []) for f in r["findings"]]


def _check(tmp_path, capsys, *docs: dict) -> tuple[int, dict[str, set[str]]]:
    code, findings = _report(tmp_path, capsys, *docs)
    found: dict[str, set[str]] = {"error": set(), "warning": set()}
    for f in findings:
        found[f["severity"]].add(f["rule"])
    return code, found


def _pair(p_script: str, d_script: str, **kw) -> tuple[dict, dict]:
    p_kw = {k.removeprefix("p_"): v for k, v in kw.items() if not k.startswith("d_")}
    d_kw = {k.removeprefix("d_"): v for k, v in kw.items() if not k.startswith("p_")}
    return _lws("prefill", p_script, **{"gpus": 4, **p_kw}), _lws("decode", d_script, **{"gpus": 4, **d_kw})


# --- 1. the DP ranks of a pod's launches ----------------------------------------------------------------------------


def test_four_launches_per_pod_over_two_pods_fill_a_dp_group_of_eight(tmp_path, capsys):
    code, found = _check(tmp_path, capsys, *_pair(_per_gpu_script(4, 8), _per_gpu_script(4, 8, port=8200)))
    assert "parallelism-gpu-count" not in found["error"] and code == 0, found


def test_launches_of_a_loop_count_as_well(tmp_path, capsys):
    code, found = _check(tmp_path, capsys, *_pair(_per_gpu_script(4, 8, loop=True),
                                                  _per_gpu_script(4, 8, port=8200, loop=True)))
    assert "parallelism-gpu-count" not in found["error"], found


def test_fewer_launches_than_the_dp_size_still_leave_ranks_unstarted(tmp_path, capsys):
    """Eight ranks started (4 per pod x 2 pods) for --data-parallel-size 12: ranks 8-11 never start."""
    code, found = _check(tmp_path, capsys, *_pair(_per_gpu_script(4, 12), _per_gpu_script(4, 8, port=8200)))
    assert code == 1 and "parallelism-gpu-count" in found["error"], found


def _role(dp: int, local: int | None = 1) -> RoleConfig:
    return RoleConfig(role="prefill", model=MOE, dp=dp, dp_local=local)


def test_pod_dp_ranks_sums_one_group_only():
    same = {"--data-parallel-address": "10.0.0.1", "--data-parallel-rpc-port": "5555"}
    other = {"--data-parallel-address": "10.0.0.2", "--data-parallel-rpc-port": "5555"}
    assert pod_dp_ranks([(_role(8), same), (_role(8), same), (_role(8), same)]) == [3, 3, 3]
    # another group's address, another DP size, an unknown local count: not summed with the rest
    assert pod_dp_ranks([(_role(8), same), (_role(8), other)]) == [None, None]
    assert pod_dp_ranks([(_role(8), same), (_role(16), same)]) == [None, None]
    assert pod_dp_ranks([(_role(8), same), (_role(8, None), same)]) == [None, None]
    # one launch alone, or no data parallelism: dp_local says it
    assert pod_dp_ranks([(_role(8), same)]) == [None]
    assert pod_dp_ranks([(_role(1), {}), (_role(1), {})]) == [None, None]


# --- 2. CUDA_VISIBLE_DEVICES past the device plugin's count -----------------------------------------------------------


def test_launches_pinned_past_the_pods_gpus_fail(tmp_path, capsys):
    code, findings = _report(tmp_path, capsys, *_pair(_per_gpu_script(4, 8), _per_gpu_script(4, 8, port=8200),
                                                      p_gpus=2))
    past = [f for f in findings if f["rule"] == "parallelism-gpu-count" and f["severity"] == "error"
            and "the pod requests 2 GPU(s)" in f["message"]]
    assert code == 1 and {"CUDA_VISIBLE_DEVICES=2", "CUDA_VISIBLE_DEVICES=3"} <= {
        w for f in past for w in f["message"].split() if w.startswith("CUDA_VISIBLE_DEVICES=")}, findings
    # the launches pinned to GPUs 0 and 1 are inside the pod's two
    assert not any("CUDA_VISIBLE_DEVICES=0 " in f["message"] or "CUDA_VISIBLE_DEVICES=1 " in f["message"]
                   for f in past), past


def test_a_deployment_pinned_past_its_gpus_fails_and_a_privileged_one_is_not_judged(tmp_path, capsys):
    def deployment(role: str, cvd: str, security: dict | None = None) -> dict:
        c = {"name": "vllm", "image": "vllm/vllm-openai:v0.23.0", "command": ["vllm", "serve"],
             "args": ["meta-llama/Llama-3.1-8B-Instruct", "--kv-transfer-config", KV],
             "env": [POD_IP, {"name": "CUDA_VISIBLE_DEVICES", "value": cvd}],
             "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        if security:
            c["securityContext"] = security
        labels = {"app": "llama", "role": role}
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"llama-{role}", "labels": labels},
                "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
                                                                          "spec": {"containers": [c]}}}}
    code, found = _check(tmp_path, capsys, deployment("prefill", "0"), deployment("decode", "1"))
    assert code == 1 and "parallelism-gpu-count" in found["error"], found
    code, found = _check(tmp_path, capsys, deployment("prefill", "0"), deployment("decode", "0"))
    assert "parallelism-gpu-count" not in found["error"], found
    # a privileged container sees every GPU of its node: ordinal 1 may be there
    code, found = _check(tmp_path, capsys, deployment("prefill", "0"), deployment("decode", "1", {"privileged": True}))
    assert "parallelism-gpu-count" not in found["error"], found


# --- 3. PYTORCH_ALLOC_CONF ------------------------------------------------------------------------------------------


def test_allocator_conf_fault_reads_the_general_variable_as_pytorch_does():
    on = "expandable_segments:True"
    assert allocator_conf_fault((0, 26, 0), {"PYTORCH_ALLOC_CONF": on}, (), True)[1][0] == "error"
    assert allocator_conf_fault((0, 26, 0), {"PYTORCH_ALLOC_CONF": on}, (), False)[1][0] == "warning"
    assert allocator_conf_fault(None, {"PYTORCH_ALLOC_CONF": on}, (), True)[1][0] == "warning"
    # PyTorch 2.8 (vLLM 0.11.0) does not read it
    assert allocator_conf_fault((0, 11, 0), {"PYTORCH_ALLOC_CONF": on}, (), True)[1] is None
    # the cumem allocator's pool keeps the KV cache out of expandable segments
    assert allocator_conf_fault((0, 26, 0), {"PYTORCH_ALLOC_CONF": on}, ("--enable-cumem-allocator",), True)[1] is None
    # not a NIXL pair: only vLLM's startup refusal, which never reads it
    assert allocator_conf_fault((0, 26, 0), {"PYTORCH_ALLOC_CONF": on}, (), True, nixl=False)[1] is None
    # the older name is refused at startup from 0.21 whatever the newer one says
    both = {"PYTORCH_ALLOC_CONF": "max_split_size_mb:512", "PYTORCH_CUDA_ALLOC_CONF": on}
    assert allocator_conf_fault((0, 26, 0), both, (), False) == (
        "PYTORCH_CUDA_ALLOC_CONF", allocator_conf_fault((0, 26, 0), {"PYTORCH_CUDA_ALLOC_CONF": on}, (), False)[1])
    # before 0.21 PyTorch 2.9+ reads the newer name first: the older one's expandable segments are not in effect
    assert allocator_conf_fault((0, 15, 1), both, (), True)[1] is None


def test_pytorch_alloc_conf_over_rdma_is_refused_end_to_end(tmp_path, capsys):
    env = [POD_IP, {"name": "PYTORCH_ALLOC_CONF", "value": "expandable_segments:True"}]
    rdma = {"rdma/ib": "1"}
    docs = _pair(_per_gpu_script(4, 8), _per_gpu_script(4, 8, port=8200), env=env, extra_resources=rdma)
    code, found = _check(tmp_path, capsys, *docs)
    assert code == 1 and "expandable-segments-with-nixl" in found["error"], found
    docs = _pair(_per_gpu_script(4, 8), _per_gpu_script(4, 8, port=8200), env=env)  # no RDMA device: a warning
    code, found = _check(tmp_path, capsys, *docs)
    assert code == 0 and "expandable-segments-with-nixl" in found["warning"], found


# --- 4. the leader's address as every pod's side-channel host ------------------------------------------------------

LEADER_HOST = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "$(LWS_LEADER_ADDRESS)"}


def _hybrid(dp: int, local: int, port: int, extra: str = "") -> str:
    return (f"vllm serve {MOE} --port {port} --data-parallel-size {dp} --data-parallel-size-local {local} "
            f"--data-parallel-start-rank $(( ${{LWS_WORKER_INDEX:-0}} * {local} )) --data-parallel-hybrid-lb "
            f"--data-parallel-address ${{LWS_LEADER_ADDRESS}} --data-parallel-rpc-port 5555 --enable-expert-parallel "
            f"--kv-transfer-config '{KV}' {extra}")


def test_leader_address_as_side_channel_host_of_dp_pods_is_refused(tmp_path, capsys):
    for p_script in (_per_gpu_script(4, 8), _hybrid(8, 4, 8000)):
        docs = _pair(p_script, _per_gpu_script(4, 8, port=8200), p_env=[LEADER_HOST])
        code, found = _check(tmp_path, capsys, *docs)
        assert code == 1 and "side-channel-host-not-routable" in found["error"], (p_script, found)


def test_leader_address_for_one_engine_spread_over_the_pods_is_not_this_fault(tmp_path, capsys):
    """TP 8 over two 4-GPU pods (--nnodes): one engine core, on the leader, binds the only listener."""
    tp = (f"vllm serve {MOE} --port 8000 --tensor-parallel-size 8 --nnodes 2 --node-rank ${{LWS_WORKER_INDEX:-0}} "
          f"--master-addr ${{LWS_LEADER_ADDRESS}} --kv-transfer-config '{KV}'")
    docs = _pair(tp, _per_gpu_script(4, 8, port=8200), p_env=[LEADER_HOST])
    code, found = _check(tmp_path, capsys, *docs)
    assert "side-channel-host-not-routable" not in found["error"], found


# --- 5. more DP ranks over the group than --data-parallel-size ------------------------------------------------------


def test_more_ranks_over_the_group_than_the_dp_size_are_refused(tmp_path, capsys):
    for d_script in (_per_gpu_script(4, 4, port=8200), _hybrid(4, 4, 8200)):
        docs = _pair(_per_gpu_script(4, 8), d_script)
        code, found = _check(tmp_path, capsys, *docs)
        assert code == 1 and "data-parallel-rank-out-of-range" in found["error"], (d_script, found)


def test_ranks_filling_the_dp_size_exactly_are_not(tmp_path, capsys):
    docs = _pair(_per_gpu_script(4, 8), _hybrid(8, 4, 8200))
    code, found = _check(tmp_path, capsys, *docs)
    assert "data-parallel-rank-out-of-range" not in found["error"], found


def test_a_release_before_the_rank_check_read_is_not_judged(tmp_path, capsys):
    docs = _pair(_per_gpu_script(4, 8), _hybrid(4, 4, 8200), image="vllm/vllm-openai:v0.10.0")
    code, found = _check(tmp_path, capsys, *docs)
    assert "data-parallel-rank-out-of-range" not in found["error"], found
