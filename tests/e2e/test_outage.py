"""Nothing ends for good: the operator lives through an apiserver outage and an etcd outage, and
picks up what changed.

The apiserver (or etcd, with the apiserver up and answering errors) is stopped for OUTAGE_SECONDS
(``PDD_E2E_OUTAGE_SECONDS``, 30 by default: longer than the ~18 s after which the operator used to exit;
set it to minutes for a longer run) and started again on the same etcd data; then objects change, and
the operator must act on them. A ConfigMap deleted while the operator's watch was down (removed in
etcd behind the stopped apiserver, so no watch ever reports it) must be seen missing by the resync.
A reconcile that fails while an admission webhook the apiserver calls is down (500 for every
Deployment apply) is retried with the work queue's per-object backoff, not at the next resync.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
import urllib.error
import urllib.request

import pytest
import yaml

from tests.e2e.conftest import (
    CLUSTER_SH,
    ROOT,
    OperatorProcess,
    _free_port,
    condition,
    other_operators_stopped,
    pdd_status,
    wait_for,
)

pytestmark = pytest.mark.cluster

OUTAGE_SECONDS = float(os.environ.get("PDD_E2E_OUTAGE_SECONDS", "30"))
LLAMA = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())


@pytest.fixture(autouse=True, scope="module")
def _the_only_operator():
    """Each test's own operator is the only one: the session's operator would reconcile the same
    objects through the same outage, and what a test then sees (a status write, a 409) could be
    either's."""
    with other_operators_stopped():
        yield


def _component(cluster, verb: str, name: str) -> None:
    subprocess.run(["bash", str(CLUSTER_SH), f"{verb}-component", name], env=cluster.env, check=True, timeout=240)


def _manifest(name: str) -> str:
    return yaml.safe_dump({**LLAMA, "metadata": {"name": name}})


def _live(port: int) -> int:
    try:
        # kopf runs the probes per request: on a loaded 2-core machine an answer can take seconds.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def _ready(cluster, ns, name):
    return lambda: condition(pdd_status(cluster, ns, name), "Ready").get("status") == "True"


def _etcd_delete(cluster, key: str) -> int:
    """Delete ``key`` in etcd itself (its v3 JSON gateway on loopback); returns how many keys went."""
    port = int(cluster.env.get("PDD_ETCD_PORT") or int(cluster.env.get("PDD_APISERVER_PORT") or 16443) + 1)
    body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v3/kv/deleterange", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        return int(json.loads(resp.read()).get("deleted", 0))


def _outage(cluster, op, live_port: int, component: str) -> None:
    """Stop ``component`` for OUTAGE_SECONDS; the operator must stay up and live throughout."""
    _component(cluster, "stop", component)
    try:
        deadline = time.monotonic() + OUTAGE_SECONDS
        while time.monotonic() < deadline:  # the outage itself, not a wait for a result
            time.sleep(min(10.0, max(0.0, deadline - time.monotonic())))
            assert op.proc.poll() is None, f"the operator exited during the {component} outage"
        # The apiserver or etcd is away; restarting the operator would not help, so it stays live.
        assert _live(live_port) == 200
    finally:
        _component(cluster, "start", component)


def _operator(cluster, tmp_path, monkeypatch, resync_seconds: float = 2) -> tuple[OperatorProcess, int]:
    live_port = _free_port()
    monkeypatch.setitem(cluster.env, "PDD_BACKOFF_CAP_SECONDS", "4")
    op = OperatorProcess(cluster, tmp_path / "operator.log",
                         ["--liveness", f"http://127.0.0.1:{live_port}/healthz"], resync_seconds=resync_seconds)
    op.start()
    return op, live_port


def _changes_are_picked_up(cluster, namespace) -> None:
    """After an outage: a deleted child comes back, a new PDDeployment gets Ready, and the object held
    through the outage is reconciled again."""
    old = cluster.apps.read_namespaced_deployment("before-decode", namespace).metadata.uid
    cluster.kubectl("delete", "-n", namespace, "deployment/before-decode")
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_manifest("after"))
    wait_for(lambda: cluster.apps.read_namespaced_deployment("before-decode", namespace).metadata.uid != old,
             120, what="decode Deployment restored after the outage")
    wait_for(_ready(cluster, namespace, "after"), 120, what="a PDDeployment created after the outage Ready")
    desired = {role: LLAMA["spec"][role]["replicas"] for role in ("prefill", "decode")}
    wait_for(lambda: all((pdd_status(cluster, namespace, "before").get(role) or {}).get("replicas") == n
                         for role, n in desired.items()), 120, what="before's status follows its children again")


