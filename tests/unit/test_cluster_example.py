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
