"""End to end on the real control plane: the validating admission webhook, served by a real ``pdd run
--webhook-port`` over TLS, called by the real kube-apiserver, driven with the real kubectl.

Some faults (TP divisibility, ...) are also CEL rules of the CRD, which the apiserver checks before it
calls any webhook; tests that must show the webhook itself at work use a version-dependent fault
(:func:`webhook_probe`) and look for the webhook's name in kubectl's error.
"""

from __future__ import annotations

import pytest
import yaml
from cryptography import x509

from tests.e2e.conftest import (
    ROOT,
    WEBHOOK_CONFIGURATION,
    WEBHOOK_NAME,
    WEBHOOK_PROBE_RULE,
    condition,
    pdd_status,
    wait_for,
    webhook_probe,
)

pytestmark = pytest.mark.cluster

LLAMA = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())
DENIED = f'admission webhook "{WEBHOOK_NAME}" denied the request'
UNREACHABLE = f'failed calling webhook "{WEBHOOK_NAME}"'


def llama(name: str = "llama-8b", **roles) -> str:
    doc = yaml.safe_load(yaml.safe_dump(LLAMA))
    doc["metadata"] = {"name": name}
    for role, values in roles.items():
        doc["spec"][role].update(values)
        for key, value in values.items():
            if value is None:
                del doc["spec"][role][key]
    return yaml.safe_dump(doc)


def pdd_names(cluster, ns) -> set[str]:
    items = cluster.custom.list_namespaced_custom_object("pdd-operator.dev", "v1alpha1", ns, "pddeployments")["items"]
    return {i["metadata"]["name"] for i in items}


def apply(cluster, ns, manifest, *extra):
    return cluster.kubectl("apply", "-n", ns, *extra, "-f", "-", input=manifest, check=False)


def test_configuration_and_real_tls(cluster, webhook_operator):
    conf = webhook_operator.configuration()
    (hook,) = conf["webhooks"]
    assert hook["name"] == WEBHOOK_NAME and hook["clientConfig"]["url"] == webhook_operator.url
    assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
    (rule,) = hook["rules"]
    assert rule["resources"] == ["pddeployments"] and rule["operations"] == ["CREATE", "UPDATE"]
    assert {c["name"] for c in hook["matchConditions"]} == {"not-being-deleted", "spec-changed"}
    # caBundle is the generated CA, and the served certificate verifies against it for IP 127.0.0.1.
    ca_pem = (webhook_operator.cert_dir / "ca.crt").read_bytes()
    assert webhook_operator.ca_bundle() == ca_pem
    served = x509.load_der_x509_certificate(webhook_operator.peer_certificate())
    served.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_pem))
    # kopf's managed mode would also have created an (empty) mutating configuration: not used.
    assert cluster.kubectl("get", "mutatingwebhookconfiguration", WEBHOOK_CONFIGURATION,
                           check=False).returncode != 0


def test_incompatible_spec_is_refused_with_rule_id(cluster, webhook_operator, namespace):
    proc = apply(cluster, namespace, llama(prefill={"tensorParallelSize": 2}, decode={"tensorParallelSize": 3}))
    assert proc.returncode != 0 and "[tp-divisibility]" in proc.stderr, proc.stderr
    assert pdd_names(cluster, namespace) == set()


def test_webhook_refuses_all_errors_at_once_with_fixes(cluster, webhook_operator, namespace):
    doc = yaml.safe_load(webhook_probe("nemotron-nano"))
    doc["spec"]["decode"]["blockSize"] = 256  # HMA needs equal block sizes before vLLM 0.27
    proc = apply(cluster, namespace, yaml.safe_dump(doc))
    assert proc.returncode != 0 and DENIED in proc.stderr, proc.stderr
    assert f"[{WEBHOOK_PROBE_RULE}]" in proc.stderr and "[block-size-hma]" in proc.stderr
    assert "Fix:" in proc.stderr
    # A server-side dry run is validated too (sideEffects: None), and creates nothing either.
    proc = apply(cluster, namespace, webhook_probe(), "--dry-run=server")
    assert proc.returncode != 0 and DENIED in proc.stderr
    assert pdd_names(cluster, namespace) == set()


