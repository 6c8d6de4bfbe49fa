"""The API models and the CRD generated from them."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from pdd_operator.api.crd import build_crd, crd_yaml, structural
from pdd_operator.api.spec import PDDeploymentSpec
from tests.helpers import EXAMPLES, ROOT, make_spec


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_are_valid_specs(path):
    doc = yaml.safe_load(path.read_text())
    assert doc["apiVersion"] == "pdd-operator.dev/v1alpha1" and doc["kind"] == "PDDeployment"
    PDDeploymentSpec.model_validate(doc["spec"])


def test_committed_crd_matches_the_models():
    committed = (ROOT / "crds" / "pddeployment.yaml").read_text()
    assert committed == crd_yaml(), "crds/ drifted from the models: run `pdd crd --write crds/pddeployment.yaml`"


def _walk(schema: dict, path: str):
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from _walk(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _walk(schema["additionalProperties"], f"{path}{{}}")


def _root_schema() -> dict:
    return build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_every_spec_and_status_field_has_a_description():
    root = _root_schema()
    missing = [
        path for part in ("spec", "status") for path, node in _walk(root["properties"][part], part)
        if "description" not in node and not path.endswith("[]") and not path.endswith("{}")
    ]
    assert missing == []


def test_crd_schema_is_structural():
    for path, node in _walk(_root_schema(), ""):
        assert "type" in node or node.get("x-kubernetes-int-or-string"), path
        assert not {"$ref", "anyOf", "allOf", "oneOf", "title", "$defs"} & node.keys(), path


def test_crd_names_printer_columns_and_status_subresource():
    crd = build_crd()
    names = crd["spec"]["names"]
    assert (names["kind"], names["plural"], names["shortNames"]) == ("PDDeployment", "pddeployments", ["pdd"])
    version = crd["spec"]["versions"][0]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"] if c.get("priority", 0) == 0]
    assert columns == ["Ready", "Prefill", "Decode", "Compatible", "Age"]


def test_crd_carries_enums_bounds_and_defaults():
    spec = _root_schema()["properties"]["spec"]["properties"]
    role = spec["prefill"]["properties"]
    assert role["tensorParallelSize"]["minimum"] == 1 and role["tensorParallelSize"]["default"] == 1
    assert role["gpuMemoryUtilization"]["exclusiveMinimum"] is True and role["gpuMemoryUtilization"]["maximum"] == 1
    assert spec["kvTransfer"]["properties"]["connector"]["enum"] == ["NixlConnector", "NixlPushConnector"]
    assert spec["prefill"]["default"] == {} and spec["model"].get("default") is None
    assert spec["model"]["required"] == ["name"]
    limits = role["resources"]["properties"]["limits"]["additionalProperties"]
    assert limits == {"x-kubernetes-int-or-string": True}


def test_structural_refuses_unions_it_cannot_express():
    with pytest.raises(ValueError):
        structural({"anyOf": [{"type": "string"}, {"type": "object"}]})


@pytest.mark.parametrize(
    "patch, field",
    [
        ({"prefill": {"tensorParalelSize": 2}}, "tensorParalelSize"),
        ({"prefill": {"gpuMemoryUtilization": 1.5}}, "gpuMemoryUtilization"),
        ({"kvTransfer": {"connector": "LMCacheConnector"}}, "connector"),
        ({"decode": {"replicas": -1}}, "replicas"),
        ({"network": {"rdma": {"resourceName": "not a resource"}}}, "resourceName"),
    ],
)
def test_bad_fields_are_refused_naming_the_field(patch, field):
    with pytest.raises(ValidationError) as info:
        make_spec(**patch)
    assert field in str(info.value)


def test_must_match_settings_are_written_once():
    role_fields = set(PDDeploymentSpec.model_fields["prefill"].annotation.model_fields)
    for shared in ("model", "engine", "kv_cache", "kv_transfer", "speculative", "image", "vllm_version",
                   "dtype", "kv_cache_dtype", "connector", "trust_remote_code", "max_model_len"):
        assert shared not in role_fields


def test_rules_reference_is_in_sync():
    from pdd_operator.compat.docs import rules_markdown

    committed = (ROOT / "docs" / "rules.md").read_text()
    assert committed == rules_markdown(), "docs/rules.md drifted: run `pdd rules --markdown > docs/rules.md`"


def test_cel_rules_name_existing_compatibility_rules():
    import re

    from pdd_operator.compat.rules import RULES_BY_ID

    spec = _root_schema()["properties"]["spec"]
    rules = spec["x-kubernetes-validations"]
    assert len(rules) >= 5
    for rule in rules:
        rule_id = re.match(r"\[([a-z0-9-]+)\]", rule["message"]).group(1)
        assert rule_id in RULES_BY_ID and RULES_BY_ID[rule_id].severity == "error"
