"""Variants of what the eighty-second public-report set (tests/unit/data/public_reports_82) taught, with negative
controls.

- OME (sgl-project/ome ``ome.io/v1beta1``) splits P/D by structure: a (Cluster)ServingRuntime's ``engineConfig``
  is the prefill and ``decoderConfig`` the decode (an InferenceService's ``engine``/``decoder``), each component's
  main container its ``runner``. Those runners are read as the engines of those roles: vLLM ones are judged, SGLang
  ones are "not checked" (never "nothing to check"), and a runtime without a decoder is no P/D deployment.
- An OME runtime hands its engines the model as ``$(MODEL_PATH)`` but names the model architecture it serves
  (``supportedModelFormats[].modelArchitecture``): where that is one architecture, it is the model's.
- vLLM 0.9.0's NIXL connector, having no block-length assert, reads the prefill's blocks with the decode's own
  block length: a KV dtype of another width or another block size corrupts the decode's KV there (errors, no longer
  warnings).
- Two pods asking the scheduler for one host port (``hostNetwork`` and one ``containerPort``) never share a node,
  so their side-channel ports cannot collide (:func:`pdd_operator.compat.placement.may_share_node`).
"""

from __future__ import annotations

import copy
import json

import pytest

from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def _runner(image, model="$(MODEL_PATH)", tp=1, extra=(), env=(POD_IP,), command=None, port=8080):
    return {"name": "ome-container", "image": image,
            "command": command or ["python3", "-m", "vllm.entrypoints.openai.api_server", "--port", str(port),
                                   "--model", model, "--tensor-parallel-size", str(tp), "--kv-transfer-config", KV,
                                   *extra],
            "env": list(env), "ports": [{"containerPort": port, "name": "http1", "protocol": "TCP"}],
            "resources": {"limits": {"nvidia.com/gpu": tp}}}


def _ome(prefill, decode, kind="ClusterServingRuntime", arch="LlamaForCausalLM", host_network=True, keys=None):
    p_key, d_key = keys or (("engine", "decoder") if kind == "InferenceService" else ("engineConfig", "decoderConfig"))
    spec = {p_key: {"hostNetwork": host_network, "runner": prefill}}
    if decode is not None:
        spec[d_key] = {"hostNetwork": host_network, "runner": decode}
    if arch and kind != "InferenceService":
        spec["supportedModelFormats"] = [{"modelFormat": {"name": "safetensors"}, "modelArchitecture": arch}]
    return {"apiVersion": "ome.io/v1beta1", "kind": kind, "metadata": {"name": "rt"}, "spec": spec}


def _messages(out, rule):
    return [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule]


# --- OME runners are the engines of their components' roles ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["ClusterServingRuntime", "ServingRuntime", "InferenceService"])
def test_ome_vllm_runners_are_judged_as_the_pair(tmp_path, capsys, kind):
    img = "vllm/vllm-openai:v0.20.1"
    code, out = check(tmp_path, capsys, _ome(_runner(img, "Qwen/Qwen3-8B"), _runner(img, "Qwen/Qwen3-8B"), kind))
    assert code == 0 and len(out["results"]) == 1 and not out.get("notChecked"), out
    assert "spec.engine" in out["results"][0]["object"] and "spec.decoder" in out["results"][0]["object"]


def test_ome_roles_come_from_the_structure_not_the_flags(tmp_path, capsys):
    """Both runners kv_both and unlabelled: engineConfig is the prefill, decoderConfig the decode, so a side-channel
    host missing on the engineConfig runner is the prefill's fault (its address is what the decode dials)."""
    img = "vllm/vllm-openai:v0.20.1"
    code, out = check(tmp_path, capsys, _ome(_runner(img, "Qwen/Qwen3-8B", env=()), _runner(img, "Qwen/Qwen3-8B")))
    assert code == 1 and "side-channel-host-not-routable" in rules(out, "error")
    code, out = check(tmp_path, capsys, _ome(_runner(img, "Qwen/Qwen3-8B"), _runner(img, "Qwen/Qwen3-8B", env=())))
    assert "side-channel-host-not-routable" not in rules(out, "error")


