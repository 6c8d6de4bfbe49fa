"""Variants of what the seventy-sixth public-report set (tests/unit/data/public_reports_76) taught, with negative
controls: a prefill whose NixlConnector sits inside vLLM's ``MultiConnector`` serves its NIXL handshake only where
the MultiConnector forwards the handshake metadata.

From vLLM 0.11.1 the NIXL side channel is opened by ``NixlConnectorScheduler.set_xfer_handshake_metadata``, which
EngineCore calls with what the workers' ``get_handshake_metadata()`` return; MultiConnector forwards neither before
0.16.0 (0.11.1-0.14.1 sdists), so the prefill's NIXL child never listens and every decode handshake fails
(``multi-connector-nixl-listener``, :mod:`pdd_operator.compat.rules.multi_connector`). 0.11.0 (the worker starts the
listener), 0.16.0 and later (forwarded), a MultiConnector on the decode alone and Dynamo's own PdConnector are not
refused by it; 0.15.x, not read, is "not checked".
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main
from tests.unit.test_turn2_variants import check, container, rules, workload

RULE = "multi-connector-nixl-listener"
NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def _multi(*children) -> str:
    return json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both",
                       "kv_connector_extra_config": {"connectors": [NIXL, *children]}})


LMCACHE = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
OFFLOAD = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
           "kv_connector_extra_config": {"block_size": 64, "cpu_bytes_to_use": 10_000_000_000}}
OFFLOAD_OLD = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
               "kv_connector_extra_config": {"block_size": 64, "num_cpu_blocks": 1000}}
SHARED = {"kv_connector": "SharedStorageConnector", "kv_role": "kv_both",
          "kv_connector_extra_config": {"shared_storage_path": "local_storage"}}
EXAMPLE = {"kv_connector": "ExampleConnector", "kv_role": "kv_both",
           "kv_connector_extra_config": {"shared_storage_path": "local_storage"}}


def _pair(image, p_kv, d_kv, model="Qwen/Qwen3-8B"):
    return [workload("m-prefill", "prefill", container([model, "--kv-transfer-config", p_kv], image=image), app="m"),
            workload("m-decode", "decode", container([model, "--kv-transfer-config", d_kv], image=image), app="m")]


@pytest.mark.parametrize(("image", "p_kv", "d_kv", "model", "refused"), [
    # the wrapped prefill on each release read without the forwarding, with other children and models
    ("vllm/vllm-openai:v0.11.1", _multi(LMCACHE), json.dumps(NIXL), "Qwen/Qwen3-8B", True),
    ("vllm/vllm-openai:v0.11.2", _multi(OFFLOAD_OLD), _multi(OFFLOAD_OLD), "meta-llama/Llama-3.1-8B-Instruct", True),
    ("vllm/vllm-openai:v0.12.0", _multi(SHARED), _multi(SHARED), "meta-llama/Llama-3.1-8B-Instruct", True),
    ("vllm/vllm-openai:v0.13.0", _multi(EXAMPLE), _multi(EXAMPLE), "meta-llama/Llama-3.1-8B-Instruct", True),
    ("vllm/vllm-openai:v0.14.1", _multi(OFFLOAD), json.dumps(NIXL), "Qwen/Qwen3-32B", True),
    # negative controls: 0.11.0's worker starts the listener itself; 0.16.0+ forwards; the decode alone wrapped
    ("vllm/vllm-openai:v0.11.0", _multi(LMCACHE), json.dumps(NIXL), "Qwen/Qwen3-8B", False),
    ("vllm/vllm-openai:v0.16.0", _multi(EXAMPLE), _multi(EXAMPLE), "meta-llama/Llama-3.1-8B-Instruct", False),
    ("vllm/vllm-openai:v0.19.0", _multi(OFFLOAD), json.dumps(NIXL), "Qwen/Qwen3-32B", False),
    ("vllm/vllm-openai:v0.13.0", json.dumps(NIXL), _multi(EXAMPLE), "meta-llama/Llama-3.1-8B-Instruct", False),
    ("vllm/vllm-openai:v0.14.1", json.dumps(NIXL), json.dumps(NIXL), "Qwen/Qwen3-8B", False),
])
def test_a_wrapped_nixl_prefill_serves_its_handshake(tmp_path, capsys, image, p_kv, d_kv, model, refused):
    code, out = check(tmp_path, capsys, *_pair(image, p_kv, d_kv, model))
    assert (RULE in rules(out, "error")) == refused, out
    if refused:
        assert code == 1
        message = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == RULE)
        assert message.startswith("prefill: MultiConnector[NixlConnector,") and "fixed in 0.16.0" in message


def test_an_unread_release_between_is_not_checked(tmp_path, capsys):
    """0.15.x was not read: between 0.14.1 (no forwarding) and 0.16.0 (forwarding) the rule says "not checked"."""
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.15.1", _multi(LMCACHE), json.dumps(NIXL)))
    assert RULE not in rules(out)
    assert RULE in json.dumps(out) and code != 1, out


def test_an_unknown_release_is_not_probed(tmp_path, capsys):
    """Judged only where the prefill's release is known (an unknown one is almost always later than 0.14)."""
    code, out = check(tmp_path, capsys, *_pair("example.com/vllm:custom", _multi(EXAMPLE), json.dumps(NIXL)))
    assert RULE not in json.dumps(out)


def test_dynamo_pdconnector_is_not_vllms_multiconnector(tmp_path, capsys):
    """Dynamo KVBM's PdConnector (kvbm.vllm_integration.connector) carries its own handshake forwarding (Dynamo's code,
    ai-dynamo/dynamo#4957), which this rule does not describe: a PdConnector prefill on vLLM 0.12.0 is not refused."""
    pd_kv = json.dumps({"kv_connector": "PdConnector", "kv_role": "kv_both",
                        "kv_connector_module_path": "kvbm.vllm_integration.connector",
                        "kv_connector_extra_config": {"connectors": [
                            {"kv_connector": "DynamoConnector", "kv_role": "kv_both",
                             "kv_connector_module_path": "kvbm.vllm_integration.connector"}, NIXL]}})
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.12.0", pd_kv, json.dumps(NIXL)))
    assert RULE not in json.dumps(out)


_SCRIPT = """#!/bin/bash
pip install vllm=={version}
MODEL=meta-llama/Llama-3.1-8B-Instruct
CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve $MODEL --port 8100 --kv-transfer-config '{p_kv}' &
CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5659 vllm serve $MODEL --port 8200 --kv-transfer-config '{d_kv}' &
python3 toy_proxy_server.py --port 8192 --prefiller-hosts localhost --prefiller-ports 8100 \\
  --decoder-hosts localhost --decoder-ports 8200
"""


@pytest.mark.parametrize(("version", "p_kv", "d_kv", "refused"), [
    ("0.13.0", _multi(EXAMPLE), _multi(EXAMPLE), True),      # vLLM's disagg_prefill.md example on its own release
    ("0.14.0", _multi(OFFLOAD), json.dumps(NIXL), True),
    ("0.13.0", json.dumps(NIXL), _multi(EXAMPLE), False),     # only the decode wrapped
    ("0.16.0", _multi(EXAMPLE), _multi(EXAMPLE), False),
])
def test_a_launch_script_on_one_host(tmp_path, capsys, version, p_kv, d_kv, refused):
    path = tmp_path / "run.sh"
    path.write_text(_SCRIPT.format(version=version, p_kv=p_kv, d_kv=d_kv))
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert (RULE in rules(out, "error")) == refused, out
    assert (code == 1) == refused, out
