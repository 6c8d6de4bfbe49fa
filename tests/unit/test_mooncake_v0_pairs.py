"""Kinds the "not checked" verdicts of held-out sets 40, 61 and 62 hid where vLLM's code decides (issue 9).

- MooncakeConnector pairs (compat/rules/mooncake.py): a pair of both roles on vLLM's V1 MooncakeConnector of a release
  whose connector was read (0.13.0-0.24.x) is judged by the engine-alone rules and the mooncake-* rules, ok where none
  fails, instead of "not checked". 0.13.0-0.18.x push KV with the prefill's own block_len to the decode's addresses
  (mooncake_connector.py 0.13.0 lines 612-660, 0.16.0 lines 836-882): heterogeneous TP whose ranks hold different KV
  heads and KV caches of different element widths corrupt the decode's blocks; 0.13.0-0.14.1 send decode rank i to
  prefill rank i only (group_kv_pull, 0.13.0 line 857). 0.19.0 is the 0.19.1 connector (the validating sender).
- V0-only connectors (PyNcclConnector, MooncakeConnector = V0 SimpleConnector, LMCacheConnector,
  MooncakeStoreConnector) on 0.9.0-0.10.0: the V1 engine's KVConnectorFactory.create_connector_v1 asserts a
  KVConnectorBase_V1 (kv_connector/factory.py 0.9.0 lines 52-72, 0.9.1-0.10.0 lines 53-73): the engine fails at start.
"""

from __future__ import annotations

import json

import pytest

from .test_script_inputs import _check, _errors

MC = "MooncakeConnector"


def _kv(connector: str, role: str) -> str:
    return json.dumps({"kv_connector": connector, "kv_role": role})


def _mooncake_script(vllm: str, model: str = "Qwen/Qwen2.5-7B-Instruct", p_flags: str = "", d_flags: str = "",
                     p_gpus: str = "0", d_gpus: str = "1") -> str:
    return f"""#!/bin/bash
pip install vllm=={vllm} mooncake-transfer-engine
CUDA_VISIBLE_DEVICES={p_gpus} vllm serve {model} --port 8100 {p_flags} \\
    --kv-transfer-config '{_kv(MC, "kv_producer")}' &
CUDA_VISIBLE_DEVICES={d_gpus} vllm serve {model} --port 8200 {d_flags} \\
    --kv-transfer-config '{_kv(MC, "kv_consumer")}' &
python toy_proxy_server.py --port 8000 --prefiller-hosts 127.0.0.1 --prefiller-ports 8100 \\
    --decoder-hosts 127.0.0.1 --decoder-ports 8200
"""


