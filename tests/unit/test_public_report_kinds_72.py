"""Variants of what the seventy-second public-report set (tests/unit/data/public_reports_72) taught, with negative
controls: a Ray Serve LLM prefill/decode application is a P/D deployment even where its file names no KV connector.

Ray Serve LLM's P/D builders take the prefill and decode LLMConfigs as the args ``prefill_config`` and
``decode_config`` (Ray's ``PDServingArgs``). Ray's first builder gave each one NixlConnector kv_both itself when its
``engine_kwargs`` had no ``kv_transfer_config`` (the release test ``serve_llama_3dot1_8b_quantized_tp1_2p1d.yaml``),
and an LLMConfig may be a path to another file (``serve_qwen3_8B_fp8_1p1d.yaml``). Such a Serve config, or the same
config as a RayService's ``serveConfigV2``, configures KV transfer that the checker cannot read: the answer is "not
checked" with a reason (exit 3), never "nothing to check" (exit 4), which says the files hold no P/D at all
(:mod:`pdd_operator.compat.ray_serve`). A Serve config of plain (aggregated) LLM applications, or one with only a
prefill config, stays "nothing to check".
"""

from __future__ import annotations

import pytest
import yaml

from pdd_operator.compat.ray_serve import pd_applications
from tests.unit.test_turn2_variants import check

NOTHING = 4
NOT_CHECKED = 3


def _llm_config(model="Qwen/Qwen3-8B", tp=1, **engine):
    return {"model_loading_config": {"model_id": model.rsplit("/", 1)[-1].lower(), "model_source": model},
            "engine_kwargs": {"tensor_parallel_size": tp, **engine},
            "deployment_config": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 2}}}


def _serve_config(args, import_path="ray.serve.llm:build_pd_openai_app", name="pd-app"):
    return {"applications": [{"name": name, "route_prefix": "/", "import_path": import_path, "args": args}]}


def _rayservice(serve_config, image="rayproject/ray-llm:2.49.0-py311-cu128"):
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "llm"},
            "spec": {"serveConfigV2": yaml.safe_dump(serve_config),
                     "rayClusterConfig": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
                         "containers": [{"name": "ray-head", "image": image}]}}}}}}


#: P/D applications whose file names no KV connector: Ray adds or demands it, or it is in another file.
CONNECTORLESS = [
    # the first builder's import path, another model and a decode TP of 2 (the set: Llama-3.1-8B w4a16, TP 1 both)
    _serve_config({"prefill_config": _llm_config("meta-llama/Llama-3.1-8B-Instruct"),
                   "decode_config": _llm_config("meta-llama/Llama-3.1-8B-Instruct", tp=2)},
                  "ray.llm._internal.serve.deployments.prefill_decode_disagg.prefill_decode_disagg:build_app"),
    # the public builder, LLMConfigs given as file paths (LLMConfig.from_file)
    _serve_config({"prefill_config": "./configs/model_config/qwen_3_8B_fp8_1replica.yaml",
                   "decode_config": "./configs/model_config/qwen_3_8B_fp8_1replica.yaml"}),
    # a custom builder around build_pd_openai_app (Anyscale's builder:pd_builder) with the ingress options
    _serve_config({"prefill_config": _llm_config("openai/gpt-oss-20b", tp=2),
                   "decode_config": _llm_config("openai/gpt-oss-20b", tp=2),
                   "ingress_deployment_config": {"autoscaling_config": {"min_replicas": 2, "max_replicas": 2}}},
                  "builder:pd_builder"),
]


@pytest.mark.parametrize("serve_config", CONNECTORLESS)
def test_a_serve_config_whose_pd_application_names_no_connector_is_not_checked(serve_config, tmp_path, capsys):
    code, out = check(tmp_path, capsys, serve_config)
    assert code == NOT_CHECKED and not out["results"], out
    [skipped] = out["notChecked"]
    assert skipped["object"] == "Ray Serve config (applications with import_path)"
    assert "pd-app names no KV connector" in skipped["reason"] and "NixlConnector kv_both" in skipped["reason"]


@pytest.mark.parametrize("serve_config", CONNECTORLESS)
def test_the_same_application_in_a_rayservice_is_not_checked(serve_config, tmp_path, capsys):
    doc = _rayservice(serve_config)
    code, out = check(tmp_path, capsys, doc)
    assert code == NOT_CHECKED and not out["results"], out
    [skipped] = out["notChecked"]
    assert skipped["object"] == "RayService/llm"
    assert "pd-app names no KV connector" in skipped["reason"]


def test_a_pd_application_naming_its_connector_is_not_checked_without_the_connectorless_clause(tmp_path, capsys):
    nixl = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    doc = _serve_config({"prefill_config": _llm_config(kv_transfer_config=nixl),
                         "decode_config": _llm_config(kv_transfer_config=nixl)})
    code, out = check(tmp_path, capsys, doc)
    assert code == NOT_CHECKED, out
    [skipped] = out["notChecked"]
    assert "names no KV connector" not in skipped["reason"]


@pytest.mark.parametrize("serve_config", [
    # Ray Serve LLM's aggregated builder: no prefill/decode split
    _serve_config({"llm_configs": [_llm_config(tp=2)]}, "ray.serve.llm:build_openai_app"),
    # a prefill config alone is not a P/D pair
    _serve_config({"prefill_config": _llm_config()}),
    # a non-LLM Serve application
    _serve_config({"model_path": "/models/resnet50"}, "image_classifier:app"),
])
def test_serve_configs_without_a_pd_application_stay_nothing_to_check(serve_config, tmp_path, capsys):
    assert check(tmp_path, capsys, serve_config)[0] == NOTHING
    assert check(tmp_path, capsys, _rayservice(serve_config))[0] == NOTHING


def test_pd_applications_reads_serve_configs_and_rayservices_and_tolerates_broken_ones():
    config = CONNECTORLESS[1]
    assert pd_applications(config) == ["pd-app"]
    assert pd_applications(_rayservice(config)) == ["pd-app"]
    unnamed = {"applications": [{"import_path": "builder:pd_builder", "args": config["applications"][0]["args"]}]}
    assert pd_applications(unnamed) == ["builder:pd_builder"]
    broken = _rayservice(config)
    broken["spec"]["serveConfigV2"] = "applications: [unclosed"
    assert pd_applications(broken) == []
    assert pd_applications({"applications": "not a list"}) == []
