"""Ray Serve LLM prefill/decode applications judged as the engines Ray builds from them (issue 9, after set 72).

A Serve config (``serve run`` / ``serve deploy``) or a RayService's ``serveConfigV2`` whose application takes a
``prefill_config`` and a ``decode_config`` holds no engine command: Ray Serve LLM turns each LLMConfig into a vLLM
engine (``engine_kwargs`` keys are ``AsyncEngineArgs`` fields, the model is ``model_loading_config.model_source``,
Ray adds ``distributed_executor_backend="ray"``; Ray's first P/D builder adds NixlConnector kv_both where no
``kv_transfer_config`` is given). :func:`pdd_operator.compat.ray_serve.ray_serve_scan` reads them so, and the rules
judge the pair with the vLLM of the RayService's Ray image (``rayproject/ray-llm:2.51.0-...`` ships vLLM 0.11.0,
``2.50.0`` vLLM 0.10.2: ``wrapped_vllm_versions.json``); a Serve config names no image, so its vLLM is unknown and
the rules do what they do on any unknown release. Before this reader every one of these files was "not checked".
"""

from __future__ import annotations

import pytest
import yaml

from pdd_operator.compat.ray_serve import FIRST_PD_BUILDER, in_ray_terms, ray_serve_scan
from pdd_operator.vllm.args import POD_IP
from pdd_operator.vllm.versions import version_from_image
from tests.unit.test_turn2_variants import check, rules

NOT_CHECKED = 3
NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
#: Ray LLM images and the vLLM each ships (the table's rows).
RAY_IMAGES = [("rayproject/ray-llm:2.51.0-py311-cu128", "0.11.0"), ("rayproject/ray-llm:2.50.0-py311-cu128", "0.10.2")]


def _llm_config(model="Qwen/Qwen3-8B", tp=1, connector=True, replicas=None, **engine):
    deployment = ({"num_replicas": replicas} if replicas is not None else
                  {"autoscaling_config": {"min_replicas": 1, "max_replicas": 4}})
    kwargs = {"tensor_parallel_size": tp, "max_model_len": 8192, **engine}
    if connector:
        kwargs["kv_transfer_config"] = dict(NIXL)
    return {"model_loading_config": {"model_id": "qwen3", "model_source": model}, "engine_kwargs": kwargs,
            "deployment_config": deployment}


def _serve_config(prefill, decode, import_path="ray.serve.llm:build_pd_openai_app"):
    return {"applications": [{"name": "pd-app", "route_prefix": "/", "import_path": import_path,
                              "args": {"prefill_config": prefill, "decode_config": decode}}]}


def _rayservice(serve_config, image):
    group = {"template": {"spec": {"containers": [{"name": "ray", "image": image}]}}}
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "llm"},
            "spec": {"serveConfigV2": yaml.safe_dump(serve_config),
                     "rayClusterConfig": {"rayVersion": image.split(":")[1][:6], "headGroupSpec": group,
                                          "workerGroupSpecs": [{"groupName": "gpu", **group}]}}}


#: One change from a valid pair (Qwen3-8B, TP 1, NIXL kv_both on both), and the rule that refuses it on vLLM 0.10.2
#: and 0.11.0: fp8 KV on the decode only (block_len differs: the handshake's assert), block sizes 16 against 32
#: (heterogeneous block sizes before 0.11.1), a prefill TP above the decode's (before 0.14.0), a different checkpoint on
#: the decode (Qwen3-14B has 40 layers against 36: the region-count assert from 0.11.0, a read past the prefill's
#: regions before it).
ONE_CHANGE = {
    "kv_cache_dtype": ({}, {"kv_cache_dtype": "fp8"}, "kv-cache-dtype-mismatch"),
    "block_size": ({"block_size": 16}, {"block_size": 32}, "block-size-hetero-unsupported"),
    "tensor_parallel_size": ({"tp": 2}, {"tp": 1}, "hetero-tp-p-gt-d-unsupported"),
    "model": ({}, {"model": "Qwen/Qwen3-14B"}, "model-mismatch"),
}


@pytest.mark.parametrize(("image", "vllm"), RAY_IMAGES)
def test_a_valid_pair_in_a_rayservice_is_judged_with_the_vllm_of_its_ray_image(image, vllm, tmp_path, capsys):
    code, out = check(tmp_path, capsys, _rayservice(_serve_config(_llm_config(), _llm_config()), image))
    assert code == 0 and not out["notChecked"] and not rules(out, "error"), out
    [result] = out["results"]
    assert result["vllmVersion"] == vllm and "applications[pd-app].args.prefill_config" in result["object"]


@pytest.mark.parametrize(("image", "vllm"), RAY_IMAGES)
@pytest.mark.parametrize("change", sorted(ONE_CHANGE))
def test_one_change_on_one_role_in_a_rayservice_is_refused(change, image, vllm, tmp_path, capsys):
    prefill, decode, rule = ONE_CHANGE[change]
    doc = _rayservice(_serve_config(_llm_config(**prefill), _llm_config(**decode)), image)
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and rule in rules(out, "error"), out
    assert out["results"][0]["vllmVersion"] == vllm


