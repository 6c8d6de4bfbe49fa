"""Every admitted PDDeployment runs or says why, and nothing one object does harms the others: bad and
awkward inputs through the real apiserver, with the webhook off (the session operator) and on."""

from __future__ import annotations

import copy
import json
import uuid

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdd_operator.api.names import child_name, is_dns1035_label
from tests.e2e.conftest import ROOT, condition, pdd_status, wait_for
from tests.helpers import TURN2_INPUTS

pytestmark = pytest.mark.cluster

INPUTS = TURN2_INPUTS
LLAMA = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())


def manifest(name: str, **spec_patch) -> str:
    doc = copy.deepcopy(LLAMA)
    doc["metadata"] = {"name": name}
    for key, value in spec_patch.items():
        doc["spec"][key] = {**doc["spec"].get(key, {}), **value} if isinstance(value, dict) else value
    return json.dumps(doc)  # JSON: kubectl sends it as it is (non-ASCII included)


def settled(cluster, ns, name):
    """The status for the current generation, once the operator wrote one."""
    def check():
        obj = cluster.custom.get_namespaced_custom_object("pdd-operator.dev", "v1alpha1", ns, "pddeployments", name)
        st_ = obj.get("status") or {}
        return st_.get("observedGeneration") == obj["metadata"]["generation"] and st_.get("conditions") and st_
    return check


@pytest.mark.parametrize("name", [
    "llama-3.1-8b",  # dots: not a Service name
    "qwen3-32b-fp8-instruct-disaggregated-nixl-rdma-team-a-prod1",  # 59 characters: <name>-prefill is 67
    "a" * 100 + ".b" * 40,  # 180 characters: not a label value either
    "7b-model",  # a leading digit: not a DNS-1035 label
])
def test_any_valid_name_gets_children_and_status(cluster, operator, namespace, name):
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=manifest(name))
    st_ = wait_for(settled(cluster, namespace, name), 90, what=f"status of {name}")
    assert condition(st_, "Degraded").get("reason") != "ApplyFailed", st_
    for role in ("prefill", "decode", "router"):
        child = child_name(name, role)
        assert is_dns1035_label(child)
        wait_for(lambda c=child: cluster.apps.read_namespaced_deployment(c, namespace), 60, what=f"Deployment {child}")
    wait_for(lambda: condition(pdd_status(cluster, namespace, name), "Ready").get("status") == "True", 120,
             what=f"{name} Ready (pods found by their instance label)")


def test_emoji_and_large_spec_are_applied(cluster, operator, namespace):
    cluster.kubectl("apply", "-n", namespace, "-f", "-",
                    input=manifest("emoji", model={"servedModelName": "llama-\U0001F999"}))
    big = yaml.safe_load((INPUTS / "spec-over-annotation-limit.yaml").read_text())
    cluster.kubectl("apply", "--server-side", "-n", namespace, "-f", "-", input=json.dumps(big))
    for name in ("emoji", "qwen3-8b-template"):
        st_ = wait_for(settled(cluster, namespace, name), 90, what=f"status of {name}")
        assert condition(st_, "Degraded").get("reason") != "ApplyFailed", st_
    dep = cluster.apps.read_namespaced_deployment("emoji-decode", namespace)
    assert "llama-\U0001F999" in dep.spec.template.spec.containers[0].args
    dep = cluster.apps.read_namespaced_deployment("qwen3-8b-template-prefill", namespace)
    assert "pdd-operator.dev/applied-spec" not in (dep.metadata.annotations or {})
    assert pdd_status(cluster, namespace, "qwen3-8b-template")["appliedSpec"]["generation"] == 1


