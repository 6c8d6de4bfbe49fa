"""Every Kubernetes API call has a timeout: against a real TCP listener that accepts connections and
never answers (as a SIGSTOPped apiserver or a half-open connection behaves), the operator's calls fail
with a transient error instead of hanging, and the work queue retries the reconcile with backoff."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import urllib3
from kubernetes import client

from pdd_operator import kubeclient
from pdd_operator.controller import handlers
from pdd_operator.controller.kube import Kube
from pdd_operator.controller.metrics import QUEUE_RETRIES
from pdd_operator.controller.reconcile import is_transient
from pdd_operator.controller.workqueue import WorkQueue

#: (connect, read) seconds for the tests' clients: short, so a hang shows as a failed join below.
TIMEOUT = (2.0, 0.5)
#: How long a call may take before the test calls it hung (the timeout plus a loaded machine's slack).
HUNG_AFTER = 30.0


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose connections the kernel accepts (listen backlog) but nobody ever reads or answers."""
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(64)
        yield hung.getsockname()[1]


def silent_client(port: int) -> kubeclient.TimeoutApiClient:
    conf = client.Configuration()
    conf.host = f"http://127.0.0.1:{port}"
    return kubeclient.TimeoutApiClient(conf, request_timeout=TIMEOUT)


def outcome_of(call) -> BaseException | object:
    """Run ``call`` in a thread; return what it raised (or returned). Fails the test if it is still
    running after :data:`HUNG_AFTER` seconds (it would hang forever without a timeout)."""
    result: list = []

    def run():
        try:
            result.append(call())
        except BaseException as exc:  # noqa: BLE001  (what it raised is the result)
            result.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HUNG_AFTER)
    assert not thread.is_alive(), f"the call was still waiting after {HUNG_AFTER} s: no request timeout"
    return result[0]


@pytest.mark.parametrize("call", [
    pytest.param(lambda kube: kube.get("Deployment", "ns", "a-decode"), id="read"),
    pytest.param(lambda kube: kube.get_pdd("ns", "a"), id="custom-object read"),
    pytest.param(lambda kube: kube.list_metadata("Deployment"), id="metadata list"),
    pytest.param(lambda kube: kube.apply({"apiVersion": "v1", "kind": "ServiceAccount",
                                          "metadata": {"name": "a-router", "namespace": "ns"}}), id="apply"),
    pytest.param(lambda kube: kube.patch_status("ns", "a", {"observedGeneration": 1}, None), id="status patch"),
])
def test_a_call_to_a_silent_apiserver_fails_in_time_as_a_transient_error(silent_port, call):
    exc = outcome_of(lambda: call(Kube(silent_client(silent_port))))
    assert isinstance(exc, urllib3.exceptions.HTTPError), exc
    assert "timed out" in str(exc).lower(), exc
    assert is_transient(exc)


def test_an_explicit_timeout_wins_over_the_default(silent_port):
    api = client.CoreV1Api(kubeclient.TimeoutApiClient(silent_client(silent_port).configuration,
                                                       request_timeout=(2.0, 3600.0)))
    exc = outcome_of(lambda: api.list_namespaced_pod("ns", _request_timeout=TIMEOUT))
    assert isinstance(exc, urllib3.exceptions.HTTPError) and is_transient(exc), exc


def test_watch_timeouts_end_server_side_first():
    kw = kubeclient.watch_timeout(120)
    connect, read = kw["_request_timeout"]
    assert kw["timeout_seconds"] == 120 and read > 120 and connect == kubeclient.CONNECT_SECONDS
    assert kubeclient.READ_SECONDS > 60  # the apiserver's own --request-timeout answers (504) first


def test_a_reconcile_against_a_silent_apiserver_is_retried_with_backoff(monkeypatch, silent_port):
    """The real reconcile, the real Kube (no cache: its reads go to the socket), a real work queue."""
    monkeypatch.setitem(handlers._state, "kube", Kube(silent_client(silent_port)))
    monkeypatch.setitem(handlers._state, "elector", None)
    before = QUEUE_RETRIES._value.get()
    queue = WorkQueue(lambda key, queued_at: handlers._reconcile_logged(*key, queued_at=queued_at),
                      workers=1, retry_base=3600.0, retry_cap=3600.0)
    queue.start()
    try:
        queue.add(("ns", "a"))
        deadline = time.monotonic() + HUNG_AFTER
        while queue.failures(("ns", "a")) == 0:
            assert time.monotonic() < deadline, "the reconcile did not end: no request timeout"
            time.sleep(0.01)
        assert queue.retry_due(("ns", "a")) is not None
        assert QUEUE_RETRIES._value.get() == before + 1
    finally:
        queue.stop()
