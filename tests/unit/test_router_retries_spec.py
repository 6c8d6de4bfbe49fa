"""``spec.router.retries``: the model (defaults, bounds, messages), the CRD schema, the router flags it
renders and the router config they build, and that a change of it touches the router's pod template only."""

from __future__ import annotations

import argparse

import pytest
from pydantic import ValidationError

from pdd_operator.api.crd import build_crd
from pdd_operator.api.messages import invalid_spec_findings
from pdd_operator.api.spec import PDDeploymentSpec, RouterSpec
from pdd_operator.render.engine import compat_hash
from pdd_operator.render.workloads import Owner, render_children
from pdd_operator.router.proxy import RouterConfig
from pdd_operator.router.server import add_arguments, build
from tests.helpers import make_spec

OWNER = Owner(name="demo", namespace="ns", uid="u1", generation=2)
STATIC = ["--static-prefill", "http://p:1", "--static-decode", "http://d:1"]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p


def children(spec: PDDeploymentSpec) -> dict[tuple[str, str], dict]:
    return {(c["kind"], c["metadata"]["name"]): c for c in render_children(OWNER, spec)}


def router_command(spec: PDDeploymentSpec) -> list[str]:
    dep = children(spec)[("Deployment", "demo-router")]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    return container["command"]


def test_defaults_are_the_routers_own():
    """An unset ``spec.router.retries`` (or an empty one, as the apiserver's defaulting fills it) is what
    ``pdd router`` does without flags and what ``RouterConfig`` holds: one retry within 30 s."""
    flags = parser().parse_args(STATIC)
    for spec in (make_spec(), make_spec(router={"retries": {}})):
        r = spec.router.retries
        assert (r.attempts, r.deadline_seconds) == (1, 30)
        assert (r.attempts, r.deadline_seconds) == (flags.retries, flags.retry_deadline)
        assert (r.attempts, r.deadline_seconds) == (RouterConfig().retries, RouterConfig().retry_deadline)
    assert RouterSpec().wire()["retries"] == {"attempts": 1, "deadlineSeconds": 30}


@pytest.mark.parametrize("retries", [{"attempts": 0}, {"attempts": 5}, {"deadlineSeconds": 1},
                                     {"deadlineSeconds": 3600}, {"attempts": 3, "deadlineSeconds": 90}])
def test_values_within_the_bounds_are_accepted(retries):
    r = make_spec(router={"retries": retries}).router.retries
    assert r.wire() == {"attempts": 1, "deadlineSeconds": 30, **retries}


@pytest.mark.parametrize(("retries", "path", "reason"), [
    ({"attempts": -1}, "spec.router.retries.attempts", "greater than or equal to 0"),
    ({"attempts": 6}, "spec.router.retries.attempts", "less than or equal to 5"),
    ({"attempts": "two"}, "spec.router.retries.attempts", "valid integer"),
    ({"attempts": 1.5}, "spec.router.retries.attempts", "valid integer"),
    ({"deadlineSeconds": 0}, "spec.router.retries.deadlineSeconds", "greater than or equal to 1"),
    ({"deadlineSeconds": 3601}, "spec.router.retries.deadlineSeconds", "less than or equal to 3600"),
    ({"deadlineSeconds": "30s"}, "spec.router.retries.deadlineSeconds", "valid integer"),
    ({"perTryTimeout": "5s"}, "spec.router.retries.perTryTimeout", "Extra inputs are not permitted"),
])
def test_bad_values_are_refused_naming_the_field(retries, path, reason):
    """Refused by the model (``pdd check``, the webhook, the status) with the field's wire path first."""
    with pytest.raises(ValidationError) as exc:
        make_spec(router={"retries": retries})
    (finding,) = invalid_spec_findings(exc.value)
    assert finding.fields == [path] and finding.severity == "error"
    assert finding.message.startswith(f"{path}: ") and reason in finding.message, finding.message
    assert "kubectl explain pdd.spec.router.retries" in finding.fix


def test_the_crd_bounds_and_defaults_them_without_the_operator():
    """The apiserver itself defaults and bounds the fields (the schema ``pdd crd`` writes), so a spec
    applied while the webhook is down is refused the same way."""
    schema = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    router = schema["properties"]["spec"]["properties"]["router"]["properties"]["retries"]
    assert router["default"] == {} and router["type"] == "object"
    attempts, deadline = router["properties"]["attempts"], router["properties"]["deadlineSeconds"]
    assert (attempts["type"], attempts["default"], attempts["minimum"], attempts["maximum"]) == ("integer", 1, 0, 5)
    assert (deadline["type"], deadline["default"], deadline["minimum"], deadline["maximum"]) == ("integer", 30, 1, 3600)


@pytest.mark.parametrize(("retries", "want"), [
    ({}, (1, 30.0)), ({"attempts": 0}, (0, 30.0)), ({"attempts": 3, "deadlineSeconds": 90}, (3, 90.0)),
])
def test_the_rendered_flags_build_the_router_config(retries, want):
    """The router Deployment's command carries ``--retries`` and ``--retry-deadline``; ``pdd router``
    parses them into the ``RouterConfig`` that :func:`pdd_operator.router.retry.may_retry` reads."""
    cmd = router_command(make_spec(router={"retries": retries}))
    assert cmd[:2] == ["pdd", "router"]
    assert cmd[cmd.index("--retries") + 1] == str(want[0])
    assert cmd[cmd.index("--retry-deadline") + 1] == str(int(want[1]))
    args = parser().parse_args(cmd[2:])
    assert (args.retries, args.retry_deadline) == want and args.pddeployment == "demo" and args.namespace == "ns"
    # the same flags with static endpoints in place of discovery: what build() makes of them
    flags = ["--retries", str(args.retries), "--retry-deadline", str(args.retry_deadline)]
    config = build(parser().parse_args(STATIC + flags))[0].config
    assert (config.retries, config.retry_deadline) == want


def test_a_change_of_retries_changes_the_router_deployment_and_no_engine_child():
    """Only the router Deployment differs: every engine Deployment (pod template included), Service and
    the router's RBAC render identically, and the compat hash (the rollout's slot switch) stays."""
    before = make_spec(prefill={"replicas": 2})
    after = make_spec(prefill={"replicas": 2}, router={"retries": {"attempts": 0, "deadlineSeconds": 5}})
    old, new = children(before), children(after)
    assert old.keys() == new.keys()
    changed = {key for key in old if old[key] != new[key]}
    assert changed == {("Deployment", "demo-router")}
    for role in ("prefill", "decode"):
        assert new[("Deployment", f"demo-{role}")]["spec"]["template"] == old[("Deployment", f"demo-{role}")]["spec"]["template"]
    assert compat_hash(after) == compat_hash(before)
    router_old, router_new = (c[("Deployment", "demo-router")]["spec"] for c in (old, new))
    assert router_old["template"] != router_new["template"]  # the router's pods roll
    assert "--retries" in router_command(after) and router_command(after)[-4:] == ["--retries", "0", "--retry-deadline", "5"]
