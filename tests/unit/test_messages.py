"""One text for a finding and one path for a refused field, at every edge: ``pdd check``/``pdd render``,
the admission webhook, and the status conditions."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from pdd_operator.api.messages import SPEC_INVALID_RULE, field_path, finding_text, invalid_spec_findings
from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.api.status import Finding
from pdd_operator.cli import main
from pdd_operator.compat import evaluate
from pdd_operator.controller import webhook
from pdd_operator.controller.reconcile import invalid_spec_report
from pdd_operator.controller.status import RoleObservation, fold_status
from tests.helpers import make_spec, merge

BASE = make_spec().model_dump(mode="json", by_alias=True, exclude_none=True)


@pytest.mark.parametrize(
    "loc, path",
    [
        (("prefill", "tensorParallelSize"), "spec.prefill.tensorParallelSize"),
        (("prefill", "tolerations", 0, "effect"), "spec.prefill.tolerations[0].effect"),
        (("prefill", "resources", "limits", "nvidia.com/gpu"), 'spec.prefill.resources.limits["nvidia.com/gpu"]'),
        ((), "spec"),
    ],
)
def test_field_path(loc, path):
    assert field_path(loc) == path


def test_finding_text_with_and_without_a_fix():
    f = Finding(rule="r", severity="error", message="Broken.", fix="Mend it.")
    assert finding_text(f) == "[r] Broken. Fix: Mend it."
    assert finding_text(f.model_copy(update={"fix": ""})) == "[r] Broken."


def _refused(patch: dict) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        PDDeploymentSpec.model_validate(merge(BASE, patch))
    return info.value


def test_invalid_spec_findings_name_each_field_once_with_a_fix():
    exc = _refused({"prefill": {"tensorParallelSize": 0, "tensorParalelSize": 2, "tolerations": [{"effect": "Soon"}]}})
    findings = invalid_spec_findings(exc)
    assert {f.rule for f in findings} == {SPEC_INVALID_RULE} and {f.severity for f in findings} == {"error"}
    by_field = {f.fields[0]: f for f in findings}
    assert set(by_field) == {"spec.prefill.tensorParallelSize", "spec.prefill.tensorParalelSize",
                             "spec.prefill.tolerations[0].effect"}
    assert by_field["spec.prefill.tensorParallelSize"].message.startswith("spec.prefill.tensorParallelSize: Input ")
    assert "`kubectl explain pdd.spec.prefill.tensorParallelSize`" in by_field["spec.prefill.tensorParallelSize"].fix
    assert by_field["spec.prefill.tensorParalelSize"].fix.startswith("Remove spec.prefill.tensorParalelSize")
    assert "`kubectl explain pdd.spec.prefill.tolerations.effect`" in by_field["spec.prefill.tolerations[0].effect"].fix


def _manifest(tmp_path, spec: dict) -> str:
    path = tmp_path / "pdd.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment",
                                    "metadata": {"name": "demo"}, "spec": spec}))
    return str(path)


def _status_conditions(report) -> dict:
    status = fold_status(
        generation=2, previous={}, report=report, applied_generation=1,
        observations={"prefill": RoleObservation(exists=True), "decode": RoleObservation(exists=True)},
        now="2026-11-29T10:00:00Z",
    )
    return {c["type"]: c for c in status["conditions"]}


def test_a_bad_field_reads_the_same_in_check_render_webhook_and_status(tmp_path, capsys):
    spec = merge(BASE, {"prefill": {"tolerations": [{"effect": "Soon"}]}})
    (finding,) = invalid_spec_findings(_refused({"prefill": {"tolerations": [{"effect": "Soon"}]}}))
    text = finding_text(finding)
    assert text.startswith("[spec-invalid] spec.prefill.tolerations[0].effect: ") and " Fix: " in text

    path = _manifest(tmp_path, spec)
    assert main(["check", path]) == 1  # refused, as the webhook refuses it (not unreadable input)
    assert f"\n  error: {text}\n" in capsys.readouterr().out + "\n"
    assert main(["render", path]) == 2
    assert f"\n  {text}\n" in capsys.readouterr().err + "\n"

    verdict = webhook.review("CREATE", {"metadata": {"name": "demo"}, "spec": spec})
    assert not verdict.allowed and text in verdict.message.splitlines()

    with pytest.raises(ValidationError) as info:
        PDDeploymentSpec.model_validate(spec)
    c = _status_conditions(invalid_spec_report(info.value))
    assert c["Compatible"]["message"] == text
    assert c["Stalled"]["message"].endswith(": " + text)


def test_a_finding_reads_the_same_in_check_render_webhook_and_status(tmp_path, capsys):
    spec = merge(BASE, {"prefill": {"tensorParallelSize": 2}, "decode": {"tensorParallelSize": 3}})
    report = evaluate(PDDeploymentSpec.model_validate(spec))
    (finding,) = [f for f in report.errors if f.rule == "tp-divisibility"]
    text = finding_text(finding)

    path = _manifest(tmp_path, spec)
    assert main(["check", path]) == 1
    assert f"  error: {text}" in capsys.readouterr().out.splitlines()
    assert main(["render", path]) == 1
    assert f"error: demo: {text}" in capsys.readouterr().err.splitlines()

    verdict = webhook.review("CREATE", {"metadata": {"name": "demo"}, "spec": spec})
    assert not verdict.allowed and text in verdict.message.splitlines()

    c = _status_conditions(report)
    assert text in c["Compatible"]["message"] and text in c["Stalled"]["message"]
