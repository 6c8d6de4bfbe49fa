"""Variants of what the seventy-second public-report set (tests/unit/data/public_reports_72) taught, with negative
controls: a Ray Serve LLM prefill/decode application is a P/D deployment even where its file names no KV connector;
and two known checkpoints whose KV layouts differ are refused by vLLM even where no compatibility hash runs.

Ray Serve LLM's P/D builders take the prefill and decode LLMConfigs as the args ``prefill_config`` and
``decode_config`` (Ray's ``PDServingArgs``). Ray's first builder gave each one NixlConnector kv_both itself when its
``engine_kwargs`` had no ``kv_transfer_config`` (the release test ``serve_llama_3dot1_8b_quantized_tp1_2p1d.yaml``),
and an LLMConfig may be a path to another file (``serve_qwen3_8B_fp8_1p1d.yaml``). Such a Serve config, or the same
config as a RayService's ``serveConfigV2``, configures KV transfer that the checker cannot read: the answer is "not
checked" with a reason (exit 3), never "nothing to check" (exit 4), which says the files hold no P/D at all
(:mod:`pdd_operator.compat.ray_serve`). A Serve config of plain (aggregated) LLM applications, or one with only a
prefill config, stays "nothing to check". Since the fixR reader, an application whose two LLMConfigs are in the file
(under the first builder, with or without a connector; under the others, with one) is judged as the engines Ray builds
from them (tests/unit/test_ray_serve_pairs.py); the cases above keep "not checked".

The set's vllm#20980 variant with a Qwen3-14B decode against a Qwen3-8B prefill (vLLM 0.9.2) names both by local
paths, whose checkpoints the files do not show: a ``model-mismatch`` warning there is the honest answer. Where both
``--model`` values are checkpoints the table of public config.json fields knows
(:func:`pdd_operator.vllm.model_config.kv_geometry`), vLLM before 0.13.0 (or with ``enforce_handshake_compat`` false)
still refuses them when their KV differs: the handshake's block-length asserts for different per-layer widths, and
from 0.11.0 its region-count assert for different layer counts; before 0.11.0 a decode with more layers reads KV
regions the prefill never registered. Same-width checkpoints where the decode has fewer layers (0.9-0.10), unknown
names, and one checkpoint under two names stay a warning.
"""

from __future__ import annotations

import pytest
import yaml

from pdd_operator.compat.ray_serve import pd_applications
from tests.unit.test_turn2_variants import check, container, rules, workload

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


#: P/D applications whose file names no KV connector, under a builder that adds none itself: the connector is demanded
#: by Ray or in another file.
CONNECTORLESS = [
    # the public builder, LLMConfigs given as file paths (LLMConfig.from_file)
    _serve_config({"prefill_config": "./configs/model_config/qwen_3_8B_fp8_1replica.yaml",
                   "decode_config": "./configs/model_config/qwen_3_8B_fp8_1replica.yaml"}),
    # a custom builder around build_pd_openai_app (Anyscale's builder:pd_builder) with the ingress options
    _serve_config({"prefill_config": _llm_config("openai/gpt-oss-20b", tp=2),
                   "decode_config": _llm_config("openai/gpt-oss-20b", tp=2),
                   "ingress_deployment_config": {"autoscaling_config": {"min_replicas": 2, "max_replicas": 2}}},
                  "builder:pd_builder"),
]
#: The first builder's import path gives each connectorless LLMConfig NixlConnector kv_both itself: since the fixR
#: reader (:func:`pdd_operator.compat.ray_serve.ray_serve_scan`) such a pair is judged (the set: Llama-3.1-8B w4a16,
#: TP 1 both; here another model and a decode TP of 2).
FIRST_BUILDER = _serve_config({"prefill_config": _llm_config("meta-llama/Llama-3.1-8B-Instruct"),
                               "decode_config": _llm_config("meta-llama/Llama-3.1-8B-Instruct", tp=2)},
                              "ray.llm._internal.serve.deployments.prefill_decode_disagg.prefill_decode_disagg:build_app")


