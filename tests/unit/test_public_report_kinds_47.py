"""The kinds held-out set 47 (tests/unit/data/public_reports_47) found, each with variants of its own (other models,
versions, launchers, orchestrators): P/D deployments as tutorials and guides publish them.

- two engines whose NIXL side-channel listeners bind different specific addresses (each launch script exports its
  own node's IP) never collide on the side-channel port, whatever the port (``side-channel-port-conflict``,
  :func:`pdd_operator.compat.rules.network._bind_addresses_differ`);
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main


def _check(tmp_path, capsys, text: str, name: str = "pair.sh", *extra: str) -> tuple[int, dict]:
    path = tmp_path / name
    path.write_text(text)
    code = main(["check", str(path), "-o", "json", *extra])
    return code, json.loads(capsys.readouterr().out)


def _rules(out: dict, severity: str) -> set[str]:
    return {f["rule"] for r in out.get("results", []) for f in r["findings"] if f["severity"] == severity}


# --- distinct side-channel bind addresses ------------------------------------------------------------------------


def _node(role: str, host: str, port: int, http: int, model: str = "Qwen/Qwen3-8B") -> str:
    kv_role = "kv_producer" if role == "prefill" else "kv_consumer"
    return (f"# ---- start_{role}.sh (run on the {role} node) ----\n"
            f"export VLLM_NIXL_SIDE_CHANNEL_HOST={host}\n"
            f"export VLLM_NIXL_SIDE_CHANNEL_PORT={port}\n"
            f"nohup vllm serve {model} --port {http} --tensor-parallel-size 2 "
            f"--kv-transfer-config '{{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"{kv_role}\"}}' "
            f"> ~/{role}.log 2>&1 &\n")


@pytest.mark.parametrize(("p_host", "d_host", "conflict"), [
    ("10.0.1.15", "10.0.2.27", False),            # each node's own IP: two listeners, two addresses
    ("fd00::15", "fd00::27", False),              # IPv6 likewise
    ("10.0.1.15", "10.0.1.15", True),             # one address twice: the second bind fails
    ("0.0.0.0", "10.0.2.27", True),               # a wildcard holds the port on every address
    ("10.0.1.15", "localhost", True),             # unset-like loopback on one side: may be one host's
])
def test_engines_binding_distinct_addresses_do_not_collide_on_the_side_channel_port(tmp_path, capsys, p_host, d_host,
                                                                                     conflict):
    text = "#!/bin/bash\n" + _node("prefill", p_host, 50100, 8100) + _node("decode", d_host, 50100, 8200)
    _, out = _check(tmp_path, capsys, text, "pair.sh", "--vllm-version", "0.16.0")
    assert ("side-channel-port-conflict" in _rules(out, "error")) is conflict, out
