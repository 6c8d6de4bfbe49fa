"""Issue 9, "no silent passes": an engine whose role flag (Dynamo's ``--is-prefill-worker``, ``--is-decode-worker``,
``--disaggregation-mode``) has a value not in the files, or a Dynamo worker whose command line holds a variable not in
the files where such a flag may stand, has an unknown role: it is never paired as decode (the object's other engine
being a prefill) nor by a label, name or ``subComponentType``; ``pdd check`` says "not checked: cannot tell prefill
from decode because ..." for it and for the engine left without a counterpart.

Variants: Dynamo v1alpha1 graphs (a variable, a script branch, a kubelet reference), a Dynamo v1beta1 graph, a plain
Deployment pair and a LeaderWorkerSet pair running ``dynamo.vllm`` with role labels. A PDDeployment and a KServe
LLMInferenceService take the role from their structure and ``kv_role`` (vllm serve has no such flag): no variant.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import check

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
# vllm-runtime 0.6.1: the worker builds NixlConnector from its default --connector nixl; a --kv-transfer-config beside
# it raises (dynamo-connector-flag, set 67)
BASE = "python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B"
SECRET = {"valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
BRANCH = 'if [ "$ROLE" = prefill ]; then EXTRA=--is-prefill-worker; fi; ' + BASE + " $EXTRA"


def _service(line, env=(), **kw):
    return {"componentType": "worker", "replicas": 1, "envs": list(env), "resources": {"limits": {"gpu": "1"}},
            "extraPodSpec": {"mainContainer": {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1",
                                               "command": ["/bin/sh", "-c"], "args": [line]}}, **kw}


def _v1alpha1(second: dict, first: dict | None = None) -> dict:
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"backendFramework": "vllm", "services": {
                "Frontend": {"componentType": "frontend"},
                "WorkerA": first or _service(BASE + " --is-prefill-worker"), "WorkerB": second}}}


def _reasons(out) -> str:
    return " ".join(n["reason"] for n in out["notChecked"])


UNKNOWN = [
    pytest.param(_service(BASE + " $ROLE_FLAG", env=[{"name": "ROLE_FLAG", **SECRET}]), "$ROLE_FLAG", id="variable"),
    pytest.param(_service(BRANCH, env=[{"name": "ROLE", **SECRET}]), "--is-prefill-worker is the value of $ROLE",
                 id="script-branch"),
    pytest.param(_service(BASE + " --disaggregation-mode $MODE", env=[{"name": "MODE", **SECRET}],
                          subComponentType="decode"), "--disaggregation-mode is the value of $MODE",
                 id="mode-beside-subComponentType-decode"),
]


@pytest.mark.parametrize("second, why", UNKNOWN)
def test_a_worker_whose_role_flag_is_unknown_is_not_paired_as_decode(tmp_path, capsys, second, why):
    code, out = check(tmp_path, capsys, _v1alpha1(second))
    assert code == 3 and not out["results"], out
    reasons = _reasons(out)
    assert "cannot tell prefill from decode because" in reasons and why in reasons, reasons
    assert "its decode engine may be DynamoGraphDeployment/g spec.services.WorkerB" in reasons, reasons


@pytest.mark.parametrize("second", [_service(BASE), _service(BASE + " --is-decode-worker"),
                                    _service(BASE + " $EXTRA", env=[{"name": "EXTRA", "value": "--enforce-eager"}])])
def test_a_worker_whose_role_the_files_give_is_paired(tmp_path, capsys, second):
    # no flag (Dynamo's decode worker), a literal flag, a variable the files set: all readable
    code, out = check(tmp_path, capsys, _v1alpha1(second))
    assert code == 0 and len(out["results"]) == 1 and not out["notChecked"], out


def _v1beta1(mode: str, env=()) -> dict:
    def component(kind: str, m: str, e) -> dict:
        args = ["-m", "dynamo.vllm", "--model", "Qwen/Qwen3-32B", "--disaggregation-mode", m, "--kv-transfer-config", KV]
        return {"name": kind, "type": kind, "podTemplate": {"spec": {"containers": [
            {"name": "main", "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1", "command": ["python3"],
             "args": args, "env": list(e)}]}}}
    return {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"components": [component("prefill", "prefill", ()), component("decode", mode, env)]}}


@pytest.mark.parametrize("mode, env, paired", [
    ("$(MODE)", [{"name": "MODE", **SECRET}], False),          # the kubelet expands it to a Secret's value
    ("$(MODE)", [{"name": "MODE", "value": "decode"}], True),
    ("decode", [], True),
])
def test_v1beta1_type_does_not_stand_in_for_an_unknown_mode(tmp_path, capsys, mode, env, paired):
    code, out = check(tmp_path, capsys, _v1beta1(mode, env))
    assert (len(out["results"]) == 1) is paired and (code == 3) is (not paired), out
    if not paired:
        assert "--disaggregation-mode is the value of $MODE" in _reasons(out), out


def _labelled(kind: str, role: str, args: list[str], env=()) -> dict:
    labels = {"app": "q", "llm-d.ai/role": role}
    c = {"name": "worker", "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1", "command": ["python3"],
         "args": ["-m", "dynamo.vllm", "--model", "Qwen/Qwen3-8B", "--kv-transfer-config", KV, *args], "env": list(env)}
    pod = {"metadata": {"labels": labels}, "spec": {"containers": [c]}}
    if kind == "LeaderWorkerSet":
        spec = {"leaderWorkerTemplate": {"size": 1, "workerTemplate": pod}}
        return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": kind,
                "metadata": {"name": f"q-{role}", "labels": labels}, "spec": spec}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": f"q-{role}", "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": pod}}


@pytest.mark.parametrize("kind", ["Deployment", "LeaderWorkerSet"])
@pytest.mark.parametrize("mode, paired", [("$(MODE)", False), ("decode", True)])
def test_a_role_label_does_not_stand_in_for_an_unknown_mode(tmp_path, capsys, kind, mode, paired):
    docs = [_labelled(kind, "prefill", ["--disaggregation-mode", "prefill"]),
            _labelled(kind, "decode", ["--disaggregation-mode", mode], env=[{"name": "MODE", **SECRET}])]
    code, out = check(tmp_path, capsys, *docs)
    assert (len(out["results"]) == 1) is paired, out
    if not paired:
        assert code == 3 and "cannot tell prefill from decode because its --disaggregation-mode" in _reasons(out), out
