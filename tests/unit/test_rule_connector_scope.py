"""A rule scoped to one KV connector (``Rule.connector``: the ``p2p_nccl`` and ``moriio`` rules) is neither run nor
named "not checked" on another connector's pair (``compat.engine._in_scope``).

Issue 9: a NixlConnector pair whose flags a variable not in the files may set (``$EXTRA_ARGS`` where flags stand) was
reported "not checked" for the P2pNccl rules too (p2p-nccl-parallel-mismatch, -block-size-, -kv-dtype-, -model-),
rules that judge only a pair of two ``P2pNcclConnector`` engines. A P2pNccl pair still names its own.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main
from pdd_operator.compat.rules import CHECKS

from .test_script_inputs import _check

P2P_RULES = {r.id for r in CHECKS if r.connector == "P2pNcclConnector"}
MORIIO_RULES = {r.id for r in CHECKS if r.connector == "MoRIIOConnector"}


def _kv(connector: str, role: str) -> str:
    return json.dumps({"kv_connector": connector, "kv_role": role, "kv_port": "21001",
                       "kv_connector_extra_config": {"http_port": "20003", "proxy_ip": "0.0.0.0", "proxy_port": "30001"}})


def _pair(connector: str, vllm: str, roles: tuple[str, str] = ("kv_both", "kv_both"), flags: str = "$EXTRA_ARGS") -> str:
    """Two Deployments whose shell command line carries ``flags`` (a variable not in the files) before the KV config."""
    docs = []
    for name, role in zip(("prefill", "decode"), roles, strict=True):
        line = f"vllm serve Qwen/Qwen3-8B {flags} --kv-transfer-config '{_kv(connector, role)}'"
        docs.append(f"""---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v{vllm}
        command: ["/bin/sh", "-c"]
        args: [{json.dumps(line)}]
        env:
        - name: VLLM_NIXL_SIDE_CHANNEL_HOST
          valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}
        - name: VLLM_DISABLE_REQUEST_ID_RANDOMIZATION
          value: "1"
        resources: {{limits: {{nvidia.com/gpu: 1}}}}
""")
    return "".join(docs)


def _said(out: dict) -> str:
    return json.dumps(out)


def test_scoped_rules_exist():
    assert len(P2P_RULES) >= 5 and len(MORIIO_RULES) >= 3  # the scope below is not vacuous


@pytest.mark.parametrize("vllm", ["0.11.0", "0.20.0", "0.30.0"])
def test_nixl_pair_never_names_p2p_nccl_or_moriio_rules(tmp_path, capsys, vllm):
    code, out = _check(tmp_path, capsys, _pair("NixlConnector", vllm), "pair.yaml")
    said = _said(out)
    assert "not checked" in said and "block-size-direction" in said, out  # its own rules are "not checked"
    assert not [r for r in P2P_RULES | MORIIO_RULES if r in said], out


def test_nixl_pair_text_output_never_names_p2p_nccl_rules(tmp_path, capsys):
    path = tmp_path / "pair.yaml"
    path.write_text(_pair("NixlConnector", "0.11.0"))
    main(["check", str(path)])
    text = capsys.readouterr().out
    assert "block-size-direction" in text and "p2p-nccl" not in text and "moriio" not in text, text


@pytest.mark.parametrize("vllm", ["0.11.0", "0.20.0"])
def test_p2p_nccl_pair_still_names_its_not_checked_rules(tmp_path, capsys, vllm):
    code, out = _check(tmp_path, capsys, _pair("P2pNcclConnector", vllm, ("kv_producer", "kv_consumer")), "pair.yaml")
    said = _said(out)
    assert "p2p-nccl-parallel-mismatch" in said and "p2p-nccl-block-size-mismatch" in said, out
    assert "block-size-direction" not in said and not [r for r in MORIIO_RULES if r in said], out
