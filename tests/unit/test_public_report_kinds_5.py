"""Variants of the kinds of fault the fifth public-report set (tests/unit/data/public_reports_5) found missed,
each with negative controls: block sizes before vLLM 0.11.1, P/D custom resources whose engines their controller
builds (not checked) and Kthena ModelBooster workers (read from their config maps), vLLM platform plugins (Neuron,
Ascend), and a vllm-gaudi prefill that converts its own KV layout."""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import check, container, rules, workload


def _kv(role="kv_both", **extra):
    return json.dumps({"kv_connector": "NixlConnector", "kv_role": role, **extra})


def _pair(image="vllm/vllm-openai:v0.11.0", p_args=(), d_args=(), p_env=(), d_env=(), p_kv=None, d_kv=None,
          p_resources=None, model="Qwen/Qwen3-0.6B"):
    """Prefill and decode Deployments of one model through NixlConnector (``*_kv``: their --kv-transfer-config)."""
    def role(name, args, env, kv, resources):
        c = container([model, *args, "--kv-transfer-config", kv or _kv()], image=image, env=list(env))
        if resources is not None:
            c["resources"] = {"limits": resources}
        return workload(f"qwen-{name}", name, c)
    return [role("prefill", p_args, p_env, p_kv, p_resources), role("decode", d_args, d_env, d_kv, None)]


# --- block-size-hetero-unsupported: different block sizes only from vLLM 0.11.1 (vllm#26759) ----------------------


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.9.2", "vllm/vllm-openai:v0.10.2", "vllm/vllm-openai:v0.11.0"])
@pytest.mark.parametrize("blocks", [(16, 64), (64, 16), (16, 32)])
def test_different_block_sizes_before_0_11_1_are_refused(tmp_path, capsys, image, blocks):
    pair = _pair(image, p_args=["--block-size", str(blocks[0])], d_args=["--block-size", str(blocks[1])])
    code, out = check(tmp_path, capsys, *pair)
    assert code == 1 and "block-size-hetero-unsupported" in rules(out, "error"), out


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.11.1", "vllm/vllm-openai:v0.12.0", "vllm/vllm-openai:v0.20.0"])
def test_a_decode_block_a_multiple_of_prefills_is_accepted_from_0_11_1(tmp_path, capsys, image):
    pair = _pair(image, p_args=["--block-size", "16"], d_args=["--block-size", "64"])
    code, out = check(tmp_path, capsys, *pair)
    assert code == 0 and not rules(out, "error"), out


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.10.2", "vllm/vllm-openai:v0.11.0"])
def test_equal_block_sizes_before_0_11_1_get_no_block_size_finding(tmp_path, capsys, image):
    pair = _pair(image, p_args=["--block-size", "32"], d_args=["--block-size", "32"])
    code, out = check(tmp_path, capsys, *pair)
    assert not {r for r in rules(out) if r.startswith("block-size")}, out


# --- custom resources whose controller builds the engines: not checked, never passed --------------------


def _rayservice(kv=True):
    """A RayService of a Ray Serve LLM P/D application (``kv``) or, without KV transfer, of the aggregated builder:
    a P/D application is P/D even where it names no connector (set 72, :mod:`pdd_operator.compat.ray_serve`)."""
    engine = {"tensor_parallel_size": 1}
    config = {"model_loading_config": {"model_id": "meta-llama/Llama-3.1-8B-Instruct"}, "engine_kwargs": engine}
    if kv:
        engine["kv_transfer_config"] = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
        app = {"name": "pd", "import_path": "ray.serve.llm:build_pd_openai_app",
               "args": {role: config for role in ("prefill_config", "decode_config")}}
    else:
        app = {"name": "llm", "import_path": "ray.serve.llm:build_openai_app", "args": {"llm_configs": [config]}}
    serve = {"applications": [app]}
    head = {"template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray-llm:2.52.0-py311-cu128"}]}}}
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "llama-pd"},
            "spec": {"serveConfigV2": json.dumps(serve), "rayClusterConfig": {"headGroupSpec": head}}}


def _modelbooster(connector="NixlConnector", backend_type="vLLMDisaggregated", env=(), image="vllm/vllm-openai:v0.20.0",
                  p_config=None, d_config=None):
    """A Kthena ModelBooster: ``*_config`` are the prefill/decode workers' config maps (Kthena's vLLM flags)."""
    def worker(kind, config):
        kv = json.dumps({"kv_connector": connector, "kv_role": "kv_both"})
        return {"type": kind, "image": image, "replicas": 1, "resources": {"limits": {"nvidia.com/gpu": "1"}},
                "config": {"tensor-parallel-size": 1, "kv-transfer-config": kv, **(config or {})}}
    return {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelBooster", "metadata": {"name": "qwen-pd"},
            "spec": {"backend": {"type": backend_type, "modelURI": "hf://Qwen/Qwen3-0.6B", "env": list(env),
                                 "workers": [worker("prefill", p_config), worker("decode", d_config)]}}}


