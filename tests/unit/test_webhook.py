"""The validating admission webhook without a cluster: the decision (:func:`review`), the kopf handler,
the webhook configuration, and the TLS certificates (checked with ``cryptography`` and a real TLS
handshake on loopback)."""

from __future__ import annotations

import asyncio
import base64
import copy
import ipaddress
import socket
import ssl
import stat
import threading
from datetime import UTC, datetime, timedelta

import kopf
import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from pdd_operator.cli import build_parser
from pdd_operator.compat import evaluate
from pdd_operator.controller import tls, webhook
from pdd_operator.controller.webhook import review
from tests.helpers import HYBRID, FakeAdmissionApi, merge

LLAMA = {
    "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "hfArchitecture": "LlamaForCausalLM", "numKvHeads": 8},
    "engine": {"image": "vllm/vllm-openai:v0.20.2"},
    "prefill": {"tensorParallelSize": 1, "blockSize": 16},
    "decode": {"tensorParallelSize": 2, "blockSize": 16},
    "network": {"rdma": {"resourceName": "rdma/ib", "count": 1}},
}
NEMOTRON = HYBRID


def obj(spec: dict, name: str = "x", **meta) -> dict:
    return {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment",
            "metadata": {"name": name, "namespace": "ns", **meta}, "spec": copy.deepcopy(spec)}


# --- the decision -----------------------------------------------------------------------------------


def rollout_warnings(verdict: webhook.Verdict) -> list[str]:
    return [w for w in verdict.warnings if w.startswith(f"[{webhook.ROLLOUT_RULE}]")]


def test_compatible_spec_is_allowed_with_exactly_the_rule_warnings():
    verdict = review("CREATE", obj(LLAMA))
    assert verdict.allowed and verdict.message == ""
    expected = [webhook.finding_text(f) for f in evaluate(webhook.parse_spec(obj(LLAMA))).warnings]
    assert verdict.warnings == expected
    assert not [w for w in verdict.warnings if w.startswith("[block-size-partial]")]


def test_error_is_refused_with_rule_id_message_and_fix():
    verdict = review("CREATE", obj(merge(LLAMA, {"prefill": {"tensorParallelSize": 2},
                                               "decode": {"tensorParallelSize": 3}}), name="bad"))
    assert not verdict.allowed
    assert verdict.message.startswith("PDDeployment bad cannot work with vLLM 0.20.2")
    line = next(x for x in verdict.message.splitlines() if x.startswith("[tp-divisibility]"))
    assert "Fix:" in line


def test_all_errors_are_reported_at_once():
    spec = merge(NEMOTRON, {"kvCache": {"ssmConvStateLayout": "SD"}, "decode": {"blockSize": 256}})
    verdict = review("CREATE", obj(spec))
    assert not verdict.allowed
    rules = {line.split("]")[0] + "]" for line in verdict.message.splitlines()[1:]}
    assert rules >= {"[ssm-conv-layout-ds]", "[block-size-hma]"}
    assert all("Fix:" in line for line in verdict.message.splitlines()[1:])


#: LLAMA on a vLLM whose default block size depends on the GPU (0.29+): a role without blockSize is a warning.
LLAMA_030 = merge(LLAMA, {"engine": {"image": "vllm/vllm-openai:v0.30.0"}})
#: As LLAMA_030 with a fine-tune whose config.json the checker does not know, so its head size, and the decode's
#: default block size from 0.29, are not known.
FINE_TUNE_030 = merge(LLAMA_030, {"model": {"name": "NousResearch/Hermes-3-Llama-3.1-8B"}})


def test_warnings_are_admission_warnings_and_allowed():
    spec = merge(FINE_TUNE_030, {"decode": {"blockSize": None}})
    del spec["decode"]["blockSize"]
    verdict = review("CREATE", obj(spec))
    assert verdict.allowed
    assert [w for w in verdict.warnings if w.startswith("[block-size-partial] ")]
    assert all("Fix:" in w for w in verdict.warnings)


def test_invalid_fields_are_refused_naming_each_field():
    spec = merge(LLAMA, {"prefill": {"tensorParallelSize": 0, "tensorParalelSize": 2},
                         "engine": {"imagePullPolicy": "Sometimes"}})
    verdict = review("CREATE", obj(spec))
    assert not verdict.allowed
    text = verdict.message
    assert "invalid spec (3 field(s))" in text
    for path in ("spec.prefill.tensorParallelSize", "spec.prefill.tensorParalelSize", "spec.engine.imagePullPolicy"):
        assert f"[spec-invalid] {path}: " in text, text


