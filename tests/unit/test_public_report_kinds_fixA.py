"""Input-reading kinds the held-out sets 100, 103, 105 and 106 still missed (i9-fixA), each with variants in other
models, versions and formats, and negative controls.

- KServe: an LLMInferenceService read with the LLMInferenceServiceConfigs its ``baseRefs`` name, Go template actions
  such as ``{{ .Spec.Model.Name }}`` filled from the service (set 106), :mod:`pdd_operator.compat.kserve_base_refs`.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.kserve_base_refs import merged_service, strategic_merge, substitute
from tests.unit.test_turn2_variants import check, rules

KV = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


# --- KServe baseRefs (set 106) ---------------------------------------------------------------------------------------


def _config(name, section, command, args, image="ghcr.io/llm-d/llm-d-cuda:v0.3.0", ns="llm", env=()):
    container = {"name": "main", "image": image, "command": command, "args": args, "env": list(env)}
    spec = {"template": {"containers": [container]}}
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceServiceConfig",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"prefill": spec} if section == "prefill" else spec}


def _service(refs, model="granite-8b", ns="llm", api="v1alpha1"):
    spec = {"baseRefs": [{"name": r} for r in refs], "model": {"uri": "hf://ibm-granite/granite-8b-code-instruct"},
            "prefill": {"replicas": 1, "parallelism": {"tensor": 1}}, "replicas": 1, "router": {"route": {}}}
    if model is not None:
        spec["model"]["name"] = model
    return {"apiVersion": f"serving.kserve.io/{api}", "kind": "LLMInferenceService",
            "metadata": {"name": "svc", "namespace": ns}, "spec": spec}


def _pd_configs(p_extra=(), d_extra=(), model_arg="{{ .Spec.Model.Name }}", **kw):
    return [_config("p-cfg", "prefill", ["vllm", "serve", model_arg], ["--port=8000", *p_extra], **kw),
            _config("d-cfg", "decode", ["vllm", "serve", model_arg], ["--port=8001", *d_extra], **kw)]


def test_base_refs_without_connector_are_a_pair_without_connector(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pd_configs(), _service(["p-cfg", "d-cfg"]))
    assert code == 1 and rules(out, "error") == {"kv-connector-missing"}
    assert all("LLMInferenceService/svc" in r["object"] for r in out["results"])
    assert not any("LLMInferenceServiceConfig" in s["object"] for s in out["notChecked"])


@pytest.mark.parametrize("api", ["v1alpha1", "v1alpha2"])
def test_base_refs_with_a_kv_dtype_mismatch_are_judged(tmp_path, capsys, api):
    kv = ["--kv-transfer-config", json.dumps(KV)]
    docs = _pd_configs(kv, [*kv, "--kv-cache-dtype", "fp8"])
    code, out = check(tmp_path, capsys, *docs, _service(["p-cfg", "d-cfg"], api=api))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error")


def test_base_refs_of_a_valid_pair_pass(tmp_path, capsys):
    env = [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    kv = ["--kv-transfer-config", json.dumps(KV)]
    code, out = check(tmp_path, capsys, *_pd_configs(kv, kv, env=env), _service(["p-cfg", "d-cfg"]))
    assert code == 0 and out["results"] and not rules(out, "error")


def test_an_action_the_files_do_not_fill_is_not_checked_naming_the_field(tmp_path, capsys):
    docs = _pd_configs(model_arg="{{ .GlobalConfig.SystemNamespace }}")
    code, out = check(tmp_path, capsys, *docs, _service(["p-cfg", "d-cfg"]))
    assert code == 3 and not out["results"]
    reason = " ".join(s["reason"] for s in out["notChecked"])
    assert ".GlobalConfig.SystemNamespace" in reason and "containers[main].command[2]" in reason


def test_a_model_name_the_service_does_not_set_is_not_checked(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pd_configs(), _service(["p-cfg", "d-cfg"], model=None))
    assert code == 3 and ".Spec.Model.Name" in " ".join(s["reason"] for s in out["notChecked"])


def test_configs_of_another_namespace_are_not_folded_in(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pd_configs(ns="other"), _service(["p-cfg", "d-cfg"]))
    assert code != 1 and "kv-connector-missing" not in rules(out, "error")


def test_strategic_merge_merges_containers_by_name_and_replaces_lists():
    base = {"template": {"containers": [{"name": "main", "image": "a", "args": ["x"]}, {"name": "side"}]}}
    over = {"template": {"containers": [{"name": "main", "args": ["y"]}]}, "replicas": 2}
    assert strategic_merge(base, over) == {
        "template": {"containers": [{"name": "main", "image": "a", "args": ["y"]}, {"name": "side"}]}, "replicas": 2}


def test_substitute_fills_fields_of_the_service_and_leaves_the_rest():
    service = {"metadata": {"name": "svc", "namespace": "llm"}, "spec": {"model": {"name": "m"},
                                                                        "parallelism": {"tensor": 4}}}
    out, left = substitute({"a": "{{ .Spec.Model.Name }}/{{.Name}}", "b": ["--tp={{ .Spec.Parallelism.Tensor }}"],
                            "c": "{{ ChildName .Name `-kserve` }}"}, service)
    assert out["a"] == "m/svc" and out["b"] == ["--tp=4"] and out["c"].startswith("{{")
    assert [u.field for u in left] == ["spec.c"]


def test_a_base_ref_model_name_is_the_service_s():
    config = {"spec": {"model": {"name": "from-config"}, "template": {"containers": [
        {"name": "main", "command": ["vllm", "serve", "{{ .Spec.Model.Name }}"]}]}}}
    service = {"kind": "LLMInferenceService", "metadata": {"name": "s"}, "spec": {"baseRefs": [{"name": "c"}]}}
    merged, left = merged_service(service, [config])
    assert not left and merged["spec"]["template"]["containers"][0]["command"][2] == "from-config"
    assert "baseRefs" not in merged["spec"]