@pytest.mark.parametrize("doc", [_modelbooster(backend_type="SGLangDisaggregated")], ids=["ModelBooster-other-backend"])
def test_pd_custom_resources_without_engine_containers_are_not_checked(tmp_path, capsys, doc):
    code, out = check(tmp_path, capsys, doc)
    assert code == 3 and len(out["notChecked"]) == 1 and not out["results"], out
    assert out["notChecked"][0]["object"] == f"{doc['kind']}/{doc['metadata']['name']}", out


def test_a_rayservice_pd_application_is_judged_from_its_llmconfigs(tmp_path, capsys):
    """Since issue 9's fixR reader (:func:`pdd_operator.compat.ray_serve.ray_serve_scan`) the LLMConfigs of a
    RayService's P/D application are read as the engines Ray builds (ray-llm 2.52.0 maps to no vLLM in the table: an
    unknown release); an LLMConfig given as a file path keeps the application "not checked"."""
    code, out = check(tmp_path, capsys, _rayservice())
    assert code == 0 and not out["notChecked"] and out["results"][0]["vllmVersion"] == "unknown", out
    doc = _rayservice()
    serve = json.loads(doc["spec"]["serveConfigV2"])
    serve["applications"][0]["args"]["decode_config"] = "./configs/llama_decode.yaml"
    doc["spec"]["serveConfigV2"] = json.dumps(serve)
    code, out = check(tmp_path, capsys, doc)
    assert code == 3 and not out["results"] and out["notChecked"][0]["object"] == "RayService/llama-pd application pd"


# --- Kthena ModelBooster: the workers' config maps are the engines' flags (convert/model_serving.go) ------


POD_IP = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def test_a_modelbooster_pair_is_read_from_its_worker_config_maps(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _modelbooster(env=[POD_IP], p_config={"enforce-eager": ""}))
    assert len(out["results"]) == 1 and not out["notChecked"] and code == 0, out


@pytest.mark.parametrize("host", ["0.0.0.0", "localhost", None])
def test_a_modelbooster_backend_env_reaches_both_workers(tmp_path, capsys, host):
    env = [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": host}] if host else []
    code, out = check(tmp_path, capsys, _modelbooster(env=env))
    assert code == 1 and "side-channel-host-not-routable" in rules(out, "error"), out


@pytest.mark.parametrize("image,blocks,refused", [("vllm/vllm-openai:v0.11.0", (16, 64), True),
                                                  ("vllm/vllm-openai:v0.11.1", (16, 64), False),
                                                  ("vllm/vllm-openai:v0.11.0", (32, 32), False)])
def test_modelbooster_config_values_become_flags(tmp_path, capsys, image, blocks, refused):
    doc = _modelbooster(env=[POD_IP], image=image, p_config={"block_size": blocks[0]}, d_config={"block-size": blocks[1]})
    code, out = check(tmp_path, capsys, doc)
    assert ("block-size-hetero-unsupported" in rules(out, "error")) == refused and (code == 1) == refused, out


def test_an_lmcache_modelbooster_is_not_checked(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _modelbooster("LMCacheConnectorV1", env=[POD_IP]))
    assert code == 3 and out["notChecked"] and not rules(out, "error"), out


def test_a_custom_resource_without_kv_transfer_is_nothing_to_check(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _rayservice(kv=False))
    assert code == 4 and not out["notChecked"] and not out["results"], out  # nothing to check (exit 4)


def test_a_custom_resource_with_engine_containers_is_still_checked(tmp_path, capsys):
    roles = [{"name": name, "replicas": 1, "entryTemplate": {"spec": {"containers": [
        container(["Qwen/Qwen3-0.6B", "--kv-transfer-config", _kv(kv_role)], image="vllm/vllm-openai:v0.20.0")]}}}
        for name, kv_role in (("prefill", "kv_producer"), ("decode", "kv_consumer"))]
    doc = {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing", "metadata": {"name": "qwen"},
           "spec": {"template": {"roles": roles}}}
    code, out = check(tmp_path, capsys, doc)
    assert len(out["results"]) == 1 and not out["notChecked"] and code == 0, out


def test_a_builtin_kind_mentioning_kv_transfer_is_not_taken_for_a_controller_input(tmp_path, capsys):
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "notes"},
              "stringData": {"kv-transfer-config": _kv()}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bench"}, "spec": {"template": {"spec": {
        "containers": [{"name": "bench", "image": "python:3.12", "args": ["--kv_role", "kv_producer"]}]}}}}
    code, out = check(tmp_path, capsys, secret, job)
    assert code == 4 and not out["notChecked"], out  # nothing to check (exit 4)


