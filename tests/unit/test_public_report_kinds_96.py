"""Variants of what the ninety-sixth public-report set (tests/unit/data/public_reports_96) taught, with negative
controls: the other connectors users run for P/D on vLLM 0.26-0.34.

- MooncakeConnector pairs of unequal TP on 0.29.0-0.34.0 are judged (``rules/mooncake.py`` ``MOONCAKE_JUDGED_NO_PP``:
  LBHNC layout forced, ``handshake_target_ranks``, region lengths against the TP ratio capped at the KV heads from
  0.30.0, per-head offsets), not left "not checked"; pipeline or context parallelism and KV formats with their own
  layout still are. ``mooncake-hetero-tp-nvfp4-kv``: 0.30.0-0.34.0 refuse re-sharding NVFP4 KV heads.
- ``kv_connector_module_path``: a module under ``vllm.distributed.kv_transfer`` the release does not ship stops the
  engine (``kv-connector-module-missing``); a class loaded from a module outside vLLM is that package's code, never
  judged as vLLM's connector of the same name.
- ``moriio-extra-config-port-invalid``: MoRIIOConfig converts its ports with ``int()`` as the worker starts.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.kv_transfer_config import third_party_module
from pdd_operator.vllm.shipped_modules import import_fails
from pdd_operator.vllm.versions import parse_version
from tests.unit.cli_check import check_text
from tests.unit.test_turn2_variants import check, container, rules, workload


def _script(tmp_path, capsys, text: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, "pair.sh")


def _kv(connector: str, role: str, **more) -> str:
    return json.dumps({"kv_connector": connector, "kv_role": role, **more})


def _two_nodes(version: str, model: str, p: str, d: str, p_kv: str, d_kv: str, rocm: bool = False) -> str:
    """Two `docker run` nodes of the given vLLM image (the set's shell format)."""
    image = f"vllm/vllm-openai{'-rocm' if rocm else ''}:v{version}"
    dev = "--device /dev/kfd --device /dev/dri" if rocm else "--gpus all"
    return (f"#!/bin/bash\ndocker run --rm --network host {dev} {image} vllm serve {model} --port 8010 {p} "
            f"--kv-transfer-config '{p_kv}' &\n"
            f"docker run --rm --network host {dev} {image} vllm serve {model} --port 8020 {d} "
            f"--kv-transfer-config '{d_kv}' &\nwait\n")


def _mooncake(version, model, p="", d="", p_extra=None, d_extra=None):
    return _two_nodes(version, model, p, d, _kv("MooncakeConnector", "kv_producer", **(p_extra or {})),
                      _kv("MooncakeConnector", "kv_consumer", **(d_extra or {})))


def _errors(out) -> set[str]:
    return rules(out, "error")


# --- MooncakeConnector pairs of unequal TP, 0.29.0-0.34.0 ---------------------------------------------------------


@pytest.mark.parametrize(("version", "model", "p", "d"), [
    ("0.29.0", "Qwen/Qwen2.5-7B-Instruct", "", "--tensor-parallel-size 2"),       # 4 KV heads: 4 / 2 per rank
    ("0.30.0", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size 4", "--tensor-parallel-size 2"),
    ("0.31.0", "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size 2", ""),
    ("0.32.0", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size 2", "--tensor-parallel-size 8"),
    ("0.33.0", "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size 2 --kv-cache-dtype fp8",
     "--kv-cache-dtype fp8"),
    ("0.34.0", "Qwen/Qwen2.5-7B-Instruct", "", "--tensor-parallel-size 2"),
    ("0.34.0", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size 8", "--tensor-parallel-size 16"),  # decode
    # past the 8 KV heads: 0.30.0 on cap both TP sizes at the heads and copy the replicated head
])
def test_a_mooncake_pair_of_unequal_tp_is_judged_from_0_29(tmp_path, capsys, version, model, p, d):
    code, out = _script(tmp_path, capsys, _mooncake(version, model, p, d))
    assert code == 0 and not out.get("notChecked") and not _errors(out), out


def test_a_mooncake_pair_of_unequal_tp_in_deployments_is_judged(tmp_path, capsys):
    def role(r, tp):
        c = container(["meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", str(tp), "--kv-transfer-config",
                       _kv("MooncakeConnector", "kv_producer" if r == "prefill" else "kv_consumer")],
                      image="vllm/vllm-openai:v0.31.0", gpus=tp)
        return workload(f"m-{r}", r, c)
    code, out = check(tmp_path, capsys, role("prefill", 4), role("decode", 2))
    assert code == 0 and not out.get("notChecked"), out


def test_a_decode_past_the_heads_is_still_refused_on_0_29(tmp_path, capsys):
    # 0.29.0 checks the raw TP ratio (no cap by the KV heads): mooncake-decode-kv-replicated
    code, out = _script(tmp_path, capsys, _mooncake("0.29.0", "meta-llama/Llama-3.1-8B-Instruct",
                                                    "--tensor-parallel-size 8", "--tensor-parallel-size 16"))
    assert code == 1 and "mooncake-decode-kv-replicated" in _errors(out), out


@pytest.mark.parametrize(("version", "expected"), [("0.31.0", 1), ("0.34.0", 1)])
def test_a_width_mismatch_with_a_replicated_prefill_is_refused_from_0_30(tmp_path, capsys, version, expected):
    # prefill TP 16 past Llama-3.1-8B's 8 KV heads: 0.30.0 on cap it and check the lengths all the same
    code, out = _script(tmp_path, capsys, _mooncake(version, "meta-llama/Llama-3.1-8B-Instruct",
                                                    "--tensor-parallel-size 16", "--tensor-parallel-size 8 "
                                                    "--kv-cache-dtype fp8"))
    assert code == expected and "mooncake-kv-region-length" in _errors(out), out


def test_a_width_mismatch_with_a_replicated_prefill_is_undecided_on_0_29(tmp_path, capsys):
    # 0.29.0's sender skips the length check where the prefill's cache is replicated
    code, out = _script(tmp_path, capsys, _mooncake("0.29.0", "meta-llama/Llama-3.1-8B-Instruct",
                                                    "--tensor-parallel-size 16", "--tensor-parallel-size 8 "
                                                    "--kv-cache-dtype fp8"))
    assert "mooncake-kv-region-length" not in _errors(out), out


@pytest.mark.parametrize(("version", "p", "d"), [
    ("0.31.0", "--tensor-parallel-size 2 --pipeline-parallel-size 2", "--tensor-parallel-size 2"),  # PP: not read
    ("0.34.0", "--tensor-parallel-size 2 --kv-cache-dtype turboquant_k8v4",
     "--kv-cache-dtype turboquant_k8v4"),                                  # own KV layout (LBNHC from 0.34.0)
    ("0.33.0", "--tensor-parallel-size 2 --decode-context-parallel-size 2", ""),  # DCP with unequal TP
])
def test_other_unequal_mooncake_shapes_stay_not_checked(tmp_path, capsys, version, p, d):
    code, out = _script(tmp_path, capsys, _mooncake(version, "meta-llama/Llama-3.1-8B-Instruct", p, d))
    assert code in (1, 3) and code != 0, out


@pytest.mark.parametrize(("version", "p", "d", "expected"), [
    ("0.31.0", "--tensor-parallel-size 2 --kv-cache-dtype nvfp4", "--kv-cache-dtype nvfp4", 1),
    ("0.34.0", "--kv-cache-dtype nvfp4", "--tensor-parallel-size 4 --kv-cache-dtype nvfp4", 1),
    ("0.34.0", "--tensor-parallel-size 16 --kv-cache-dtype nvfp4", "--tensor-parallel-size 8 --kv-cache-dtype nvfp4",
     None),                                                 # both at or past the 8 KV heads: no head re-sharding
    ("0.31.0", "--tensor-parallel-size 2 --kv-cache-dtype nvfp4", "--tensor-parallel-size 2 --kv-cache-dtype nvfp4",
     None),                                                 # equal TP
    ("0.29.0", "--tensor-parallel-size 2 --kv-cache-dtype nvfp4", "--kv-cache-dtype nvfp4", None),  # no such check
])
def test_nvfp4_kv_heads_are_not_re_sharded_from_0_30(tmp_path, capsys, version, p, d, expected):
    code, out = _script(tmp_path, capsys, _mooncake(version, "meta-llama/Llama-3.1-8B-Instruct", p, d))
    if expected:
        assert code == expected and "mooncake-hetero-tp-nvfp4-kv" in _errors(out), out
    else:
        assert "mooncake-hetero-tp-nvfp4-kv" not in rules(out), out


# --- kv_connector_module_path --------------------------------------------------------------------------------------

OLD_MOONCAKE = "vllm.distributed.kv_transfer.kv_connector.v1.mooncake_connector"
NEW_MOONCAKE = "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector"


@pytest.mark.parametrize(("module", "version", "fails"), [
    (OLD_MOONCAKE, "0.14.0", False), (OLD_MOONCAKE, "0.16.0", True), (OLD_MOONCAKE, "0.31.0", True),
    (OLD_MOONCAKE, "0.15.0", None),            # not read: 0.14.1 ships it, 0.16.0 does not
    (NEW_MOONCAKE, "0.13.0", True), (NEW_MOONCAKE, "0.34.0", False), (NEW_MOONCAKE, "0.35.0", None),
    ("vllm.distributed.kv_transfer.kv_connector.v1.no_such", None, True),
    ("vllm.entrypoints.openai.api_server", "0.20.0", False),   # the middleware table, through the same lookup
    ("lmcache.integration.vllm.lmcache_connector_v1", "0.26.0", None),
])
def test_the_shipped_module_tables(module, version, fails):
    assert import_fails(module, parse_version(version) if version else None) is fails


@pytest.mark.parametrize(("version", "module", "refused"), [
    ("0.31.0", OLD_MOONCAKE, True),
    ("0.34.0", OLD_MOONCAKE, True),
    ("0.14.0", OLD_MOONCAKE, False),           # 0.13.0-0.14.1 keep MooncakeConnector there
    ("0.31.0", NEW_MOONCAKE, False),
])
def test_a_vllm_connector_module_the_release_lacks_stops_the_engine(tmp_path, capsys, version, module, refused):
    text = _two_nodes(version, "Qwen/Qwen2.5-7B-Instruct", "", "",
                      _kv("MooncakeConnector", "kv_producer", kv_connector_module_path=module),
                      _kv("MooncakeConnector", "kv_consumer", kv_connector_module_path=module))
    code, out = _script(tmp_path, capsys, text)
    assert ("kv-connector-module-missing" in _errors(out)) is refused, out
    if refused:
        assert code == 1, out


def test_a_multiconnector_child_module_is_read_too(tmp_path, capsys):
    def kv(role):
        return _kv("MultiConnector", role, kv_connector_extra_config={"connectors": [
            {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
            {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
             "kv_connector_module_path": "vllm.distributed.kv_transfer.kv_connector.v1.cpu_offload_connector"}]})
    code, out = _script(tmp_path, capsys, _two_nodes("0.34.0", "Qwen/Qwen3-8B", "", "", kv("kv_producer"),
                                                     kv("kv_consumer")))
    assert code == 1 and "kv-connector-module-missing" in _errors(out), out


@pytest.mark.parametrize(("connector", "version", "module"), [
    ("MooncakeConnector", "0.31.0", "mooncake.mooncake_connector_v1"),
    ("MooncakeConnector", "0.27.0", "vllm_omni.distributed.kv_transfer.patched_mooncake_connector"),
    ("NixlConnector", "0.30.0", "my_company.kv.nixl_connector"),
])
def test_a_class_from_a_module_outside_vllm_is_not_judged_as_vllms(tmp_path, capsys, connector, version, module):
    text = _two_nodes(version, "Qwen/Qwen2.5-7B-Instruct", "", "",
                      _kv(connector, "kv_producer", kv_connector_module_path=module),
                      _kv(connector, "kv_consumer", kv_connector_module_path=module))
    code, out = _script(tmp_path, capsys, text)
    assert code == 3 and not _errors(out), out
    assert module in json.dumps(out["notChecked"]), out


def test_a_moriio_class_from_outside_vllm_is_not_a_moriio_pair(tmp_path, capsys):
    extra = {"proxy_ip": "10.0.0.1", "proxy_ping_port": 36367, "http_port": 8000}
    text = _two_nodes("0.30.0", "MiniMaxAI/MiniMax-M2.5", "--tensor-parallel-size 4", "--tensor-parallel-size 8",
                      _kv("MoRIIOConnector", "kv_producer", kv_connector_module_path="amd_ext.moriio",
                          kv_connector_extra_config=extra),
                      _kv("MoRIIOConnector", "kv_consumer", kv_connector_module_path="amd_ext.moriio",
                          kv_connector_extra_config=extra), rocm=True)
    code, out = _script(tmp_path, capsys, text)
    assert code == 3 and "moriio-tp-mismatch" not in rules(out), out


def test_third_party_module():
    assert third_party_module({"kv_connector_module_path": "mooncake.mooncake_connector_v1"})
    assert third_party_module({"kv_connector_module_path": NEW_MOONCAKE}) is None
    assert third_party_module({"kv_connector_module_path": ""}) is None
    assert third_party_module({}) is None


# --- MoRIIO's numeric extra-config keys ----------------------------------------------------------------------------


def _moriio(version, p_extra, d_extra):
    return _two_nodes(version, "MiniMaxAI/MiniMax-M2.5", "--tensor-parallel-size 4", "--tensor-parallel-size 4",
                      _kv("MoRIIOConnector", "kv_producer", kv_connector_extra_config=p_extra),
                      _kv("MoRIIOConnector", "kv_consumer", kv_connector_extra_config=d_extra), rocm=True)


GOOD = {"proxy_ip": "10.0.0.1", "proxy_ping_port": "36367", "http_port": "8000"}


@pytest.mark.parametrize(("version", "change", "refused"), [
    ("0.30.0", {"http_port": "${SERVER_PORT}"}, True),
    ("0.25.0", {"proxy_ping_port": "${PROXY_PING_PORT}"}, True),
    ("0.34.0", {"http_port": "8000.0"}, True),
    ("0.30.0", {"num_workers": "four"}, True),
    ("0.22.0", {"num_workers": "four"}, False),        # read from 0.23.0
    ("0.30.0", {"transfer_timeout": "30s"}, True),
    ("0.30.0", {"handshake_port": ""}, False),         # empty: the connector fills its default
    ("0.30.0", {"http_port": 8000, "proxy_ping_port": 36367}, False),
    ("0.30.0", {}, False),
])
def test_moriio_numbers_are_numbers(tmp_path, capsys, version, change, refused):
    code, out = _script(tmp_path, capsys, _moriio(version, GOOD, {**GOOD, **change}))
    assert ("moriio-extra-config-port-invalid" in _errors(out)) is refused, out
    if refused:
        assert code == 1, out


@pytest.mark.parametrize(("version", "refused"), [("0.25.0", True), ("0.28.0", False), ("0.34.0", False)])
def test_proxy_ping_port_is_required_before_0_28(tmp_path, capsys, version, refused):
    without = {k: v for k, v in GOOD.items() if k != "proxy_ping_port"}
    code, out = _script(tmp_path, capsys, _moriio(version, without, without))
    assert ("moriio-extra-config-port-invalid" in _errors(out)) is refused, out


def test_http_port_is_required_in_every_release(tmp_path, capsys):
    without = {k: v for k, v in GOOD.items() if k != "http_port"}
    code, out = _script(tmp_path, capsys, _moriio("0.31.0", GOOD, without))
    assert code == 1 and "moriio-extra-config-port-invalid" in _errors(out), out


def test_a_non_number_in_a_deployment_is_refused_too(tmp_path, capsys):
    def role(r):
        kv = _kv("MoRIIOConnector", "kv_producer" if r == "prefill" else "kv_consumer",
                 kv_connector_extra_config={**GOOD, "http_port": "8000/TCP"})
        c = container(["MiniMaxAI/MiniMax-M2.5", "--tensor-parallel-size", "4", "--kv-transfer-config", kv],
                      image="vllm/vllm-openai-rocm:v0.31.0", gpus=4, extra_resources={"amd.com/gpu": "4"})
        return workload(f"m-{r}", r, c)
    code, out = check(tmp_path, capsys, role("prefill"), role("decode"))
    assert code == 1 and "moriio-extra-config-port-invalid" in _errors(out), out