def _deployments(image: str, model: str = "Qwen/Qwen2.5-7B-Instruct", p_flags: str = "", d_flags: str = "",
                 connector: str = MC) -> str:
    docs = []
    for role, kv_role, flags in (("prefill", "kv_producer", p_flags), ("decode", "kv_consumer", d_flags)):
        args = ["serve", model, "--port", "8000", *flags.split(), "--kv-transfer-config", _kv(connector, kv_role)]
        docs.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"qwen-{role}"}, "spec": {
            "replicas": 1, "selector": {"matchLabels": {"app": f"qwen-{role}"}},
            "template": {"metadata": {"labels": {"app": f"qwen-{role}", "llm-d.ai/role": role}}, "spec": {
                "containers": [{"name": "vllm", "image": image, "command": ["vllm"], "args": args,
                                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})
    return "\n---\n".join(json.dumps(d) for d in docs)


def _not_checked(out: dict) -> bool:
    return bool(out.get("notChecked"))


# --- a valid Mooncake pair is judged (ok), not "not checked" ----------------------------------------------------------


@pytest.mark.parametrize(("vllm", "model"), [
    ("0.13.0", "Qwen/Qwen2.5-7B-Instruct"),   # set 62's entry: the first V1 MooncakeConnector
    ("0.14.1", "meta-llama/Llama-3.1-8B-Instruct"),
    ("0.18.0", "Qwen/Qwen3-8B"),
    ("0.20.0", "Qwen/Qwen2.5-7B-Instruct"),
    ("0.24.0", "meta-llama/Llama-3.1-8B-Instruct"),
])
def test_valid_mooncake_script_pair_is_ok(tmp_path, capsys, vllm, model):
    code, out = _check(tmp_path, capsys, _mooncake_script(vllm, model))
    assert code == 0 and not _errors(out) and not _not_checked(out), out


@pytest.mark.parametrize("tag", ["v0.18.0", "v0.20.0", "v0.22.0"])
def test_valid_mooncake_deployment_pair_is_ok(tmp_path, capsys, tag):
    code, out = _check(tmp_path, capsys, _deployments(f"vllm/vllm-openai:{tag}"), "pair.yaml")
    assert code == 0 and not _errors(out) and not _not_checked(out), out


@pytest.mark.parametrize(("image", "model", "p_flags", "d_flags"), [
    ("vllm/vllm-openai:v0.14.0", "Qwen/Qwen2.5-7B-Instruct", "", ""),      # no mooncake package in the image
    ("vllm/vllm-openai:v0.34.1", "Qwen/Qwen2.5-7B-Instruct", "", ""),      # a connector not read (set 83 read 0.25.0-0.34.0)
    ("vllm/vllm-openai:v0.20.0", "Qwen/Qwen2.5-7B-Instruct", "--block-size 16", "--block-size 32"),  # not derived
    ("vllm/vllm-openai:v0.20.0", "Qwen/Qwen3-Next-80B-A3B-Instruct", "", ""),  # hybrid: not read
])
def test_mooncake_pair_outside_what_was_read_stays_not_checked(tmp_path, capsys, image, model, p_flags, d_flags):
    code, out = _check(tmp_path, capsys, _deployments(image, model, p_flags, d_flags), "pair.yaml")
    assert code == 3 and _not_checked(out) and not _errors(out), out


def test_nixl_rules_do_not_judge_a_mooncake_pair(tmp_path, capsys):
    # a NIXL pair with the decode's side channel unset etc. would draw NIXL findings; the Mooncake pair of the same
    # engines draws none of the NIXL rules (only engine-alone and mooncake-* rules run)
    code, out = _check(tmp_path, capsys, _mooncake_script("0.20.0", p_flags="--tensor-parallel-size 1",
                                                           d_flags="--tensor-parallel-size 4", d_gpus="1,2,3,4"))
    rules = {f["rule"] for r in out["results"] for f in r["findings"]}
    assert code == 0 and not any(rule.startswith(("nixl", "side-channel", "hetero-tp-")) for rule in rules), out


# --- heterogeneous TP before 0.19.0 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("vllm", "model", "p_tp", "d_tp"), [
    ("0.13.0", "Qwen/Qwen2.5-7B-Instruct", 2, 1),          # set 62's entry: prefill rank 1 unasked, wrong block_len
    ("0.14.0", "Qwen/Qwen2.5-7B-Instruct", 1, 2),          # decode rank 1 asks a port no prefill rank binds
    ("0.16.0", "meta-llama/Llama-3.1-8B-Instruct", 2, 1),  # topology mapping, still the local block_len
    ("0.18.0", "meta-llama/Llama-3.1-8B-Instruct", 1, 2),
])
def test_mooncake_hetero_tp_before_0190_is_an_error(tmp_path, capsys, vllm, model, p_tp, d_tp):
    gpus = {1: "0", 2: "0,1"}
    text = _mooncake_script(vllm, model, f"--tensor-parallel-size {p_tp}", f"--tensor-parallel-size {d_tp}",
                            gpus[p_tp], {1: "2", 2: "2,3"}[d_tp])
    code, out = _check(tmp_path, capsys, text)
    assert code == 1 and "mooncake-hetero-tp-unsupported" in _errors(out), out


@pytest.mark.parametrize("vllm", ["0.19.0", "0.20.0"])
def test_mooncake_divisible_hetero_tp_from_0190_is_ok(tmp_path, capsys, vllm):
    text = _mooncake_script(vllm, "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size 2", "", "0,1", "2")
    code, out = _check(tmp_path, capsys, text)
    assert code == 0 and not _errors(out), out


def test_mooncake_indivisible_tp_from_0160(tmp_path, capsys):
    text = _mooncake_script("0.16.0", "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size 2",
                            "--tensor-parallel-size 3", "0,1", "2,3,4")
    code, out = _check(tmp_path, capsys, text)
    assert code == 1 and "mooncake-tp-indivisible" in _errors(out), out


# --- KV element width before 0.19.0 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("vllm", "p_flags", "d_flags"), [
    ("0.13.0", "", "--kv-cache-dtype fp8"),                 # set 62's entry
    ("0.16.0", "--kv-cache-dtype fp8", "--kv-cache-dtype bfloat16"),
    ("0.18.0", "--kv-cache-dtype fp8_e4m3", ""),
])
def test_mooncake_kv_width_before_0190_is_an_error(tmp_path, capsys, vllm, p_flags, d_flags):
    code, out = _check(tmp_path, capsys, _mooncake_script(vllm, "meta-llama/Llama-3.1-8B-Instruct", p_flags, d_flags))
    assert code == 1 and "mooncake-kv-region-length" in _errors(out), out


# --- V0-only connectors on the V1 engine of 0.9.0-0.10.0 --------------------------------------------------------------

V0 = "kv-connector-v0-only"


