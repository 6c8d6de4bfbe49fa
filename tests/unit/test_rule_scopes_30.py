"""Rule scopes re-read from vLLM's code per release (rules round 30), each with variants that fail without the fix and
negative controls.

- ``multi-connector-params-producers``: vLLM's MultiConnector refuses a second kv_transfer_params producer only up to
  0.22.x ("Only one connector can produce KV transfer params"); from 0.25.0 it merges the children's params
  (vllm-project/vllm#46777) and LMCacheMPConnector beside NIXL fails nothing.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

MULTI = "multi-connector-params-producers"


def _kv(role, connector="NixlConnector", **extra):
    return json.dumps({"kv_connector": connector, "kv_role": role, **extra})


def _multi(role, *children):
    return json.dumps({"kv_connector": "MultiConnector", "kv_role": role, "kv_connector_extra_config": {
        "connectors": [{"kv_connector": c, "kv_role": role if c == "NixlConnector" else "kv_both"} for c in children]}})


def _pair(model, image, kv_p, kv_d, args_p=(), args_d=(), env=(), gpus=1):
    docs = []
    for role, kv, args in (("prefill", kv_p, args_p), ("decode", kv_d, args_d)):
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": [model, *args, "--kv-transfer-config", kv], "env": [POD_IP, *env],
             "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
             "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}
        docs.append(workload(f"m-{role}", role, c, app="m"))
    return docs


def _messages(out, rule):
    return [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule]


# --- MultiConnector: a second kv_transfer_params producer, by release ----------------------------------------------

@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.25.0", "vllm/vllm-openai:v0.28.0",
                                   "vllm/vllm-openai:v0.33.0", "vllm/vllm-openai:v0.34.0"])
def test_lmcache_mp_beside_nixl_is_fine_where_multiconnector_merges_the_params(tmp_path, capsys, image):
    docs = _pair("Qwen/Qwen3-8B", image, _multi("kv_producer", "NixlConnector", "LMCacheMPConnector"),
                 _multi("kv_consumer", "NixlConnector", "LMCacheMPConnector"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and MULTI not in rules(out), image


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.18.1", "vllm/vllm-openai:v0.22.0"])
def test_lmcache_mp_beside_nixl_still_warns_before_the_merge(tmp_path, capsys, image):
    docs = _pair("Qwen/Qwen3-8B", image, _multi("kv_producer", "NixlConnector", "LMCacheMPConnector"),
                 _multi("kv_consumer", "NixlConnector", "LMCacheMPConnector"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and MULTI in rules(out, "warning"), image
    assert all("0.25.0" in m for m in _messages(out, MULTI)) or all(
        "0.25.0" in f["fix"] for r in out["results"] for f in r["findings"] if f["rule"] == MULTI)


# --- NIXL backend names, by release ---------------------------------------------------------------------------------

UNKNOWN, FABRIC = "nixl-backend-unknown", "nixl-backend-fabric-mismatch"


def _backends(role, *names):
    return _kv(role, kv_connector_extra_config={"backends": list(names)})


@pytest.mark.parametrize(("image", "name"), [("vllm/vllm-openai:v0.20.2", "ucx"), ("vllm/vllm-openai:v0.11.0", "ucx"),
                                             ("vllm/vllm-openai:v0.34.0", "Mooncake"),
                                             ("vllm/vllm-openai:v0.28.0", "libfabric")])
def test_a_plugin_name_in_another_case_stops_the_engine(tmp_path, capsys, image, name):
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", image, _backends("kv_producer", name),
                 _backends("kv_consumer", name))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and UNKNOWN in rules(out, "error"), (image, name)
    assert len(_messages(out, UNKNOWN)) == 2 and all(name.upper() in m for m in _messages(out, UNKNOWN))


def test_a_name_no_plugin_has_is_a_warning(tmp_path, capsys):
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.26.0", _backends("kv_producer", "UCX", "RDMA"),
                 _backends("kv_consumer", "UCX", "RDMA"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and UNKNOWN in rules(out, "warning") and UNKNOWN not in rules(out, "error")


@pytest.mark.parametrize("names", [("UCX",), ("LIBFABRIC",), ("UCX", "GDS_MT")])
def test_plugin_names_as_nixl_writes_them_say_nothing(tmp_path, capsys, names):
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.20.2", _backends("kv_producer", *names),
                 _backends("kv_consumer", *names))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and UNKNOWN not in rules(out), names


def test_releases_before_0_11_do_not_read_the_backend_list(tmp_path, capsys):
    # 0.9.0-0.10.2 create the agent with NIXL's default config (UCX): a LIBFABRIC decode is a UCX decode there.
    for image in ("vllm/vllm-openai:v0.10.2", "vllm/vllm-openai:v0.9.2"):
        docs = _pair("meta-llama/Llama-3.1-8B-Instruct", image, _kv("kv_producer"), _backends("kv_consumer", "LIBFABRIC"))
        code, out = check(tmp_path, capsys, *docs)
        assert FABRIC not in rules(out, "error") and code == 0, image
        docs = _pair("meta-llama/Llama-3.1-8B-Instruct", image, _backends("kv_producer", "ucx"),
                     _backends("kv_consumer", "ucx"))
        code, out = check(tmp_path, capsys, *docs)
        assert code == 0 and UNKNOWN not in rules(out), image
    # control: from 0.11.0 the same one-sided LIBFABRIC is read, and the agents share no backend
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.11.0", _kv("kv_producer"),
                 _backends("kv_consumer", "LIBFABRIC"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and FABRIC in rules(out, "error")
