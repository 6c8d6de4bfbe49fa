"""The kinds of checker fault the sixty-second held-out set (tests/unit/data/public_reports_62) found, with variants
beyond its entries (other releases, formats, connector layouts).

- ``offloading-cpu-size-key``: vLLM's ``OffloadingConnector`` (alone or a ``MultiConnector`` child next to NIXL) with
  the default ``CPUOffloadingSpec`` refuses to start without its CPU pool size under the key of its release:
  ``num_cpu_blocks`` in 0.11.0-0.13.x, ``cpu_bytes_to_use`` from 0.14.0 (vllm-project/vllm#24498; v1/kv_offload/cpu.py
  0.13.0 lines 24-28, 0.14.0 lines 25-29, cpu/spec.py 0.34.0 lines 99-103). Nothing read the key, so a pair copied
  across the change passed silently.
- ``multi-connector-nixl-engine-id``: on vLLM 0.9.x a ``MultiConnector`` builds its NIXL child's config by
  ``KVTransferConfig(**child)``, which draws a fresh engine_id for the scheduler's and each worker's instance
  (multi_connector.py 0.9.2 line 50, config.py lines 3814-3815): the decode gets a ``remote_engine_id`` no prefill
  worker registered and fails with KeyError (nixl_connector.py 0.9.2 lines 972-973). Fixed in 0.10.0
  (vllm-project/vllm#20613; multi_connector.py 0.10.0 lines 50-53); a child naming its engine_id is the workaround.
"""

from __future__ import annotations

import json

import pytest

from .test_script_inputs import KV_BOTH, _check, _errors

OFFLOAD = "offloading-cpu-size-key"
ENGINE_ID = "multi-connector-nixl-engine-id"


def _offload(extra: dict) -> dict:
    return {"kv_connector": "OffloadingConnector", "kv_role": "kv_both", "kv_connector_extra_config": extra}


def _multi(*children: dict) -> str:
    return json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both",
                       "kv_connector_extra_config": {"connectors": list(children)}})


NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def _script(vllm: str, kv_p: str, kv_d: str, model: str = "Qwen/Qwen3-8B", flags: str = "") -> str:
    return f"""#!/bin/bash
pip install vllm=={vllm}
python3 toy_proxy_server.py --port 8000 --prefiller-port 8100 --decoder-port 8200 &
CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve {model} --port 8100 {flags}\\
    --kv-transfer-config '{kv_p}' &
CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve {model} --port 8200 {flags}\\
    --kv-transfer-config '{kv_d}' &
"""


# --- offloading-cpu-size-key -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("vllm", "extra"), [
    ("0.14.0", {"block_size": 64, "num_cpu_blocks": 1000}),   # the set's entry: the old key after the change
    ("0.20.0", {"block_size": 64, "num_cpu_blocks": 1000}),   # a later release (cpu/spec.py)
    ("0.34.0", {"num_cpu_blocks": 1000}),                     # the newest release read
    ("0.13.0", {"block_size": 64, "cpu_bytes_to_use": 10**9}),  # the new key before the change
    ("0.11.0", {"cpu_bytes_to_use": 10**9}),                  # the first release with the connector
    ("0.12.0", {"block_size": 64}),                           # no size at all
    ("0.14.1", {"spec_name": "CPUOffloadingSpec", "num_cpu_blocks": 1000}),  # the default spec named
])
def test_offloading_next_to_nixl_without_its_releases_key(tmp_path, capsys, vllm, extra):
    kv = _multi(NIXL, _offload(extra))
    code, out = _check(tmp_path, capsys, _script(vllm, kv, kv))
    assert code == 1 and OFFLOAD in _errors(out), out


def test_offloading_alone_is_refused_too(tmp_path, capsys):
    """A bare OffloadingConnector pair is not NIXL's KV path (not checked otherwise), but the engine fails by itself."""
    kv = json.dumps(_offload({"num_cpu_blocks": 1000}))
    code, out = _check(tmp_path, capsys, _script("0.16.0", kv, kv))
    assert code == 1 and OFFLOAD in _errors(out), out


def test_offloading_on_one_role_only(tmp_path, capsys):
    kv_d = _multi(NIXL, _offload({"cpu_bytes_to_use": 10**9}))
    code, out = _check(tmp_path, capsys, _script("0.13.0", json.dumps(NIXL), kv_d))
    assert code == 1 and OFFLOAD in _errors(out), out


