"""The operator's RBAC (controller/rbac.py): least privilege, the namespaced form, the startup checks,
and the generated docs. That the operator needs no more than this is shown on a real apiserver by
tests/e2e/test_chart.py (the operator runs as the chart's ServiceAccount; the audit log has no 403)."""

from __future__ import annotations

import pytest
import yaml

from pdd_operator.api.constants import GROUP
from pdd_operator.cli import main
from pdd_operator.controller import rbac
from pdd_operator.render.workloads import ROUTER_RULES
from tests.helpers import ROOT

CHART = rbac.Options(namespace="pdd-system", webhook_configuration="pdd", webhook_configuration_mode="ca-bundle",
                     webhook_secret="pdd-webhook-certs")
NAMESPACED = rbac.Options(namespace="pdd-system", watch_namespaces=("team-a", "team-b"), webhook_configuration="pdd",
                          webhook_configuration_mode="ca-bundle", webhook_secret="pdd-webhook-certs")


def all_rules(docs):
    return [(d["kind"], d["metadata"].get("namespace"), r) for d in docs if d["kind"] in ("ClusterRole", "Role")
            for r in d["rules"]]


@pytest.mark.parametrize("options", [rbac.Options(), CHART, NAMESPACED,
                                     rbac.Options(webhook_configuration=GROUP, webhook_configuration_mode="apply")])
def test_no_wildcard_no_delete_and_secrets_only_by_name(options):
    for _, _, rule in all_rules(rbac.manifests(options)):
        for key in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert "*" not in rule.get(key, []), rule
        assert not {"delete", "deletecollection", "escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
        if "secrets" in rule["resources"]:
            assert rule["resourceNames"] == ["pdd-webhook-certs"] and "create" not in rule["verbs"]
        if "validatingwebhookconfigurations" in rule["resources"]:
            assert rule["resourceNames"] == [options.webhook_configuration]
        if "pddeployments" in rule["resources"]:
            assert set(rule["verbs"]) == {"get", "list", "watch"}  # never writes the object itself, only its status


def test_all_namespaces_is_one_cluster_role_and_a_secret_role():
    docs = rbac.manifests(CHART, name="pdd", service_account="pdd-sa")
    kinds = [(d["kind"], d["metadata"].get("namespace")) for d in docs]
    assert kinds == [("ClusterRole", None), ("ClusterRoleBinding", None), ("Role", "pdd-system"), ("RoleBinding", "pdd-system")]
    for d in docs:
        if "subjects" in d:
            assert d["subjects"] == [{"kind": "ServiceAccount", "name": "pdd-sa", "namespace": "pdd-system"}]
            assert d["roleRef"]["name"] == "pdd"


def test_namespaced_form_grants_pddeployments_only_in_the_listed_namespaces():
    docs = rbac.manifests(NAMESPACED)
    (cluster_role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    assert [r["resources"] for r in cluster_role["rules"]] == [["validatingwebhookconfigurations"]]
    roles = {d["metadata"]["namespace"]: d for d in docs if d["kind"] == "Role"}
    assert set(roles) == {"team-a", "team-b", "pdd-system"}
    for ns in ("team-a", "team-b"):
        assert any("pddeployments" in r["resources"] for r in roles[ns]["rules"])
        assert not any("secrets" in r["resources"] for r in roles[ns]["rules"])
    assert [r["resources"] for r in roles["pdd-system"]["rules"]] == [["secrets"]]


def test_no_webhook_no_cluster_role_when_namespaced():
    docs = rbac.manifests(rbac.Options(watch_namespaces=("a",)))
    assert {d["kind"] for d in docs} == {"Role", "RoleBinding"}


def test_the_operator_holds_every_verb_of_the_router_role_it_creates():
    """RBAC escalation prevention: a Role may grant only what its creator holds in that namespace."""
    held = {(r.api_group, res): set(r.verbs) for r in rbac.rules(rbac.Options()) for res in r.resources}
    for rule in ROUTER_RULES:
        for group in rule["apiGroups"]:
            for res in rule["resources"]:
                assert set(rule["verbs"]) <= held[(group, res)]


def test_access_checks_cover_every_verb_per_namespace_and_name():
    checks = rbac.access_checks(NAMESPACED)
    per_ns = [c for c in checks if c.resource == "pddeployments"]
    assert {(c.namespace, c.verb) for c in per_ns} == {(ns, v) for ns in ("team-a", "team-b") for v in ("get", "list", "watch")}
    assert rbac.AccessCheck("admissionregistration.k8s.io", "validatingwebhookconfigurations", "get", "", "pdd") in checks
    assert rbac.AccessCheck("", "secrets", "update", "pdd-system", "pdd-webhook-certs") in checks
    assert all(c.namespace == "" for c in rbac.access_checks(rbac.Options()) if c.resource == "pods")
    n_verbs = sum(len(r.verbs) * len(r.resources) * max(1, len(r.resource_names)) for r in rbac.rules(rbac.Options()))
    assert len(rbac.access_checks(rbac.Options())) == n_verbs


def test_missing_message_names_each_permission_and_the_fix():
    c = rbac.AccessCheck("admissionregistration.k8s.io", "validatingwebhookconfigurations", "get", "", "pdd", why="x")
    msg = rbac.missing_message([c])
    assert "get validatingwebhookconfigurations.admissionregistration.k8s.io 'pdd'" in msg
    assert "pdd rbac" in msg


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="mode must be one of"):
        rbac.Options(webhook_configuration_mode="always")
    with pytest.raises(ValueError, match="listed twice"):
        rbac.Options(watch_namespaces=("a", "a"))


def test_docs_rbac_md_is_generated():
    committed = (ROOT / "docs" / "rbac.md").read_text()
    assert committed == rbac.markdown(), "docs/rbac.md drifted: run `pdd rbac --markdown > docs/rbac.md`"


def test_pdd_rbac_prints_the_objects(capsys):
    assert main(["rbac", "--namespace", "ops", "-w", "a", "--webhook-secret", "s"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert docs == rbac.manifests(rbac.Options(namespace="ops", watch_namespaces=("a",), webhook_configuration=GROUP,
                                               webhook_configuration_mode="ca-bundle", webhook_secret="s"))


def test_pdd_rbac_refuses_a_namespace_listed_twice(capsys):
    assert main(["rbac", "-w", "a", "-w", "a"]) == 2
    assert "--watch-namespace" in capsys.readouterr().err
