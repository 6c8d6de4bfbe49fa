"""``pdd check`` on manifests in other formats whose fields have any shape YAML can carry.

A manifest from the field is not validated against a schema before it reaches ``pdd check``: a
Deployment's ``args`` may be one string, an ``env`` entry's value a number, ``labels`` a list, the
``--kv-transfer-config`` JSON broken or not an object. Whatever the shape, ``pdd check`` answers
with one of its exit codes (:data:`pdd_operator.cli.CHECK_EXIT_CODES`) and a report, never a
traceback: generated documents in each supported format (Deployment, StatefulSet, LeaderWorkerSet,
DynamoGraphDeployment, KServe LLMInferenceService) have random values put at the places the reader
looks, and the check must finish with a known code.
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdd_operator.cli import CHECK_EXIT_CODES, main

_KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _container(role: str) -> dict:
    return {"name": role, "image": "vllm/vllm-openai:v0.11.0", "command": ["vllm", "serve"],
            "args": ["Qwen/Qwen3-8B", "--tensor-parallel-size", "1", "--kv-transfer-config", _KV],
            "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
            "resources": {"limits": {"nvidia.com/gpu": 1}}}


def _deployment(role: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"qwen-{role}", "labels": {"app": "qwen", "role": role}},
            "spec": {"template": {"metadata": {"labels": {"app": "qwen", "role": role}},
                                  "spec": {"containers": [_container(role)]}}}}


def _skeletons() -> list[list[dict]]:
    """One P/D deployment per supported format, each correct as written."""
    statefulsets = [dict(d, kind="StatefulSet") for d in (_deployment("prefill"), _deployment("decode"))]
    lws = [{"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": f"qwen-{role}"},
            "spec": {"leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": {"containers": [_container(role)]}}}}}
           for role in ("prefill", "decode")]
    dynamo = [{"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "qwen"},
               "spec": {"services": {
                   "VllmPrefillWorker": {"componentType": "worker", "subComponentType": "prefill", "extraPodSpec": {
                       "mainContainer": {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1",
                                         "command": ["python3", "-m", "dynamo.vllm"],
                                         "args": ["--model", "Qwen/Qwen3-8B", "--is-prefill-worker"]}}},
                   "VllmDecodeWorker": {"componentType": "worker", "subComponentType": "decode", "extraPodSpec": {
                       "mainContainer": {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1",
                                         "command": ["python3", "-m", "dynamo.vllm"],
                                         "args": ["--model", "Qwen/Qwen3-8B"]}}}}}}]
    kserve = [{"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService", "metadata": {"name": "qwen"},
               "spec": {"model": {"uri": "hf://Qwen/Qwen3-8B"},
                        "template": {"containers": [_container("decode")]},
                        "prefill": {"template": {"containers": [_container("prefill")]}}}}]
    return [[_deployment("prefill"), _deployment("decode")], statefulsets, lws, dynamo, kserve]


def _paths(node, path=()):
    """Every (path, value) in a document, containers' and mappings' items included."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*path, i))


def _replace(doc, path, value):
    if not path:
        return value
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(allow_nan=False),
                     st.text(max_size=12), st.sampled_from(["{", "[]", "{}", '{"kv_role": 3}', "kv_producer",
                                                            "--tensor-parallel-size", "0", "-1", "2**64",
                                                            '{"kv_connector": null}', "vllm", "serve",
                                                            "--kv-transfer-config", "nixl==0.1.0"]))
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                       max_leaves=10)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(skeleton=st.sampled_from(range(5)), picks=st.lists(st.tuples(st.integers(0, 10_000), _values), min_size=1,
                                                            max_size=4))
def test_check_answers_with_an_exit_code_whatever_the_fields_hold(skeleton, picks):
    docs = copy.deepcopy(_skeletons()[skeleton])
    for where, value in picks:
        doc_index = where % len(docs)
        paths = [p for p, _ in _paths(docs[doc_index])]
        path = paths[where % len(paths)]
        docs[doc_index] = _replace(docs[doc_index], path, value)
    with tempfile.TemporaryDirectory() as tmp:
        manifest = Path(tmp) / "pd.yaml"
        manifest.write_text(yaml.safe_dump_all(docs))
        code = main(["check", str(manifest), "-o", "json"])
    assert code in CHECK_EXIT_CODES


def test_the_skeletons_are_checked_and_compatible(capsys):
    """The generated documents start from deployments that are read and paired: the fuzz test mutates
    something the checker really reads."""
    for docs in _skeletons():
        with tempfile.TemporaryDirectory() as tmp:
            manifest = Path(tmp) / "pd.yaml"
            manifest.write_text(yaml.safe_dump_all(docs))
            code = main(["check", str(manifest), "-o", "json"])
        out = json.loads(capsys.readouterr().out)
        assert out["results"], (docs[0]["kind"], out)
        assert code in (0, 3), (docs[0]["kind"], out)


