"""Variants of what the thirty-first public-report set (tests/unit/data/public_reports_31) taught, with negative
controls.

- vLLM's short data-parallel options (``-dpl``, ``-dpa``, ``-dpr``, ``-dpn``, ..., ``-ep``;
  vllm/engine/arg_utils.py from 0.11.1) are read as their long names (:mod:`pdd_operator.vllm.flags`). Unread, a
  multi-node data-parallel engine written with ``-dpl`` (ai-dynamo/nixl#1240's GB200 launch) looked as if it ran its
  whole ``--data-parallel-size`` in one pod, and ``parallelism-gpu-count`` refused it; ``--headless`` and the DP
  load-balancing switches take no value, so the option after them is no longer read as theirs.
- An unset (or loopback) ``VLLM_NIXL_SIDE_CHANNEL_HOST`` on hostNetwork pods whose side-channel ports overlap is an
  error even where the scheduler decides the nodes (``side-channel-host-not-routable``): on one node the second
  engine's listener cannot bind and the engine waits for it forever; on two the decode dials its own node. Distinct
  ports keep it a warning (one node works).
"""

from __future__ import annotations

import json

from pdd_operator.vllm.flags import parse_flags
from tests.unit.test_turn2_variants import check, rules, workload

GPUS, HOST = "parallelism-gpu-count", "side-channel-host-not-routable"
HOST_IP = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}
KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


# --- the short data-parallel options -------------------------------------------------------------------------------

def test_parse_flags_reads_the_short_data_parallel_options_and_headless_takes_no_value():
    _, flags = parse_flags(["vllm", "serve", "m", "-dp", "8", "-dpl", "4", "-dpa", "10.0.0.1", "-dpr", "4",
                            "--headless", "-tp", "2", "-dpp", "13345", "-ep"])
    assert flags["--data-parallel-size-local"] == "4" and flags["--data-parallel-address"] == "10.0.0.1"
    assert flags["--data-parallel-start-rank"] == "4" and flags["--data-parallel-rpc-port"] == "13345"
    assert flags["--headless"] is True and flags["--tensor-parallel-size"] == "2"
    assert flags["--enable-expert-parallel"] is True


def _lws(role, image, script, gpus, env=(), size=2):
    def template(cmd):
        return {"metadata": {"labels": {"app": "m", "role": role}},
                "spec": {"hostNetwork": True, "containers": [{
                    "name": "vllm", "image": image, "command": ["bash", "-c", cmd], "env": [HOST_IP, *env],
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": f"m-{role}", "labels": {"app": "m", "role": role}},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {
                "size": size, "leaderTemplate": template(script + " -dpr 0"),
                "workerTemplate": template(script + " -dpr 4 --headless")}}}


def _wide_ep(role, image, dp, dpl, port):
    return _lws(role, image, f"vllm serve Qwen/Qwen3-235B-A22B-FP8 -tp 1 -dp {dp} -dpl {dpl} -dpa ${{LWS_LEADER_ADDRESS}} "
                             f"-ep --kv-transfer-config '{KV}'", 4,
                env=[{"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": port}])


def test_dp8_over_two_four_gpu_pods_with_dpl_4_is_not_a_gpu_shortage(tmp_path, capsys):
    docs = [_wide_ep("prefill", "vllm/vllm-openai:v0.24.0", 8, 4, "5600"),
            _wide_ep("decode", "vllm/vllm-openai:v0.24.0", 8, 4, "5700")]
    code, out = check(tmp_path, capsys, *docs)
    assert GPUS not in rules(out) and code == 0, out


def test_external_lb_rank_per_pod_with_dpn_is_one_rank_per_pod(tmp_path, capsys):
    docs = []
    for role, port in (("prefill", "5600"), ("decode", "5700")):
        c = {"name": "vllm", "image": "vllm/vllm-openai:v0.13.0", "command": ["vllm", "serve"],
             "args": ["deepseek-ai/DeepSeek-V2-Lite", "-dp", "2", "-dpn", "0", "--trust-remote-code",
                      "--kv-transfer-config", KV],
             "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
                      "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                     {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": port}],
             "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        docs.append(workload(f"dsv2-{role}", role, c, app="dsv2"))
    code, out = check(tmp_path, capsys, *docs)
    assert GPUS not in rules(out) and code == 0, out


def test_dpl_larger_than_the_pod_gpus_is_still_refused(tmp_path, capsys):
    docs = [_wide_ep("prefill", "vllm/vllm-openai:v0.24.0", 16, 8, "5600"),
            _wide_ep("decode", "vllm/vllm-openai:v0.24.0", 16, 8, "5700")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and GPUS in rules(out, "error")


# --- an unset side-channel host on hostNetwork pods whose ports overlap --------------------------------------------

def _hostnet_pair(image, model, host_p, port_p, port_d, pod_extra=None):
    docs = []
    for role, host, port in (("prefill", host_p, port_p), ("decode", HOST_IP, port_d)):
        env = [*([host] if host else []), *([{"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": port}] if port else [])]
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": [model, "--port", "8100" if role == "prefill" else "8200", "--kv-transfer-config", KV],
             "env": env, "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        docs.append(workload(f"m-{role}", role, c, app="m", pod={"hostNetwork": True, **(pod_extra or {})}))
    return docs


def test_unset_host_with_the_default_port_on_both_hostnetwork_roles_is_an_error(tmp_path, capsys):
    docs = _hostnet_pair("vllm/vllm-openai:v0.13.0", "meta-llama/Llama-3.1-8B-Instruct", None, None, None)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and HOST in rules(out, "error"), out
    finding = next(f for r in out["results"] for f in r["findings"] if f["rule"] == HOST)
    assert "Address already in use" in finding["message"] and "own node" in finding["message"]


def test_localhost_with_one_explicit_port_on_both_roles_is_an_error_on_v030(tmp_path, capsys):
    localhost = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "localhost"}
    docs = _hostnet_pair("vllm/vllm-openai:v0.30.0", "Qwen/Qwen3-32B", localhost, "5557", "5557")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and HOST in rules(out, "error"), out


def test_unset_host_with_distinct_ports_stays_a_warning(tmp_path, capsys):
    docs = _hostnet_pair("vllm/vllm-openai:v0.13.0", "meta-llama/Llama-3.1-8B-Instruct", None, "5600", "5700")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and HOST in rules(out, "warning") and HOST not in rules(out, "error")


def test_unset_host_on_one_pinned_node_with_distinct_ports_is_fine(tmp_path, capsys):
    docs = _hostnet_pair("vllm/vllm-openai:v0.13.0", "meta-llama/Llama-3.1-8B-Instruct", None, "5600", "5700",
                         pod_extra={"nodeSelector": {"kubernetes.io/hostname": "gpu-1"}})
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and HOST not in rules(out)
