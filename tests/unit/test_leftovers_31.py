"""Kinds left over from rules round 30 (leftovers 31), each read in vLLM's code per release, with variants that fail
without the fix and negative controls.

- ``hetero-tp-kv-layout`` on a written ``VLLM_KV_CACHE_LAYOUT``: vLLM's head-splitting guard (nixl add_remote_agent,
  0.20.0-0.34.0) skips the handshaking engine's ``enable_permute_local_kv`` and a replicated remote KV cache (the
  remote TP above the model's KV heads), for a written layout as for a TurboQuant-forced one; the remote is the
  prefill for pull, so a decode-side replication does not exempt a pull pair.
- ``kv-layout-dtype-unsupported``: from 0.34.0 a turboquant_* KV cache with a written VLLM_KV_CACHE_LAYOUT other than
  LBNHC stops the engine at layout resolution ("does not satisfy every supported set").
"""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

LAYOUT = "hetero-tp-kv-layout"
DTYPE_LAYOUT = "kv-layout-dtype-unsupported"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"  # 8 KV heads
GEMMA = "google/gemma-2-2b-it"              # 4 KV heads


def _kv(role, connector="NixlConnector", **extra):
    return json.dumps({"kv_connector": connector, "kv_role": role, **extra})


def _pair(model, image, tps, layout=None, dtype=None, kv_d=None, kv_p=None, connector=True):
    docs = []
    env = [{"name": "VLLM_KV_CACHE_LAYOUT", "value": layout}] if layout else []
    for role, kv, n in (("prefill", kv_p or _kv("kv_producer"), tps[0]), ("decode", kv_d or _kv("kv_consumer"), tps[1])):
        args = [model, "--tensor-parallel-size", str(n)]
        if dtype:
            args += ["--kv-cache-dtype", dtype]
        if connector:
            args += ["--kv-transfer-config", kv]
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"], "args": args, "env": [POD_IP, *env],
             "resources": {"limits": {"nvidia.com/gpu": str(n)}},
             "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}
        docs.append(workload(f"m-{role}", role, c, app="m"))
    return docs


# --- a written token-major layout with heterogeneous TP: the guard's exemptions ------------------------------------

@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.22.0", "vllm/vllm-openai:v0.26.0", "vllm/vllm-openai:v0.34.0"])
def test_written_nhd_with_heterogeneous_tp_is_refused(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, *_pair(LLAMA, image, (1, 2), layout="NHD"))
    assert code == 1 and LAYOUT in rules(out, "error"), image


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.22.0", "vllm/vllm-openai:v0.26.0", "vllm/vllm-openai:v0.34.0"])
def test_written_nhd_with_the_decode_permuting_is_not_refused(tmp_path, capsys, image):
    kv_d = _kv("kv_consumer", enable_permute_local_kv=True)
    _, out = check(tmp_path, capsys, *_pair(LLAMA, image, (1, 2), layout="NHD", kv_d=kv_d))
    assert LAYOUT not in rules(out), image


@pytest.mark.parametrize(("model", "layout"), [(GEMMA, "NHD"), (GEMMA, "LBNHC")])
def test_written_token_major_layout_with_a_replicated_prefill_cache_is_not_refused(tmp_path, capsys, model, layout):
    # prefill TP 8 > 4 KV heads: the decode's handshake sees a replicated remote cache and splits no heads
    _, out = check(tmp_path, capsys, *_pair(model, "vllm/vllm-openai:v0.30.0", (8, 4), layout=layout))
    assert LAYOUT not in rules(out)


def test_a_replicated_decode_cache_does_not_exempt_a_pull_pair(tmp_path, capsys):
    # decode TP 8 > 4 KV heads, prefill TP 2: the pull decode's remote (the prefill) is split by heads
    code, out = check(tmp_path, capsys, *_pair(GEMMA, "vllm/vllm-openai:v0.30.0", (2, 8), layout="NHD"))
    assert code == 1 and LAYOUT in rules(out, "error")
    _, out = check(tmp_path, capsys, *_pair(GEMMA, "vllm/vllm-openai:v0.34.0", (2, 8), dtype="turboquant_k8v4"))
    assert LAYOUT in rules(out, "error")


def test_written_nhd_for_a_model_of_unknown_heads_is_a_warning(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_pair("acme/private-model-7b", "vllm/vllm-openai:v0.26.0", (1, 2), layout="NHD"))
    assert LAYOUT in rules(out, "warning") and LAYOUT not in rules(out, "error")


# --- a TurboQuant KV cache refuses a written layout other than LBNHC from 0.34.0 -------------------------------------

@pytest.mark.parametrize(("layout", "tps", "connector"), [
    ("LBHNC", (1, 1), True), ("HND", (2, 2), True), ("LBHNC", (1, 1), False), ("BLHNC", (1, 1), True),
])
def test_turboquant_with_another_written_layout_on_034_is_refused(tmp_path, capsys, layout, tps, connector):
    docs = _pair(LLAMA, "vllm/vllm-openai:v0.34.0", tps, layout=layout, dtype="turboquant_k8v4", connector=connector)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and DTYPE_LAYOUT in rules(out, "error"), (layout, tps, connector)