def _v0_script(vllm: str, connector: str, env: str = "", model: str = "Qwen/Qwen3-8B", flags: str = "",
               multi: bool = False) -> str:
    def kv(role: str, rank: int) -> str:
        own = {"kv_connector": connector, "kv_role": role, "kv_rank": rank, "kv_parallel_size": 2,
               "kv_buffer_size": 5e9}
        if multi:
            own = {"kv_connector": "MultiConnector", "kv_role": role, "kv_connector_extra_config": {
                "connectors": [{"kv_connector": "NixlConnector", "kv_role": role}, own]}}
        return json.dumps(own)
    return f"""#!/bin/bash
pip install vllm=={vllm}
{env} CUDA_VISIBLE_DEVICES=0 vllm serve {model} --port 8100 {flags} --kv-transfer-config '{kv("kv_producer", 0)}' &
{env} CUDA_VISIBLE_DEVICES=1 vllm serve {model} --port 8200 {flags} --kv-transfer-config '{kv("kv_consumer", 1)}' &
"""


def _findings(out: dict) -> dict[str, str]:
    return {f["rule"]: f["severity"] for r in out["results"] for f in r["findings"]}


@pytest.mark.parametrize(("vllm", "connector", "env", "model"), [
    ("0.9.2", "PyNcclConnector", "", "Qwen/Qwen3-8B"),                     # set 61's entry, VLLM_USE_V1 unset
    ("0.9.0", "PyNcclConnector", "VLLM_USE_V1=1", "meta-llama/Llama-3.1-8B-Instruct"),
    ("0.9.1", "LMCacheConnector", "", "meta-llama/Llama-3.1-8B-Instruct"),
    ("0.10.0", "MooncakeStoreConnector", "VLLM_USE_V1=1", "Qwen/Qwen3-8B"),
    ("0.10.0", "MooncakeConnector", "", "Qwen/Qwen3-8B"),                  # the V0 SimpleConnector's other name
])
def test_v0_connector_on_the_v1_engine_is_an_error(tmp_path, capsys, vllm, connector, env, model):
    code, out = _check(tmp_path, capsys, _v0_script(vllm, connector, env, model))
    assert code == 1 and V0 in _errors(out), out


def test_v0_connector_as_a_multiconnector_child_is_an_error(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _v0_script("0.9.2", "LMCacheConnector", multi=True))
    assert code == 1 and V0 in _errors(out), out


@pytest.mark.parametrize(("vllm", "connector"), [("0.9.2", "PyNcclConnector"), ("0.10.0", "LMCacheConnector")])
def test_v0_connector_on_the_v0_engine_is_not_refused(tmp_path, capsys, vllm, connector):
    code, out = _check(tmp_path, capsys, _v0_script(vllm, connector, "VLLM_USE_V1=0"))
    # a valid PyNccl pair is judged (ok) since branch i9-v0pairs32 (compat/rules/v0_pair.py); LMCacheConnector V0 not
    judged = connector == "PyNcclConnector"
    assert code == (0 if judged else 3) and V0 not in _findings(out) and bool(out["notChecked"]) != judged, out


@pytest.mark.parametrize(("env", "flags", "model"), [
    ("", "--preemption-mode swap", "Qwen/Qwen3-8B"),          # the oracle's V0 fallback may apply
    ("", "", "example/private-model"),                        # whether the model runs on V1 is not known
])
def test_v0_connector_where_the_engine_may_fall_back_is_not_an_error(tmp_path, capsys, env, flags, model):
    code, out = _check(tmp_path, capsys, _v0_script("0.9.2", "PyNcclConnector", env, model, flags))
    assert V0 not in _errors(out) and code == 3, out


@pytest.mark.parametrize(("vllm", "connector"), [("0.10.1.1", "PyNcclConnector"), ("0.9.2", "LMCacheConnectorV1")])
def test_v0_rule_controls(tmp_path, capsys, vllm, connector):
    # from 0.10.1 the name is unregistered (another rule); a V1 connector is no V0 one
    code, out = _check(tmp_path, capsys, _v0_script(vllm, connector))
    assert V0 not in _findings(out), out


# --- two kv_both NIXL engines of one deployment serving different models ----------------------------------------------

KV_BOTH_NIXL = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _kv_both_script(vllm: str, model_a: str, model_b: str, third: str = "") -> str:
    return f"""#!/bin/bash
pip install vllm=={vllm}
CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve {model_a} --port 8100 \\
    --kv-transfer-config '{KV_BOTH_NIXL}' &
CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve {model_b} --port 8200 \\
    --kv-transfer-config '{KV_BOTH_NIXL}' &
{third}
"""


