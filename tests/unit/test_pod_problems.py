"""Containers that cannot run are told in status: the cache keeps their waiting state, and
``Degraded=True`` ``ContainersFailing`` names the pod, the container and why."""

from __future__ import annotations

from pdd_operator.controller import cache as caching
from pdd_operator.controller.pod_failures import pod_problems
from pdd_operator.controller.status import RoleObservation, fold_status
from tests.unit.test_status import GOOD, T0, dep


def pod(name: str, *statuses: dict, init: tuple[dict, ...] = (), deleting: bool = False) -> dict:
    """A pod as the API returns it (with fields the cache drops), run through the cache's pod view."""
    meta = {"name": name, "namespace": "ns", "annotations": {"x": "y"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    return caching.pod_view({"kind": "Pod", "metadata": meta, "spec": {"containers": [{"name": "vllm"}]},
                             "status": {"phase": "Pending", "containerStatuses": list(statuses),
                                        "initContainerStatuses": list(init)}})


def waiting(name: str, reason: str, message: str | None = None, last: dict | None = None) -> dict:
    st = {"name": name, "ready": False, "restartCount": 3, "image": "vllm/vllm-openai:v0.20.2",
          "state": {"waiting": {"reason": reason, **({"message": message} if message else {})}}}
    if last:
        st["lastState"] = {"terminated": last}
    return st


def degraded(prefill_pods: list[dict], decode_pods: list[dict] | None = None) -> dict:
    obs = {"prefill": RoleObservation.from_deployment(dep(ready=0), prefill_pods),
           "decode": RoleObservation.from_deployment(dep(), decode_pods or [])}
    status = fold_status(generation=1, previous={}, report=GOOD, applied_generation=1, observations=obs, now=T0)
    return next(c for c in status["conditions"] if c["type"] == "Degraded")


def test_a_missing_secret_is_named_with_the_pod_and_container():
    c = degraded([pod("m-prefill-abc", waiting("vllm", "CreateContainerConfigError", 'secret "hf-token" not found'))])
    assert (c["status"], c["reason"]) == ("True", "ContainersFailing")
    assert c["message"] == ('Containers cannot run: prefill: pod m-prefill-abc container vllm: '
                            'CreateContainerConfigError: secret "hf-token" not found '
                            '(fix: spec.model.hfTokenSecretRef, spec.prefill.env)')


def test_a_crash_loop_reports_its_last_exit_not_the_changing_back_off_text():
    a = pod("p", waiting("vllm", "CrashLoopBackOff", "back-off 10s restarting failed container=vllm",
                         {"exitCode": 137, "reason": "OOMKilled"}))
    b = pod("p", waiting("vllm", "CrashLoopBackOff", "back-off 2m40s restarting failed container=vllm",
                         {"exitCode": 137, "reason": "OOMKilled"}))
    assert pod_problems([a]) == pod_problems([b]) == ["pod p container vllm: CrashLoopBackOff (last exit 137, OOMKilled)"]
    assert degraded([a]) == degraded([b])  # equal statuses: no write per restart


def test_image_pull_failures_and_init_containers_count():
    got = pod_problems([pod("p", waiting("vllm", "ImagePullBackOff", 'Back-off pulling image "vllm:nope"'),
                            init=(waiting("preflight", "ErrImagePull", "not found"),))])
    assert got == ["pod p container preflight: ErrImagePull: not found",
                   'pod p container vllm: ImagePullBackOff: Back-off pulling image "vllm:nope"']


def test_progress_and_pods_being_deleted_are_not_failures():
    assert pod_problems([pod("p", waiting("vllm", "ContainerCreating")),
                         pod("q", waiting("vllm", "PodInitializing")),
                         pod("r", waiting("vllm", "CrashLoopBackOff"), deleting=True)]) == []
    c = degraded([pod("p", waiting("vllm", "ContainerCreating"))])
    assert (c["status"], c["reason"]) == ("False", "AsExpected")


def test_long_messages_are_cut_and_whitespace_folded():
    (line,) = pod_problems([pod("p", waiting("vllm", "RunContainerError", "a\n  b " + "x" * 1000))])
    assert line.startswith("pod p container vllm: RunContainerError: a b x") and len(line) == 300


def test_the_cache_keeps_only_failing_containers():
    view = pod("p", waiting("vllm", "CrashLoopBackOff"), {"name": "sidecar", "ready": True,
                                                          "state": {"running": {"startedAt": T0}}})
    assert [s["name"] for s in view["status"]["containerStatuses"]] == ["vllm"]
    assert set(view["status"]["containerStatuses"][0]) == {"name", "state", "lastState"}


def test_a_lost_role_keeps_its_reason_and_says_why_its_pods_do_not_run():
    """After the pair served, the role lost is the reason (who serves meanwhile), the crash the detail."""
    served = fold_status(generation=1, previous={}, report=GOOD, applied_generation=1, now=T0,
                         observations={"prefill": RoleObservation.from_deployment(dep()),
                                       "decode": RoleObservation.from_deployment(dep())}, fallback=True)
    crashing = [pod("p", waiting("vllm", "CrashLoopBackOff", last={"exitCode": 137, "reason": "OOMKilled"}))]
    status = fold_status(generation=1, previous=served, report=GOOD, applied_generation=1, now=T0, fallback=True,
                         observations={"prefill": RoleObservation.from_deployment(dep(ready=0), crashing),
                                       "decode": RoleObservation.from_deployment(dep())})
    c = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert c["reason"] == "PrefillUnavailable" and "decode engine alone" in c["message"]
    assert c["message"].endswith("pod p container vllm: CrashLoopBackOff (last exit 137, OOMKilled).")
