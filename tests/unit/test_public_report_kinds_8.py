"""Variants of the kinds of fault the eighth public-report set (tests/unit/data/public_reports_8) found, each with
negative controls: a wildcard side-channel host (0.0.0.0) on AIBrix StormService roles, whose gateway replaces the
advertised host with the prefill pod IP (a warning there, an error elsewhere, and an unset host still an error);
``spec.nodeName`` as placement of hostNetwork pods (two names: apart; one name: one node); and the per-node
side-channel fault of vLLM before 0.11.1, which needs Ray to carry the leader's environment to other nodes (data
parallelism over pods that each run their own ``vllm serve`` is not affected)."""

from __future__ import annotations

import pytest

from tests.unit.test_pod_groups import RAY_LEADER, _lws, _serve
from tests.unit.test_turn2_variants import KV, check, container, pd, rules, workload

# --- a wildcard side-channel host behind the AIBrix gateway ----------------------------------------------------


def _storm(host: str | None, image="vllm/vllm-openai:v0.10.2", kind="StormService"):
    """A prefill/decode pair of one model with VLLM_NIXL_SIDE_CHANNEL_HOST ``host`` (``None``: unset), as the roles
    of an AIBrix StormService, or (``kind="Deployment"``) as two Deployments."""
    env = [] if host is None else [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": host}]

    def engine(role):
        c = container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV], image=image, gpus=1, name=role)
        c["env"] = env + [e for e in c["env"] if e["name"] != "VLLM_NIXL_SIDE_CHANNEL_HOST"]
        return c

    if kind == "Deployment":
        return [workload(f"s-{r}", r, engine(r)) for r in ("prefill", "decode")]
    roles = [{"name": r, "replicas": 1, "template": {"metadata": {"labels": {"model.aibrix.ai/name": "q"}},
                                                      "spec": {"containers": [engine(r)]}}} for r in ("prefill", "decode")]
    return [{"apiVersion": "orchestration.aibrix.ai/v1alpha1", "kind": "StormService", "metadata": {"name": "s"},
             "spec": {"replicas": 1, "template": {"spec": {"roles": roles}}}}]


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_wildcard_host_on_stormservice_roles_is_a_warning(tmp_path, capsys, host):
    code, out = check(tmp_path, capsys, *_storm(host))
    assert code == 0 and "side-channel-host-not-routable" in rules(out, "warning")
    assert "side-channel-host-not-routable" not in rules(out, "error")


@pytest.mark.parametrize("host", [None, "localhost", "127.0.0.1"])
def test_a_loopback_host_on_stormservice_roles_is_still_refused(tmp_path, capsys, host):
    # the listener binds loopback only: no router's rewrite of remote_host makes it reachable from another pod
    code, out = check(tmp_path, capsys, *_storm(host))
    assert code == 1 and "side-channel-host-not-routable" in rules(out, "error")


def test_a_wildcard_host_on_plain_deployments_is_still_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_storm("0.0.0.0", kind="Deployment"))
    assert code == 1 and "side-channel-host-not-routable" in rules(out, "error")


# --- spec.nodeName places hostNetwork pods ---------------------------------------------------------------------


def _hostnet(node_p: str | None, node_d: str | None):
    docs = pd("b", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV], image="vllm/vllm-openai:v0.19.1")
    for doc, node in zip(docs, (node_p, node_d), strict=True):
        spec = doc["spec"]["template"]["spec"]
        spec["hostNetwork"] = True
        if node:
            spec["nodeName"] = node
        spec["containers"][0]["env"][0] = {
            "name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}
    return docs


def test_hostnetwork_pods_bound_to_two_nodes_share_no_ports(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_hostnet("node-a", "node-b"))
    assert code == 0 and "side-channel-port-conflict" not in rules(out)


def test_hostnetwork_pods_bound_to_one_node_are_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_hostnet("node-a", "node-a"))
    assert code == 1 and "side-channel-port-conflict" in rules(out, "error")


