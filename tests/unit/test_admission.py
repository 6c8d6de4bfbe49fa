"""Every valid PDDeployment name, port layout and bind address renders objects Kubernetes accepts; what it
would refuse is refused up front (render.admission), naming the field."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_operator.api.constants import LABEL_INSTANCE
from pdd_operator.api.names import child_name, is_dns1035_label, is_label_value, is_pddeployment_name, label_value
from pdd_operator.api.status import decode_spec, encode_spec
from pdd_operator.controller.kube import apply_body
from pdd_operator.render.admission import MAX_OBJECT_BYTES, admission_findings, check_sizes
from pdd_operator.render.engine import role_ports, vllm_args
from pdd_operator.render.workloads import Owner, render_children
from pdd_operator.router.discovery import pod_selector
from tests.helpers import ROOT, TURN2_INPUTS, make_spec, spec_of

INPUTS = TURN2_INPUTS

# DNS-1123 subdomains: labels of [a-z0-9-] starting and ending alphanumeric, joined by dots, <= 253.
_label = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
NAMES = st.lists(_label, min_size=1, max_size=8).map(".".join).filter(lambda n: len(n) <= 253)


def _all_labels(obj: dict) -> list[dict]:
    out = [obj["metadata"].get("labels") or {}]
    template = (obj.get("spec") or {}).get("template")
    if template:
        out.append(template["metadata"].get("labels") or {})
    return out


@settings(max_examples=300, deadline=None)
@given(NAMES)
def test_every_valid_name_renders_valid_child_names_and_labels(name):
    assert is_pddeployment_name(name)
    for child in render_children(Owner(name=name, uid="u", generation=1), make_spec()):
        assert is_dns1035_label(child["metadata"]["name"]), child["metadata"]["name"]
        for labels in _all_labels(child):
            assert all(is_label_value(v) for v in labels.values()), labels
    assert admission_findings(name, "default", make_spec()) == []


@pytest.mark.parametrize("name, role, want", [
    ("demo", "prefill", "demo-prefill"),  # valid names keep their children's names
    ("llama-3.1-8b", "prefill", "llama-3-1-8b-{h}-prefill"),
    ("7b-model", "decode", "pdd-7b-model-{h}-decode"),
])
def test_child_names(name, role, want):
    from pdd_operator.api.names import name_hash
    assert child_name(name, role) == want.format(h=name_hash(name))


def test_names_that_differ_only_in_dots_get_different_children():
    assert child_name("llama-3.1-8b", "router") != child_name("llama-3-1-8b", "router")
    long_a, long_b = "a" * 60 + "x", "a" * 60 + "y"
    assert child_name(long_a, "prefill") != child_name(long_b, "prefill")
    assert label_value("b" * 100) != label_value("b" * 99 + "c")


def test_case_inputs_names_render_or_are_refused():
    docs = [d for f in ("pdd-name-service-suffix-over-63.yaml", "pdd-name-with-dots.yaml")
            for d in yaml.safe_load_all((INPUTS / f).read_text())]
    verdicts = {}
    for doc in docs:
        name = doc["metadata"]["name"]
        from pdd_operator.api.spec import PDDeploymentSpec
        spec = PDDeploymentSpec.model_validate(doc["spec"])
        verdicts[name] = [f.rule for f in admission_findings(name, "default", spec)]
        if not verdicts[name]:
            for child in render_children(Owner(name=name, uid="u", generation=1), spec):
                assert is_dns1035_label(child["metadata"]["name"])
    assert verdicts == {
        "qwen3-32b-fp8-instruct-disaggregated-nixl-rdma-team-a-prod1": [],
        "llama-3.1-8b": [],
        "qwen2.5:32b": ["name-invalid"],  # the apiserver refuses it too; `pdd check` says so offline
    }


def test_router_selects_the_label_the_operator_renders():
    name = "x" * 100
    pod_labels = render_children(Owner(name=name), make_spec())[1]["spec"]["template"]["metadata"]["labels"]
    assert f"{LABEL_INSTANCE}={pod_labels[LABEL_INSTANCE]}," in pod_selector(name)


# --- fields the apiserver refuses in children ------------------------------------------------------------

@pytest.mark.parametrize("patch, field", [
    ({"prefill": {"nodeSelector": {"gpu": "H100 80GB"}}}, "spec.prefill.nodeSelector.gpu"),
    ({"decode": {"nodeSelector": {"bad key!": "x"}}}, "spec.decode.nodeSelector.bad key!"),
    ({"placement": {"gpuProduct": "NVIDIA H200"}}, "spec.placement.gpuProduct"),
    ({"placement": {"topologyKey": "rack id"}}, "spec.placement.topologyKey"),
    ({"prefill": {"resources": {"requests": {"memory": "lots"}}}}, "spec.prefill.resources.requests.memory"),
    ({"router": {"resources": {"limits": {"cpu": "1 core"}}}}, "spec.router.resources.limits.cpu"),
    ({"decode": {"resources": {"limits": {"memory": "-1Gi"}}}}, "spec.decode.resources.limits.memory"),
    ({"decode": {"tolerations": [{"key": "a b", "operator": "Exists"}]}}, "spec.decode.tolerations[0].key"),
    ({"engine": {"env": [{"name": "A=B", "value": "1"}]}}, "spec.engine.env[0].name"),
    ({"engine": {"imagePullSecrets": ["My_Secret"]}}, "spec.engine.imagePullSecrets[0]"),
    ({"router": {"serviceAccountName": "Router"}}, "spec.router.serviceAccountName"),
    ({"model": {"hfTokenSecretRef": {"name": "hf token", "key": "t"}}}, "spec.model.hfTokenSecretRef.name"),
    ({"engine": {"image": " vllm/vllm-openai:v0.20.2"}}, "spec.engine.image"),
])
def test_fields_the_apiserver_refuses_in_children_are_named(patch, field):
    findings = admission_findings("demo", "default", make_spec(**patch))
    assert [f.fields for f in findings] == [[field]]
    assert all(f.severity == "error" and f.fix for f in findings)


def test_valid_fields_pass():
    spec = make_spec(prefill={"nodeSelector": {"example.com/gpu": "H100_80GB.v2"},
                              "resources": {"requests": {"cpu": "500m", "memory": "200Gi", "hugepages-2Mi": "1Gi"}}},
                     engine={"env": [{"name": "MY.VAR-1", "value": "x"}]},
                     placement={"topologyKey": "network.topology.kubernetes.io/block", "gpuProduct": "NVIDIA-H200"})
    assert admission_findings("demo", "default", spec) == []


# --- sizes: the spec is no longer copied onto every child ---------------------------------------------------

def test_large_valid_spec_renders_children_without_a_spec_copy():
    doc = yaml.safe_load((INPUTS / "spec-over-annotation-limit.yaml").read_text())
    from pdd_operator.api.spec import PDDeploymentSpec
    spec = PDDeploymentSpec.model_validate(doc["spec"])
    assert len(json.dumps(doc["spec"])) > 256 * 1024
    assert admission_findings("qwen3-8b-template", "default", spec) == []
    for child in render_children(Owner(name="t", uid="u", generation=2), spec):
        notes = child["metadata"].get("annotations") or {}
        assert sum(len(k) + len(v) for k, v in notes.items()) < 1024, child["kind"]
    kept = encode_spec(spec.wire(), 2)
    assert len(kept["data"]) < 16 * 1024  # the repeated template compresses
    assert decode_spec(kept) == spec.wire()


def test_too_large_rendered_object_is_refused():
    import random
    rnd = random.Random(1)
    noise = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(MAX_OBJECT_BYTES))
    findings = check_sizes("demo", "default", make_spec(prefill={"extraArgs": ["--chat-template", noise]}))
    assert {f.rule for f in findings} == {"object-too-large"}
    assert any("Deployment demo-prefill" in f.message for f in findings)


def test_applied_spec_refuses_tampering():
    kept = encode_spec({"model": {"name": "m"}}, 1)
    with pytest.raises(ValueError, match="sha256"):
        decode_spec({**kept, "sha256": "0" * 64})
    with pytest.raises(ValueError, match="cannot be decoded"):
        decode_spec({"data": "not base64!", "sha256": "x"})


# --- ports -------------------------------------------------------------------------------------------------

def _port_sets(spec):
    from pdd_operator.render.engine import side_channel_span
    out = {}
    for role in ("prefill", "decode"):
        http, side = role_ports(spec, role)
        out[role] = {http, *range(side, side + side_channel_span(spec, role))}
    return out


def test_hostnetwork_case_input_ports_do_not_collide():
    doc = yaml.safe_load((INPUTS / "hostnetwork-http-vs-nixl-port.yaml").read_text())
    from pdd_operator.api.spec import PDDeploymentSpec
    spec = PDDeploymentSpec.model_validate(doc["spec"])
    sets = _port_sets(spec)
    assert not sets["prefill"] & sets["decode"]
    assert role_ports(spec, "decode") == (5601, 5602)


@settings(max_examples=300, deadline=None)
@given(port=st.integers(1024, 65535), side=st.integers(1024, 65535), tp=st.sampled_from([1, 2, 4, 8]),
       version=st.sampled_from(["v0.10.1", "v0.20.2"]))
def test_host_network_ports_never_collide(port, side, tp, version):
    spec = make_spec(port=port, kvTransfer={"sideChannelPort": side}, network={"hostNetwork": True},
                     engine={"image": f"vllm/vllm-openai:{version}"},
                     prefill={"tensorParallelSize": tp}, decode={"tensorParallelSize": tp})
    sets = _port_sets(spec)
    refused = [f.rule for f in admission_findings("demo", "default", spec)]
    if max(max(s) for s in sets.values()) > 65535:
        assert "port-out-of-range" in refused
    else:
        assert "port-out-of-range" not in refused
        assert not sets["prefill"] & sets["decode"]


# --- bind addresses -----------------------------------------------------------------------------------------

def test_engines_bind_every_address_family_by_default():
    args = vllm_args(make_spec(), "prefill")
    assert args[args.index("--host") + 1] == "::"


@pytest.mark.parametrize("extra", [["--host", "::"], ["--host=0.0.0.0"], ["--host", "fd00::1"]])
def test_user_host_in_extra_args_is_accepted_and_rendered_once(extra):
    from pdd_operator.compat.engine import evaluate
    spec = make_spec(prefill={"extraArgs": extra}, decode={"extraArgs": extra})
    report = evaluate(spec)
    assert "extra-args-managed-flag" not in {f.rule for f in report.findings}
    args = vllm_args(spec, "decode")
    assert sum(a == "--host" or a.startswith("--host=") for a in args) == 1


def test_ipv6_case_input_is_accepted():
    from pdd_operator.api.spec import PDDeploymentSpec
    from pdd_operator.compat.engine import evaluate
    for doc in yaml.safe_load_all((INPUTS / "ipv6-only-cluster-bind-host.yaml").read_text()):
        spec = PDDeploymentSpec.model_validate(doc["spec"])
        assert evaluate(spec).compatible, doc["metadata"]["name"]
        args = vllm_args(spec, "prefill")
        assert args[args.index("--host") + 1] == "::"


def test_router_listens_on_every_family():
    import argparse

    from pdd_operator.router.server import add_arguments
    p = argparse.ArgumentParser()
    add_arguments(p)
    assert p.parse_args([]).host is None


# --- the apply body -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["model-\U0001F600", "a\\ud83d\\ude00b", "\\\U0001F680", "plain", "é\u00a0\u2028"])
def test_apply_body_has_no_escaped_surrogates_and_round_trips(text):
    body = apply_body({"a": [text, {"k": text}]})
    assert json.loads(body) == {"a": [text, {"k": text}]}
    assert yaml.safe_load(body.decode()) == {"a": [text, {"k": text}]}
    assert not re.search(rb"(?<!\\)(\\\\)*\\ud[89ab]", body)


# --- the same checks in the webhook and `pdd check` ---------------------------------------------------------

def test_webhook_refuses_what_the_apiserver_would_refuse_in_children():
    from pdd_operator.controller.webhook import review
    spec = make_spec(prefill={"nodeSelector": {"gpu": "H100 80GB"}}).wire()
    verdict = review("CREATE", {"metadata": {"name": "demo", "namespace": "ns"}, "spec": spec})
    assert not verdict.allowed
    assert "[label-invalid] spec.prefill.nodeSelector.gpu" in verdict.message
    ok = review("CREATE", {"metadata": {"name": "llama-3.1-8b", "namespace": "ns"}, "spec": make_spec().wire()})
    assert ok.allowed, ok.message


def test_pdd_check_reports_an_invalid_name(capsys):
    from pdd_operator.cli import main
    rc = main(["check", "--output", "json", str(INPUTS / "pdd-name-with-dots.yaml")])
    results = {r["object"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert rc == 1
    assert results["PDDeployment/llama-3.1-8b"]["compatible"]
    assert [f["rule"] for f in results["PDDeployment/qwen2.5:32b"]["findings"]][:1] == ["name-invalid"]


@pytest.mark.parametrize("example", sorted((ROOT / "examples").rglob("*.yaml")), ids=lambda p: p.stem)
def test_the_size_shortcut_holds_for_the_examples(example):
    """check_sizes skips rendering when 3 x spec + RENDER_OVERHEAD_BYTES fits: each child must stay
    within twice the spec plus a quarter of that overhead."""
    from pdd_operator.render.admission import RENDER_OVERHEAD_BYTES, _size
    doc = next(d for d in yaml.safe_load_all(example.read_text()) if d and d.get("kind") == "PDDeployment")
    spec = spec_of(doc)
    budget = 2 * _size(spec.wire()) + RENDER_OVERHEAD_BYTES // 4
    for child in render_children(Owner(name="x" * 200, uid="u", generation=1), spec):
        assert _size(child) <= budget, child["kind"]