@pytest.mark.parametrize(("vllm", "model_a", "model_b"), [
    ("0.13.0", "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-3B-Instruct"),  # set 61's entry, one host
    ("0.20.0", "Qwen/Qwen3-8B", "Qwen/Qwen3-0.6B"),
    ("0.14.1", "Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
])
def test_two_kv_both_engines_of_one_script_with_different_models_are_refused(tmp_path, capsys, vllm, model_a, model_b):
    code, out = _check(tmp_path, capsys, _kv_both_script(vllm, model_a, model_b))
    assert code == 1 and "model-mismatch" in _errors(out), out


ESCAPED = KV_BOTH_NIXL.replace('"', '\\"')  # inside ssh's double-quoted remote command


def test_kv_both_engines_of_different_models_across_ssh_are_refused(tmp_path, capsys):
    text = f"""#!/bin/bash
pip install vllm==0.14.1
VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1 vllm serve Qwen/Qwen3-8B --port 8100 --kv-transfer-config '{KV_BOTH_NIXL}' &
ssh node2 "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2 vllm serve Qwen/Qwen3-4B --port 8200 --kv-transfer-config '{ESCAPED}'" &
"""
    code, out = _check(tmp_path, capsys, text)
    assert code == 1 and "model-mismatch" in _errors(out), out


def test_a_third_engine_or_another_connector_leaves_different_models_unpaired(tmp_path, capsys):
    third = (f"CUDA_VISIBLE_DEVICES=2 VLLM_NIXL_SIDE_CHANNEL_PORT=5602 vllm serve Qwen/Qwen3-0.6B --port 8300 "
             f"--kv-transfer-config '{KV_BOTH_NIXL}' &")
    code, out = _check(tmp_path, capsys, _kv_both_script("0.20.0", "Qwen/Qwen3-8B", "Qwen/Qwen3-4B", third))
    assert "model-mismatch" not in _errors(out) and code == 3, out
    text = _kv_both_script("0.20.0", "Qwen/Qwen3-8B", "Qwen/Qwen3-4B").replace("NixlConnector", "LMCacheConnectorV1")
    code, out = _check(tmp_path, capsys, text)
    # two LMCache kv_both engines with no LMCache P/D source are each a lone engine's cache, no P/D side (set 116:
    # compat.manifests.single_engine_cache): nothing to check, and still never a model-mismatch pair
    assert "model-mismatch" not in _errors(out) and code == 4 and not out["notChecked"], out
    code, out = _check(tmp_path, capsys, text.replace("vllm serve", "LMCACHE_CONFIG_FILE=/etc/lmcache.yaml vllm serve"))
    assert "model-mismatch" not in _errors(out) and code == 3, out


def test_different_models_before_the_nixl_hash_are_a_warning(tmp_path, capsys):
    # a local path whose checkpoint the files do not show: its KV layout may be the id's (set 72: two known
    # checkpoints of different KV layouts, Qwen2.5-7B against Llama-3.1-8B, are an error, test_public_report_kinds_72)
    code, out = _check(tmp_path, capsys, _kv_both_script("0.11.0", "Qwen/Qwen2.5-7B-Instruct", "/models/llama-8b"))
    assert code == 0 and _findings(out).get("model-mismatch") == "warning", out


def test_kv_both_engines_of_two_scripts_are_not_paired(tmp_path, capsys):
    one = """#!/bin/bash
pip install vllm==0.20.0
VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve {model} --port 8100 --kv-transfer-config '{kv}' &
"""
    (tmp_path / "a.sh").write_text(one.format(model="Qwen/Qwen3-8B", kv=KV_BOTH_NIXL))
    (tmp_path / "b.sh").write_text(one.format(model="Qwen/Qwen3-4B", kv=KV_BOTH_NIXL))
    from pdd_operator.cli import main
    code = main(["check", str(tmp_path / "a.sh"), str(tmp_path / "b.sh"), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert "model-mismatch" not in _errors(out) and code == 3, out


def test_two_pools_of_different_models_in_one_manifest_stay_unpaired(tmp_path, capsys):
    # one object may hold model pools each ready for P/D (set 40's Grove control); only a script's two engines pair
    text = _deployments("vllm/vllm-openai:v0.20.0").replace("kv_producer", "kv_both").replace("kv_consumer", "kv_both")
    text = text.replace("MooncakeConnector", "NixlConnector").replace('"llm-d.ai/role": "prefill"', '"tier": "a"')
    text = text.replace('"llm-d.ai/role": "decode"', '"tier": "b"').replace("qwen-prefill", "pool-a")
    text = text.replace("qwen-decode", "pool-b")
    docs = text.split("\n---\n")
    docs[1] = docs[1].replace("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen3-8B")
    code, out = _check(tmp_path, capsys, "\n---\n".join(docs), "pools.yaml")
    assert "model-mismatch" not in _errors(out) and code == 3, out