def test_the_same_changes_in_a_serve_config_are_judged_as_on_an_unknown_release(tmp_path, capsys):
    # every release refuses different KV dtypes and different layer counts; block sizes and a prefill TP above the
    # decode's only some releases refuse: "not checked" naming the rule and its releases
    for change, (prefill, decode, rule) in ONE_CHANGE.items():
        code, out = check(tmp_path, capsys, _serve_config(_llm_config(**prefill), _llm_config(**decode)))
        if change in ("kv_cache_dtype", "model"):
            assert code == 1 and rule in rules(out, "error"), (change, out)
        else:
            assert code == NOT_CHECKED and not rules(out, "error"), (change, out)
            [skipped] = out["notChecked"]
            assert rule in skipped["reason"] and "version is unknown" in skipped["reason"], out
    code, out = check(tmp_path, capsys, _serve_config(_llm_config(), _llm_config()))
    assert code == 0 and rules(out) == {"vllm-version-unknown"}, out


def test_a_serve_config_is_judged_on_the_release_pdd_check_is_told(tmp_path, capsys):
    # heterogeneous block sizes: refused on 0.11.0, taken from 0.11.1 (the rule's bound)
    doc = _serve_config(_llm_config(block_size=16), _llm_config(block_size=32))
    code, out = check(tmp_path, capsys, doc, extra=("--vllm-version", "0.11.0"))
    assert code == 1 and "block-size-hetero-unsupported" in rules(out, "error"), out
    code, out = check(tmp_path, capsys, doc, extra=("--vllm-version", "0.20.0"))
    assert code == 0 and "block-size-hetero-unsupported" not in rules(out), out


def test_an_unlisted_ray_image_is_an_unknown_release(tmp_path, capsys):
    doc = _serve_config(_llm_config(block_size=16), _llm_config(block_size=32))
    code, out = check(tmp_path, capsys, _rayservice(doc, "rayproject/ray-llm:2.52.0-py311-cu128"))
    assert code == NOT_CHECKED and "block-size-hetero-unsupported" in out["notChecked"][0]["reason"], out
    assert version_from_image("rayproject/ray-llm:2.51.0-py311-cu128") == (0, 11, 0)
    assert version_from_image("rayproject/ray-llm:2.50.0") == (0, 10, 2)
    assert version_from_image("rayproject/ray-llm:nightly-py311-cu128") is None
    assert version_from_image("rayproject/ray:2.51.0-py311-gpu") is None  # the plain Ray image holds no vLLM


def test_findings_name_the_llmconfig_keys(tmp_path, capsys):
    doc = _rayservice(_serve_config(_llm_config(), _llm_config(kv_cache_dtype="fp8")), RAY_IMAGES[0][0])
    code, out = check(tmp_path, capsys, doc)
    [finding] = [f for r in out["results"] for f in r["findings"] if f["rule"] == "kv-cache-dtype-mismatch"]
    assert "applications[pd-app].args.decode_config.engine_kwargs" in finding["fields"], finding
    assert "--kv-cache-dtype" not in finding["fix"] + finding["message"], finding
    assert in_ray_terms("set --kv-cache-dtype fp8 on the decode container, or pdd check --vllm-version 0.20.2") == (
        "set kv_cache_dtype fp8 in decode_config.engine_kwargs, or pdd check --vllm-version 0.20.2")
    assert in_ray_terms("--no-enable-prefix-caching") == "enable_prefix_caching: false"


def test_the_first_builder_gives_a_connectorless_config_nixl_kv_both(tmp_path, capsys):
    prefill, decode = _llm_config(connector=False), _llm_config(connector=False, kv_cache_dtype="fp8")
    code, out = check(tmp_path, capsys, _rayservice(_serve_config(prefill, decode, FIRST_PD_BUILDER), RAY_IMAGES[0][0]))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out
    code, out = check(tmp_path, capsys, _rayservice(_serve_config(prefill, prefill, FIRST_PD_BUILDER),
                                                    RAY_IMAGES[0][0]))
    assert code == 0 and not out["notChecked"], out


@pytest.mark.parametrize(("prefill", "decode", "import_path", "why"), [
    # the later builders refuse a config without kv_transfer_config, a custom one may add its own
    (_llm_config(connector=False), _llm_config(connector=False), "ray.serve.llm:build_pd_openai_app",
     "name no kv_transfer_config"),
    (_llm_config(connector=False), _llm_config(connector=False), "builder:pd_builder", "name no kv_transfer_config"),
    # an LLMConfig given as a file path: its engine_kwargs are in that file
    ("./configs/qwen3_8b.yaml", _llm_config(), "ray.serve.llm:build_pd_openai_app", "LLMConfig.from_file"),
    # weights from a cloud mirror: the model is not a name the file holds
    ({**_llm_config(), "model_loading_config": {"model_id": "qwen3", "model_source": {"bucket_uri": "s3://b/qwen"}}},
     _llm_config(), "ray.serve.llm:build_pd_openai_app", "cloud mirror"),
])
def test_what_the_file_does_not_hold_stays_not_checked(prefill, decode, import_path, why, tmp_path, capsys):
    for doc in (_serve_config(prefill, decode, import_path),
                _rayservice(_serve_config(prefill, decode, import_path), RAY_IMAGES[0][0])):
        code, out = check(tmp_path, capsys, doc)
        assert code == NOT_CHECKED and not out["results"], out
        [skipped] = out["notChecked"]
        assert "application pd-app" in skipped["object"] and why in skipped["reason"], out


