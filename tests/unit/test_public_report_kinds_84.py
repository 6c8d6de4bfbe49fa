"""Variants of what the eighty-fourth public-report set (tests/unit/data/public_reports_84) taught, with negative
controls.

- Sleep mode on an engine whose KV connector, whatever it is, cannot sleep (``sleep-mode-unsupported``,
  :mod:`pdd_operator.compat.rules.sleep_mode`): vLLM 0.33+ asks the connector class of every engine with sleep mode
  on (vllm/config/vllm.py 0.33.0 lines 1254-1268), not only NIXL's: MooncakeConnector answers False off RDMA
  (``mooncake_protocol`` tcp, or MC_INTRANODE_NVLINK & co. set), MoRIIOConnector and 0.33.0's MooncakeStoreConnector
  always, a MultiConnector where any child does. vLLM 0.33.0's Mooncake sweep with the protocol switched to TCP
  passed silently.
- A MultiConnector of MooncakeConnector and MooncakeStoreConnector (vLLM 0.34.0's MooncakeStoreConnector guide) was
  "not checked" as "not vLLM's NixlConnector" although a bare MooncakeConnector pair is judged; it is now judged as a
  Mooncake pair (:func:`pdd_operator.compat.rules.mooncake.runs_mooncake`), the Mooncake rules reading its child.
- ``--enable-extensible-kv-cache`` (new in 0.34.0) where vLLM refuses it (``extensible-kv-cache-unsupported``,
  :mod:`pdd_operator.compat.rules.extensible_kv_cache`): on ROCm with a connector that registers the KV cache, with
  ``--kv-cache-memory-bytes`` / ``--num-gpu-blocks-override``, LMCacheMPConnector or ``custom_mem_pool``. vLLM
  0.34.0's NixlConnector guide on a ROCm image passed silently.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.cli_check import check_text
from tests.unit.test_turn2_variants import check, container, rules, workload

SLEEP = "sleep-mode-unsupported"
EXT = "extensible-kv-cache-unsupported"


def _mc(role: str, protocol: str | None = None) -> str:
    extra = {"device_name": "mlx5_0", **({"mooncake_protocol": protocol} if protocol else {})}
    return json.dumps({"kv_connector": "MooncakeConnector", "kv_role": role, "kv_connector_extra_config": extra})


def _mc_pair(name, p_args, d_args, image, model="Qwen/Qwen3-0.6B", p_env=(), d_env=(), **kw):
    return [workload(f"{name}-prefill", "prefill", container([model, *p_args], image=image, env=p_env, **kw)),
            workload(f"{name}-decode", "decode", container([model, *d_args], image=image, env=d_env, **kw))]


def _store_multi(role: str, store_role: str, mc_role: str) -> str:
    return json.dumps({"kv_connector": "MultiConnector", "kv_role": role, "kv_connector_extra_config": {"connectors": [
        {"kv_connector": "MooncakeConnector", "kv_role": mc_role},
        {"kv_connector": "MooncakeStoreConnector", "kv_role": store_role}]}})


def _findings(out, rule):
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == rule]


def _script(tmp_path, capsys, text: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, "pair.sh")


# --- sleep-mode-unsupported beyond NIXL ---------------------------------------------------------------------


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.33.0", "vllm/vllm-openai:v0.34.0"])
def test_mooncake_over_tcp_with_sleep_mode_is_refused_on_both_roles(tmp_path, capsys, image):
    docs = _mc_pair("mc", ["--kv-transfer-config", _mc("kv_producer", "tcp"), "--enable-sleep-mode"],
                    ["--kv-transfer-config", _mc("kv_consumer", "tcp"), "--enable-sleep-mode"], image)
    code, out = check(tmp_path, capsys, *docs)
    found = _findings(out, SLEEP)
    assert code == 1 and {f["severity"] for f in found} == {"error"} and len(found) == 2, out
    assert "mooncake_protocol rdma" in found[0]["message"]


def test_mooncake_on_nvlink_env_with_sleep_mode_is_refused_on_that_role_only(tmp_path, capsys):
    docs = _mc_pair("mc", ["--kv-transfer-config", _mc("kv_producer"), "--enable-sleep-mode"],
                    ["--kv-transfer-config", _mc("kv_consumer"), "--enable-sleep-mode"], "vllm/vllm-openai:v0.34.0",
                    model="meta-llama/Llama-3.1-8B-Instruct", d_env=[{"name": "MC_INTRANODE_NVLINK", "value": "1"}])
    code, out = check(tmp_path, capsys, *docs)
    found = _findings(out, SLEEP)
    assert code == 1 and [f["message"].split(":")[0] for f in found] == ["decode"], out
    assert "MC_INTRANODE_NVLINK" in found[0]["message"]


@pytest.mark.parametrize(("image", "protocol"), [("vllm/vllm-openai:v0.34.0", None), ("vllm/vllm-openai:v0.34.0", "rdma"),
                                                  ("vllm/vllm-openai:v0.32.0", "tcp")])
def test_mooncake_over_rdma_or_before_v033_sleeps(tmp_path, capsys, image, protocol):
    docs = _mc_pair("mc", ["--kv-transfer-config", _mc("kv_producer", protocol), "--enable-sleep-mode"],
                    ["--kv-transfer-config", _mc("kv_consumer", protocol), "--enable-sleep-mode"], image)
    _, out = check(tmp_path, capsys, *docs)
    assert SLEEP not in rules(out), out


def test_moriio_with_sleep_mode_is_refused(tmp_path, capsys):
    kv = json.dumps({"kv_connector": "MoRIIOConnector", "kv_role": "kv_both",
                     "kv_connector_extra_config": {"proxy_ip": "10.0.0.1", "proxy_ping_port": "36367",
                                                   "http_port": "20005"}})
    docs = _mc_pair("moriio", ["--kv-transfer-config", kv, "--enable-sleep-mode"], ["--kv-transfer-config", kv],
                    "vllm/vllm-openai-rocm:v0.33.0", extra_resources={"amd.com/gpu": "1"})
    code, out = check(tmp_path, capsys, *docs)
    found = _findings(out, SLEEP)
    assert code == 1 and len(found) == 1 and found[0]["message"].startswith("prefill:"), out


@pytest.mark.parametrize(("image", "store", "expected"), [
    ("vllm/vllm-openai:v0.33.0", True, "error"),      # 0.33.0's MooncakeStoreConnector never sleeps
    ("vllm/vllm-openai:v0.34.0", True, "unchecked"),   # 0.34.0's reads its Mooncake config file
    ("vllm/vllm-openai:v0.34.0", False, None),          # OffloadingConnector keeps the base class's True
])
def test_a_multiconnector_sleeps_only_where_every_child_does(tmp_path, capsys, image, store, expected):
    other = {"kv_connector": "MooncakeStoreConnector" if store else "OffloadingConnector", "kv_role": "kv_both"}
    multi = json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
        "connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_both"}, other]}})
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    docs = _mc_pair("multi", ["--kv-transfer-config", multi, "--enable-sleep-mode"], ["--kv-transfer-config", kv],
                    image, model="meta-llama/Llama-3.1-8B-Instruct")
    code, out = check(tmp_path, capsys, *docs)
    if expected == "error":
        assert code == 1 and {f["severity"] for f in _findings(out, SLEEP)} == {"error"}, out
        assert "its child" in _findings(out, SLEEP)[0]["message"]
    elif expected == "unchecked":
        assert SLEEP not in rules(out) and code == 3 and SLEEP in json.dumps(out["notChecked"]), out
    else:
        assert SLEEP not in rules(out), out


# --- a MultiConnector of MooncakeConnector and its store is a Mooncake pair -------------------------------------


def test_the_mooncake_store_guide_pair_is_judged_not_set_aside(tmp_path, capsys):
    docs = _mc_pair("store", ["--kv-transfer-config", _store_multi("kv_producer", "kv_both", "kv_producer")],
                    ["--kv-transfer-config", _store_multi("kv_consumer", "kv_consumer", "kv_consumer")],
                    "vllm/vllm-openai:v0.34.0", model="meta-llama/Llama-3.1-8B-Instruct")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and not out.get("notChecked"), out


def test_the_mooncake_rules_judge_the_multiconnector_child(tmp_path, capsys):
    # decode KV in fp8, prefill in bf16: the registered regions differ in length, as for a bare MooncakeConnector
    docs = _mc_pair("store", ["--kv-transfer-config", _store_multi("kv_producer", "kv_both", "kv_producer")],
                    ["--kv-transfer-config", _store_multi("kv_consumer", "kv_consumer", "kv_consumer"),
                     "--kv-cache-dtype", "fp8"],
                    "vllm/vllm-openai:v0.30.0", model="meta-llama/Llama-3.1-8B-Instruct")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "mooncake-kv-region-length" in rules(out, "error"), out


def test_a_multiconnector_of_mooncake_and_an_unread_connector_stays_not_checked(tmp_path, capsys):
    def multi(role):
        return json.dumps({"kv_connector": "MultiConnector", "kv_role": role, "kv_connector_extra_config": {
            "connectors": [{"kv_connector": "MooncakeConnector", "kv_role": role},
                           {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}]}})
    docs = _mc_pair("lmc", ["--kv-transfer-config", multi("kv_producer")], ["--kv-transfer-config", multi("kv_consumer")],
                    "vllm/vllm-openai:v0.34.0", model="meta-llama/Llama-3.1-8B-Instruct")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and out.get("notChecked"), out


# --- extensible-kv-cache-unsupported ------------------------------------------------------------------------------


NIXL_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
NIXL_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'


@pytest.mark.parametrize(("image", "resources", "p_kv", "refused"), [
    ("vllm/vllm-openai-rocm:v0.34.0", {"amd.com/gpu": "1"}, NIXL_P, True),
    ("rocm/vllm:v0.34.0", {"amd.com/gpu": "1"}, NIXL_P, True),
    ("vllm/vllm-openai:v0.34.0", {}, NIXL_P, False),  # CUDA: NVLink without an IMEX channel falls back, no refusal
    ("vllm/vllm-openai-rocm:v0.34.0", {"amd.com/gpu": "1"},   # NIXL on a host buffer registers no device memory
     '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_buffer_device":"cpu"}', False),
])
def test_extensible_kv_cache_with_nixl_is_refused_on_rocm_only(tmp_path, capsys, image, resources, p_kv, refused):
    docs = _mc_pair("ext", ["--kv-transfer-config", p_kv, "--enable-extensible-kv-cache"],
                    ["--kv-transfer-config", NIXL_D], image, extra_resources=resources)
    _, out = check(tmp_path, capsys, *docs)
    found = _findings(out, EXT)
    assert bool(found) is refused, out
    if refused:
        assert found[0]["severity"] == "error" and found[0]["message"].startswith("prefill:")
        assert "on ROCm" in found[0]["message"]


def test_extensible_kv_cache_with_mooncake_on_rocm_is_refused(tmp_path, capsys):
    docs = _mc_pair("ext", ["--kv-transfer-config", _mc("kv_producer"), "--enable-extensible-kv-cache"],
                    ["--kv-transfer-config", _mc("kv_consumer"), "--enable-extensible-kv-cache"],
                    "vllm/vllm-openai-rocm:v0.34.0", extra_resources={"amd.com/gpu": "1"})
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and len(_findings(out, EXT)) == 2, out


@pytest.mark.parametrize(("flags", "refused"), [
    (["--kv-cache-memory-bytes", "8000000000", "--enable-extensible-kv-cache"], True),
    (["--num-gpu-blocks-override", "2048", "--enable-extensible-kv-cache"], True),
    (["--kv-cache-memory-bytes", "8000000000", "--no-enable-extensible-kv-cache"], False),
    (["--kv-cache-memory-bytes", "8000000000"], False),  # unset: vLLM leaves it off here, no error
])
def test_extensible_kv_cache_with_a_fixed_kv_cache_size_is_refused(tmp_path, capsys, flags, refused):
    docs = _mc_pair("ext", ["--kv-transfer-config", NIXL_P], ["--kv-transfer-config", NIXL_D, *flags],
                    "vllm/vllm-openai:v0.34.0", model="meta-llama/Llama-3.1-8B-Instruct")
    _, out = check(tmp_path, capsys, *docs)
    assert (EXT in rules(out, "error")) is refused, out


def test_extensible_kv_cache_with_a_custom_mem_pool_child_is_refused(tmp_path, capsys):
    multi = json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
        "connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                       {"kv_connector": "MooncakeStoreConnector", "kv_role": "kv_both",
                        "kv_connector_extra_config": {"custom_mem_pool": True}}]}})
    docs = _mc_pair("ext", ["--kv-transfer-config", multi, "--enable-extensible-kv-cache"],
                    ["--kv-transfer-config", NIXL_D], "vllm/vllm-openai:v0.34.0",
                    model="meta-llama/Llama-3.1-8B-Instruct")
    _, out = check(tmp_path, capsys, *docs)
    assert EXT in rules(out, "error") and "custom_mem_pool" in _findings(out, EXT)[0]["message"], out


def test_extensible_kv_cache_in_a_script_with_a_block_override_is_refused(tmp_path, capsys):
    text = ("pip install vllm==0.34.0\n"
            f"CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve Qwen/Qwen3-0.6B --port 8100 "
            f"--num-gpu-blocks-override 512 --enable-extensible-kv-cache --kv-transfer-config '{NIXL_P}' &\n"
            f"CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve Qwen/Qwen3-0.6B --port 8200 "
            f"--kv-transfer-config '{NIXL_D}' &\nwait\n")
    code, out = _script(tmp_path, capsys, text)
    assert code == 1 and EXT in rules(out, "error"), out
