"""Engines that span a pod group (LeaderWorkerSet ``size``, AIBrix StormService ``podGroupSize``): the GPU count is
the group's when a Ray cluster spans it, the pod's otherwise; the side-channel rule sees Ray clusters started in the
command (``ray start``, vLLM's multi-node-serving.sh).
"""

from __future__ import annotations

import pytest

from pdd_operator.compat import evaluate
from pdd_operator.compat.manifests import find_engines, pair_engines

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
RAY_LEADER = ("bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader "
              "--ray_cluster_size=$(LWS_GROUP_SIZE); ")


def _serve(tp: int, pp: int, version: str, ray_prefix: str = "", role: str = "prefill") -> dict:
    script = (f"{ray_prefix}vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size {tp} "
              f"--pipeline-parallel-size {pp} --kv-transfer-config '{KV}'")
    return {"name": role, "image": f"vllm/vllm-openai:v{version}", "command": ["sh", "-c", script],
            "resources": {"limits": {"nvidia.com/gpu": "8"}},
            "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}


def _lws(role: str, size: int, container: dict) -> dict:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": f"ds-{role}", "labels": {"app": "ds"}},
            "spec": {"leaderWorkerTemplate": {"size": size, "leaderTemplate": {
                "metadata": {"labels": {"role": role}}, "spec": {"containers": [container]}},
                "workerTemplate": {"spec": {"containers": [{"name": "w", "image": "vllm/vllm-openai:v0.28.0",
                                                            "command": ["sh", "-c", "ray start --block"]}]}}}}}


def _storm(size: int, prefill: dict, decode: dict) -> dict:
    def role(name, c):
        return {"name": name, "replicas": 1, "podGroupSize": size, "template": {"spec": {"containers": [c]}}}
    return {"apiVersion": "orchestration.aibrix.ai/v1alpha1", "kind": "StormService", "metadata": {"name": "ds"},
            "spec": {"template": {"spec": {"roles": [role("prefill", prefill), role("decode", decode)]}}}}


def _rules(docs) -> tuple:
    (pair, _, _), = pair_engines([e for d in docs for e in find_engines(d)])[0]
    return pair, {f.rule for f in evaluate(pair).errors}


@pytest.mark.parametrize("version", ["0.28.0", "0.32.0"])
def test_lws_ray_group_counts_the_group_gpus(version):
    docs = [_lws(r, 2, _serve(16, 1, version, RAY_LEADER, r)) for r in ("prefill", "decode")]
    pair, errors = _rules(docs)
    assert pair.prefill.pod_group == 2 and pair.prefill.ray_cluster
    assert "parallelism-gpu-count" not in errors


def test_lws_ray_group_too_small_is_refused_with_the_group_total():
    docs = [_lws(r, 2, _serve(8, 3, "0.28.0", RAY_LEADER, r)) for r in ("prefill", "decode")]
    pair, _ = _rules(docs)
    found = [f for f in evaluate(pair).errors if f.rule == "parallelism-gpu-count"]
    assert found and "2 pods with 8 GPU(s) each (16 in all)" in found[0].message


def test_storm_group_without_ray_counts_one_pod():
    pair, errors = _rules([_storm(2, _serve(8, 2, "0.28.0"), _serve(8, 2, "0.28.0", role="decode"))])
    assert pair.prefill.pod_group == 2 and not pair.prefill.ray_cluster
    assert "parallelism-gpu-count" in errors
    message = next(f.message for f in evaluate(pair).errors if f.rule == "parallelism-gpu-count")
    assert "pod group of 2 pods adds none" in message


def test_storm_group_with_ray_start_fits():
    ray = "ray start --head --port 6379 && "
    _, errors = _rules([_storm(2, _serve(8, 2, "0.28.0", ray), _serve(8, 2, "0.28.0", ray, "decode"))])
    assert "parallelism-gpu-count" not in errors


def test_single_pod_negative_control():
    pair, errors = _rules([_storm(1, _serve(16, 1, "0.28.0"), _serve(16, 1, "0.28.0", role="decode"))])
    assert pair.prefill.pod_group == 1 and "parallelism-gpu-count" in errors
    _, ok = _rules([_storm(1, _serve(8, 1, "0.28.0"), _serve(8, 1, "0.28.0", role="decode"))])
    assert "parallelism-gpu-count" not in ok


def test_side_channel_rule_sees_a_ray_cluster_started_in_the_script():
    # vLLM 0.10: each rank binds its own listener on the leader's address (until 0.11.1)
    docs = [_lws(r, 2, _serve(16, 1, "0.10.0", RAY_LEADER, r)) for r in ("prefill", "decode")]
    _, errors = _rules(docs)
    assert "side-channel-host-per-node" in errors
    docs = [_lws(r, 2, _serve(16, 1, "0.11.1", RAY_LEADER, r)) for r in ("prefill", "decode")]
    assert "side-channel-host-per-node" not in _rules(docs)[1]
