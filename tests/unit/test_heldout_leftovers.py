"""The strict xfails left in the held-out sets, fixed as kinds (branch i9-fixG), and one structural clean-up.

1. ``Rule.one_engine`` (pdd_operator/compat/rules/base.py) is the one definition of "a rule that judges an engine by its
   own argv and image": :func:`pdd_operator.compat.engine.evaluate_alone` selects by it (no hand list of ids in
   compat/engine.py), and each such rule is declared so where it is declared.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from pdd_operator.compat import engine
from pdd_operator.compat.manifests import lone_pair, scan
from pdd_operator.compat.rules import CHECKS
from pdd_operator.compat.rules.multi_connector import NOT_DESCRIBED
from tests.unit.cli_check import check_text
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

#: The rules that judged a lone engine before the attribute (compat/engine.py's former ONE_ENGINE_RULES).
_ONE_ENGINE = {"engine-args-invalid", "cli-flag-removed", "cli-flag-not-yet", "entrypoint-repeated",
               "kv-transfer-config-removed-field", "kv-connector-unregistered", "attention-backend-unsupported",
               "kv-cache-dtype-unknown", "speculative-config-removed-field", "tp-heads-indivisible",
               # set 79: ECConnectorFactory refuses an EC connector the release does not register
               "ec-connector-unregistered",
               # set 84: VllmConfig refuses sleep mode / the extensible KV cache for the engine's own connector
               "sleep-mode-unsupported", "extensible-kv-cache-unsupported",
               # set 86: an option with three hyphens or a typographic dash stops the parser
               "cli-option-malformed",
               # set 87: an engine that cannot split its FP8 checkpoint's experts along the weight blocks never loads
               "fp8-moe-block-tp-indivisible",
               # set 88: weights per GPU above what the engine may use of its GPU stop one engine at load
               "weights-exceed-gpu-memory",
               # fixN: vllm-rs serve on a release without the Rust frontend
               "rust-frontend-unavailable",
               # fixO: the OpenAI server imports each --middleware at startup (OME's vLLM runtimes)
               "middleware-module-missing",
               # set 96: the connector factory imports a kv_connector_module_path; MoRIIO int()s its ports at start
               "kv-connector-module-missing", "moriio-extra-config-port-invalid",
               # fixT: --attention-backend beside another backend setting stops create_engine_config
               "attention-backend-set-twice",
               # fixV: MoRIIO ports bound twice in one pod, a kv_lease_duration vLLM refuses, a --config mapping
               "moriio-listener-port-collision", "mooncake-kv-lease-invalid", "config-file-mapping-release-dependent",
               # fixX: vLLM's gRPC server parses no HTTP front-end flag
               "grpc-server-flag-unrecognised",
               # fixB: the model's architecture against the release's model registry
               "architecture-not-in-release",
               # set 109: a flag no vLLM release's parser has (Dynamo's, SGLang's, TensorRT-LLM's)
               "cli-flag-unknown",
               # set 123: ModelConfig refuses a --max-model-len above the model's derived length on its own
               "max-model-len-exceeds-model",
               # fixF: an option that takes one value given none (an array of the batch shell in srun's bash -c)
               "cli-option-missing-value"}


# --- 1. Rule.one_engine ------------------------------------------------------------------------------------------


def test_one_engine_rules_are_declared_where_the_rules_are():
    marked = {r.id for r in CHECKS if r.one_engine}
    assert marked == _ONE_ENGINE
    assert all(r.without_connector for r in CHECKS if r.one_engine)  # an engine alone has no counterpart either
    assert not hasattr(engine, "ONE_ENGINE_RULES")


def _lone_engine(args):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "m-prefill", "labels": {"role": "prefill"}},
           "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.20.0", "command": ["vllm", "serve"],
                                    "args": ["Qwen/Qwen3-0.6B", *args],
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    engines, _ = scan(pod)
    return engines[0]


def test_evaluate_alone_selects_by_the_attribute():
    e = _lone_engine(["--kv-transfer-config", '{"kv_connector":"NoSuchConnector","kv_role":"kv_producer"}'])
    role = "prefill"
    found = {f.rule for f in engine.evaluate_alone(lone_pair(e), role)}
    assert found == {"kv-connector-unregistered"}
    # the same rule, not marked: no longer run on a lone engine (the selection is the attribute, not an id list)
    unmarked = tuple(dataclasses.replace(r, one_engine=False) if r.id == "kv-connector-unregistered" else r
                     for r in CHECKS)
    assert not engine.evaluate_alone(lone_pair(e), role, unmarked)
    # a rule marked that no list named is run
    marked = tuple(dataclasses.replace(r, one_engine=True) if r.id == "kv-connector-unregistered" else r
                   for r in CHECKS if r.id == "kv-connector-unregistered")
    assert {f.rule for f in engine.evaluate_alone(lone_pair(e), role, marked)} == {"kv-connector-unregistered"}


# --- 2. commands typed into an interactive container run in its image --------------------------------------------


def _check_script(tmp_path, capsys, text: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, "pd.sh")


def _findings(out, severity=None) -> set[str]:
    return {f["rule"] for r in out["results"] for f in r["findings"] if severity in (None, f["severity"])}


def _versions(out) -> set[str]:
    return {r["vllmVersion"] for r in out["results"]}


def _session(container: str, connector: str, model: str = "Qwen/Qwen2.5-7B-Instruct", between: str = "") -> str:
    """A pasted session: the container, then each engine's command "inside the container" (Mooncake#3061's shape)."""
    kv = '{"kv_connector":"%s","kv_role":"%s"}'
    return (f"#!/bin/bash\n{container}\n{between}\n# Prefiller node, inside the container:\n"
            f"vllm serve {model} --port 8010 --kv-transfer-config '{kv % (connector, 'kv_producer')}'\n\n"
            f"# Decoder node, inside the container:\n"
            f"vllm serve {model} --port 8020 --kv-transfer-config '{kv % (connector, 'kv_consumer')}'\n\n"
            "python toy_proxy_server.py --port 8000 --prefiller-ports 8010 --decoder-ports 8020\n")


@pytest.mark.parametrize(("container", "connector", "rule"), [
    # --entrypoint=/bin/bash on vLLM's ROCm image: 0.12.0 registers no MooncakeConnector (it arrived in 0.13.0)
    ("docker run -it --ipc=host --entrypoint=/bin/bash vllm/vllm-openai-rocm:v0.12.0", "MooncakeConnector",
     "kv-connector-unregistered"),
    # bash as the command after the image, CUDA image, another connector gone from the V1 registry
    ("docker run -it --rm --gpus all vllm/vllm-openai:v0.11.0 bash", "PyNcclConnector", "kv-connector-unregistered"),
    # podman, --interactive spelled out, /bin/sh; the storage connector's 0.13.0 name on 0.12.0
    ("podman run --interactive --tty --entrypoint /bin/sh docker.io/vllm/vllm-openai:v0.12.0", "ExampleConnector",
     "kv-connector-unregistered"),
])
def test_engines_typed_into_an_interactive_container_run_its_release(tmp_path, capsys, container, connector, rule):
    code, out = _check_script(tmp_path, capsys, _session(container, connector))
    assert code == 1 and rule in _findings(out, "error"), out


def test_an_interactive_container_of_a_judged_release_passes_a_valid_pair(tmp_path, capsys):
    code, out = _check_script(tmp_path, capsys, _session(
        "docker run -it --entrypoint=/bin/bash vllm/vllm-openai-rocm:v0.20.0", "MooncakeConnector"))
    assert code == 0 and not _findings(out, "error") and _versions(out) == {"0.20.0"}, out


@pytest.mark.parametrize("container", [
    # not interactive: bash reads no commands and exits; the later lines run on the host
    "docker run -d --entrypoint=/bin/bash vllm/vllm-openai:v0.12.0",
    # a shell that runs a script of its own, not the session's later lines
    "docker run -it vllm/vllm-openai:v0.12.0 bash -c 'nvidia-smi'",
])
def test_a_container_that_takes_no_typed_commands_gives_them_no_image(tmp_path, capsys, container):
    code, out = _check_script(tmp_path, capsys, _session(container, "MooncakeConnector"))
    assert code == 3 and not _findings(out, "error"), out


def test_a_pin_installed_inside_the_container_replaces_its_release(tmp_path, capsys):
    code, out = _check_script(tmp_path, capsys, _session(
        "docker run -it --entrypoint=/bin/bash vllm/vllm-openai:v0.20.0", "MooncakeConnector",
        between="pip install vllm==0.12.0"))
    assert code == 1 and "kv-connector-unregistered" in _findings(out, "error"), out


# --- 3. a non-NIXL pair of an unknown or unread release: "not checked", with what the releases read do ------------


def _v0_pair(image, connector="PyNcclConnector", model="meta-llama/Llama-3.1-8B-Instruct", extra=(), v0_fields=True):
    docs = []
    for role, kv_role, rank in (("prefill", "kv_producer", 0), ("decode", "kv_consumer", 1)):
        kv = json.dumps({"kv_connector": connector, "kv_role": kv_role, **({
            "kv_rank": rank, "kv_parallel_size": 2, "kv_buffer_size": 1e9} if v0_fields else {})})
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": [model, "--kv-transfer-config", kv, *extra], "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        docs.append(workload(f"m-{role}", role, c, app="m"))
    return docs


def _not_checked(out) -> str:
    return json.dumps(out["notChecked"])


@pytest.mark.parametrize(("image", "connector", "named"), [
    # PyNccl on an image whose tag names no release: the V1 engine's assert on 0.9.0-0.10.0, the V1-only registry after
    ("vllm/vllm-openai:latest", "PyNcclConnector", ("kv-connector-v0-only (vLLM 0.9.0 <= v < 0.10.1)",
                                                    "kv-connector-unregistered (vLLM 0.10.1 <= v")),
    # the V0 Mooncake pipe under the same name, a digest-pinned image
    ("vllm/vllm-openai@sha256:" + "0" * 64, "MooncakeConnector", ("kv-connector-v0-only (vLLM 0.9.0 <= v < 0.10.1)",)),
])
def test_an_unknown_release_names_what_the_releases_read_refuse(tmp_path, capsys, image, connector, named):
    code, out = check(tmp_path, capsys, *_v0_pair(image, connector))
    assert code == 3 and not rules(out, "error"), out
    why = _not_checked(out)
    assert all(n in why for n in named) and "the verdict depends on the release" in why, why
    assert NOT_DESCRIBED not in why, why


def test_a_release_older_than_the_rules_says_so(tmp_path, capsys):
    # LMCacheConnector's V0 code on 0.8.0 was not read (fix M judges PyNccl / Mooncake pairs of 0.7.0-0.8.x only)
    code, out = check(tmp_path, capsys, *_v0_pair("vllm/vllm-openai:v0.8.0", "LMCacheConnector"))
    assert code == 3 and not rules(out, "error"), out
    assert "vLLM 0.8.0 is older than every release these rules were read from" in _not_checked(out), out


def test_a_read_v0_pair_of_an_older_release_is_judged(tmp_path, capsys):
    """Fix M: the same PyNccl pair on v0.7.3 (the V0 engine its default, chunked prefill off at --max-model-len 8192)
    is judged by the rules read back to it: ok, the rules not read for 0.7.3 named in the warning."""
    code, out = check(tmp_path, capsys, *_v0_pair("vllm/vllm-openai:v0.7.3", extra=("--max-model-len", "8192")))
    assert code == 0 and not rules(out, "error"), out
    assert "cli-flag-unknown" in json.dumps(out["results"]), out


def test_a_connector_no_release_refuses_keeps_the_plain_reason(tmp_path, capsys):
    # LMCacheConnectorV1 with flags every release has: nothing read refuses it, its transfer is LMCache's own code
    code, out = check(tmp_path, capsys, *_v0_pair("lmcache/vllm-openai:latest", "LMCacheConnectorV1",
                                                            v0_fields=False))
    assert code == 3 and NOT_DESCRIBED in _not_checked(out), out


def test_a_known_read_release_is_still_judged(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_v0_pair("vllm/vllm-openai:v0.9.2"))
    assert code == 1 and "kv-connector-v0-only" in rules(out, "error"), out


# --- 4. 0.10.0 still registers the V0 Mooncake names: not "unregistered" there ------------------------------------


@pytest.mark.parametrize("connector", ["MooncakeConnector", "MooncakeStoreConnector"])
def test_v0_mooncake_names_are_registered_on_0_10_0(tmp_path, capsys, connector):
    v0 = [dict(d) for d in _v0_pair("vllm/vllm-openai:v0.10.0", connector)]
    for d in v0:
        d["spec"]["template"]["spec"]["containers"][0]["env"] = [
            {"name": "VLLM_USE_V1", "value": "0"}, {"name": "MOONCAKE_CONFIG_PATH", "value": "/etc/mooncake.json"}]
    code, out = check(tmp_path, capsys, *v0)
    assert code == 0 and not rules(out, "error"), out  # the V0 engine builds the registered V0 class
    code, out = check(tmp_path, capsys, *_v0_pair("vllm/vllm-openai:v0.10.0", connector))
    assert code == 1 and rules(out, "error") == {"kv-connector-v0-only"}, out  # the V1 engine's assert, not the lookup
    code, out = check(tmp_path, capsys, *_v0_pair("vllm/vllm-openai:v0.10.1.1", connector))
    assert code == 1 and "kv-connector-unregistered" in rules(out, "error"), out  # gone from the V1-only registry


# --- 5. NIXL 0.10.0 as a known-bad row (set 3: vllm#35799, pinned out by vllm#35495) ------------------------------


def _nixl_pair(image, install, kv=None):
    kv = kv or {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    docs = []
    for role in ("prefill", "decode"):
        c = {"name": "vllm", "image": image, "command": ["bash", "-c"],
             "args": [f"{install} && exec vllm serve Qwen/Qwen3-8B --kv-transfer-config '{json.dumps(kv)}'"],
             "env": [POD_IP, {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": "5600"}],
             "resources": {"limits": {"nvidia.com/gpu": "1", "rdma/ib": "1"}}}
        docs.append(workload(f"q-{role}", role, c, app="q"))
    return docs


@pytest.mark.parametrize(("image", "install", "warned"), [
    ("vllm/vllm-openai:v0.16.0", "pip install nixl==0.10.0", True),
    # the CUDA 12 wheel spelled alone, another release whose requirements had no upper bound
    ("vllm/vllm-openai:v0.14.0", "pip install nixl-cu12==0.10.0", True),
    # a release that pins it out, overridden in the command
    ("vllm/vllm-openai:v0.18.0", "uv pip install --system nixl[cu12]==0.10.0", True),
    ("vllm/vllm-openai:v0.16.0", "pip install nixl==0.9.0", False),
    ("vllm/vllm-openai:v0.16.0", "pip install nixl==0.10.1", False),
])
def test_nixl_0_10_0_is_a_known_bad_release(tmp_path, capsys, image, install, warned):
    code, out = check(tmp_path, capsys, *_nixl_pair(image, install))
    assert code == 0 and ("nixl-version-known-bad" in rules(out, "warning")) == warned, out


def test_nixl_0_10_0_without_ucx_is_not_that_fault(tmp_path, capsys):
    kv = {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"backends": ["LIBFABRIC"]}}
    code, out = check(tmp_path, capsys, *_nixl_pair("vllm/vllm-openai:v0.16.0", "pip install nixl==0.10.0", kv))
    assert "nixl-version-known-bad" not in rules(out), out


# --- 6. a known-bad vLLM row that needs UniformTypeKVCacheSpecs: certain for a sparse MLA (DSA) model --------------

_STACK = {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [
    {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
    {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
     "kv_connector_extra_config": {"cpu_bytes_to_use": 64000000000}}]}}


def _offload_pair(model, image, kv=_STACK):
    docs = []
    for role in ("prefill", "decode"):
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": [model, "--tensor-parallel-size", "8", "--kv-transfer-config", json.dumps(kv)],
             "env": [POD_IP], "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
             "resources": {"limits": {"nvidia.com/gpu": "8", "rdma/ib": "1"}}}
        docs.append(workload(f"o-{role}", role, c, app="o"))
    return docs


def _severity_of(out, rule):
    return {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == rule}


@pytest.mark.parametrize(("model", "image", "expected"), [
    ("zai-org/GLM-5-FP8", "vllm/vllm-openai:v0.19.0", {"error"}),
    ("deepseek-ai/DeepSeek-V3.2", "vllm/vllm-openai:v0.19.1", {"error"}),
    # a dense model: one spec for every layer (is_kv_cache_spec_uniform), not UniformTypeKVCacheSpecs as far as known
    ("meta-llama/Llama-3.3-70B-Instruct", "vllm/vllm-openai:v0.19.0", {"warning"}),
    # MLA without the DSA indexer: every layer the same MLA spec
    ("deepseek-ai/DeepSeek-V3", "vllm/vllm-openai:v0.19.0", {"warning"}),
    # fixed by vllm#39617 in 0.20.0
    ("deepseek-ai/DeepSeek-V3.2", "vllm/vllm-openai:v0.20.0", set()),
])
def test_offloading_beside_nixl_on_0_19_is_certain_for_a_dsa_model(tmp_path, capsys, model, image, expected):
    code, out = check(tmp_path, capsys, *_offload_pair(model, image))
    assert _severity_of(out, "vllm-version-known-bad") == expected, out


def test_a_dsa_model_without_the_offloading_connector_is_not_that_fault(tmp_path, capsys):
    kv = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    code, out = check(tmp_path, capsys, *_offload_pair("deepseek-ai/DeepSeek-V3.2", "vllm/vllm-openai:v0.19.0", kv))
    assert not _severity_of(out, "vllm-version-known-bad"), out


def test_what_decides_a_release_read_pair_is_in_its_reason(tmp_path, capsys):
    # 0.9.2, a local model whose V1 support is not known: the V1 engine's assert fails it unless the oracle picks V0
    code, out = check(tmp_path, capsys, *_v0_pair("vllm/vllm-openai:v0.9.2", model="/models/local-checkpoint"))
    assert code == 3 and not rules(out), out
    why = _not_checked(out)
    assert "what decides it: kv-connector-v0-only" in why and "the model's V1 support is not known here" in why, why
    # a model the V1 oracle takes: the same rule is an error, the pair refused
    code, out = check(tmp_path, capsys, *_v0_pair("vllm/vllm-openai:v0.9.2"))
    assert code == 1 and "kv-connector-v0-only" in rules(out, "error"), out
