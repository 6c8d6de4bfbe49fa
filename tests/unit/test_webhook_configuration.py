"""The webhook configuration as the Helm chart runs the operator: it patches only ``caBundle`` of the
chart's ValidatingWebhookConfiguration (``--webhook-configuration-mode=ca-bundle``), never creates it,
and leaves it alone with cert-manager (``none``). The merge of the partial apply is the apiserver's;
tests/e2e/test_chart.py shows it on a real one."""

from __future__ import annotations

import base64

import pytest

from pdd_operator.controller import webhook
from tests.helpers import FakeAdmissionApi as AdmissionApi


def chart_configuration(ca_bundle: bytes | None = None) -> dict:
    conf = webhook.webhook_configuration({"service": {"name": "pdd", "namespace": "ops", "port": 443,
                                                      "path": "/validate-pddeployment"}}, b"", name="pdd")
    if ca_bundle is None:
        del conf["webhooks"][0]["clientConfig"]["caBundle"]
    else:
        conf["webhooks"][0]["clientConfig"]["caBundle"] = base64.b64encode(ca_bundle).decode()
    return conf


def test_ca_bundle_patch_holds_only_the_ca_bundle():
    body = webhook.ca_bundle_patch("pdd", b"PEM")
    assert body["metadata"] == {"name": "pdd"}
    assert body["webhooks"] == [{"name": webhook.WEBHOOK_NAME,
                                 "clientConfig": {"caBundle": base64.b64encode(b"PEM").decode()}}]


def test_ensure_ca_bundle_patches_when_missing_or_different_and_only_then():
    api = AdmissionApi(chart_configuration())
    assert webhook.ensure_ca_bundle(api, "pdd", b"PEM")
    ((name, body, kwargs),) = api.patches
    assert name == "pdd" and body == webhook.ca_bundle_patch("pdd", b"PEM")
    assert kwargs["_content_type"] == "application/apply-patch+yaml" and kwargs["field_manager"] == "pdd-operator"
    api = AdmissionApi(chart_configuration(b"PEM"))
    assert not webhook.ensure_ca_bundle(api, "pdd", b"PEM") and api.patches == []
    assert webhook.ensure_ca_bundle(api, "pdd", b"NEW") and len(api.patches) == 1


def test_ensure_ca_bundle_never_creates_the_configuration():
    api = AdmissionApi(None)
    with pytest.raises(webhook.ConfigurationMissing, match="does not exist.*Helm chart"):
        webhook.ensure_ca_bundle(api, "pdd", b"PEM")
    conf = chart_configuration()
    conf["webhooks"][0]["name"] = "other.example.com"
    with pytest.raises(webhook.ConfigurationMissing, match="no webhook named validate-pddeployment"):
        webhook.ensure_ca_bundle(AdmissionApi(conf), "pdd", b"PEM")
    assert api.patches == []


def test_keep_once_follows_the_mode(tmp_path):
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"PEM")
    target = {"url": "https://127.0.0.1:1/validate-pddeployment"}
    api = AdmissionApi(None)
    assert webhook.keep_once(api, webhook.Endpoint(server=None, target=target, ca_file=ca, mode="apply"))
    assert api.patches[0][1] == webhook.webhook_configuration(target, b"PEM")
    none = AdmissionApi(None)
    assert not webhook.keep_once(none, webhook.Endpoint(server=None, target=target, ca_file=ca, mode="none"))
    assert none.patches == []
    with pytest.raises(webhook.ConfigurationMissing):
        webhook.keep_once(AdmissionApi(None), webhook.Endpoint(server=None, target=target, ca_file=ca,
                                                               configuration="pdd", mode="ca-bundle"))