@pytest.mark.parametrize(("vllm", "extra"), [
    ("0.13.0", {"block_size": 64, "num_cpu_blocks": 1000}),
    ("0.14.0", {"block_size": 64, "cpu_bytes_to_use": 10**9}),
    ("0.34.0", {"cpu_bytes_to_use": "1000000000"}),
    ("0.14.0", {"spec_name": "MyOffloadingSpec", "spec_module_path": "my.spec", "num_cpu_blocks": 10}),  # a plugin
])
def test_offloading_with_its_releases_key_or_another_spec(tmp_path, capsys, vllm, extra):
    kv = _multi(NIXL, _offload(extra))
    code, out = _check(tmp_path, capsys, _script(vllm, kv, kv))
    assert OFFLOAD not in _errors(out), out


def test_kv_offloading_size_flag_is_not_judged(tmp_path, capsys):
    """--kv-offloading-size makes vLLM write its own OffloadingConnector config (cpu_bytes_to_use from the flag)."""
    kv = json.dumps(NIXL)
    code, out = _check(tmp_path, capsys, _script("0.18.0", kv, kv, flags="--kv-offloading-size 10 "))
    assert OFFLOAD not in _errors(out), out


def test_offloading_key_in_a_deployment(tmp_path, capsys):
    kv = _multi(NIXL, _offload({"num_cpu_blocks": 1000}))
    docs = []
    for role, port in (("prefill", 8100), ("decode", 8200)):
        docs.append(f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: qwen3-{role}, labels: {{role: {role}}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: qwen3-{role}}}}}
  template:
    metadata: {{labels: {{app: qwen3-{role}}}}}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.20.0
        command: ["vllm", "serve", "Qwen/Qwen3-8B", "--port", "{port}", "--kv-transfer-config", {json.dumps(kv)}]
        resources: {{limits: {{nvidia.com/gpu: 1}}}}
""")
    code, out = _check(tmp_path, capsys, "---\n".join(docs), name="pd.yaml")
    assert code == 1 and OFFLOAD in _errors(out), out


# --- multi-connector-nixl-engine-id ----------------------------------------------------------------------------------

LMCACHE = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}


@pytest.mark.parametrize(("vllm", "children"), [
    ("0.9.2", (NIXL, LMCACHE)),                                        # the set's entry
    ("0.9.1", (NIXL, LMCACHE)),
    ("0.9.0", (NIXL, LMCACHE)),
    ("0.9.2", (LMCACHE, NIXL)),                                        # NIXL second
    ("0.9.2", (NIXL, {"kv_connector": "SharedStorageConnector", "kv_role": "kv_both",
                      "kv_connector_extra_config": {"shared_storage_path": "/tmp/kv"}})),
])
def test_nixl_child_without_engine_id_on_09(tmp_path, capsys, vllm, children):
    kv = _multi(*children)
    code, out = _check(tmp_path, capsys, _script(vllm, kv, kv, model="Qwen/Qwen3-1.7B"))
    assert code == 1 and ENGINE_ID in _errors(out), out


def test_the_engines_own_engine_id_does_not_reach_the_child(tmp_path, capsys):
    kv = json.loads(_multi(NIXL, LMCACHE))
    kv["engine_id"] = "prefill-0"
    code, out = _check(tmp_path, capsys, _script("0.9.2", json.dumps(kv), _multi(NIXL, LMCACHE), model="Qwen/Qwen3-1.7B"))
    assert code == 1 and ENGINE_ID in _errors(out), out


@pytest.mark.parametrize(("vllm", "kv_p", "kv_d"), [
    ("0.10.0", _multi(NIXL, LMCACHE), _multi(NIXL, LMCACHE)),                          # fixed
    ("0.10.1.1", _multi(NIXL, LMCACHE), _multi(NIXL, LMCACHE)),
    ("0.9.2", _multi({**NIXL, "engine_id": "p-nixl"}, LMCACHE), _multi({**NIXL, "engine_id": "d-nixl"}, LMCACHE)),
    ("0.9.2", _multi({**NIXL, "engine_id": "p-nixl"}, LMCACHE), _multi(NIXL, LMCACHE)),  # only the prefill's matters
    ("0.9.2", KV_BOTH, KV_BOTH),                                                       # no MultiConnector
])
def test_no_engine_id_error(tmp_path, capsys, vllm, kv_p, kv_d):
    code, out = _check(tmp_path, capsys, _script(vllm, kv_p, kv_d, model="Qwen/Qwen3-1.7B"))
    assert ENGINE_ID not in _errors(out), out