@pytest.mark.parametrize("serve_config", CONNECTORLESS)
def test_a_serve_config_whose_pd_application_names_no_connector_is_not_checked(serve_config, tmp_path, capsys):
    code, out = check(tmp_path, capsys, serve_config)
    assert code == NOT_CHECKED and not out["results"], out
    [skipped] = out["notChecked"]
    assert skipped["object"] == "Ray Serve config application pd-app"
    assert "pd-app names no KV connector" in skipped["reason"] and "NixlConnector kv_both" in skipped["reason"]


@pytest.mark.parametrize("serve_config", CONNECTORLESS)
def test_the_same_application_in_a_rayservice_is_not_checked(serve_config, tmp_path, capsys):
    doc = _rayservice(serve_config)
    code, out = check(tmp_path, capsys, doc)
    assert code == NOT_CHECKED and not out["results"], out
    [skipped] = out["notChecked"]
    assert skipped["object"] == "RayService/llm application pd-app"
    assert "pd-app names no KV connector" in skipped["reason"]


@pytest.mark.parametrize("doc", [FIRST_BUILDER, _rayservice(FIRST_BUILDER)])
def test_the_first_builders_connectorless_application_is_judged_with_its_added_nixl(doc, tmp_path, capsys):
    # no image names a vLLM release (ray-llm 2.49.0 is not in the table): the rules judge every release, and no
    # release refuses a decode TP above the prefill's for a dense model
    code, out = check(tmp_path, capsys, doc)
    assert code == 0 and not out["notChecked"] and not rules(out, "error"), out
    assert "vllm-version-unknown" in rules(out, "warning")


def test_a_pd_application_naming_its_connector_is_judged(tmp_path, capsys):
    nixl = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    doc = _serve_config({"prefill_config": _llm_config(kv_transfer_config=nixl),
                         "decode_config": _llm_config(kv_transfer_config=nixl)})
    code, out = check(tmp_path, capsys, doc)
    assert code == 0 and not out["notChecked"] and out["results"][0]["vllmVersion"] == "unknown", out


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
    config = CONNECTORLESS[0]
    assert pd_applications(config) == ["pd-app"]
    assert pd_applications(_rayservice(config)) == ["pd-app"]
    unnamed = {"applications": [{"import_path": "builder:pd_builder", "args": config["applications"][0]["args"]}]}
    assert pd_applications(unnamed) == ["builder:pd_builder"]
    broken = _rayservice(config)
    broken["spec"]["serveConfigV2"] = "applications: [unclosed"
    assert pd_applications(broken) == []
    assert pd_applications({"applications": "not a list"}) == []


# --- model-mismatch: known checkpoints of different KV layouts where no hash runs --------------------------------

PRODUCER = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
CONSUMER = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'


def _pair(p_model, d_model, image, tp=1, kv_extra=""):
    def kv(text):
        return text[:-1] + kv_extra + "}" if kv_extra else text
    return [workload("llm-prefill", "prefill", container([p_model, "--tensor-parallel-size", str(tp),
                                                          "--kv-transfer-config", kv(PRODUCER)], image=image, gpus=tp)),
            workload("llm-decode", "decode", container([d_model, "--tensor-parallel-size", str(tp),
                                                        "--kv-transfer-config", kv(CONSUMER)], image=image, gpus=tp))]


def _severity(out, rule_id):
    return {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == rule_id}