def test_engines_carry_what_ray_adds():
    doc = _serve_config(_llm_config(tp=2, replicas=3, enforce_eager=True, enable_prefix_caching=False),
                        _llm_config(tp=2))
    doc["applications"][0]["args"]["prefill_config"]["runtime_env"] = {"env_vars": {"UCX_TLS": "rc,cuda_copy"}}
    engines, unreadable = ray_serve_scan(doc)
    assert not unreadable and [e.role for e in engines] == ["prefill", "decode"]
    prefill, decode = (e.config for e in engines)
    assert prefill.model == "Qwen/Qwen3-8B" and prefill.served_model_name == "qwen3" and prefill.tp == 2
    assert prefill.executor == "ray" and prefill.prefix_caching is False and prefill.replicas == 3
    assert decode.replicas == 1  # autoscaling_config.min_replicas
    assert prefill.env["UCX_TLS"] == "rc,cuda_copy" and prefill.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == POD_IP
    assert prefill.kv_transfer == NIXL and engines[0].doc_id == engines[1].doc_id
    assert ray_serve_scan({"applications": [{"import_path": "app:build", "args": {}}]}) is None


def test_two_applications_of_one_config_pair_per_application_and_share_no_pod(tmp_path, capsys):
    # two P/D applications in one Serve config: each prefill pairs with its own decode, and replicas of different
    # applications are Ray actors of their own (no shared port), never containers of one pod
    first = _serve_config(_llm_config(), _llm_config())["applications"][0]
    second = {**_serve_config(_llm_config("meta-llama/Llama-3.1-8B-Instruct", kv_cache_dtype="fp8"),
                              _llm_config("meta-llama/Llama-3.1-8B-Instruct"))["applications"][0], "name": "llama"}
    code, out = check(tmp_path, capsys, {"applications": [first, second]})
    assert code == 1 and rules(out, "error") == {"kv-cache-dtype-mismatch"}, out
    objects = {r["object"]: {f["rule"] for f in r["findings"]} for r in out["results"]}
    assert objects == {
        "Ray Serve config applications[pd-app].args.prefill_config + Ray Serve config applications[pd-app].args."
        "decode_config": {"vllm-version-unknown"},
        "Ray Serve config applications[llama].args.prefill_config + Ray Serve config applications[llama].args."
        "decode_config": {"kv-cache-dtype-mismatch", "vllm-version-unknown"}}, objects


@pytest.mark.parametrize(("runtime_env", "vllm"), [
    ({"pip": ["vllm==0.20.0", "nixl"]}, "0.20.0"),  # the replicas' own virtualenv replaces the image's vLLM
    ({"uv": {"packages": ["vllm[audio]==0.13.0"]}}, "0.13.0"),
    ({"pip": ["vllm>=0.11.0"]}, "unknown"),  # no exact pin: whichever release the resolver picks
    ({"pip": ["vllm-router==0.1.0"]}, "0.11.0"),  # another package: the Ray image's vLLM
])
def test_a_runtime_env_that_installs_vllm_decides_the_release(runtime_env, vllm, tmp_path, capsys):
    config = _serve_config(_llm_config(), _llm_config())
    config["applications"][0]["runtime_env"] = runtime_env
    code, out = check(tmp_path, capsys, _rayservice(config, RAY_IMAGES[0][0]))
    assert out["results"][0]["vllmVersion"] == vllm, out


@pytest.mark.parametrize(("image", "vllm"), RAY_IMAGES)
def test_an_engine_id_written_for_many_replicas_is_made_unique_by_ray(image, vllm, tmp_path, capsys):
    """Ray's NixlConnectorBackend.setup suffixes a written ``engine_id`` per replica, so a Serve config that writes one
    for two or more replicas (Ray's own docs example) is not the shared engine id ``nixl-engine-id-shared`` refuses in
    a Deployment; the same ``--kv-transfer-config`` in two replicas of a plain Deployment is (test_public_report_kinds_77)."""
    prefill, decode = _llm_config(replicas=2), _llm_config(replicas=3)
    prefill["engine_kwargs"]["kv_transfer_config"] = {**NIXL, "engine_id": "engine1"}
    decode["engine_kwargs"]["kv_transfer_config"] = {**NIXL, "engine_id": "engine2"}
    code, out = check(tmp_path, capsys, _rayservice(_serve_config(prefill, decode), image))
    assert code == 0 and "nixl-engine-id-shared" not in rules(out, "error") | rules(out, "warning"), out
