"""dev/cluster_example.py's pure parts: the manifest it applies and the cluster line it prints."""

from __future__ import annotations

from pathlib import Path

from dev.cluster_example import NODE_LABEL, cluster_exports, manifest


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
