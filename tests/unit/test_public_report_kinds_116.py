"""Variants of what the hundred-and-sixteenth public-report set (tests/unit/data/public_reports_116) taught, with
negative controls.

A lone vLLM engine whose KV connector only caches or offloads its own KV (``kv_role`` ``kv_both`` with vLLM's
OffloadingConnector or SimpleCPUOffloadConnector, LMCache's connectors with nothing that turns LMCache's P/D mode
on, or a MultiConnector of those) is no side of a prefill/decode pair
(:func:`pdd_operator.compat.manifests.single_engine_cache`): a file holding only such an engine has nothing to check
(exit 4), and beside a P/D pair it no longer makes the file "not checked". Before, every lone ``kv_both`` engine was
reported as an engine whose role cannot be told (exit 3), as set 116's HYGON cookbook's single LMCache engine was.
A lone ``kv_both`` engine of a transfer connector (NixlConnector, MooncakeConnector, a MultiConnector with a NIXL
child) stays not checked: its other side may be in other files. An LMCache engine whose config file is not in the
files, or whose environment sets LMCache's P/D mode, stays not checked too (the set's own entry: its
``LMCACHE_CONFIG_FILE`` is not among the inputs, so it stays in ``missed``).

An engine of DAS's vLLM build for Hygon HCUs (OpenDAS/vllm with vllm-plugin-das) is not checked
(:data:`pdd_operator.compat.manifests.DAS_PLUGIN`): its environment sets a ``VLLM_HCU_*`` variable, which no upstream
release reads, or its image is DAS's (``harbor.sourcefind.cn:5443/dcu/...``). Its Mooncake transfer, KV layout and
flags are the build's own: the cookbook runs a pipeline-parallel MooncakeConnector prefill that upstream 0.16-0.23
refuses and passes ``--enable-custom-sp``. Set 116's HCU entries were right blind only because their versions were not
read; written with ``pip install vllm==0.18.1`` the PP16 layout was refused (``mooncake-pp-unsupported``), a false
refusal.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.cli_check import check_text
from tests.unit.test_turn2_variants import KV, check, rules

OFFLOAD = '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"num_cpu_blocks":4096}}'
SIMPLE_CPU = '{"kv_connector":"SimpleCPUOffloadConnector","kv_role":"kv_both"}'
LMCACHE = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
LMCACHE_MP = '{"kv_connector":"LMCacheMPConnector","kv_role":"kv_both"}'
MULTI_CACHE = json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
    "connectors": [{"kv_connector": "OffloadingConnector", "kv_role": "kv_both"},
                   {"kv_connector": "LMCacheMPConnector", "kv_role": "kv_both"}]}})
MULTI_NIXL = json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
    "connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                   {"kv_connector": "OffloadingConnector", "kv_role": "kv_both"}]}})


def _script(tmp_path, capsys, body: str, version: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, f"pip install vllm=={version}\n{body}\n", "serve.sh")


def _serve(model: str, kv: str, env: str = "", port: int = 8000, gpus: str = "0") -> str:
    return f"{env}CUDA_VISIBLE_DEVICES={gpus} vllm serve {model} --port {port} --kv-transfer-config '{kv}' &"


def _lone_deployment(kv: str, image: str, name: str = "qwen", model: str = "Qwen/Qwen3-8B") -> dict:
    """One Deployment ``name`` with no role label or role word whose engine serves ``model`` with ``kv``."""
    labels = {"app": name}
    c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
         "args": [model, "--kv-transfer-config", kv], "env": [],
         "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [c]}}}}


@pytest.mark.parametrize(("kv", "env", "version", "model"), [
    (OFFLOAD, "", "0.23.0", "Qwen/Qwen3-8B"),
    (SIMPLE_CPU, "", "0.34.0", "meta-llama/Llama-3.1-8B-Instruct"),
    (LMCACHE, "LMCACHE_LOCAL_CPU=True LMCACHE_MAX_LOCAL_CPU_SIZE=40 ", "0.18.1", "Qwen/Qwen3-32B"),
    (LMCACHE_MP, "", "0.26.0", "Qwen/Qwen3-14B"),
    (MULTI_CACHE, "", "0.34.0", "Qwen/Qwen3-8B"),
])
def test_a_lone_cache_engine_in_a_script_has_nothing_to_check(tmp_path, capsys, kv, env, version, model):
    code, out = _script(tmp_path, capsys, _serve(model, kv, env), version)
    assert code == 4 and not out["notChecked"] and not out["results"], out


@pytest.mark.parametrize(("kv", "image"), [(OFFLOAD, "vllm/vllm-openai:v0.27.0"),
                                           (SIMPLE_CPU, "vllm/vllm-openai:v0.34.0"),
                                           (LMCACHE_MP, "lmcache/vllm-openai:v0.3.14")])
def test_a_lone_cache_engine_in_a_deployment_has_nothing_to_check(tmp_path, capsys, kv, image):
    code, out = check(tmp_path, capsys, _lone_deployment(kv, image))
    assert code == 4 and not out["notChecked"], out


@pytest.mark.parametrize(("kv", "env"), [
    (KV, ""),                                                     # half of a NIXL pair
    ('{"kv_connector":"MooncakeConnector","kv_role":"kv_both"}', ""),
    (MULTI_NIXL, ""),                                             # a NIXL child moves KV to another engine
    ('{"kv_connector":"OffloadingConnector","kv_role":"kv_producer"}', ""),  # a role written: not a lone cache
])
def test_a_lone_engine_that_may_be_one_side_of_a_pair_stays_not_checked(tmp_path, capsys, kv, env):
    code, out = _script(tmp_path, capsys, _serve("Qwen/Qwen3-8B", kv, env), "0.23.0")
    assert code == 3 and out["notChecked"], out


@pytest.mark.parametrize(("kv", "env"), [
    (LMCACHE, "LMCACHE_CONFIG_FILE=/etc/lmcache.yaml "),          # its P/D mode is set in a file not read
    (LMCACHE, "LMCACHE_ENABLE_PD=True LMCACHE_PD_ROLE=sender "),  # LMCache's P/D mode on
    ('{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both","kv_connector_extra_config":{"lmcache.enable_pd":true}}',
     ""),
])
def test_a_lone_lmcache_engine_whose_pd_mode_may_be_on_has_no_peer_in_the_files(tmp_path, capsys, kv, env):
    # its P/D mode may be on, but LMCache's P/D channel needs a second engine, and the files hold none: nothing to
    # check, with a note (fixE, compat.manifests.lone_lmcache_engine; was "not checked" before it)
    code, out = _script(tmp_path, capsys, _serve("Qwen/Qwen3-8B", kv, env), "0.23.0")
    assert code == 4 and not out["notChecked"] and out["aggregated"], out


def test_a_cache_engine_beside_a_pair_leaves_the_pair_judged_alone(tmp_path, capsys):
    body = "\n".join([
        _serve("Qwen/Qwen3-8B", '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}',
               "VLLM_NIXL_SIDE_CHANNEL_PORT=5600 ", port=8100, gpus="0"),
        _serve("Qwen/Qwen3-8B", '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}',
               "VLLM_NIXL_SIDE_CHANNEL_PORT=5700 ", port=8200, gpus="1"),
        _serve("Qwen/Qwen3-32B", OFFLOAD, port=8300, gpus="2,3"),
    ])
    code, out = _script(tmp_path, capsys, body, "0.23.0")
    assert code == 0 and not out["notChecked"] and len(out["results"]) == 1, out


def test_a_cache_engine_beside_a_broken_pair_does_not_hide_the_error(tmp_path, capsys):
    body = "\n".join([
        _serve("Qwen/Qwen3-8B", '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}',
               "VLLM_NIXL_SIDE_CHANNEL_PORT=5600 ", port=8100, gpus="0"),
        _serve("Qwen/Qwen3-8B --kv-cache-dtype fp8", '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}',
               "VLLM_NIXL_SIDE_CHANNEL_PORT=5700 ", port=8200, gpus="1"),
        _serve("Qwen/Qwen3-32B", LMCACHE, port=8300, gpus="2"),
    ])
    code, out = _script(tmp_path, capsys, body, "0.23.0")
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out


def test_only_the_lone_transfer_engine_of_two_deployments_is_not_checked(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _lone_deployment(OFFLOAD, "vllm/vllm-openai:v0.23.0"),
                      _lone_deployment(KV, "vllm/vllm-openai:v0.23.0", "llama", "meta-llama/Llama-3.1-8B-Instruct"))
    assert code == 3 and len(out["notChecked"]) == 1 and "llama" in out["notChecked"][0]["object"], out


HCU_PP = """export VLLM_HCU_USE_FLASHMLA=1
export LMSLIM_USE_GLOBAL_MOE_CACHE=1
vllm serve /models/glm-w4a8 --trust-remote-code -pp {pp} --port 9348 \\
    --kv-transfer-config '{{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}}' &