def test_missing_spec_is_refused():
    verdict = review("CREATE", {"metadata": {"generateName": "pd-"}})
    assert not verdict.allowed and "PDDeployment pd-*" in verdict.message and "spec.model" in verdict.message


@pytest.mark.parametrize("operation", ["DELETE", "CONNECT", None])
def test_other_operations_are_allowed(operation):
    assert review(operation, obj({"model": {}}), obj({})).allowed


# --- updates ----------------------------------------------------------------------------------------

MUST_MATCH_CHANGES = [
    ("spec.model.name", {"model": {"name": "meta-llama/Llama-3.1-8B"}}),
    ("spec.model.revision", {"model": {"revision": "main"}}),
    ("spec.engine.image", {"engine": {"image": "vllm/vllm-openai:v0.21.0"}}),
    ("spec.engine.vllmVersion", {"engine": {"vllmVersion": "0.20.2"}}),
    ("spec.model.dtype", {"model": {"dtype": "bfloat16"}}),
    ("spec.kvCache.dtype", {"kvCache": {"dtype": "fp8"}}),
    ("spec.kvCache.layout", {"kvCache": {"layout": "LBNHC"}}),
    ("spec.kvTransfer.connector", {"kvTransfer": {"connector": "NixlPushConnector"}}),
    ("spec.kvTransfer.backends", {"kvTransfer": {"backends": ["LIBFABRIC"]}}),
    ("spec.kvTransfer.bufferDevice", {"kvTransfer": {"bufferDevice": "cpu"}}),
    ("spec.speculative", {"speculative": {"method": "ngram"}}),
]


@pytest.mark.parametrize("path, patch", MUST_MATCH_CHANGES, ids=[p for p, _ in MUST_MATCH_CHANGES])
def test_each_must_match_setting_is_detected(path, patch):
    old = webhook.parse_spec(obj(LLAMA))
    new = webhook.parse_spec(obj(merge(LLAMA, patch)))
    assert webhook.changed_must_match(old, new) == [path]


def test_in_place_change_of_must_match_setting_warns_about_the_rollout():
    old = obj(LLAMA)
    new = obj(merge(LLAMA, {"model": {"revision": "abc123"}, "engine": {"image": "vllm/vllm-openai:v0.21.0"}}))
    verdict = review("UPDATE", new, old)
    assert verdict.allowed
    warning = next(w for w in verdict.warnings if w.startswith(f"[{webhook.ROLLOUT_RULE}]"))
    assert "spec.engine.image, spec.model.revision changed" in warning
    assert "coordinated rollout" in warning and "keeps serving" in warning and "room" in warning


def test_scaling_is_not_a_must_match_change():
    verdict = review("UPDATE", obj(merge(LLAMA, {"prefill": {"replicas": 4}})), obj(LLAMA))
    assert verdict.allowed and rollout_warnings(verdict) == []


def test_create_never_gets_the_rollout_warning():
    assert rollout_warnings(review("CREATE", obj(LLAMA), None)) == []


def test_update_to_an_incompatible_spec_is_refused():
    new = obj(merge(LLAMA, {"prefill": {"tensorParallelSize": 2}, "decode": {"tensorParallelSize": 3}}))
    verdict = review("UPDATE", new, obj(LLAMA))
    assert not verdict.allowed and "[tp-divisibility]" in verdict.message


def test_update_from_an_invalid_old_spec_skips_the_comparison():
    verdict = review("UPDATE", obj(LLAMA), obj({"model": {}}))
    assert verdict.allowed and rollout_warnings(verdict) == []


def test_metadata_only_update_of_a_stored_bad_spec_is_allowed_with_a_warning():
    bad = obj(merge(LLAMA, {"prefill": {"tensorParallelSize": 2}, "decode": {"tensorParallelSize": 3}}))
    relabelled = merge(bad, {"metadata": {"labels": {"team": "a"}, "finalizers": []}})
    verdict = review("UPDATE", relabelled, bad)
    assert verdict.allowed
    assert len(verdict.warnings) == 1 and "[tp-divisibility]" in verdict.warnings[0]
    assert "leaves the spec unchanged" in verdict.warnings[0]


def test_metadata_only_update_of_a_good_spec_has_no_warning():
    assert review("UPDATE", merge(obj(LLAMA), {"metadata": {"labels": {"a": "b"}}}), obj(LLAMA)) == \
        webhook.Verdict(True)