def test_ome_vllm_runner_on_another_release_is_judged_by_it(tmp_path, capsys):
    p = _runner("vllm/vllm-openai:v0.20.1", "Qwen/Qwen3-8B")
    d = _runner("vllm/vllm-openai:v0.20.1", "Qwen/Qwen3-8B", extra=("--kv-cache-dtype", "fp8"))
    code, out = check(tmp_path, capsys, _ome(p, d, "ServingRuntime"))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error")


@pytest.mark.parametrize("multinode", [False, True])
def test_ome_sglang_pd_runtime_is_not_checked_never_nothing_to_check(tmp_path, capsys, multinode):
    def sglang(mode):
        return {"name": "ome-container", "image": "docker.io/lmsysorg/sglang:v0.5.5.post3-cu129-amd64",
                "command": ["python3", "-m", "sglang.launch_server", "--model-path", "$(MODEL_PATH)", "--tp-size", "4",
                            "--disaggregation-mode", mode]}
    doc = _ome(sglang("prefill"), sglang("decode"), arch="DeepseekV3ForCausalLM")
    if multinode:  # leader/worker components, as OME's DeepSeek and Kimi P/D runtimes
        for key in ("engineConfig", "decoderConfig"):
            runner = doc["spec"][key].pop("runner")
            doc["spec"][key].update({"leader": {"runner": runner}, "worker": {"size": 1, "runner": copy.deepcopy(runner)}})
    code, out = check(tmp_path, capsys, doc)
    assert code == 3 and out["notChecked"] and all("SGLang" in n["reason"] for n in out["notChecked"]), out


def test_ome_runtime_without_a_decoder_is_no_pd_deployment(tmp_path, capsys):
    runner = _runner("vllm/vllm-openai:v0.20.1", "Qwen/Qwen3-8B")
    runner["command"] = [x for x in runner["command"] if x not in ("--kv-transfer-config", KV)]
    code, _ = check(tmp_path, capsys, _ome(runner, None))
    assert code == 4


def test_a_runner_outside_ome_is_not_a_container(tmp_path, capsys):
    """``runner`` is OME's; another group's object of the same kind name holds no engine there."""
    img = "vllm/vllm-openai:v0.20.1"
    doc = _ome(_runner(img, "Qwen/Qwen3-8B"), _runner(img, "Qwen/Qwen3-8B"))
    doc["apiVersion"], doc["kind"] = "example.com/v1", "Runtime"
    code, out = check(tmp_path, capsys, doc)
    assert code != 0 or not out["results"]


# --- the architecture an OME runtime declares ------------------------------------------------------------------------


@pytest.mark.parametrize(("arch", "image", "expected"), [
    ("LlamaForCausalLM", "vllm/vllm-openai:v0.10.2", "error"),        # plain attention: default 16 against 32
    ("Qwen3ForCausalLM", "vllm/vllm-openai:v0.9.0", "error"),
    ("LlamaForCausalLM", "vllm/vllm-openai:v0.11.1", None),           # block_size_ratio maps 16 onto 32
    (None, "vllm/vllm-openai:v0.10.2", "warning"),                   # no architecture: the default is not pinned
])
def test_declared_architecture_pins_the_default_block_size(tmp_path, capsys, arch, image, expected):
    p = _runner(image, extra=())
    d = _runner(image, extra=("--block-size", "32"))
    code, out = check(tmp_path, capsys, _ome(p, d, arch=arch))
    hetero = {"block-size-hetero-unsupported", "block-size-direction"}
    if expected == "error":
        assert code == 1 and hetero & rules(out, "error"), out
    elif expected == "warning":
        assert not hetero & rules(out, "error") and "block-size-partial" in rules(out, "warning")
    else:
        assert not hetero & rules(out)
    assert ("architecture-unknown" in rules(out)) == (arch is None)


def test_formats_of_several_architectures_declare_none(tmp_path, capsys):
    img = "vllm/vllm-openai:v0.10.2"
    doc = _ome(_runner(img), _runner(img, extra=("--block-size", "32")))
    doc["spec"]["supportedModelFormats"].append({"modelFormat": {"name": "safetensors"},
                                                 "modelArchitecture": "DeepseekV3ForCausalLM"})
    code, out = check(tmp_path, capsys, doc)
    assert "architecture-unknown" in rules(out) and "block-size-hetero-unsupported" not in rules(out, "error")


