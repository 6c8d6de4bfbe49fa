"""A failure is always visible: refused applies and unreadable inputs become status, never a crash.

The parts that need no apiserver: the status branch, the error text, how config.json input is read and
judged. tests/e2e/test_robustness.py drives the same code through a real apiserver.
"""

from __future__ import annotations

import json

import pytest
import urllib3
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.client.exceptions import ApiException

from pdd_operator.compat import evaluate
from pdd_operator.controller.kube import api_error_text
from pdd_operator.controller.reconcile import check_spec, is_transient, load_model_config
from pdd_operator.controller.status import RoleObservation, fold_status
from tests.helpers import make_spec


def _fold(apply_errors, report=None):
    obs = RoleObservation(exists=True, replicas=1, ready=1, updated=1, current=1, observed=True)
    return fold_status(generation=2, previous={}, report=report or evaluate(make_spec()), applied_generation=1,
                       observations={"prefill": obs, "decode": obs}, now="2026-11-30T00:00:00Z",
                       apply_errors=apply_errors)


def test_apply_errors_make_degraded_apply_failed_with_the_message():
    status = _fold(["Service demo-prefill: 422 Unprocessable Entity: spec.ports[1].name: Duplicate value: \"http\""])
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ApplyFailed")
    assert "Duplicate value" in degraded["message"]
    assert next(c for c in _fold([])["conditions"] if c["type"] == "Degraded")["status"] == "False"


def test_an_incompatible_spec_still_wins_over_apply_errors():
    bad = evaluate(make_spec(prefill={"tensorParallelSize": 2}, decode={"tensorParallelSize": 3}))
    degraded = next(c for c in _fold(["Deployment x: 422"], report=bad)["conditions"] if c["type"] == "Degraded")
    assert degraded["reason"] == "IncompatibleSpec"


def test_api_error_text_carries_the_apiservers_message():
    exc = ApiException(status=422, reason="Unprocessable Entity")
    exc.body = json.dumps({"kind": "Status", "message": "Service \"x\" is invalid: metadata.name: Invalid value"})
    assert api_error_text(exc) == '422 Unprocessable Entity: Service "x" is invalid: metadata.name: Invalid value'
    raw = ApiException(status=400, reason="Bad Request")
    raw.body = "yaml: invalid Unicode character escape code"
    assert api_error_text(raw) == "400 Bad Request: yaml: invalid Unicode character escape code"


def test_an_event_the_apiserver_refuses_is_logged_on_one_line(monkeypatch, caplog):
    """A terminating namespace refuses new Events with 403: the warning carries the apiserver's message,
    not the client's multi-line dump of the response headers (hundreds of lines a minute when a
    namespace with many PDDeployments goes)."""
    from pdd_operator.controller.kube import Kube

    refused = ApiException(status=403, reason="Forbidden")
    refused.headers = {"Audit-Id": "x", "Content-Type": "application/json"}
    refused.body = json.dumps({"kind": "Status", "message": 'events is forbidden: unable to create new content in '
                                                            'namespace ns because it is being terminated'})

    def refuse(*_args, **_kwargs):
        raise refused
    kube = Kube.__new__(Kube)
    monkeypatch.setattr(kube, "_request", refuse, raising=False)
    with caplog.at_level("WARNING", logger="pdd_operator.control"):
        assert kube.event({"kind": "PDDeployment", "metadata": {"name": "a", "namespace": "ns"}},
                          "Warning", "ApplyFailed", "m") is False
    [record] = [r for r in caplog.records if "cannot record event" in r.getMessage()]
    assert "\n" not in record.getMessage() and "Audit-Id" not in record.getMessage()
    assert record.getMessage().endswith("403 Forbidden: events is forbidden: unable to create new content in "
                                        "namespace ns because it is being terminated")


class ConfigMaps:
    """The one read load_model_config makes, answering from a dict (or raising what the apiserver would)."""

    def __init__(self, data: dict[str, str] | None = None, error: ApiException | None = None) -> None:
        self.data, self.error = data or {}, error

    def config_map_value(self, namespace: str, name: str, key: str) -> str | None:
        if self.error is not None:
            raise self.error
        return self.data.get(key)


SPEC = make_spec(model={"configMapRef": {"name": "cfg"}})


def test_deeply_nested_config_json_is_a_warning_not_a_crash():
    deep = "[" * 100_000 + "]" * 100_000
    config, warning = load_model_config(ConfigMaps({"config.json": deep}), "ns", SPEC)
    assert config is None and warning.rule == "model-config-unavailable" and "too deeply" in warning.message


def test_a_forbidden_configmap_is_a_read_error_and_a_warning():
    errors: list[str] = []
    config, warning = load_model_config(ConfigMaps(error=ApiException(status=403, reason="Forbidden")), "ns", SPEC,
                                        errors)
    assert config is None and warning is not None
    assert errors == ["ConfigMap cfg: 403 Forbidden"]


def test_an_unreachable_apiserver_is_raised_for_a_retry():
    with pytest.raises(ApiException):
        load_model_config(ConfigMaps(error=ApiException(status=503, reason="Service Unavailable")), "ns", SPEC)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)
CONFIG_KEYS = ["architectures", "num_key_value_heads", "n_groups", "mamba_n_groups", "text_config", "model_type",
               "is_encoder_decoder", "vision_config", "num_attention_heads", "layers_block_type", "hybrid_override_pattern"]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(CONFIG_KEYS), JSON_VALUES, max_size=6))
def test_any_config_json_gives_a_report_never_an_exception(config):
    report, used = check_spec(SPEC, "demo", "ns", config, None)
    assert report.version
    if used is None:
        assert "model-config-unavailable" in {f.rule for f in report.findings}


@pytest.mark.parametrize("code, refusal", [(400, True), (403, True), (422, True), (409, False), (429, False),
                                           (500, False), (503, False), (0, False)])
def test_only_answers_about_the_request_are_reported_as_refusals(code, refusal):
    from pdd_operator.controller.reconcile import is_refusal
    assert is_refusal(ApiException(status=code)) is refusal


@pytest.mark.parametrize("exc, transient", [
    (ApiException(status=409), True),    # a conflict: the next read is newer
    (ApiException(status=429), True),    # throttled (API priority and fairness)
    (ApiException(status=500), True),    # e.g. a failing admission webhook, etcd away
    (ApiException(status=503), True),
    (ApiException(status=0), True),      # no HTTP answer
    (ApiException(status=403), False),   # RBAC: a retry alone does not help
    (ApiException(status=404), False),   # gone: its deletion event follows
    (ApiException(status=422), False),   # refused input (reported as ApplyFailed, not raised)
    (urllib3.exceptions.ProtocolError("Connection aborted."), True),
    (urllib3.exceptions.ReadTimeoutError(None, "/apis", "read timed out"), True),
    (ConnectionRefusedError(111, "Connection refused"), True),
    (ValueError("a bug"), False),
    (KeyError("spec"), False),
])
def test_transient_failures_are_the_ones_retried_with_backoff(exc, transient):
    assert is_transient(exc) is transient
