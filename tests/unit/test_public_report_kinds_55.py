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

import pytest

from pdd_operator.compat.manifests import declared_pd_roles
from tests.unit.test_turn2_variants import check

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