@pytest.mark.parametrize("node_p, node_d", [("node-a", None), (None, None)])
def test_hostnetwork_pods_on_an_unknown_node_are_warned(tmp_path, capsys, node_p, node_d):
    # one of them may land on the other's node or not: the scheduler decides, so a warning (set 9)
    code, out = check(tmp_path, capsys, *_hostnet(node_p, node_d))
    assert code == 0 and "side-channel-port-conflict" in rules(out, "warning")


def test_two_engines_bound_to_one_node_share_its_loopback(tmp_path, capsys):
    # one nodeName for both hostNetwork pods: one network namespace, so the default localhost host reaches the peer
    docs = _hostnet("node-a", "node-a")
    for i, doc in enumerate(docs):
        c = doc["spec"]["template"]["spec"]["containers"][0]
        c["env"] = [e for e in c["env"] if e["name"] != "VLLM_NIXL_SIDE_CHANNEL_HOST"]
        c["env"].append({"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(5600 + 10 * i)})
        c["args"] += ["--port", str(8000 + i)]
    _, out = check(tmp_path, capsys, *docs)
    assert "side-channel-host-not-routable" not in rules(out)


# --- the per-node side channel before 0.11.1 is a Ray fault -------------------------------------------------------


def _dp_over_pods(version: str, executor_ray: bool = False):
    """Prefill and decode LeaderWorkerSets of two pods, each pod running its own ``vllm serve`` with 8 local DP
    ranks of 16 (--data-parallel-address / --data-parallel-start-rank), the side-channel host its own pod IP."""
    script = ("START_RANK=$(( ${LWS_WORKER_INDEX:-0} * 8 ))\n"
              "exec vllm serve deepseek-ai/DeepSeek-V3 --data-parallel-size 16 --data-parallel-size-local 8 "
              "--data-parallel-address ${LWS_LEADER_ADDRESS} --data-parallel-start-rank $START_RANK "
              "--enable-expert-parallel " + ("--distributed-executor-backend ray " if executor_ray else "")
              + f"--kv-transfer-config '{KV}'")
    docs = []
    for role in ("prefill", "decode"):
        c = {"name": role, "image": f"vllm/vllm-openai:v{version}", "command": ["sh", "-c", script],
             "resources": {"limits": {"nvidia.com/gpu": "8"}},
             "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}
        docs.append({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                     "metadata": {"name": f"dp-{role}", "labels": {"app": "dp", "llm-d.ai/role": role}},
                     "spec": {"leaderWorkerTemplate": {"size": 2, "workerTemplate": {
                         "metadata": {"labels": {"app": "dp", "llm-d.ai/role": role}}, "spec": {"containers": [c]}}}}})
    return docs


@pytest.mark.parametrize("version", ["0.10.2", "0.11.0"])
def test_dp_over_pods_with_their_own_vllm_serve_is_not_a_per_node_fault(tmp_path, capsys, version):
    code, out = check(tmp_path, capsys, *_dp_over_pods(version))
    assert out["results"] and not out["notChecked"]  # read and paired: the rule had the engines to judge
    assert "side-channel-host-per-node" not in rules(out) and "kv-connector-missing" not in rules(out)


def test_dp_over_pods_of_an_unknown_version_is_not_held_back_by_the_per_node_rule(tmp_path, capsys):
    docs = _dp_over_pods("0.10.2")
    for d in docs:
        d["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = "ghcr.io/x/vllm:dev"
    _, out = check(tmp_path, capsys, *docs)
    assert out["results"] and "side-channel-host-per-node" not in str(out)


@pytest.mark.parametrize("version, refused", [("0.10.2", True), ("0.11.1", False)])
def test_a_ray_multi_node_launch_over_pods_is_still_refused_before_0_11_1(tmp_path, capsys, version, refused):
    _, out = check(tmp_path, capsys, *_dp_over_pods(version, executor_ray=True))
    assert ("side-channel-host-per-node" in rules(out, "error")) == refused


def test_a_ray_cluster_instance_over_two_pods_is_still_refused_on_0_10(tmp_path, capsys):
    docs = [_lws(r, 2, _serve(16, 1, "0.10.0", RAY_LEADER, r)) for r in ("prefill", "decode")]
    _, out = check(tmp_path, capsys, *docs)
    assert "side-channel-host-per-node" in rules(out, "error")