vllm serve /models/glm-w4a8 --trust-remote-code -tp 8 --port 9349 \\
    --kv-transfer-config '{{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}}' &"""


@pytest.mark.parametrize("version", ["0.18.1", "0.21.0"])
@pytest.mark.parametrize("pp", [2, 16])
def test_a_das_build_engine_is_not_checked_but_not_refused(tmp_path, capsys, version, pp):
    code, out = _script(tmp_path, capsys, HCU_PP.format(pp=pp), version)
    assert code == 3 and not rules(out, "error") and "vllm-plugin-das" in out["notChecked"][0]["reason"], out


def test_the_same_layout_on_upstream_vllm_is_refused(tmp_path, capsys):
    upstream = "\n".join(x for x in HCU_PP.format(pp=2).splitlines() if "VLLM_HCU_" not in x)
    code, out = _script(tmp_path, capsys, upstream.replace("/models/glm-w4a8", "Qwen/Qwen3-8B")
                        .replace("-tp 8", "-tp 1"), "0.18.1")
    assert code == 1 and "mooncake-pp-unsupported" in rules(out, "error"), out


def _mooncake_pair(image: str, env=(), decode_tp: str = "2") -> list[dict]:
    docs = []
    for role, tp in (("prefill", "1"), ("decode", decode_tp)):
        labels = {"app": "qwen", "llm-d.ai/role": role}
        kv = json.dumps({"kv_connector": "MooncakeConnector", "kv_role": f"kv_{'producer' if role == 'prefill' else 'consumer'}"})
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"], "env": list(env),
             "args": ["Qwen/Qwen3-8B", "--tensor-parallel-size", tp, "--kv-transfer-config", kv],
             "resources": {"limits": {"nvidia.com/gpu": tp}}}
        docs.append({"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": f"qwen-{role}", "labels": labels},
                     "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                              "template": {"metadata": {"labels": labels}, "spec": {"containers": [c]}}}})
    return docs


@pytest.mark.parametrize(("image", "env"), [
    ("harbor.sourcefind.cn:5443/dcu/admin/base/vllm:0.18.1-ubuntu22.04-dtk26.04-py3.10", ()),
    ("vllm/vllm-openai:v0.18.1", ({"name": "VLLM_HCU_USE_CUSTOM_FLASH_ATTN", "value": "1"},)),
])
def test_a_das_build_deployment_is_not_checked(tmp_path, capsys, image, env):
    code, out = check(tmp_path, capsys, *_mooncake_pair(image, env))
    assert code == 3 and not rules(out, "error") and "vllm-plugin-das" in json.dumps(out["notChecked"]), out


def test_an_upstream_deployment_of_the_same_pair_is_judged(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_mooncake_pair("vllm/vllm-openai:v0.18.1",
                                                        ({"name": "VLLM_HOST_IP", "value": "10.0.0.1"},)))
    assert code == 1 and "mooncake-hetero-tp-unsupported" in rules(out, "error"), out
