"""The kind of checker fault the hundred-and-eleventh held-out set (tests/unit/data/public_reports_111) found, with
variants beyond its entries (other models, vLLM releases, KServe API versions, where the engine lines sit).

- A KServe ``LLMInferenceService`` whose engine lines come from the ``LLMInferenceServiceConfig`` documents its
  ``baseRefs`` name, in the same files, was not merged over them: its ``main`` containers without ``command`` were
  taken as templated ("not checked") and each config was read alone, so a P/D pair whose lines were all in the files
  was never judged (set 106's granite entry, set 111's Lab 2 entries). KServe merges the well-known configs, then the
  baseRefs in order, then the service, strategically (containers and env by name, ``command``/``args`` replaced) and
  renders ``{{ .Spec.Model.Name }}`` (kserve v0.16.0 pkg/controller/v1alpha1/llmisvc/config_merge.go
  combineBaseRefsConfig, mergeSpecs, ReplaceVariables): :mod:`pdd_operator.compat.kserve_merge`.
- A P/D service whose one role runs its own command without a KV connector while the other's line is left to
  KServe's template was "not checked": no template reaches a container with its own command, so that role never
  moves KV whatever the template gives the other (``kv-connector-missing``).
- A templated engine's "not checked" did not say which config holds its line; it names the well-known config KServe
  picks (``kserve-config-llm-prefill-template``, ``kserve-config-llm-decode-worker-data-parallel``, ...) and the
  baseRefs not in the files.
"""

from __future__ import annotations

import pytest
import yaml

from pdd_operator.compat.kserve_merge import merge_base_refs, merge_spec, render, well_known_configs

from .test_script_inputs import _check, _errors

NIXL = '--kv-transfer-config={"kv_connector":"NixlConnector","kv_role":"kv_both"}'
POD_IP = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def _main(image: str, model: str, port: int, tp: int, side: bool, extra: str = "") -> dict:
    """A main container with its own vllm serve line (NixlConnector kv_both) serving ``model``'s checkpoint where KServe
    puts it (/mnt/models, from ``spec.model.uri``)."""
    del model  # the line names the mount, as KServe's own templates do
    return {"name": "main", "image": image, "command": ["vllm", "serve"],
            "args": ["/mnt/models", "--served-model-name={{ .Spec.Model.Name }}", f"--port={port}",
                     f"--tensor-parallel-size={tp}", *extra.split(), NIXL], "env": [POD_IP] if side else []}


def _config_and_service(api: str = "v1alpha1", image: str = "vllm/vllm-openai:v0.11.0", model: str = "Qwen/Qwen3-8B",
                        p_tp: int = 2, d_tp: int = 2, ns: str = "llm", config_ns: str = "llm", side: bool = True,
                        d_extra: str = "") -> str:
    """A user's LLMInferenceServiceConfig holding the decode's engine line (``spec.template``) and the service naming
    it in baseRefs, which holds the prefill's own line and the decode's GPUs only (set 111's Lab 2 shape): neither
    document alone is a P/D pair."""
    config = {"apiVersion": f"serving.kserve.io/{api}", "kind": "LLMInferenceServiceConfig",
              "metadata": {"name": "vllm-base-config", "namespace": config_ns},
              "spec": {"template": {"containers": [_main(image, model, 8001, d_tp, side, d_extra)]}}}
    service = {"apiVersion": f"serving.kserve.io/{api}", "kind": "LLMInferenceService",
               "metadata": {"name": "qwen-pd", "namespace": ns},
               "spec": {"baseRefs": [{"name": "vllm-base-config"}], "model": {"uri": f"hf://{model}", "name": "qwen"},
                        "prefill": {"replicas": 1, "parallelism": {"tensor": p_tp},
                                    "template": {"containers": [_main(image, model, 8000, p_tp, side)]}},
                        "replicas": 2, "parallelism": {"tensor": d_tp},
                        "template": {"containers": [{"name": "main",
                                                     "resources": {"limits": {"nvidia.com/gpu": str(d_tp)}}}]}}}
    return yaml.safe_dump_all([config, service], sort_keys=False)