def test_update_of_an_object_being_deleted_is_allowed():
    bad = {"model": {}}
    new = obj(bad, deletionTimestamp="2026-01-01T00:00:00Z")
    verdict = review("UPDATE", new, obj({"model": {"name": "m"}}))
    assert verdict.allowed and "[spec-invalid]" in verdict.warnings[0]


# --- the kopf handler -------------------------------------------------------------------------------


def test_handler_raises_admission_error_and_fills_kopf_warnings():
    warnings: list[str] = []
    bad = obj(merge(LLAMA, {"prefill": {"tensorParallelSize": 2}, "decode": {"tensorParallelSize": 3}}))
    with pytest.raises(kopf.AdmissionError) as err:
        asyncio.run(webhook.validate_pddeployment(operation="CREATE", body=kopf.Body(bad), old=None, warnings=warnings))
    assert err.value.code == 422 and "[tp-divisibility]" in str(err.value)

    spec = copy.deepcopy(FINE_TUNE_030)
    del spec["decode"]["blockSize"]
    asyncio.run(webhook.validate_pddeployment(operation="UPDATE", body=kopf.Body(obj(spec)),
                                              old=kopf.Body(obj(FINE_TUNE_030)), warnings=warnings))
    assert any(w.startswith("[block-size-partial]") for w in warnings)


def test_enable_registers_handler_for_create_and_update_of_the_main_resource():
    registry = kopf.OperatorRegistry()
    endpoint = webhook.Endpoint(server=kopf.WebhookServer(port=1), target={"url": "https://127.0.0.1:1/x"},
                                ca_file=None)
    webhook.enable(endpoint, registry=registry)
    (handler,) = registry._webhooks.get_all_handlers()
    assert handler.id == webhook.HANDLER_ID
    assert set(handler.operations) == {"CREATE", "UPDATE"}
    assert handler.subresource is None and not handler.ignore_failures
    ids = {h.id for h in registry._activities.get_all_handlers()}
    assert {"webhook-startup", "webhook-cleanup"} <= ids


def test_refusals_are_logged_at_info_not_error():
    import logging

    f = webhook.RefusalLogLevel()
    refusal = logging.LogRecord("kopf.objects", logging.ERROR, __file__, 1,
                                "Webhook 'validate-pddeployment' failed permanently: [x] bad", None, None)
    other = logging.LogRecord("kopf.objects", logging.ERROR, __file__, 1, "Handler 'x' failed permanently", None, None)
    assert f.filter(refusal) and f.filter(other)
    assert (refusal.levelno, refusal.levelname) == (logging.INFO, "INFO")
    assert other.levelno == logging.ERROR


# --- the webhook configuration ----------------------------------------------------------------------


def test_configuration_fails_closed_for_create_update_of_pddeployments_only():
    conf = webhook.webhook_configuration({"url": "https://127.0.0.1:9443/validate-pddeployment"}, b"PEM")
    assert conf["metadata"]["name"] == "pdd-operator.dev"
    (hook,) = conf["webhooks"]
    assert hook["name"] == "validate-pddeployment.pdd-operator.dev"
    assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
    (rule,) = hook["rules"]
    assert rule["resources"] == ["pddeployments"]  # not pddeployments/status
    assert rule["operations"] == ["CREATE", "UPDATE"]  # never DELETE
    assert base64.b64decode(hook["clientConfig"]["caBundle"]) == b"PEM"
    exprs = " ".join(c["expression"] for c in hook["matchConditions"])
    assert "deletionTimestamp" in exprs and "object.spec != oldObject.spec" in exprs
    assert 1 <= hook["timeoutSeconds"] <= 30


@pytest.mark.parametrize("host, url", [
    ("127.0.0.1", "https://127.0.0.1:9443/validate-pddeployment"),
    ("::1", "https://[::1]:9443/validate-pddeployment"),
    ("pdd.system.svc", "https://pdd.system.svc:9443/validate-pddeployment"),
])
def test_webhook_url(host, url):
    assert webhook.webhook_url(host, 9443) == url


@pytest.mark.parametrize("host, config", [
    ("127.0.0.1", {"url": "https://127.0.0.1:9443/validate-pddeployment"}),
    ("webhooks.example.com", {"url": "https://webhooks.example.com:9443/validate-pddeployment"}),
    ("pdd-operator.pdd-system.svc", {"service": {"name": "pdd-operator", "namespace": "pdd-system", "port": 9443,
                                                 "path": "/validate-pddeployment"}}),
])
def test_client_config_uses_a_service_reference_for_service_names(host, config):
    assert webhook.client_config(host, 9443) == config
    conf = webhook.webhook_configuration(config, b"PEM")
    assert conf["webhooks"][0]["clientConfig"] == {**config, "caBundle": base64.b64encode(b"PEM").decode()}
    assert "caBundle" not in config  # not mutated


