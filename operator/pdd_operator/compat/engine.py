"""Evaluate the rules for one P/D pair: which fired, which could not be evaluated, the verdict."""

from __future__ import annotations

from dataclasses import dataclass, field

from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.api.status import Finding
from pdd_operator.compat.pair import PDPair, from_pddeployment
from pdd_operator.compat.rules import CHECKS, Rule
from pdd_operator.compat.rules.base import in_manifest_terms, manifest_fields
from pdd_operator.compat.rules.records import MODEL_CONFIG_UNAVAILABLE, VERSION_UNKNOWN, VERSION_UNVERIFIED
from pdd_operator.vllm.model_config import ModelConfigError, parse_config_json
from pdd_operator.vllm.versions import NEWEST_KNOWN, OLDEST_KNOWN, fmt


@dataclass(frozen=True)
class CompatReport:
    """The outcome of :func:`evaluate`.

    Attributes:
        version: the vLLM version the rules were evaluated for, ``"unknown"`` if none.
        findings: errors first, then warnings, each in rule order (deterministic).
        not_evaluated: ids of version-bounded rules skipped because the version is unknown.
        not_checked: why no rule was evaluated at all (the pair uses a KV connector these rules do not
            describe), or ``""``. Such a pair is neither compatible nor incompatible: ``pdd check`` reports
            it as "not checked" and exits non-zero unless told to allow it.
    """

    version: str
    findings: list[Finding] = field(default_factory=list)
    not_evaluated: list[str] = field(default_factory=list)
    not_checked: str = ""

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def compatible(self) -> bool:
        """True when no error-severity rule fired."""
        return not self.errors


def _in_terms(pair: PDPair, fix: str) -> str:
    return fix if pair.managed else in_manifest_terms(fix)


def _sentence(text: str) -> str:
    return text if text.startswith("vLLM") else text[0].upper() + text[1:]


def _finding(pair: PDPair, rule: Rule, message: str, fix: str, severity: str | None = None) -> Finding:
    if severity not in (None, rule.severity, "warning"):
        raise ValueError(f"rule {rule.id} may only lower its severity, not report {severity!r}")
    fields = manifest_fields(rule.fields, pair.containers, rule.in_manifest)
    return Finding(rule=rule.id, severity=severity or rule.severity, fields=fields, message=message, fix=fix,
                   source=rule.source)


def evaluate(
    target: PDDeploymentSpec | PDPair, rules: tuple[Rule, ...] = CHECKS, model_config: dict | None = None
) -> CompatReport:
    """Check a PDDeployment spec (or an already extracted :class:`PDPair`) against every rule.

    A rule bounded to versions (``since``/``until``) runs only when the version is known and inside
    its bounds; with an unknown version such rules are named in a ``vllm-version-unknown`` warning
    instead of passing silently. ``model_config`` is the model's parsed config.json, if known.
    Never raises for a schema-valid spec.
    """
    pair = from_pddeployment(target, model_config=model_config) if isinstance(target, PDDeploymentSpec) else target
    version = pair.version
    foreign = sorted({f"{r.role} {r.wrapper or r.connector}" for r in pair.roles if r.connector and not r.nixl})
    if foreign:
        return CompatReport(version=fmt(version), not_checked=(
            f"the KV connector is not vLLM's NixlConnector ({', '.join(foreign)}; no NixlConnector inside): "
            "these rules describe NixlConnector prefill/decode only"))
    findings: list[Finding] = []
    skipped: list[str] = []
    for rule in rules:
        if rule.check is None:
            continue
        if rule.version_bounded and version is None:
            skipped.append(rule.id)
            continue
        if not rule.applies_to(version):
            continue
        for message, fix, *severity in rule.check(pair):
            findings.append(_finding(pair, rule, message, _in_terms(pair, fix), *severity))
    if version is None:
        what = "; ".join(pair.notes) if pair.notes else "the vLLM version is not known for both roles"
        findings.append(Finding(
            rule=VERSION_UNKNOWN, severity="warning",
            fields=manifest_fields(("spec.engine.vllmVersion", "spec.engine.image"), pair.containers),
            message=f"{_sentence(what)}; these version-dependent rules were not evaluated: {', '.join(skipped)}.",
            fix=_in_terms(pair, "Set spec.engine.vllmVersion (e.g. 0.20.2) or use an image tag that starts with the version."),
            source="vllm-nixl-facts.md section 7 (version timeline)",
        ))
    elif not (OLDEST_KNOWN <= version <= NEWEST_KNOWN):
        findings.append(Finding(
            rule=VERSION_UNVERIFIED, severity="warning",
            fields=manifest_fields(("spec.engine.vllmVersion", "spec.engine.image"), pair.containers),
            message=f"vLLM {fmt(version)} is outside the versions whose NIXL code these rules were built from "
            f"({fmt(OLDEST_KNOWN)} to 0.33.x); rules were applied as for the nearest known version.",
            fix="Use a vLLM release between 0.20 and 0.33, or review the deployment by hand.",
            source="vllm-nixl-facts.md section 0",
        ))
    findings.sort(key=lambda f: 0 if f.severity == "error" else 1)
    return CompatReport(version=fmt(version), findings=findings, not_evaluated=skipped)


def model_config_unavailable(problem: str) -> Finding:
    """The :data:`MODEL_CONFIG_UNAVAILABLE` warning: the model's config.json from
    ``spec.model.configMapRef`` could not be used, for the reason ``problem`` (a sentence fragment
    naming the ConfigMap and key). The rules then ran on ``spec.model`` and the name tables, so the
    deployment is still checked, with less to go on.
    """
    return Finding(
        rule=MODEL_CONFIG_UNAVAILABLE, severity="warning", fields=["spec.model.configMapRef"],
        message=f"{problem}; rules that need the model's config.json used spec.model and the name tables instead.",
        fix="Create the ConfigMap with the model's config.json under that key, or fix spec.model.configMapRef.",
        source="PDDeployment API (spec.model.configMapRef)",
    )


def model_config_from_configmap(text: str | None, name: str, key: str) -> tuple[dict | None, Finding | None]:
    """The model's config.json from the value of key ``key`` of ConfigMap ``name`` (``None``: the
    ConfigMap or key does not exist), as the operator and ``pdd check`` read ``spec.model.configMapRef``.

    Returns ``(config, None)``, or ``(None, model_config_unavailable(...))`` naming the ConfigMap, the
    key and what is wrong (:func:`~pdd_operator.vllm.model_config.parse_config_json`). Never raises.
    """
    if text is None:
        return None, model_config_unavailable(f"ConfigMap {name!r} or its key {key!r} does not exist")
    try:
        return parse_config_json(text), None
    except ModelConfigError as exc:
        return None, model_config_unavailable(f"ConfigMap {name!r} key {key!r}: {exc}")