# --- vLLM platform plugins: Neuron and Ascend engines are not checked -----------------------------------


@pytest.mark.parametrize("image,resources", [
    ("public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.16.0-neuronx-py311", {"aws.amazon.com/neuron": "1"}),
    ("vllm/vllm-openai:v0.16.0", {"aws.amazon.com/neuroncore": "2"}),
    ("quay.io/ascend/vllm-ascend:v0.11.0rc1", {"huawei.com/ascend-1980": "1"}),
    ("my-registry/vllm:v0.11.0", {"huawei.com/Ascend910": "8"}),
], ids=["neuron-image", "neuron-resource", "ascend-image", "ascend-resource"])
def test_a_platform_plugin_prefill_is_not_checked(tmp_path, capsys, image, resources):
    pair = _pair("vllm/vllm-openai:v0.16.0", p_resources=resources, p_kv=_kv(kv_buffer_device="cpu"))
    pair[0]["spec"]["template"]["spec"]["containers"][0]["image"] = image
    code, out = check(tmp_path, capsys, *pair)
    assert code == 3 and not rules(out, "error"), out
    assert any("platform plugin" in u["reason"] for u in out["notChecked"]), out


@pytest.mark.parametrize("resources", [{"nvidia.com/gpu": "1"}, {"amd.com/gpu": "1"}, {"habana.ai/gaudi": "1"}])
def test_gpu_and_gaudi_engines_are_still_checked(tmp_path, capsys, resources):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.20.0", p_resources=resources))
    assert len(out["results"]) == 1 and not any("platform plugin" in u["reason"] for u in out["notChecked"]), out


# --- a vllm-gaudi prefill that converts its own KV layout (llm-d README.hpu_cuda.md) --------------------


def _gaudi_cuda(hetero="true", buffer="hpu"):
    p_env = [{"name": "VLLM_KV_CACHE_LAYOUT", "value": "NHD"}]
    if hetero is not None:
        p_env.append({"name": "VLLM_HPU_HETERO_KV_LAYOUT", "value": hetero})
    return _pair("vllm/vllm-openai:v0.20.0", p_env=p_env, d_env=[{"name": "VLLM_KV_CACHE_LAYOUT", "value": "HND"}],
                 p_kv=_kv(kv_buffer_device=buffer, enable_permute_local_kv="True"),
                 d_kv=_kv(enable_permute_local_kv="True"), p_resources={"habana.ai/gaudi": "1"})


@pytest.mark.parametrize("hetero", ["true", "True"])
def test_a_gaudi_prefill_converting_its_layout_is_a_warning(tmp_path, capsys, hetero):
    code, out = check(tmp_path, capsys, *_gaudi_cuda(hetero))
    assert "kv-layout-mismatch" in rules(out, "warning") and "kv-layout-mismatch" not in rules(out, "error"), out


@pytest.mark.parametrize("hetero,buffer", [(None, "hpu"), ("false", "hpu"), ("1", "hpu"), ("true", "cuda")])
def test_a_layout_mismatch_without_the_gaudi_conversion_is_refused(tmp_path, capsys, hetero, buffer):
    code, out = check(tmp_path, capsys, *_gaudi_cuda(hetero, buffer))
    assert code == 1 and "kv-layout-mismatch" in rules(out, "error"), out


@pytest.mark.parametrize("path,value", [(("env",), [{"name": "X", "value": 7}]), (("env",), [3]), (("modelURI",), 7),
                                        (("workers", 0, "image"), ["a"]), (("workers", 0, "config"), [1]),
                                        (("workers", 1, "resources"), {"limits": [1]}), (("workers",), [5])])
def test_a_malformed_modelbooster_backend_is_a_field_type_finding_not_a_traceback(tmp_path, capsys, path, value):
    """A field the apiserver refuses for its type is an error finding naming it (fixY), never a traceback."""
    doc = _modelbooster(env=[POD_IP])
    node = doc["spec"]["backend"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and "manifest-field-type-invalid" in rules(out, "error") and not out["inputErrors"], out
    assert "spec.backend" in json.dumps(out["results"]), out