@pytest.mark.parametrize(("image", "layout", "dtype"), [
    ("vllm/vllm-openai:v0.33.0", "LBHNC", "turboquant_k8v4"),  # the 0.33 backend declares no layout
    ("vllm/vllm-openai:v0.34.0", "LBNHC", "turboquant_k8v4"),  # the layout it supports
    ("vllm/vllm-openai:v0.34.0", "NHD", "turboquant_k8v4"),    # its legacy alias
    ("vllm/vllm-openai:v0.34.0", None, "turboquant_k8v4"),     # no written layout: NIXL's preference is dropped
    ("vllm/vllm-openai:v0.34.0", "LBHNC", "fp8"),
])
def test_turboquant_layout_controls_say_nothing(tmp_path, capsys, image, layout, dtype):
    _, out = check(tmp_path, capsys, *_pair(LLAMA, image, (1, 1), layout=layout, dtype=dtype))
    assert DTYPE_LAYOUT not in rules(out), (image, layout, dtype)


# --- hybrid SSM decode with async scheduling before vLLM 0.24.0 (vllm#45357) -----------------------------------------

KNOWN_BAD = "vllm-version-known-bad"
NEMOTRON = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8"  # hybrid Mamba2


def _hybrid(image, model=NEMOTRON, args_d=(), args_p=()):
    docs = []
    for role, kv, args in (("prefill", _kv("kv_producer"), args_p), ("decode", _kv("kv_consumer"), args_d)):
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": [model, "--trust-remote-code", *args, "--kv-transfer-config", kv],
             "env": [POD_IP, {"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}],
             "resources": {"limits": {"nvidia.com/gpu": "1"}},
             "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}
        docs.append(workload(f"m-{role}", role, c, app="m"))
    return docs


def _known_bad(out, fragment="conv/SSM state"):
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == KNOWN_BAD and fragment in f["message"]]


@pytest.mark.parametrize(("image", "args_d"), [
    ("vllm/vllm-openai:v0.20.2", ()),                      # async scheduling on by default
    ("vllm/vllm-openai:v0.22.0", ()),
    ("vllm/vllm-openai:v0.23.0", ("--async-scheduling",)),
    ("vllm/vllm-openai:v0.23.0", ("--speculative-config", json.dumps({"method": "mtp", "num_speculative_tokens": 1}))),
])
def test_hybrid_decode_with_async_scheduling_before_024_is_a_warning(tmp_path, capsys, image, args_d):
    args_p = tuple(a for a in args_d if a != "--async-scheduling")
    _, out = check(tmp_path, capsys, *_hybrid(image, args_d=args_d, args_p=args_p))
    found = _known_bad(out)
    assert len(found) == 1 and found[0]["severity"] == "warning" and "decode" in found[0]["message"], image
    assert "--no-async-scheduling" in found[0]["fix"]


@pytest.mark.parametrize(("image", "model", "args_d"), [
    ("vllm/vllm-openai:v0.24.0", NEMOTRON, ()),                          # the deferred free (vllm#45357)
    ("vllm/vllm-openai:v0.26.0", NEMOTRON, ()),
    ("vllm/vllm-openai:v0.22.0", NEMOTRON, ("--no-async-scheduling",)),  # the workaround
    ("vllm/vllm-openai:v0.22.0", NEMOTRON, ("--speculative-config",      # ngram turns the default off
                                            json.dumps({"method": "ngram", "num_speculative_tokens": 2,
                                                        "prompt_lookup_max": 3}))),
    ("vllm/vllm-openai:v0.22.0", "Qwen/Qwen3-8B", ()),                   # attention only appends one token's KV
])
def test_hybrid_async_scheduling_controls_say_nothing(tmp_path, capsys, image, model, args_d):
    _, out = check(tmp_path, capsys, *_hybrid(image, model=model, args_d=args_d))
    assert not _known_bad(out), (image, model, args_d)


def _nemotron_spec(image, extra_args=()):
    from pdd_operator.api.spec import PDDeploymentSpec
    return PDDeploymentSpec.model_validate({
        "model": {"name": NEMOTRON, "hfArchitecture": "NemotronHForCausalLM", "trustRemoteCode": True},
        "engine": {"image": image}, "prefill": {"replicas": 1},
        "decode": {"replicas": 1, "extraArgs": list(extra_args)}})


@pytest.mark.parametrize(("image", "extra", "synced"), [
    ("ghcr.io/pdd-operator/vllm-nixl:v0.20.2", (), True),
    ("vllm/vllm-openai:v0.23.0", (), True),
    ("vllm/vllm-openai:v0.24.0", (), False),
    ("vllm/vllm-openai:v0.23.0", ("--async-scheduling",), False),  # the user's choice stands (and is warned)
])
def test_the_operator_turns_async_scheduling_off_on_a_hybrid_decode_before_024(image, extra, synced):
    from pdd_operator.compat import evaluate
    from pdd_operator.render.engine import vllm_args
    spec = _nemotron_spec(image, extra)
    assert ("--no-async-scheduling" in vllm_args(spec, "decode")) is synced
    assert "--no-async-scheduling" not in vllm_args(spec, "prefill")
    warned = [f for f in evaluate(spec).findings if f.rule == KNOWN_BAD and "conv/SSM state" in f.message]
    assert bool(warned) is (not synced and image.endswith("v0.23.0"))


# --- rdma-device-visibility: the network attachments real platforms write --------------------------------------------

VISIBILITY = "rdma-device-visibility"
_VOLC = '[{"cniConf": {"name": "rdma"}}]'
_GKE = '[{"interfaceName":"eth0","network":"default"},{"interfaceName":"eth1","network":"rdma-0"}]'


def _attached(resource, annotations, kind="Deployment"):
    docs = []
    for role, kv in (("prefill", _kv("kv_producer")), ("decode", _kv("kv_consumer"))):
        c = {"name": "vllm", "image": "vllm/vllm-openai:v0.26.0", "command": ["vllm", "serve"],
             "args": [LLAMA, "--kv-transfer-config", kv], "env": [POD_IP],
             "resources": {"limits": {"nvidia.com/gpu": "1", resource: "1"}},
             "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}
        doc = workload(f"m-{role}", role, c, app="m", kind=kind)
        doc["spec"]["template"]["metadata"]["annotations"] = dict(annotations)
        docs.append(doc)
    return docs


@pytest.mark.parametrize(("resource", "annotations"), [
    ("vke.volcengine.com/rdma", {"k8s.volcengine.com/pod-networks": _VOLC}),         # AIBrix on Volcano Engine
    ("nvidia.com/sriov_rdma_vf", {"networking.gke.io/default-interface": "eth0",    # GKE multi-network
                                  "networking.gke.io/interfaces": _GKE}),
    ("mellanox.com/cx5_sriov_switchdev", {"v1.multus-cni.io/default-network": "sriov-net"}),
    ("nvidia.com/sriov_rdma_vf", {"k8s.v1.cni.cncf.io/networks": '[{"name": "rdma-net"}]'}),  # Multus JSON form
])
def test_a_platform_network_attachment_silences_the_visibility_warning(tmp_path, capsys, resource, annotations):
    _, out = check(tmp_path, capsys, *_attached(resource, annotations))
    assert VISIBILITY not in rules(out), annotations


@pytest.mark.parametrize("annotations", [{}, {"networking.gke.io/default-interface": "eth0"},
                                         {"k8s.volcengine.com/pod-networks": ""}])
def test_without_an_attachment_the_visibility_warning_stays(tmp_path, capsys, annotations):
    _, out = check(tmp_path, capsys, *_attached("vke.volcengine.com/rdma", annotations))
    assert VISIBILITY in rules(out, "warning"), annotations


# --- a MultiConnector with two connectors that return the P/D handshake params ----------------------------------------

CLASH = "multi-connector-params-clash"


def _multi_pair(image, *children):
    def multi(role):
        return json.dumps({"kv_connector": "MultiConnector", "kv_role": role, "kv_connector_extra_config": {
            "connectors": [{"kv_connector": c, "kv_role": role} for c in children]}})
    return _pair(LLAMA, image, (1, 1), kv_p=multi("kv_producer"), kv_d=multi("kv_consumer"))


@pytest.mark.parametrize(("image", "children", "said"), [
    ("vllm/vllm-openai:v0.25.0", ("NixlConnector", "NixlConnector"), "Key clash"),
    ("vllm/vllm-openai:v0.34.0", ("NixlConnector", "MoRIIOConnector"), "Key clash"),
    ("vllm/vllm-openai:v0.28.0", ("NixlPullConnector", "NixlPushConnector"), "Key clash"),
    ("vllm/vllm-openai:v0.22.0", ("NixlConnector", "NixlConnector"), "Only one connector"),
])
def test_two_handshake_params_producers_in_a_multiconnector_are_refused(tmp_path, capsys, image, children, said):
    code, out = check(tmp_path, capsys, *_multi_pair(image, *children))
    assert code == 1 and CLASH in rules(out, "error"), (image, children)
    assert said in _messages(out, CLASH)[0]


@pytest.mark.parametrize(("image", "children"), [
    ("vllm/vllm-openai:v0.25.0", ("NixlConnector", "MooncakeConnector")),   # Mooncake returns no params
    ("vllm/vllm-openai:v0.34.0", ("NixlConnector", "OffloadingConnector")),
    ("vllm/vllm-openai:v0.34.0", ("NixlConnector",)),
])
def test_one_handshake_params_producer_is_not_refused_for_a_clash(tmp_path, capsys, image, children):
    _, out = check(tmp_path, capsys, *_multi_pair(image, *children))
    assert CLASH not in rules(out), children


def _messages(out, rule):
    return [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule]