def test_operator_survives_an_etcd_outage(cluster, namespace, tmp_path, monkeypatch):
    """etcd away, the apiserver up: every request and watch of the operator's gets errors or hangs."""
    op, live_port = _operator(cluster, tmp_path, monkeypatch)
    try:
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_manifest("before"))
        wait_for(_ready(cluster, namespace, "before"), 120, what="before Ready")
        wait_for(lambda: _live(live_port) == 200, 60, interval=1, what="liveness 200 (kopf's probe server is up)")
        _outage(cluster, op, live_port, "etcd")
        wait_for(lambda: cluster.kubectl("get", "--raw", "/readyz", check=False).returncode == 0, 120,
                 interval=1, what="the apiserver ready again (etcd back)")
        _changes_are_picked_up(cluster, namespace)
        assert op.proc.poll() is None
        assert _live(live_port) == 200
    finally:
        op.stop()
    assert "escalating" not in (tmp_path / "operator.log").read_text(), "kopf gave up on a request"


def test_a_config_map_deleted_while_the_watch_was_down_is_seen_missing(cluster, namespace, tmp_path, monkeypatch):
    """The ConfigMap goes in etcd while the apiserver is stopped: no watch event ever says so, and
    kopf's relist does not turn its absence into a deletion; the resync's list must."""
    op, _ = _operator(cluster, tmp_path, monkeypatch)
    try:
        config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_attention_heads": 32,
                  "num_key_value_heads": 8, "num_hidden_layers": 32, "hidden_size": 4096}
        cluster.core.create_namespaced_config_map(namespace, {"metadata": {"name": "cfg"},
                                                              "data": {"config.json": json.dumps(config)}})
        doc = {**LLAMA, "metadata": {"name": "held"}}
        doc["spec"] = {**LLAMA["spec"], "model": {**LLAMA["spec"]["model"], "configMapRef": {"name": "cfg"}}}
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
        wait_for(_ready(cluster, namespace, "held"), 120, what="held Ready with its ConfigMap")
        assert "model-config-unavailable" not in {f["rule"] for f in pdd_status(cluster, namespace, "held")
                                                  .get("compatibility") or []}

        _component(cluster, "stop", "kube-apiserver")
        try:
            assert _etcd_delete(cluster, f"/registry/configmaps/{namespace}/cfg") == 1
        finally:
            _component(cluster, "start", "kube-apiserver")

        def missing():
            found = [f for f in pdd_status(cluster, namespace, "held").get("compatibility") or []
                     if f["rule"] == "model-config-unavailable"]
            return found and found[0]
        finding = wait_for(missing, 120, interval=1, what="the deleted ConfigMap reported missing")
        assert "does not exist" in finding["message"]
        assert op.proc.poll() is None
    finally:
        op.stop()


def test_operator_survives_an_apiserver_outage(cluster, namespace, tmp_path, monkeypatch):
    op, live_port = _operator(cluster, tmp_path, monkeypatch)
    try:
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_manifest("before"))
        wait_for(_ready(cluster, namespace, "before"), 120, what="before Ready")
        wait_for(lambda: _live(live_port) == 200, 60, interval=1, what="liveness 200 (kopf's probe server is up)")
        _outage(cluster, op, live_port, "kube-apiserver")

        # Objects change after the outage: a child goes, a new PDDeployment comes. The object held
        # through the outage is reconciled again: its status follows the restored Deployment (desired
        # replicas back for both roles). Whether the restored pods turn Ready also depends on kwok
        # resuming its own watches after the apiserver restart, which once took longer than any timeout
        # here, so it is not what this test asserts.
        _changes_are_picked_up(cluster, namespace)
        assert op.proc.poll() is None
        assert _live(live_port) == 200
    finally:
        op.stop()
    log = (tmp_path / "operator.log").read_text()
    assert "escalating" not in log, "kopf gave up on a request"


def _unreachable_webhook(name: str, namespace: str) -> str:
    """A ValidatingWebhookConfiguration for Deployments in ``namespace`` whose server is not there
    (a free loopback port) with ``failurePolicy: Fail``: the apiserver answers 500 InternalError
    ("failed calling webhook") to every create or update of a Deployment there."""
    return json.dumps({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
            "timeoutSeconds": 2, "clientConfig": {"url": f"https://127.0.0.1:{_free_port()}/validate"},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"],
                       "operations": ["CREATE", "UPDATE"]}],
        }],
    })


