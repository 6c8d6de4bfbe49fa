"""The dev node agent's pure parts (dev/node_agent/podspec.py): env and argv as the kubelet builds them,
and the pods it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from dev.node_agent.podspec import (
    Refused,
    Runtime,
    container_argv,
    container_env,
    cpu_millis,
    expand,
    omp_bind,
    refusal,
    runtime_env,
)
from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.render.workloads import Owner, render_children

ENGINE_IMAGE = "registry.example/vllm-cpu:1"
RUNTIMES = [Runtime(images=[ENGINE_IMAGE], venv="/opt/venv", commands={"vllm": ["/opt/venv/bin/python", "/l.py"]},
                    env={"VLLM_CPU_OMP_THREADS_BIND": "{cpus}", "HOME": "/root"}),
            Runtime(images=["ghcr.io/pdd-operator/pdd-operator:*"], venv="/opt/project")]


def pod(containers: list[dict], **spec) -> dict:
    return {"metadata": {"name": "p-0", "namespace": "ns", "uid": "u-1", "labels": {"a": "b"}},
            "spec": {"nodeName": "local-cpu", "containers": containers, **spec}}


def no_lookup(kind, name, key):
    return None


def test_expand_is_the_kubelets():
    env = {"A": "x", "B": "$(A)y"}
    assert expand("$(A)-$(B)-$(C)-$$(A)-$$", env) == "x-$(A)y-$(C)-$(A)-$"


def test_env_downward_api_and_order():
    c = {"name": "vllm", "image": ENGINE_IMAGE, "command": ["vllm", "serve"],
         "args": ["--engine-id", "$(POD_NAME)", "--x", "$(MISSING)"],
         "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                 {"name": "HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                 {"name": "LABEL", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['a']"}}},
                 {"name": "URL", "value": "http://$(HOST):8000"},
                 {"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}]}
    env = container_env(pod([c]), c, "127.0.100.2", "127.0.0.1", {"KUBERNETES_SERVICE_HOST": "127.0.0.1"},
                        no_lookup, cpus=2)
    assert env == {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "POD_NAME": "p-0", "HOST": "127.0.100.2", "LABEL": "b",
                   "URL": "http://127.0.100.2:8000", "CPUS": "2"}
    argv = container_argv(c, env, RUNTIMES[0])
    assert argv == ["/opt/venv/bin/python", "/l.py", "serve", "--engine-id", "p-0", "--x", "$(MISSING)"]
    penv = runtime_env(RUNTIMES[0], {**env, "HOME": "/pod-home"}, "1")
    assert penv["VLLM_CPU_OMP_THREADS_BIND"] == "1" and penv["HOME"] == "/pod-home"  # the pod's env wins
    assert penv["PATH"].startswith("/opt/venv/bin:")


def test_omp_threads_bound_only_to_cores_of_the_pods_own():
    """A shared CPU set is not bound: pinned, every engine's worker thread sat on the set's first core (issue 13)."""
    rt = Runtime(images=[ENGINE_IMAGE], venv="/opt/venv", env={"VLLM_CPU_OMP_THREADS_BIND": "{omp_bind}", "C": "{cpus}"})
    own = runtime_env(rt, {}, "1", exclusive=True)
    shared = runtime_env(rt, {}, "0,1", exclusive=False)
    assert (own["VLLM_CPU_OMP_THREADS_BIND"], own["C"]) == ("1", "1")
    assert (shared["VLLM_CPU_OMP_THREADS_BIND"], shared["C"]) == ("nobind", "0,1")
    assert omp_bind("0,1", exclusive=False) == "nobind" and omp_bind("0", exclusive=True) == "0"
    # The pod's own value wins over the image's, as for every runtime variable.
    assert runtime_env(rt, {"VLLM_CPU_OMP_THREADS_BIND": "0"}, "0,1", exclusive=False)["VLLM_CPU_OMP_THREADS_BIND"] == "0"


def test_env_references_missing_config_map_is_refused_unless_optional():
    c = {"name": "c", "image": ENGINE_IMAGE, "command": ["x"],
         "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]}
    with pytest.raises(Refused, match="secret 'hf' key 'token' not found"):
        container_env(pod([c]), c, "127.0.100.2", "127.0.0.1", {}, no_lookup, 2)
    c["env"][0]["valueFrom"]["secretKeyRef"]["optional"] = True
    assert "T" not in container_env(pod([c]), c, "127.0.100.2", "127.0.0.1", {}, no_lookup, 2)


@pytest.mark.parametrize("change,reason,words", [
    ({"image": "example.invalid/other:1"}, "ErrImagePull", "no local runtime stands for image"),
    ({"resources": {"limits": {"nvidia.com/gpu": "1"}}}, "UnexpectedAdmissionError", "nvidia.com/gpu"),
    ({"resources": {"requests": {"rdma/ib": "1"}}}, "UnexpectedAdmissionError", "rdma/ib"),
    ({"command": []}, "CreateContainerConfigError", "entrypoint"),
    ({"readinessProbe": {"grpc": {"port": 1}}}, "CreateContainerConfigError", "readinessProbe"),
])
def test_refused_containers(change, reason, words):
    c = {"name": "c", "image": ENGINE_IMAGE, "command": ["vllm"], **change}
    r = refusal(pod([c]), RUNTIMES)
    assert r is not None and r.reason == reason and words in r.message, r


def test_refused_volumes_and_host_network():
    c = {"name": "c", "image": ENGINE_IMAGE, "command": ["vllm"]}
    r = refusal(pod([c], volumes=[{"name": "m", "hostPath": {"path": "/x"}}]), RUNTIMES)
    assert r is not None and "hostPath volumes are not supported" in r.message
    r = refusal(pod([c], hostNetwork=True), RUNTIMES)
    assert r is not None and "hostNetwork" in r.message
    assert refusal(pod([c], volumes=[{"name": "d", "emptyDir": {"medium": "Memory"}}]), RUNTIMES) is None


def test_the_rendered_cpu_example_is_runnable():
    """The CPU example's rendered engine and router pods are accepted (images mapped by the runtimes)."""
    import yaml

    doc = yaml.safe_load((Path(__file__).parents[2] / "examples" / "cpu-tiny-pd.yaml").read_text())
    spec = PDDeploymentSpec.model_validate(doc["spec"])
    runtimes = [Runtime(images=[spec.engine.image], venv="/v"), Runtime(images=[spec.router.image], venv="/p")]
    templates = [o["spec"]["template"] for o in render_children(Owner("cpu-tiny"), spec) if o["kind"] == "Deployment"]
    assert len(templates) == 3
    for t in templates:
        assert refusal({"metadata": {"name": "x"}, **t}, runtimes) is None, t


def test_cpu_millis():
    assert [cpu_millis(q) for q in ("1", "250m", 2, "1.5", None)] == [1000, 250, 2000, 1500, 0]