def test_prepare_for_a_service_name(tmp_path):
    endpoint = webhook.prepare(port=9443, host="pdd-operator.pdd-system.svc", listen="0.0.0.0", cert_dir=tmp_path)
    assert endpoint.target["service"]["namespace"] == "pdd-system"
    assert tls.covers(tls.load_cert(tmp_path / "tls.crt"), "pdd-operator.pdd-system.svc")
    assert webhook.describe_client_config(endpoint.target) == \
        "service pdd-system/pdd-operator:9443/validate-pddeployment"



def test_ensure_configuration_writes_only_when_missing_or_different():
    desired = webhook.webhook_configuration({"url": "https://127.0.0.1:9443/validate-pddeployment"}, b"PEM")
    api = FakeAdmissionApi(None)
    assert webhook.ensure_configuration(api, desired)
    name, body, kwargs = api.patches[0]
    assert name == "pdd-operator.dev" and body == desired
    assert kwargs["_content_type"] == "application/apply-patch+yaml" and kwargs["force"]

    live = merge(desired, {"metadata": {"uid": "u", "resourceVersion": "7"}})
    live["webhooks"][0] = {**live["webhooks"][0], "namespaceSelector": {}, "objectSelector": {}}
    api = FakeAdmissionApi(live)
    assert not webhook.ensure_configuration(api, desired) and api.patches == []

    rotated = webhook.webhook_configuration({"url": "https://127.0.0.1:9443/validate-pddeployment"}, b"NEW")
    assert webhook.ensure_configuration(api, rotated) and len(api.patches) == 1


# --- the command line -------------------------------------------------------------------------------


def test_run_webhook_options():
    args = build_parser().parse_args(["run"])
    assert (args.webhook_port, args.webhook_host, args.webhook_listen, args.webhook_cert_dir) == (
        0, "127.0.0.1", "127.0.0.1", None)
    args = build_parser().parse_args(["run", "--webhook-port", "9443", "--webhook-host", "pdd.ops.svc",
                                      "--webhook-listen", "0.0.0.0", "--webhook-cert-dir", "/certs"])
    assert (args.webhook_port, args.webhook_host, args.webhook_listen, args.webhook_cert_dir) == (
        9443, "pdd.ops.svc", "0.0.0.0", "/certs")