_json = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10, 10**12), st.text(max_size=8),
                               st.sampled_from(["NixlConnector", "MultiConnector", "kv_producer", "kv_consumer",
                                                "kv_both", "cpu", "cuda", "HND", "NHD"])),
                     lambda inner: st.one_of(st.lists(inner, max_size=3),
                                             st.dictionaries(st.sampled_from(
                                                 ["kv_connector", "kv_role", "kv_buffer_device", "connectors",
                                                  "kv_connector_extra_config", "backends", "enable_permute_local_kv",
                                                  "kv_connector_module_path", "x"]), inner, max_size=4)),
                     max_leaves=12)
_flags = st.sampled_from(["--tensor-parallel-size", "--block-size", "--kv-cache-dtype", "--data-parallel-size",
                          "--pipeline-parallel-size", "--port", "--speculative-config", "--kv-events-config",
                          "--attention-config", "--attention-backend", "--revision", "--dtype", "--max-model-len",
                          "--enable-prefix-caching", "--disable-hybrid-kv-cache-manager", "--nnodes"])


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(skeleton=st.sampled_from([0, 2, 4]), kv=st.tuples(_json, _json),
       flags=st.lists(st.tuples(st.booleans(), _flags, st.one_of(st.text(max_size=6), _json.map(json.dumps))),
                      max_size=4))
def test_check_answers_whatever_the_engine_flags_hold(skeleton, kv, flags):
    """The vLLM flags inside well-formed containers: any JSON in ``--kv-transfer-config`` and other
    JSON flags, any value after any flag the rules read."""
    docs = copy.deepcopy(_skeletons()[skeleton])
    containers = [c for doc in docs for _, c in _paths(doc) if isinstance(c, dict) and "args" in c and "image" in c]
    for container, config in zip(containers, kv, strict=False):
        args = container["args"]
        args[args.index("--kv-transfer-config") + 1] = json.dumps(config)
    for to_prefill, flag, value in flags:
        containers[0 if to_prefill else -1]["args"] += [flag, value]
    with tempfile.TemporaryDirectory() as tmp:
        manifest = Path(tmp) / "pd.yaml"
        manifest.write_text(yaml.safe_dump_all(docs))
        code = main(["check", str(manifest), "-o", "json"])
    assert code in CHECK_EXIT_CODES


def test_wrongly_typed_fields_are_error_findings_of_their_object_naming_the_field(tmp_path, capsys):
    """A field the apiserver refuses for its type is the object's manifest-field-type-invalid error, never an input
    error; a string where a list is wanted leaves that object not checked."""
    docs = _skeletons()[0]
    docs[0]["spec"]["template"]["spec"]["containers"][0]["args"] = "Qwen/Qwen3-8B --tensor-parallel-size 1"
    docs[1]["metadata"]["labels"] = ["app=qwen"]
    path = tmp_path / "pd.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert main(["check", str(path), "-o", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["inputErrors"] == []
    found = {r["object"]: [f for f in r["findings"] if f["rule"] == "manifest-field-type-invalid"]
             for r in out["results"]}
    assert "spec.template.spec.containers[0].args is a string where the Kubernetes PodSpec wants a list" in (
        found["Deployment/qwen-prefill"][0]["message"])
    assert "metadata.labels is a list where the Kubernetes ObjectMeta wants a mapping" in (
        found["Deployment/qwen-decode"][0]["message"])
    assert {s["object"] for s in out["notChecked"]} >= {"Deployment/qwen-prefill", "Deployment/qwen-decode"}


def test_kv_transfer_config_vllm_refuses_is_an_engine_args_error(tmp_path, capsys):
    docs = _skeletons()[0]
    args = docs[1]["spec"]["template"]["spec"]["containers"][0]["args"]
    args[args.index("--kv-transfer-config") + 1] = '{"kv_connector":"NixlConnector","kv_role":"consumer"}'
    args = docs[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    args[args.index("--kv-transfer-config") + 1] = '{"kv_connector":"NixlConnector","kv_connector_extra_config":[]}'
    path = tmp_path / "pd.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert main(["check", str(path), "-o", "json"]) == 1
    messages = [f["message"] for r in json.loads(capsys.readouterr().out)["results"] for f in r["findings"]
                if f["rule"] == "engine-args-invalid"]
    assert any("kv_role 'consumer' is not one of kv_producer, kv_consumer, kv_both" in m for m in messages)
    assert any("kv_connector_extra_config must be a JSON object, not a list" in m for m in messages)
    assert any("kv_connector without kv_role" in m for m in messages)
