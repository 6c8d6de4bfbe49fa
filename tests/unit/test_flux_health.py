"""The Flux ``healthCheckExprs`` of docs/gitops.md, read from the page and run with a real CEL
implementation (cel-python) in Flux's order (fluxcd/pkg ``runtime/cel`` ``StatusEvaluator.Evaluate``,
RFC 0009): observedGeneration != generation is InProgress; then ``inProgress``, ``failed``,
``current``, the first true one wins; none: InProgress. The objects are statuses folded by the
operator's own code (controller/status.py) and the Argo CD check's test objects, whose Argo verdict
the Flux one must match."""

from __future__ import annotations

import re

import pytest
import yaml

from pdd_operator.controller.status import RoleObservation, fold_status
from tests.helpers import ROOT
from tests.unit.test_argocd_health import CASES, CHECK_DIR, run_health
from tests.unit.test_status import BAD, GOOD, INVALID, T0, dep, obs

celpy = pytest.importorskip("celpy")

DOC = (ROOT / "docs" / "gitops.md").read_text()
#: The one YAML block of the Flux section: the Kustomization with the expressions.
_BLOCK = re.search(r"## Flux.*?```yaml\n(.*?)```", DOC, re.S).group(1)
(EXPRS,) = [e for e in yaml.safe_load(_BLOCK)["spec"]["healthCheckExprs"] if e["kind"] == "PDDeployment"]

#: Argo CD health -> the kstatus status Flux should read for the same object.
ARGO_TO_FLUX = {"Healthy": "Current", "Degraded": "Failed", "Progressing": "InProgress", "Suspended": "InProgress"}


def _program(expr: str):
    env = celpy.Environment()
    return env.program(env.compile(expr))


PROGRAMS = {key: _program(EXPRS[key]) for key in ("inProgress", "failed", "current") if EXPRS.get(key)}


def flux_status(obj: dict) -> str:
    """kstatus status of ``obj`` as Flux's StatusEvaluator computes it with :data:`EXPRS`."""
    observed = (obj.get("status") or {}).get("observedGeneration")
    generation = (obj.get("metadata") or {}).get("generation")
    if observed is not None and generation is not None and observed != generation:
        return "InProgress"
    activation = {k: celpy.json_to_cel(v) for k, v in obj.items()}
    for key, verdict in (("inProgress", "InProgress"), ("failed", "Failed"), ("current", "Current")):
        if key in PROGRAMS:
            result = PROGRAMS[key].evaluate(activation)
            if isinstance(result, Exception):
                raise result
            if bool(result):
                return verdict
    return "InProgress"


def pdd(status: dict | None, generation: int | None = None) -> dict:
    """A PDDeployment with ``status``, at ``generation`` (default: the one the status observed)."""
    if generation is None:
        generation = (status or {}).get("observedGeneration") or 1
    obj = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment",
           "metadata": {"name": "x", "namespace": "ns", "generation": generation}, "spec": {}}
    if status is not None:
        obj["status"] = status
    return obj


def folded(report=GOOD, applied=1, generation=1, prefill=None, decode=None, preflight=None, apply_errors=None):
    return fold_status(generation=generation, previous={}, report=report, applied_generation=applied,
                       observations={"prefill": prefill or obs(), "decode": decode or obs()}, now=T0,
                       preflight=preflight, apply_errors=apply_errors)


PENDING = RoleObservation.from_deployment(dep(ready=0), [{"status": {"conditions": [
    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/5 nodes"}]}}])
TCP = [("p-0", {"ready": False, "reason": "TCPFallback", "message": "UCX uses tcp"})]

FOLDED = {
    "ready": (folded(), "Current"),
    "ready-rdma": (folded(preflight=[("p-0", {"ready": True, "reason": "RDMAReady", "transport": "rdma"})]), "Current"),
    "ready-tcp-fallback": (folded(preflight=TCP), "Failed"),
    "rolling-out": (folded(decode=obs(replicas=2, ready=1, updated=2)), "InProgress"),
    "not-applied-yet": (folded(applied=None, prefill=RoleObservation(replicas=1),
                               decode=RoleObservation(replicas=1)), "Failed"),  # ChildMissing: Degraded
    "pods-starting": (folded(prefill=obs(ready=0), decode=obs(ready=0)), "InProgress"),
    "refused": (folded(report=BAD, generation=2, applied=1), "Failed"),
    "invalid": (folded(report=INVALID, generation=2, applied=1), "Failed"),
    "unschedulable": (folded(decode=PENDING), "Failed"),
    "apply-failed": (folded(apply_errors=["Deployment x-prefill: 422 Unprocessable Entity: bad"]), "Failed"),
    "deadline": (folded(prefill=obs(ready=0, conditions=[{"type": "Progressing",
                                                          "reason": "ProgressDeadlineExceeded"}])), "Failed"),
    "scaled-to-zero": (folded(prefill=obs(replicas=0, ready=0, updated=0)), "InProgress"),
}


@pytest.mark.parametrize("name", sorted(FOLDED))
def test_flux_reads_the_operators_statuses(name):
    status, expected = FOLDED[name]
    assert flux_status(pdd(status)) == expected


@pytest.mark.parametrize("name", sorted(FOLDED))
def test_flux_and_argo_agree_on_the_operators_statuses(name):
    obj = pdd(FOLDED[name][0])
    assert flux_status(obj) == ARGO_TO_FLUX[run_health((CHECK_DIR / "health.lua").read_text(), obj)["status"]]


@pytest.mark.parametrize("case", [c for c in CASES if "status" in yaml.safe_load((CHECK_DIR / c["inputPath"]).read_text())],
                         ids=lambda c: c["inputPath"])
def test_flux_and_argo_agree_on_argos_test_objects(case):
    obj = yaml.safe_load((CHECK_DIR / case["inputPath"]).read_text())
    assert flux_status(obj) == ARGO_TO_FLUX[case["healthStatus"]["status"]]


def test_a_generation_not_yet_observed_is_in_progress_whatever_the_conditions():
    assert flux_status(pdd(folded(report=BAD), generation=2)) == "InProgress"  # folded at generation 1
    assert flux_status(pdd(folded(), generation=2)) == "InProgress"
    no_generation = {k: v for k, v in folded().items() if k != "observedGeneration"}
    assert flux_status(pdd(no_generation)) == "InProgress"   # the inProgress expression's own guard


def test_an_object_without_status_is_never_current_or_failed():
    """cel-go (Flux) errors on the unbound ``status``; cel-python's ``has()`` answers false. Either
    way Flux keeps waiting: never Current, never Failed."""
    try:
        verdict = flux_status(pdd(None))
    except Exception:  # noqa: BLE001  (an evaluation error: kstatus Unknown, Flux polls again)
        verdict = "error"
    assert verdict in ("InProgress", "error")


def test_all_over_no_matching_condition_is_true_so_the_page_uses_exists():
    """The page's advice, shown: ``all`` over an empty list says True for a refused deployment's
    missing condition; the page's expressions read the same deployment as Failed."""
    wrong = _program("has(status.conditions) && status.conditions.filter(c, c.type == 'Nope')"
                     ".all(c, c.status == 'True')")
    assert bool(wrong.evaluate({"status": celpy.json_to_cel(folded(report=BAD))}))
    assert flux_status(pdd(folded(report=BAD))) == "Failed"
