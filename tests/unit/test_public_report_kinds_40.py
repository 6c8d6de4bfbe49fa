"""Variants of what the fortieth public-report set (tests/unit/data/public_reports_40) taught, with negative controls.

- The roles of an NVIDIA Grove PodCliqueSet's cliques (``spec.template.cliques[]``: ``name``, ``labels``,
  ``spec.roleName``, ``spec.podSpec``) were not read: two ``kv_both`` engines whose models differ could not be told
  apart as prefill and decode, and the pair went "not checked" (``_grove_clique_role`` in
  :mod:`pdd_operator.compat.manifests`).
- A vLLM connector name in another case (``NIXLConnector``) was read as a connector other than NIXL
  (``kv-connector-mixed``: "no KV moves") while vLLM's factory looks names up exactly and the engine never starts
  (``kv-connector-unregistered``, :func:`pdd_operator.compat.rules.connector_registry.miscased`).
"""

from __future__ import annotations

import pytest

from pdd_operator.compat.rules.connector_registry import miscased
from tests.unit.test_turn2_variants import KV, POD_IP, check, container, pd, rules

# --- Grove PodCliqueSet cliques ----------------------------------------------------------------------------------


def _clique(name, args, model, image, role_name=None, labels=None, gpus=1):
    c = container([model, *args], image=image, gpus=gpus)
    spec = {"replicas": 1, "minAvailable": 1, "podSpec": {"containers": [c]}}
    if role_name:
        spec["roleName"] = role_name
    out = {"name": name, "spec": spec}
    if labels:
        out["labels"] = labels
    return out


def _pcs(p_clique, d_clique):
    return {"apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet", "metadata": {"name": "pd"},
            "spec": {"replicas": 1, "template": {"cliques": [p_clique, d_clique]}}}


@pytest.mark.parametrize(("p_model", "d_model", "image", "how"), [
    ("Qwen/Qwen3-8B", "Qwen/Qwen3-4B", "vllm/vllm-openai:v0.24.0", "name"),
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "vllm/vllm-openai:v0.20.0", "roleName"),
    ("openai/gpt-oss-120b", "openai/gpt-oss-20b", "vllm/vllm-openai:v0.19.1", "labels"),
])
def test_grove_clique_roles_pair_kv_both_engines_of_different_models(tmp_path, capsys, p_model, d_model, image, how):
    args = ["--kv-transfer-config", KV]
    if how == "name":
        p, d = _clique("prefill", args, p_model, image), _clique("decode", args, d_model, image)
    elif how == "roleName":
        p = _clique("workers-a", args, p_model, image, role_name="prefill")
        d = _clique("workers-b", args, d_model, image, role_name="decode")
    else:
        p = _clique("pool-a", args, p_model, image, labels={"llm-d.ai/role": "prefill"})
        d = _clique("pool-b", args, d_model, image, labels={"llm-d.ai/role": "decode"})
    code, out = check(tmp_path, capsys, _pcs(p, d))
    assert code == 1 and "model-mismatch" in rules(out, "error"), out


def test_grove_cliques_of_one_model_stay_compatible(tmp_path, capsys):
    args = ["--kv-transfer-config", KV]
    p = _clique("prefill", args, "Qwen/Qwen3-8B", "vllm/vllm-openai:v0.24.0")
    d = _clique("decode", [*args, "--tensor-parallel-size", "2"], "Qwen/Qwen3-8B", "vllm/vllm-openai:v0.24.0", gpus=2)
    code, out = check(tmp_path, capsys, _pcs(p, d))
    assert code == 0 and not rules(out, "error"), out


def test_cliques_without_a_role_hint_stay_unpaired(tmp_path, capsys):
    """Negative control: clique names that name no role give the engines no role; the two kv_both engines of
    different models are not made a pair (not checked, not an error)."""
    args = ["--kv-transfer-config", KV]
    p = _clique("pool-a", args, "Qwen/Qwen3-8B", "vllm/vllm-openai:v0.24.0")
    d = _clique("pool-b", args, "Qwen/Qwen3-4B", "vllm/vllm-openai:v0.24.0")
    code, out = check(tmp_path, capsys, _pcs(p, d))
    assert code == 3 and "model-mismatch" not in rules(out), out


def test_a_clique_shape_outside_a_podcliqueset_is_not_a_clique(tmp_path, capsys):
    """Negative control: the same name/spec.podSpec shape under another kind is not read as Grove's."""
    args = ["--kv-transfer-config", KV]
    doc = _pcs(_clique("prefill", args, "Qwen/Qwen3-8B", "vllm/vllm-openai:v0.24.0"),
               _clique("decode", args, "Qwen/Qwen3-4B", "vllm/vllm-openai:v0.24.0"))
    doc["kind"], doc["apiVersion"] = "SomethingElse", "example.com/v1"
    code, out = check(tmp_path, capsys, doc)
    assert "model-mismatch" not in rules(out), out


# --- a vLLM connector name in another case -----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "right"), [
    ("NIXLConnector", "NixlConnector"), ("nixlconnector", "NixlConnector"), ("MoonCakeConnector", "MooncakeConnector"),
    ("LMCacheConnectorv1", "LMCacheConnectorV1"), ("NixlConnector", None), ("MyConnector", None), (None, None)])
def test_miscased_names_map_to_vllms_spelling(name, right):
    assert miscased(name) == right


@pytest.mark.parametrize(("role", "name", "image", "model"), [
    ("decode", "NIXLConnector", "vllm/vllm-openai:v0.19.1", "Qwen/Qwen3-8B"),
    ("prefill", "nixlconnector", "vllm/vllm-openai:v0.24.0", "meta-llama/Llama-3.1-8B-Instruct"),
    ("decode", "NIXLConnector", "vllm/vllm-openai:v0.11.0", "Qwen/Qwen3-8B"),
])
def test_a_miscased_connector_name_is_unregistered_not_mixed(tmp_path, capsys, role, name, image, model):
    good = KV
    bad = KV.replace("NixlConnector", name)
    p_kv, d_kv = (bad, good) if role == "prefill" else (good, bad)
    docs = pd("case", ["--kv-transfer-config", p_kv], ["--kv-transfer-config", d_kv], model=model, image=image)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "kv-connector-unregistered" in rules(out, "error"), out
    assert "kv-connector-mixed" not in rules(out), out


def test_a_miscased_name_with_a_module_path_is_a_custom_class(tmp_path, capsys):
    """Negative control: with kv_connector_module_path the factory imports the class by that name from the module,
    so the registry's spelling does not matter."""
    bad = '{"kv_connector":"NIXLConnector","kv_role":"kv_both","kv_connector_module_path":"my_pkg.connectors"}'
    docs = pd("case", ["--kv-transfer-config", KV], ["--kv-transfer-config", bad], image="vllm/vllm-openai:v0.24.0")
    code, out = check(tmp_path, capsys, *docs)
    assert "kv-connector-unregistered" not in rules(out), out


def test_vllms_own_spelling_is_not_refused(tmp_path, capsys):
    """Negative control: NixlConnector on both roles."""
    docs = pd("case", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV], image="vllm/vllm-openai:v0.19.1",
              env=[POD_IP])
    code, out = check(tmp_path, capsys, *docs)
    assert "kv-connector-unregistered" not in rules(out), out