def test_refused_child_is_reported_and_the_others_still_applied(cluster, operator, namespace):
    # A Service of the child's name that is not headless: clusterIP is immutable, so the apiserver
    # refuses the operator's apply of that one child (422).
    cluster.core.create_namespaced_service(namespace, {
        "metadata": {"name": "blocked-prefill"},
        "spec": {"ports": [{"name": "web", "port": 80}], "selector": {"app": "other"}},
    })
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=manifest("blocked"))
    st_ = wait_for(lambda: (s := pdd_status(cluster, namespace, "blocked")) and
                   condition(s, "Degraded").get("reason") == "ApplyFailed" and s, 90, what="Degraded=ApplyFailed")
    message = condition(st_, "Degraded")["message"]
    assert "Service blocked-prefill: 422" in message and "may not change once set" in message
    for child in ("blocked-prefill", "blocked-decode", "blocked-router"):
        wait_for(lambda c=child: cluster.apps.read_namespaced_deployment(c, namespace), 60, what=f"Deployment {child}")
    events = wait_for(lambda: [e for e in cluster.core.list_namespaced_event(namespace).items
                               if e.reason == "ApplyFailed" and e.involved_object.name == "blocked"], 30,
                      what="an ApplyFailed Event")
    assert events[0].type == "Warning"
    cluster.core.delete_namespaced_service("blocked-prefill", namespace)
    wait_for(lambda: condition(pdd_status(cluster, namespace, "blocked"), "Degraded").get("reason") != "ApplyFailed",
             60, what="Degraded cleared once the obstacle is gone")


def test_nested_configmap_harms_nobody(cluster, operator, namespace):
    cluster.core.create_namespaced_config_map(namespace, {
        "metadata": {"name": "deep"}, "data": {"config.json": "[" * 50_000 + "]" * 50_000}})
    cluster.kubectl("apply", "-n", namespace, "-f", "-",
                    input=manifest("deep", model={"configMapRef": {"name": "deep"}}))
    st_ = wait_for(settled(cluster, namespace, "deep"), 90, what="status of deep")
    assert "model-config-unavailable" in {f["rule"] for f in st_["compatibility"]}
    seen = operator.reconciles()
    # The periodic resync keeps running for everybody (2 s in the tests).
    wait_for(lambda: operator.reconciles() >= seen + 4, 60, what="resync rounds after the nested ConfigMap")
    assert operator.proc.poll() is None


# --- generated bad inputs, webhook off and on ------------------------------------------------------------

BAD_VALUES = st.sampled_from([
    {"prefill": {"nodeSelector": {"gpu": "H100 80GB"}}},
    {"decode": {"resources": {"requests": {"memory": "lots"}}}},
    {"placement": {"topologyKey": "rack id"}},
    {"engine": {"env": [{"name": "A=B", "value": "x"}]}},
    {"router": {"serviceAccountName": "Router_SA"}},
])
NAMES = st.from_regex(r"\A[a-z][a-z0-9]{0,20}(\.[a-z0-9]{1,30}){0,3}\Z")


def _apply_variant(cluster, ns, name, patch) -> tuple[bool, str]:
    doc = copy.deepcopy(LLAMA)
    doc["metadata"] = {"name": name}
    for key, value in patch.items():
        doc["spec"][key] = {**doc["spec"].get(key, {}), **value}
    proc = cluster.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(doc), check=False)
    return proc.returncode == 0, proc.stderr


def _check_variant(cluster, op, ns, name, patch, webhook: bool) -> None:
    admitted, stderr = _apply_variant(cluster, ns, name, patch)
    field = next(iter(patch))
    if not admitted:  # by the CRD's schema (label values, env names) or the webhook: naming the field
        assert f"spec.{field}" in stderr, stderr
        return
    assert not webhook, f"the webhook admitted {patch}"
    st_ = wait_for(settled(cluster, ns, name), 60, what=f"status of {name}")
    assert condition(st_, "Compatible")["status"] == "False"
    assert any(f"spec.{field}" in fld for f in st_["compatibility"] for fld in f["fields"]), st_["compatibility"]
    assert op.proc.poll() is None


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=NAMES, patch=BAD_VALUES)
def test_generated_bad_inputs_without_webhook(cluster, operator, name, patch):
    ns = _fresh_namespace(cluster)
    try:
        _check_variant(cluster, operator, ns, name, patch, webhook=False)
    finally:
        cluster.core.delete_namespace(ns)


def _fresh_namespace(cluster) -> str:
    ns = f"e2e-{uuid.uuid4().hex[:8]}"
    cluster.core.create_namespace({"metadata": {"name": ns}})
    return ns