def test_warning_is_printed_and_object_accepted(cluster, webhook_operator, namespace):
    # vLLM 0.30's default block size depends on the GPU and head size: a role without blockSize is a warning
    # where the head size is unknown (a fine-tune the table of known checkpoints does not hold)
    doc = yaml.safe_load(llama(prefill={"blockSize": 16}, decode={"blockSize": None}))
    doc["spec"]["engine"]["image"] = "vllm/vllm-openai:v0.30.0"
    doc["spec"]["model"]["name"] = "NousResearch/Hermes-3-Llama-3.1-8B"
    proc = apply(cluster, namespace, yaml.safe_dump(doc))
    assert proc.returncode == 0, proc.stderr
    assert any(line.startswith("Warning: [block-size-partial]") for line in proc.stderr.splitlines()), proc.stderr
    assert pdd_names(cluster, namespace) == {"llama-8b"}


def test_invalid_field_value_is_refused_naming_the_field(cluster, webhook_operator, namespace):
    # The CRD schema refuses these before any webhook is called (the webhook names the same fields
    # when a schema lets one through: tests/unit/test_webhook.py); the user sees the field either way.
    proc = apply(cluster, namespace, llama(prefill={"tensorParallelSize": 0}))
    assert proc.returncode != 0 and "spec.prefill.tensorParallelSize" in proc.stderr, proc.stderr
    proc = apply(cluster, namespace, llama(decode={"gpuMemoryUtilization": 1.5}))
    assert proc.returncode != 0 and "spec.decode.gpuMemoryUtilization" in proc.stderr, proc.stderr
    assert pdd_names(cluster, namespace) == set()


def test_in_place_change_of_must_match_setting_warns(cluster, webhook_operator, namespace):
    assert apply(cluster, namespace, llama()).returncode == 0
    doc = yaml.safe_load(llama())
    doc["spec"]["engine"]["image"] = "vllm/vllm-openai:v0.21.0"
    proc = apply(cluster, namespace, yaml.safe_dump(doc))
    assert proc.returncode == 0, proc.stderr
    warning = next(line for line in proc.stderr.splitlines() if line.startswith("Warning: [rollout-incompatible-change]"))
    assert "spec.engine.image" in warning and "coordinated rollout" in warning
    # Scaling changes nothing that must match: no warning.
    doc["spec"]["decode"]["replicas"] = 2
    proc = apply(cluster, namespace, yaml.safe_dump(doc))
    assert proc.returncode == 0 and "rollout-incompatible-change" not in proc.stderr, proc.stderr


def test_operator_restart_lets_no_bad_object_through(cluster, webhook_operator, namespace):
    assert apply(cluster, namespace, llama("keep")).returncode == 0
    assert apply(cluster, namespace, llama("goner")).returncode == 0
    wait_for(lambda: len(cluster.apps.list_namespaced_deployment(namespace).items) == 6, 60,
             what="children of both objects")
    webhook_operator.stop()
    try:
        # The configuration outlives the process; with nobody serving, failurePolicy Fail refuses.
        assert webhook_operator.configuration() is not None
        proc = apply(cluster, namespace, webhook_probe("bad"))
        assert proc.returncode != 0 and UNREACHABLE in proc.stderr, proc.stderr
        proc = apply(cluster, namespace, llama("new"))
        assert proc.returncode != 0 and UNREACHABLE in proc.stderr, proc.stderr  # fail closed
        # What never reaches the webhook keeps working: status writes (a separate resource),
        # metadata-only updates and deletes, including the garbage collector's removal of the
        # foregroundDeletion finalizer (an UPDATE of the object).
        cluster.kubectl("patch", "-n", namespace, "pdd/keep", "--subresource=status", "--type=merge",
                        "-p", '{"status":{"vllmVersion":"patched-while-down"}}')
        cluster.kubectl("label", "-n", namespace, "pdd/keep", "team=serving")
        cluster.kubectl("delete", "-n", namespace, "pdd/goner", "--cascade=foreground", "--timeout=60s")
        assert pdd_names(cluster, namespace) == {"keep"}
        assert not [d for d in cluster.apps.list_namespaced_deployment(namespace).items
                    if d.metadata.name.startswith("goner-")]
    finally:
        webhook_operator.start()  # waits until the webhook refuses the probe again
    proc = apply(cluster, namespace, webhook_probe("bad"))
    assert proc.returncode != 0 and DENIED in proc.stderr and f"[{WEBHOOK_PROBE_RULE}]" in proc.stderr, proc.stderr
    assert apply(cluster, namespace, llama("new")).returncode == 0
    assert pdd_names(cluster, namespace) == {"keep", "new"}
    # The restarted operator reconciles as before.
    wait_for(lambda: condition(pdd_status(cluster, namespace, "new"), "Ready").get("status") == "True",
             120, what="new Ready")