def test_prepare_generates_certificates_for_the_host(tmp_path):
    endpoint = webhook.prepare(port=9443, host="127.0.0.1", listen="127.0.0.1", cert_dir=tmp_path)
    assert endpoint.target == {"url": "https://127.0.0.1:9443/validate-pddeployment"}
    assert endpoint.ca_file == tmp_path / "ca.crt"
    server = endpoint.server
    assert (server.addr, server.port, server.host) == ("127.0.0.1", 9443, "127.0.0.1")
    assert (server.certfile, server.pkeyfile, server.cafile) == (
        str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"), str(tmp_path / "ca.crt"))


# --- TLS --------------------------------------------------------------------------------------------


def _public_der(key) -> bytes:
    from cryptography.hazmat.primitives import serialization
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def test_serving_cert_verifies_against_the_ca_with_sans_and_matching_key():
    ca = tls.generate_ca()
    serving = tls.issue_serving_cert(ca, ["127.0.0.1", "pdd-operator.pdd-system.svc"])
    serving.cert.verify_directly_issued_by(ca.cert)  # raises if the signature or issuer is wrong
    ca.cert.verify_directly_issued_by(ca.cert)       # the CA is self-signed
    assert _public_der(serving.cert.public_key()) == _public_der(serving.key.public_key())
    sans = serving.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert sans.get_values_for_type(x509.DNSName) == ["pdd-operator.pdd-system.svc"]
    assert not serving.cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    eku = serving.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    assert tls.covers(serving.cert, "127.0.0.1") and tls.covers(serving.cert, "PDD-operator.pdd-system.svc")
    assert not tls.covers(serving.cert, "127.0.0.2") and not tls.covers(serving.cert, "other.svc")


def test_serving_cert_validity_is_bounded_by_the_ca():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    ca = tls.generate_ca(days=10, now=now)
    serving = tls.issue_serving_cert(ca, ["127.0.0.1"], days=365, now=now)
    assert serving.cert.not_valid_after_utc == ca.cert.not_valid_after_utc
    assert serving.cert.not_valid_before_utc == now - tls.CLOCK_SKEW
    assert ca.cert.not_valid_after_utc - ca.cert.not_valid_before_utc == timedelta(days=10) + tls.CLOCK_SKEW


def test_serving_cert_needs_a_host():
    with pytest.raises(ValueError):
        tls.issue_serving_cert(tls.generate_ca(), [])


def test_ensure_serving_files_generates_then_reuses(tmp_path):
    cert_dir = tmp_path / "certs"
    files = tls.ensure_serving_files(cert_dir, ["127.0.0.1"])
    assert files.generated and files.cafile == cert_dir / "ca.crt"
    assert stat.S_IMODE(files.keyfile.stat().st_mode) == 0o600
    ca = tls.load_cert(files.cafile)
    cert = tls.load_cert(files.certfile)
    cert.verify_directly_issued_by(ca)
    before = {p.name: p.read_bytes() for p in cert_dir.iterdir()}
    assert sorted(before) == ["ca.crt", "tls.crt", "tls.key"]  # no CA key, no temporary files

    again = tls.ensure_serving_files(cert_dir, ["other.host"])
    assert not again.generated
    assert {p.name: p.read_bytes() for p in cert_dir.iterdir()} == before


def test_ensure_serving_files_uses_a_mounted_secret_without_ca(tmp_path):
    serving = tls.issue_serving_cert(tls.generate_ca(), ["127.0.0.1"])
    (tmp_path / "tls.crt").write_bytes(serving.cert_pem())
    (tmp_path / "tls.key").write_bytes(serving.key_pem())
    files = tls.ensure_serving_files(tmp_path, ["127.0.0.1"])
    assert not files.generated and files.cafile is None
    endpoint = webhook.prepare(port=1, host="127.0.0.1", listen="127.0.0.1", cert_dir=tmp_path)
    assert endpoint.ca_file == tmp_path / "tls.crt" and endpoint.server.cafile is None


def test_real_tls_handshake_on_loopback(tmp_path):
    """A server with the generated files, and a client that trusts only ca.crt and checks the IP SAN."""
    files = tls.ensure_serving_files(tmp_path, ["127.0.0.1"])
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(files.certfile, files.keyfile)
    client_ctx = ssl.create_default_context(cafile=str(files.cafile))

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    errors: list[Exception] = []

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as s:
                s.sendall(s.recv(5))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with client_ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(b"hello")
            assert s.recv(5) == b"hello"
            assert s.version() in ("TLSv1.2", "TLSv1.3")
    thread.join(10)
    listener.close()
    assert not errors

    other_ca = tls.generate_ca()
    wrong_ctx = ssl.create_default_context(cadata=other_ca.cert_pem().decode())
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    thread = threading.Thread(target=lambda: _accept_and_fail(listener, server_ctx), daemon=True)
    thread.start()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with pytest.raises(ssl.SSLCertVerificationError):
            wrong_ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    thread.join(10)
    listener.close()


def _accept_and_fail(listener: socket.socket, ctx: ssl.SSLContext) -> None:
    conn, _ = listener.accept()
    try:
        ctx.wrap_socket(conn, server_side=True).close()
    except (ssl.SSLError, OSError):
        pass


def test_refusal_head_names_rendered_object_errors_apart_from_compatibility_errors():
    # A bad quantity is something the apiserver refuses in the rendered Deployment, not a vLLM incompatibility.
    bad_quantity = merge(LLAMA, {"decode": {"resources": {"requests": {"memory": "lots"}}}})
    verdict = review("CREATE", obj(bad_quantity, name="q"))
    assert not verdict.allowed
    head = verdict.message.splitlines()[0]
    assert head == "PDDeployment q cannot be rendered into objects the apiserver accepts: 1 error(s):"
    assert verdict.message.splitlines()[1].startswith("[resource-invalid]")
    # Both kinds at once: each counted under its own name.
    both = merge(bad_quantity, {"prefill": {"tensorParallelSize": 2}, "decode": {"tensorParallelSize": 3}})
    head = review("CREATE", obj(both, name="q")).message.splitlines()[0]
    # tp-divisibility, and (set 37) tp-heads-indivisible: TP 3 cannot shard Llama's 32 heads
    assert "cannot work with vLLM 0.20.2: 2 compatibility error(s)" in head
    assert "cannot be rendered into objects the apiserver accepts: 1 error(s)" in head
