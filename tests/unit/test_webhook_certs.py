"""Webhook certificates kept in a Secret (controller/tls.plan_certificates, controller/webhook_certs):
made once, the serving certificate renewed under the same CA before expiry, replicas converge on one
Secret. tests/e2e/test_chart.py runs this against a real Secret through the chart's RBAC."""

from __future__ import annotations

import base64
import copy
import stat
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from kubernetes.client.exceptions import ApiException
from prometheus_client import REGISTRY

from pdd_operator.controller import tls, webhook_certs

HOST = "pdd-operator-webhook.ops.svc"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def cert(data, key=tls.CERT_FILE) -> x509.Certificate:
    return x509.load_pem_x509_certificate(data[key])


def test_empty_secret_gets_a_ca_and_a_serving_certificate_then_nothing_changes():
    data, changes = tls.plan_certificates({}, [HOST], now=T0)
    assert set(data) == set(tls.SECRET_KEYS) and changes and changes[0].startswith("new CA")
    cert(data).verify_directly_issued_by(cert(data, tls.CA_FILE))
    assert tls.covers(cert(data), HOST)
    again, changes = tls.plan_certificates(data, [HOST], now=T0 + timedelta(days=200))
    assert changes == [] and again == data


def test_serving_certificate_is_renewed_under_the_same_ca_when_a_third_of_its_life_is_left():
    data, _ = tls.plan_certificates({}, [HOST], now=T0, serving_days=90)
    not_yet, changes = tls.plan_certificates(data, [HOST], now=T0 + timedelta(days=59))
    assert changes == []
    renewed, changes = tls.plan_certificates(data, [HOST], now=T0 + timedelta(days=61), serving_days=90)
    assert changes and changes[0].startswith("new serving certificate (it expires at")
    assert renewed[tls.CA_FILE] == data[tls.CA_FILE] and renewed[tls.CA_KEY_FILE] == data[tls.CA_KEY_FILE]
    assert renewed[tls.CERT_FILE] != data[tls.CERT_FILE]
    cert(renewed).verify_directly_issued_by(cert(data, tls.CA_FILE))


def test_new_host_means_a_new_serving_certificate_not_a_new_ca():
    data, _ = tls.plan_certificates({}, [HOST], now=T0)
    moved, changes = tls.plan_certificates(data, ["other.ops.svc"], now=T0)
    assert changes == ["new serving certificate (it does not name other.ops.svc)"]
    assert moved[tls.CA_FILE] == data[tls.CA_FILE] and tls.covers(cert(moved), "other.ops.svc")


def test_a_broken_ca_is_replaced_and_a_foreign_serving_certificate_too():
    data, _ = tls.plan_certificates({}, [HOST], now=T0)
    other, _ = tls.plan_certificates({}, [HOST], now=T0)
    mixed = {**data, tls.CA_KEY_FILE: other[tls.CA_KEY_FILE]}
    fixed, changes = tls.plan_certificates(mixed, [HOST], now=T0)
    assert changes[0] == "new CA (the private key does not belong to the certificate)"
    assert fixed[tls.CA_FILE] != data[tls.CA_FILE]
    foreign = {**data, tls.CERT_FILE: other[tls.CERT_FILE], tls.KEY_FILE: other[tls.KEY_FILE]}
    fixed, changes = tls.plan_certificates(foreign, [HOST], now=T0)
    assert len(changes) == 1 and changes[0].startswith("new serving certificate")
    assert fixed[tls.CA_FILE] == data[tls.CA_FILE]


class SecretStore:
    """The apiserver's optimistic concurrency for one Secret: replace with a stale resourceVersion is 409."""

    def __init__(self, data: dict | None = None, exists: bool = True) -> None:
        self.exists, self.data, self.rv, self.replaces = exists, data, 1, 0
        self.before_replace = None

    def read(self, namespace, name):
        if not self.exists:
            raise ApiException(status=404)
        return {"type": "Opaque", "metadata": {"resourceVersion": str(self.rv), "labels": {"a": "b"}},
                **({"data": copy.deepcopy(self.data)} if self.data is not None else {})}

    def replace(self, namespace, name, body):
        if self.before_replace is not None:
            hook, self.before_replace = self.before_replace, None
            hook()
        if body["metadata"]["resourceVersion"] != str(self.rv):
            raise ApiException(status=409)
        assert body["metadata"]["labels"] == {"a": "b"}
        self.data, self.rv, self.replaces = body["data"], self.rv + 1, self.replaces + 1


REF = webhook_certs.SecretRef("ops", "pdd-operator-webhook-certs", (HOST,))


def test_sync_fills_the_secret_once_and_writes_the_serving_files(tmp_path):
    store = SecretStore()
    files, changes = webhook_certs.sync(store, REF, tmp_path)
    assert changes and store.replaces == 1
    secret = {k: base64.b64decode(v) for k, v in store.data.items()}
    assert files.certfile.read_bytes() == secret[tls.CERT_FILE] and files.cafile.read_bytes() == secret[tls.CA_FILE]
    assert stat.S_IMODE(files.keyfile.stat().st_mode) == 0o600 and not (tmp_path / tls.CA_KEY_FILE).exists()
    files2, changes = webhook_certs.sync(store, REF, tmp_path / "replica-2")
    assert changes == [] and store.replaces == 1
    assert files2.certfile.read_bytes() == files.certfile.read_bytes()
    expiry = REGISTRY.get_sample_value("pdd_webhook_certificate_expiry_timestamp_seconds", {"certificate": "serving"})
    assert expiry == cert(secret).not_valid_after_utc.timestamp()


def test_two_replicas_starting_together_converge_on_one_ca(tmp_path):
    store = SecretStore()
    # Replica B writes between replica A's read and A's write: A's update conflicts, A re-reads and
    # serves B's certificates instead of overwriting them.
    store.before_replace = lambda: webhook_certs.sync(store, REF, tmp_path / "b")
    files_a, _ = webhook_certs.sync(store, REF, tmp_path / "a")
    assert store.replaces == 1
    assert files_a.cafile.read_bytes() == (tmp_path / "b" / "ca.crt").read_bytes()
    assert files_a.certfile.read_bytes() == (tmp_path / "b" / "tls.crt").read_bytes()


def test_missing_secret_is_a_clear_error(tmp_path):
    with pytest.raises(webhook_certs.SecretMissing, match="chart creates it.*create secret generic"):
        webhook_certs.sync(SecretStore(exists=False), REF, tmp_path)