# --- the merge itself ---------------------------------------------------------------------------------------------


def test_containers_and_env_merge_by_name_and_command_is_replaced():
    base = {"template": {"containers": [{"name": "main", "image": "a", "command": ["vllm", "serve", "x"],
                                         "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                                        {"name": "side", "image": "s"}]}}
    over = {"template": {"containers": [{"name": "main", "command": ["sh", "-c"],
                                         "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]}]}}
    merged = merge_spec(base, over)["template"]["containers"]
    assert [c["name"] for c in merged] == ["main", "side"]
    assert merged[0]["image"] == "a" and merged[0]["command"] == ["sh", "-c"]
    assert merged[0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}]
    assert base["template"]["containers"][0]["command"] == ["vllm", "serve", "x"]  # the inputs are not changed


def test_go_template_fields_are_rendered_from_the_service():
    got = render(["{{ .Spec.Model.Name }}", "{{.Name}}-x", "{{ ChildName .ObjectMeta.Name `-epp-service` }}",
                  "{{ .ObjectMeta.Namespace }}", "{{ .Spec.Parallelism.Tensor }}"], "svc", "ns", "m")
    assert got == ["m", "svc-x", "svc-epp-service", "ns", "{{ .Spec.Parallelism.Tensor }}"]


def test_later_base_refs_override_earlier_ones_and_the_service_overrides_them_all():
    first = {"kind": "LLMInferenceServiceConfig", "metadata": {"name": "one"},
             "spec": {"template": {"containers": [{"name": "main", "image": "i1", "args": ["--port=1"]}]}}}
    second = {"kind": "LLMInferenceServiceConfig", "metadata": {"name": "two"},
              "spec": {"template": {"containers": [{"name": "main", "image": "i2"}]}}}
    service = {"kind": "LLMInferenceService", "metadata": {"name": "s"},
               "spec": {"baseRefs": [{"name": "one"}, {"name": "two"}, {"name": "kserve-config-llm-scheduler"}],
                        "template": {"containers": [{"name": "main", "args": ["--port=3"]}]}}}
    docs = merge_base_refs({"f.yaml": [first, second, service]})["f.yaml"]
    assert len(docs) == 1  # the configs are the service's bases, not workloads of their own
    spec = docs[0]["spec"]
    assert spec["template"]["containers"] == [{"name": "main", "image": "i2", "args": ["--port=3"]}]
    assert spec["baseRefs"] == [{"name": "kserve-config-llm-scheduler"}]  # the ref not in the files stays


# --- pdd check on whole files --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("api", "image", "p_tp", "d_tp", "rule"), [
    ("v1alpha1", "vllm/vllm-openai:v0.11.0", 4, 2, "hetero-tp-p-gt-d-unsupported"),  # prefill TP > decode TP < 0.14.0
    ("v1alpha2", "vllm/vllm-openai:v0.10.1.1", 2, 1, "hetero-tp-p-gt-d-unsupported"),
])
def test_a_pair_whose_lines_are_in_the_base_config_is_judged(tmp_path, capsys, api, image, p_tp, d_tp, rule):
    code, out = _check(tmp_path, capsys, _config_and_service(api, image, p_tp=p_tp, d_tp=d_tp), "pd.yaml")
    assert code == 1 and rule in _errors(out), out


def test_a_side_channel_host_left_unset_in_the_base_config_is_refused(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _config_and_service(side=False), "pd.yaml")
    assert code == 1 and "side-channel-host-not-routable" in _errors(out), out


@pytest.mark.parametrize(("image", "d_extra"), [("vllm/vllm-openai:v0.11.0", ""),
                                                ("vllm/vllm-openai:v0.14.1", "--enforce-eager")])
def test_a_valid_pair_from_a_base_config_passes(tmp_path, capsys, image, d_extra):
    code, out = _check(tmp_path, capsys, _config_and_service(image=image, d_extra=d_extra), "pd.yaml")
    assert code == 0 and not _errors(out) and not out.get("notChecked"), out


def test_a_config_of_another_namespace_is_not_the_services_base(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _config_and_service(config_ns="other"), "pd.yaml")
    assert code == 3 and out.get("notChecked"), out  # the service's own containers stay templated


def _mixed(prefill_args: str, decode_connector: bool) -> str:
    """A v1alpha2 service whose prefill line is KServe's template (VLLM_ADDITIONAL_ARGS ``prefill_args``) and whose
    decode runs its own vllm serve line, with or without NixlConnector."""
    image = "vllm/vllm-openai:v0.14.1"
    decode = {"name": "main", "image": image, "command": ["vllm", "serve", "/mnt/models"],
              "args": ["--port=8001", *([NIXL] if decode_connector else [])], "env": [POD_IP]}
    prefill = {"name": "main", "image": image, "env": [{"name": "VLLM_ADDITIONAL_ARGS", "value": prefill_args}]}
    return yaml.safe_dump({"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceService",
                           "metadata": {"name": "mixed", "namespace": "llm"},
                           "spec": {"model": {"uri": "hf://Qwen/Qwen3-8B", "name": "qwen"},
                                    "prefill": {"parallelism": {"tensor": 1}, "template": {"containers": [prefill]}},
                                    "template": {"containers": [decode]}}}, sort_keys=False)


def test_an_own_decode_line_without_connector_beside_a_templated_prefill_is_an_error(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _mixed("--max-model-len 8192", decode_connector=False), "mixed.yaml")
    assert code == 1 and "kv-connector-missing" in _errors(out), out


def test_an_own_decode_line_with_a_connector_beside_a_templated_prefill_stays_not_checked(tmp_path, capsys):
    nixl = "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"
    code, out = _check(tmp_path, capsys, _mixed(nixl, decode_connector=True), "mixed.yaml")
    assert "kv-connector-missing" not in _errors(out) and out.get("notChecked"), out


@pytest.mark.parametrize(("spec", "role", "first"), [
    ({"prefill": {}}, "prefill", "kserve-config-llm-prefill-template"),
    ({"prefill": {}}, "decode", "kserve-config-llm-decode-template"),
    ({"prefill": {"worker": {}, "parallelism": {"data": 4}}}, "prefill", "kserve-config-llm-prefill-worker-data-parallel"),
    ({"prefill": {}, "worker": {}, "parallelism": {"pipeline": 2}}, "decode",
     "kserve-config-llm-decode-worker-pipeline-parallel"),
    ({}, "P/D", "kserve-config-llm-template"),
    ({"worker": {}, "parallelism": {"dataLocal": 2}}, "P/D", "kserve-config-llm-worker-data-parallel"),
])
def test_the_well_known_config_an_engine_takes_its_line_from(spec, role, first):
    assert well_known_configs(spec, role)[0] == first


def test_a_templated_engines_not_checked_names_its_configs(tmp_path, capsys):
    text = """apiVersion: serving.kserve.io/v1alpha1
kind: LLMInferenceService
metadata: {name: dp}
spec:
  baseRefs: [{name: my-missing-config}]
  model: {uri: "hf://Qwen/Qwen3-8B"}
  prefill:
    worker: {containers: [{name: main, image: ghcr.io/llm-d/llm-d:v0.2.0}]}
    parallelism: {tensor: 1, data: 2}
    template: {containers: [{name: main, image: ghcr.io/llm-d/llm-d:v0.2.0}]}
  template: {containers: [{name: main, image: ghcr.io/llm-d/llm-d:v0.2.0}]}
"""
    code, out = _check(tmp_path, capsys, text, "dp.yaml")
    reasons = " ".join(u["reason"] for u in out["notChecked"])
    assert code == 3, out
    assert "kserve-config-llm-prefill-worker-data-parallel" in reasons and "kserve-config-llm-decode-template" in reasons
    assert "my-missing-config" in reasons
