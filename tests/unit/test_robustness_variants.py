"""The held-back variants of issue 11 (tests/robustness_variants.py) through the operator's own checks,
without a cluster: what the reconcile does with each spec and ConfigMap (never raises; refuses what
cannot run, naming the field; renders children for the rest), and ``pdd check`` on each document."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import ValidationError

from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.cli import main
from pdd_operator.compat.engine import model_config_from_configmap
from pdd_operator.controller.plan import plan_children
from pdd_operator.controller.reconcile import check_spec, invalid_spec_report
from pdd_operator.render.admission import check_name, is_image_reference
from tests.robustness_variants import VARIANTS, Variant


def as_stored(body: str) -> dict:
    """The document as the apiserver stores it: Go's JSON decoder replaces each lone UTF-16
    surrogate escape by U+FFFD (encoding/json ``unquote``)."""
    return json.loads(re.sub(r"[\ud800-\udfff]", "\ufffd", json.dumps(json.loads(body), ensure_ascii=False)))


def _report(v: Variant):
    doc = as_stored(v.body)
    try:
        spec = PDDeploymentSpec.model_validate(doc["spec"])
    except ValidationError as exc:
        return None, invalid_spec_report(exc), None
    config, problem = None, None
    if v.config_maps:
        cm = v.config_maps[0]
        config, problem = model_config_from_configmap((cm.get("data") or {}).get("config.json"),
                                                      cm["metadata"]["name"], "config.json")
    report, config = check_spec(spec, v.name, "ns", config, problem)
    return spec, report, config


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.id for v in VARIANTS])
def test_variant_gets_a_verdict_from_the_reconciles_checks(variant):
    spec, report, config = _report(variant)
    errors = [f for f in report.findings if f.severity == "error"] + [
        f for f in check_name(variant.name)]
    plan = plan_children(name=variant.name, namespace="ns", uid="u", generation=1, spec=spec, report=report,
                         previous_status={}, last_good=None, model_config=config, deployments={})
    if variant.verdict == "refuse":
        assert errors, f"{variant.id} was not refused"
        assert any(fld.startswith(variant.field) for f in errors for fld in f.fields), [f.fields for f in errors]
        assert all(f.fix for f in errors)
    elif variant.verdict == "run":
        assert not errors, [(f.rule, f.message) for f in errors]
        assert plan.children and plan.advances


def test_an_unparsable_image_is_refused_but_real_ones_are_not():
    for image in ("vllm/vllm-openai:v0.24.0", "ghcr.io/pdd-operator/vllm-nixl:v0.20.2", "localhost:5000/a/b:c",
                  "[::1]:5000/x:y", "busybox", "x@sha256:" + "a" * 64, "Registry.Example/x"):
        assert is_image_reference(image), image
    for image in ("a:b:c", "vllm/vllm-openai:v0.24.0-\U0001F999", "vllm/VLLM:v1", "x:" + "t" * 129, "x" * 256,
                  "x@sha256:abc", ""):
        assert not is_image_reference(image), image


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.verdict != "either"], ids=lambda v: v.id)
def test_pdd_check_judges_each_variant_like_the_reconcile(variant, tmp_path, capsys):
    docs = [{"apiVersion": "v1", "kind": "ConfigMap", **cm} for cm in variant.config_maps]
    path = tmp_path / "in.yaml"
    path.write_text("\n---\n".join([*map(json.dumps, docs), variant.body]))
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == (1 if variant.verdict == "refuse" else 0), out


def test_pdd_check_names_a_lone_surrogate_instead_of_crashing(tmp_path, capsys):
    lone = next(v for v in VARIANTS if v.id == "surrogate-lone-high")
    path = tmp_path / "in.json"
    path.write_text(lone.body)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "spec.model.servedModelName holds a lone UTF-16 surrogate" in err and "Fix:" in err
