"""Variants of what the fifty-fifth public-report set (tests/unit/data/public_reports_55) taught, with negative
controls: a custom resource that declares prefill and decode roles is a P/D deployment even where no engine command
and no KV transfer setting is written in it.

KAITO's MultiRoleInference names its roles by ``type`` and an instance type and builds the vLLM engines from its
preset; a kthena ModelServing (or an AIBrix StormService) may run images whose own entrypoint starts the engine. The
checker cannot judge such engines, so the answer is "not checked" with a reason (exit 3), never "nothing to check"
(exit 4), which says the files hold no P/D at all (:func:`pdd_operator.compat.manifests.declared_pd_roles`). A list
named ``prefill``/``decode`` that is not a workload (llm-d's scheduling profiles), one role alone, or a built-in kind
stays "nothing to check".
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.manifests import declared_pd_roles
from tests.unit.test_turn2_variants import check, container, workload

NOTHING = 4
NOT_CHECKED = 3


def _multiroleinference(model="qwen2.5-coder-7b-instruct", order=("prefill", "decode"), instance="Standard_NC80adis_H100_v5"):
    return {"apiVersion": "kaito.sh/v1alpha1", "kind": "MultiRoleInference", "metadata": {"name": "mri"},
            "spec": {"labelSelector": {"matchLabels": {"apps": "mri"}}, "model": {"name": model},
                     "roles": [{"type": t, "replicas": 2 if t == "decode" else 1, "instanceType": instance}
                               for t in order]}}


def _modelserving(names=("prefill", "decode"), image="registry.example/llm-engine:1.4"):
    roles = [{"name": n, "replicas": 1, "workerReplicas": 0,
              "entryTemplate": {"spec": {"containers": [{"name": "engine", "image": image,
                                                          "ports": [{"containerPort": 8000}]}]}}} for n in names]
    return {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing", "metadata": {"name": "ms"},
            "spec": {"replicas": 1, "template": {"roles": roles}}}


def _stormservice(image="vllm/vllm-openai:v0.20.2"):
    roles = [{"name": n, "replicas": 1, "template": {"spec": {"containers": [{"name": n, "image": image}]}}}
             for n in ("prefill", "decode")]
    return {"apiVersion": "orchestration.aibrix.ai/v1alpha1", "kind": "StormService", "metadata": {"name": "ss"},
            "spec": {"replicas": 1, "template": {"spec": {"roles": roles}}}}


@pytest.mark.parametrize("doc", [
    _multiroleinference(),                                     # another model and instance type than the set's
    _multiroleinference(order=("decode", "prefill")),          # decode listed first
    _modelserving(),                                           # an image whose own entrypoint starts the engine
    _modelserving(names=("prefill-role", "decode-role")),      # role names that carry the phase among other words
    _stormservice(),                                           # vLLM's image with no command: its default server, no
])                                                             # KV transfer settings anywhere
def test_a_custom_resource_declaring_pd_roles_without_engines_is_not_checked(doc, tmp_path, capsys):
    code, out = check(tmp_path, capsys, doc)
    assert code == NOT_CHECKED and not out["results"], out
    [skipped] = out["notChecked"]
    assert skipped["object"] == f"{doc['kind']}/{doc['metadata']['name']}"
    assert "declares prefill and decode roles" in skipped["reason"] and "roles" in skipped["reason"]


def test_scheduling_profiles_named_prefill_and_decode_are_no_workload(tmp_path, capsys):
    epp = {"apiVersion": "inference.networking.x-k8s.io/v1alpha1", "kind": "EndpointPickerConfig",
           "metadata": {"name": "epp"},
           "schedulingProfiles": [{"name": "prefill", "plugins": [{"pluginRef": "prefill-filter"}]},
                                  {"name": "decode", "plugins": [{"pluginRef": "decode-filter"}]}]}
    assert declared_pd_roles(epp) is None
    code, out = check(tmp_path, capsys, epp)
    assert code == NOTHING and not out["notChecked"]


def test_one_role_alone_or_a_built_in_kind_is_nothing_to_check(tmp_path, capsys):
    single = _modelserving(names=("prefill",))
    assert declared_pd_roles(single) is None
    code, out = check(tmp_path, capsys, single)
    assert code == NOTHING and not out["notChecked"]
    builtin = {**_modelserving(), "apiVersion": "v1", "kind": "List"}  # a built-in group runs no such controller
    code, out = check(tmp_path, capsys, builtin)
    assert code == NOTHING and not out["notChecked"]


def test_the_path_names_the_role_list():
    assert declared_pd_roles(_multiroleinference()) == "spec.roles"
    assert declared_pd_roles(_modelserving()) == "spec.template.roles"
    assert declared_pd_roles(_stormservice()) == "spec.template.spec.roles"


# --- expandable_segments with a KV connector the rules do not describe -------------------------------------------
#
# vLLM from 0.21.0 refuses expandable_segments:True at startup whatever KV connector kv_transfer_config names
# (vllm/config/vllm.py VllmConfig._verify_kv_transfer_compat, 0.21.0-0.34.0; absent from 0.20.2). The set's kthena
# LMCache template runs vllm/vllm-openai:latest (no release: not checked); on a release the refusal is a promise.


def _connector_pair(image, connector="LMCacheConnectorV1", roles=("kv_producer", "kv_consumer"), alloc=True,
                    extra=()):
    docs = []
    for role, kv_role in zip(("prefill", "decode"), roles, strict=True):
        kv = json.dumps({"kv_connector": connector, "kv_role": kv_role})
        env = [{"name": "PYTORCH_CUDA_ALLOC_CONF", "value": "expandable_segments:True"}] if alloc else []
        c = container(["Qwen/Qwen3-8B", "--kv-transfer-config", kv, *extra], image=image, env=env)
        docs.append(workload(f"q-{role}", role, c, app="q"))
    return docs


@pytest.mark.parametrize(("image", "connector", "roles"), [
    ("vllm/vllm-openai:v0.21.0", "LMCacheConnectorV1", ("kv_producer", "kv_consumer")),
    ("vllm/vllm-openai:v0.25.0", "MooncakeConnector", ("kv_producer", "kv_consumer")),
    ("vllm/vllm-openai:v0.34.0", "LMCacheConnectorV1", ("kv_both", "kv_both")),
])
def test_expandable_segments_stop_an_engine_with_any_connector_from_0_21(image, connector, roles, tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_connector_pair(image, connector, roles))
    assert code == 1, out
    messages = [f["message"] for r in out["results"] for f in r["findings"]
                if f["rule"] == "expandable-segments-with-nixl" and f["severity"] == "error"]
    assert len(messages) == 2 and all(connector in m and "NIXL registered" not in m for m in messages), messages


@pytest.mark.parametrize(("image", "alloc", "extra"), [
    ("vllm/vllm-openai:v0.20.2", True, ()),          # before 0.21 vLLM starts; LMCache's transfer is not NIXL's
    ("vllm/vllm-openai:latest", True, ()),           # no release: no promise (the set's template)
    ("vllm/vllm-openai:v0.22.0", True, ("--enable-cumem-allocator",)),  # the KV cache in the cumem pool
    ("vllm/vllm-openai:v0.21.0", False, ()),         # no expandable segments
])
def test_without_a_promise_the_other_connector_stays_not_checked(image, alloc, extra, tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_connector_pair(image, alloc=alloc, extra=extra))
    assert code == NOT_CHECKED and not out["results"], out