def test_a_reconcile_failed_in_an_outage_is_retried_with_backoff_not_at_the_resync(cluster, namespace, tmp_path,
                                                                                     monkeypatch):
    """The admission webhook the apiserver must call is away: the reconcile's Deployment applies get
    500, and the queue retries the object with its backoff (capped at 4 s here), so once the webhook
    is gone the object's children are applied and it gets Ready, though the resync period is an hour
    and no event of the object comes. (A stopped apiserver cannot show this: kopf's watches relist
    when it is back, and those events queue every object anyway.)"""
    op, _ = _operator(cluster, tmp_path, monkeypatch, resync_seconds=3600)
    webhook = f"unreachable-{namespace}.pdd-e2e.dev"
    probe = yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "probe"},
                            "spec": {"selector": {"matchLabels": {"app": "probe"}}, "template": {
                                "metadata": {"labels": {"app": "probe"}},
                                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
    try:
        cluster.kubectl("apply", "-f", "-", input=_unreachable_webhook(webhook, namespace))
        wait_for(lambda: "failed calling webhook" in cluster.kubectl(
            "apply", "--dry-run=server", "-n", namespace, "-f", "-", input=probe, check=False).stderr,
            60, interval=0.5, what="the apiserver calling the unreachable webhook")
        retries = (op.metrics() or {}).get("pdd_workqueue_retries_total", 0)
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_manifest("held"))
        wait_for(lambda: (op.metrics() or {}).get("pdd_workqueue_retries_total", 0) >= retries + 3, 60,
                 interval=0.5, what="the failed reconcile retried with backoff")
        assert cluster.apps.list_namespaced_deployment(namespace).items == []
    finally:
        cluster.kubectl("delete", "validatingwebhookconfiguration", webhook, "--ignore-not-found")
    try:
        wait_for(_ready(cluster, namespace, "held"), 120, what="held Ready after the webhook came back, before any resync")
        assert op.proc.poll() is None
    finally:
        op.stop()
    assert "retrying with backoff" in (tmp_path / "operator.log").read_text()


def _signal(cluster, verb: str, name: str) -> None:
    subprocess.run(["bash", str(CLUSTER_SH), f"{verb}-component", name], env=cluster.env, check=True, timeout=60)


@pytest.mark.parametrize("component", ["kube-apiserver", "etcd"])
def test_operator_lives_through_a_paused_component(cluster, namespace, tmp_path, monkeypatch, component):
    """The apiserver or etcd SIGSTOPped for OUTAGE_SECONDS: its sockets stay open and nothing answers,
    so every request and watch of the operator's hangs (no error to retry on). The operator must not
    exit, must stay live (its resync is stuck for longer than ``PDD_STUCK_SECONDS``, but the apiserver
    is not ready either, so a restart would not help), and once the component is resumed it must act
    on what changed and bring the held object's status up to date, without a restart. With the
    apiserver paused, the held object's decode Deployment is deleted in etcd behind it: the change
    arrives through the apiserver's watch of etcd when it resumes."""
    monkeypatch.setitem(cluster.env, "PDD_STUCK_SECONDS", "10")
    op, live_port = _operator(cluster, tmp_path, monkeypatch)
    try:
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_manifest("before"))
        wait_for(_ready(cluster, namespace, "before"), 120, what="before Ready")
        wait_for(lambda: _live(live_port) == 200, 60, interval=1, what="liveness 200 (kopf's probe server is up)")
        old = cluster.apps.read_namespaced_deployment("before-decode", namespace).metadata.uid
        _signal(cluster, "pause", component)
        codes = []
        try:
            if component == "kube-apiserver":
                assert _etcd_delete(cluster, f"/registry/deployments/{namespace}/before-decode") == 1
            deadline = time.monotonic() + OUTAGE_SECONDS
            while time.monotonic() < deadline:  # the outage itself, not a wait for a result
                codes.append(_live(live_port))
                assert op.proc.poll() is None, f"the operator exited while {component} was paused"
                time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
        finally:
            _signal(cluster, "resume", component)
        assert set(codes) == {200}, f"liveness answers while {component} was paused: {codes}"
        wait_for(lambda: cluster.kubectl("get", "--raw", "/readyz", check=False).returncode == 0, 180,
                 interval=1, what=f"the apiserver ready again ({component} resumed)")
        if component == "kube-apiserver":
            wait_for(lambda: cluster.apps.read_namespaced_deployment("before-decode", namespace).metadata.uid != old,
                     120, what="the Deployment deleted behind the paused apiserver restored")
        _changes_are_picked_up(cluster, namespace)
        wait_for(lambda: _live(live_port) == 200, 120, interval=1, what="liveness 200 after the pause")
        assert op.proc.poll() is None
    finally:
        op.stop()
    assert "escalating" not in (tmp_path / "operator.log").read_text(), "kopf gave up on a request"