# --- vLLM 0.9.0: no block-length assert ---------------------------------------------------------------------


def _deployments(image, p_args=(), d_args=(), p_tp=1, d_tp=1, model="meta-llama/Llama-3.1-8B-Instruct", pod=None):
    docs = []
    for role, tp, extra in (("prefill", p_tp, p_args), ("decode", d_tp, d_args)):
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": [model, "--tensor-parallel-size", str(tp), "--kv-transfer-config", KV, *extra],
             "env": [POD_IP], "resources": {"limits": {"nvidia.com/gpu": str(tp)}}}
        docs.append(workload(f"m-{role}", role, c, app="m", pod=pod))
    return docs


@pytest.mark.parametrize(("image", "p_dtype", "d_dtype", "severity"), [
    ("vllm/vllm-openai:v0.9.0", "auto", "fp8", "error"),        # 2 against 1 byte: reads at the wrong offsets
    ("vllm/vllm-openai:v0.9.0", "fp8_e4m3", "auto", "error"),
    ("vllm/vllm-openai:v0.9.0", "fp8", "fp8_e4m3", "warning"),   # one width: may lay out the same KV
    ("vllm/vllm-openai:v0.9.1", "auto", "fp8", "error"),         # the block-length assert
])
def test_kv_dtype_of_another_width_on_0_9_0(tmp_path, capsys, image, p_dtype, d_dtype, severity):
    code, out = check(tmp_path, capsys, *_deployments(image, ("--kv-cache-dtype", p_dtype), ("--kv-cache-dtype", d_dtype)))
    assert "kv-cache-dtype-mismatch" in rules(out, severity) and (code == 1) == (severity == "error")
    if image.endswith("0.9.0") and severity == "error":
        assert "asserts none" in _messages(out, "kv-cache-dtype-mismatch")[0]


def test_block_sizes_on_0_9_0_are_read_wrong_not_asserted(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_deployments("vllm/vllm-openai:v0.9.0", ("--block-size", "16"),
                                                      ("--block-size", "32")))
    assert code == 1 and "exchanges no block size" in _messages(out, "block-size-hetero-unsupported")[0]
    code, out = check(tmp_path, capsys, *_deployments("vllm/vllm-openai:v0.10.2", ("--block-size", "16"),
                                                      ("--block-size", "32")))
    assert code == 1 and "asserts they are equal" in _messages(out, "block-size-hetero-unsupported")[0]


# --- a shared host port keeps hostNetwork pods apart ------------------------------------------------------------------


@pytest.mark.parametrize(("p_port", "d_port", "warned"), [(8000, 8000, False), (8000, 8001, True)])
def test_hostnetwork_pods_sharing_a_host_port_never_share_a_node(tmp_path, capsys, p_port, d_port, warned):
    docs = _deployments("vllm/vllm-openai:v0.20.1", pod={"hostNetwork": True})
    for doc, port in zip(docs, (p_port, d_port), strict=True):
        c = doc["spec"]["template"]["spec"]["containers"][0]
        c["args"] += ["--port", str(port)]
        c["ports"] = [{"containerPort": port}]
    code, out = check(tmp_path, capsys, *docs)
    assert ("side-channel-port-conflict" in rules(out, "warning")) == warned
    assert "side-channel-port-conflict" not in rules(out, "error")


def test_ome_runner_ports_keep_its_hostnetwork_components_apart(tmp_path, capsys):
    img = "vllm/vllm-openai:v0.20.1"
    code, out = check(tmp_path, capsys, _ome(_runner(img, "Qwen/Qwen3-8B"), _runner(img, "Qwen/Qwen3-8B")))
    assert "side-channel-port-conflict" not in rules(out)
    code, out = check(tmp_path, capsys, _ome(_runner(img, "Qwen/Qwen3-8B"), _runner(img, "Qwen/Qwen3-8B", port=8081)))
    assert "side-channel-port-conflict" in rules(out, "warning")
