"""dev/cluster_example.py's pure parts: the manifest it applies and the cluster line it prints."""

from __future__ import annotations

from pathlib import Path

from kubernetes.utils import parse_quantity

from dev.cluster_example import AGENT_CPUS, NODE_LABEL, cluster_exports, manifest, metrics_commands
from pdd_operator.render.workloads import Owner, render_children
from tests.helpers import spec_of


def test_the_printed_kubectl_line_points_at_the_cluster_this_run_used():
    assert cluster_exports({}) == ""
    assert cluster_exports({"PDD_APISERVER_PORT": "24443"}) == "export PDD_APISERVER_PORT=24443; "
    line = cluster_exports({"PDD_CLUSTER_DIR": "/tmp/a dir", "PDD_APISERVER_PORT": "24443", "HOME": "/root"})
    assert line == "export PDD_CLUSTER_DIR='/tmp/a dir' PDD_APISERVER_PORT=24443; "


def test_the_manifest_puts_every_role_on_the_agents_node_and_names_each_change(tmp_path: Path):
    doc, changes = manifest(tmp_path / "model", "nemotron_h", "NixlPushConnector")
    spec = doc["spec"]
    assert spec["model"]["name"] == str(tmp_path / "model")
    assert spec["model"]["hfArchitecture"] == "NemotronHForCausalLM"
    assert spec["kvTransfer"]["connector"] == "NixlPushConnector"
    for part in ("prefill", "decode", "router"):
        assert spec[part]["nodeSelector"][NODE_LABEL] == "true"
        assert {"key": NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"} in spec[part]["tolerations"]
    assert any("NixlPushConnector" in c for c in changes) and any("NemotronHForCausalLM" in c for c in changes)
    _, same = manifest(tmp_path / "model")
    assert not any("connector" in c for c in same)


def test_prompt_tokens_by_source_sums_each_source_over_the_other_labels():
    from dev.pd_client import prompt_tokens_by_source

    text = """# HELP vllm:prompt_tokens_by_source_total Number of prompt tokens by source.
# TYPE vllm:prompt_tokens_by_source_total counter
vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="local_compute"} 1.0
vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="external_kv_transfer"} 646.0
vllm:prompt_tokens_by_source_total{engine="1",model_name="m",source="external_kv_transfer"} 4.0
vllm:prompt_tokens_total{engine="0",model_name="m"} 647.0
"""
    assert prompt_tokens_by_source(text) == {"local_compute": 1.0, "external_kv_transfer": 650.0}
    assert prompt_tokens_by_source("vllm:prompt_tokens_total 3.0\n") == {}


def _cpu_requests(deployment: dict) -> float:
    """CPUs one pod of a rendered Deployment requests (every container's requests.cpu, summed)."""
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return sum(float(parse_quantity(c.get("resources", {}).get("requests", {}).get("cpu", "0"))) for c in containers)


def test_a_coordinated_rollout_fits_on_the_agents_node(tmp_path: Path):
    """A compat-hash change runs the old pair, the new pair and the router at once (controller/rollout.py: the old
    slot stops only once the new pair is Ready); all of them must fit on the agent's node, or the new revision's
    last engine stays Pending and the rollout never finishes (a new user's must-match change on 2026-12-05)."""
    doc, changes = manifest(tmp_path / "model")
    children = render_children(Owner(name=doc["metadata"]["name"], namespace="default"), spec_of(doc))
    deployments = {c["metadata"]["labels"]["app.kubernetes.io/component"]: c for c in children if c["kind"] == "Deployment"}
    old_pair = _cpu_requests(deployments["prefill"]) + _cpu_requests(deployments["decode"])
    assert 2 * old_pair + _cpu_requests(deployments["router"]) <= AGENT_CPUS
    assert any("requests.cpu" in c for c in changes)


def test_the_printed_metrics_lines_look_the_pods_up_when_they_run():
    """Engine pods get new addresses when they restart or roll out: the printed lines find every Running pod of a
    role by label each time, instead of an address printed once."""
    lines = metrics_commands("cpu-tiny", "serving", "export PDD_APISERVER_PORT=26443; ", "prefill (pull)")
    assert lines[0].startswith("export PDD_APISERVER_PORT=26443; eval")
    for role in ("decode", "prefill"):
        line = next(x for x in lines if f"component={role}" in x)
        assert "app.kubernetes.io/instance=cpu-tiny" in line and "-n serving" in line
        assert "status.phase=Running" in line and "$ip:8000/metrics" in line
        assert "127." not in line