@pytest.mark.parametrize(("p_model", "d_model", "image", "tp", "kv_extra"), [
    # the set's pair as Hub ids in Deployments: the decode has 4 more layers (0.9.2 reads past the prefill's regions)
    ("Qwen/Qwen3-8B", "Qwen/Qwen3-14B", "vllm/vllm-openai:v0.9.2", 2, ""),
    # 0.11.0 and 0.12.0: the region-count assert, either way round
    ("Qwen/Qwen3-8B", "Qwen/Qwen3-14B", "vllm/vllm-openai:v0.11.0", 1, ""),
    ("Qwen/Qwen3-14B", "Qwen/Qwen3-8B", "vllm/vllm-openai:v0.12.0", 2, ""),
    # different per-layer widths (4 KV heads against 8): the block-length assert, 0.10.1.1
    ("Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.10.1.1", 1, ""),
    # a quantized copy keeps its base's geometry (read as Qwen3-8B) against Llama-3.1-8B (32 layers), 0.11.0
    ("RedHatAI/Qwen3-8B-FP8-dynamic", "meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.11.0", 1, ""),
    # same layer count, per-layer widths 2 x 128 against 8 x 128 at TP 1: the block-length assert, 0.11.0
    ("Qwen/Qwen2.5-3B-Instruct", "Qwen/Qwen3-8B", "vllm/vllm-openai:v0.11.0", 1, ""),
    # 0.20.0 with the hash check turned off: the region-count assert remains (nixl/worker.py l.1520)
    ("Qwen/Qwen3-8B", "Qwen/Qwen3-14B", "vllm/vllm-openai:v0.20.0", 1,
     ',"kv_connector_extra_config":{"enforce_handshake_compat":false}'),
])
def test_known_checkpoints_of_different_kv_layouts_are_an_error_without_the_hash(
        p_model, d_model, image, tp, kv_extra, tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(p_model, d_model, image, tp, kv_extra))
    assert code == 1 and _severity(out, "model-mismatch") == {"error"}, out
    [message] = [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "model-mismatch"]
    assert "lay out different KV" in message and "layers" in message


@pytest.mark.parametrize(("p_model", "d_model", "image"), [
    # same width, the decode has fewer layers: 0.9.2's asserts pass (the decode reads the prefill's first layers)
    ("Qwen/Qwen3-14B", "Qwen/Qwen3-8B", "vllm/vllm-openai:v0.9.2"),
    # a local path: its checkpoint is not in the files
    ("Qwen/Qwen3-8B", "/models/Qwen3-14B", "vllm/vllm-openai:v0.11.0"),
    # one checkpoint under two names (the Meta- re-release of the same weights)
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.11.0"),
])
def test_model_strings_that_do_not_show_a_refused_layout_stay_a_warning(p_model, d_model, image, tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(p_model, d_model, image))
    assert _severity(out, "model-mismatch") == {"warning"} and "model-mismatch" not in rules(out, "error"), out


def test_replicated_kv_heads_of_equal_width_per_rank_stay_a_warning(tmp_path, capsys):
    # TP 8 past both models' KV heads (2 and 8): one head of 128 per rank on both sides, 36 layers each, so vLLM
    # 0.11.0's asserts pass; the strings still differ
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen2.5-3B-Instruct", "Qwen/Qwen3-8B", "vllm/vllm-openai:v0.11.0", 8))
    assert _severity(out, "model-mismatch") == {"warning"} and "model-mismatch" not in rules(out, "error"), out


def test_from_the_hash_on_different_models_stay_the_hash_error(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-14B", "Qwen/Qwen3-8B", "vllm/vllm-openai:v0.20.0"))
    [message] = [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "model-mismatch"]
    assert code == 1 and _severity(out, "model-mismatch") == {"error"} and "lay out different KV" not in message


def test_kv_geometry_knows_public_checkpoints_and_no_local_paths_or_hybrids():
    from pdd_operator.vllm.model_config import kv_geometry
    assert kv_geometry("Qwen/Qwen3-8B").describe() == "36 layers, 8 KV heads x 128"
    assert kv_geometry("Qwen/Qwen3-14B").layers == 40 and kv_geometry("Qwen/Qwen3-14B").width == 1024
    assert kv_geometry("RedHatAI/Qwen3-8B-FP8-dynamic") == kv_geometry("Qwen/Qwen3-8B")  # a copy keeps the shape
    assert kv_geometry("/models/Qwen3-8B") is None and kv_geometry("acme/private-8b") is None
    assert kv_geometry("Qwen/Qwen3-Next-80B-A3B-Instruct") is None  # hybrid: not all layers attention of one shape
