"""Variants of the kind of fault the thirteenth public-report set (tests/unit/data/public_reports_13) found, with
negative controls: an engine flag whose value is an environment variable set from a ConfigMap key
(``valueFrom.configMapKeyRef``, or every key through ``envFrom`` ``configMapRef``) was "not checked" even where that
ConfigMap is among the files (Dynamo's A.X-K2 recipe keeps each worker's kv-transfer-config and speculative config in
one ConfigMap), so a valid pair was not passed and a broken one not refused. The kubelet resolves those references
in the pod's namespace (:mod:`pdd_operator.compat.config_refs`); a ConfigMap that is not in the files, or is in another
namespace, still leaves the value "not in these files"."""

from __future__ import annotations

import json

from pdd_operator.compat.config_refs import config_maps_of, inline_config_map_refs
from tests.unit.test_turn2_variants import check, rules

NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
POD_IP = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def _config_map(name: str, data: dict, namespace: str | None = None) -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def _ref(var: str, config_map: str, key: str) -> dict:
    return {"name": var, "valueFrom": {"configMapKeyRef": {"name": config_map, "key": key}}}


def _deployment(role: str, args: list[str], env: list[dict], image: str = "vllm/vllm-openai:v0.32.0",
                env_from: list[dict] | None = None, namespace: str | None = None) -> dict:
    """One engine of a prefill/decode pair as a Deployment (labels ``app: t``, ``role: <role>``)."""
    labels = {"app": "t", "role": role}
    container = {"name": "vllm", "image": image, "command": ["vllm", "serve"], "args": args, "env": [*env, POD_IP],
                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    if env_from is not None:
        container["envFrom"] = env_from
    meta = {"name": f"t-{role}", "labels": labels, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}


def _kv_from_env_pair(prefill_key: str, decode_key: str, namespace: str | None = None) -> list[dict]:
    """A Qwen3-0.6B pair whose ``--kv-transfer-config $(KV_CONFIG)`` comes from keys of ConfigMap ``kv``."""
    args = ["Qwen/Qwen3-0.6B", "--kv-transfer-config", "$(KV_CONFIG)"]
    return [_deployment("prefill", args, [_ref("KV_CONFIG", "kv", prefill_key)], namespace=namespace),
            _deployment("decode", args, [_ref("KV_CONFIG", "kv", decode_key)], namespace=namespace)]


KV_DATA = {"cuda": json.dumps(NIXL), "cpu": json.dumps({**NIXL, "kv_buffer_device": "cpu"})}


def test_a_kv_transfer_config_from_a_configmap_in_the_files_is_judged(tmp_path, capsys):
    # vLLM 0.32 nixl/base_worker.py: a DRAM prefill read as VRAM by the decode fails.
    code, out = check(tmp_path, capsys, _config_map("kv", KV_DATA), *_kv_from_env_pair("cpu", "cuda"))
    assert code == 1 and "kv-buffer-device-mismatch" in rules(out, "error"), out
    assert not out.get("notChecked"), out


def test_the_same_configmap_with_equal_settings_passes(tmp_path, capsys):
    # Negative control: both keys give host buffers; nothing left unread.
    code, out = check(tmp_path, capsys, _config_map("kv", KV_DATA), *_kv_from_env_pair("cpu", "cpu"))
    assert code == 0 and not rules(out, "error") and not out.get("notChecked"), out


def test_a_configmap_not_in_the_files_is_still_not_checked(tmp_path, capsys):
    # It may exist in the cluster with any value: the connector settings are not in these files.
    code, out = check(tmp_path, capsys, *_kv_from_env_pair("cpu", "cuda"))
    assert code == 3 and not rules(out, "error") and out["notChecked"], out
    assert "$KV_CONFIG" in json.dumps(out["notChecked"])


def test_a_configmap_of_another_namespace_is_not_read(tmp_path, capsys):
    # The kubelet looks the ConfigMap up in the pod's namespace only.
    docs = [_config_map("kv", KV_DATA, namespace="other"), *_kv_from_env_pair("cpu", "cuda", namespace="serving")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and not rules(out, "error") and out["notChecked"], out


def test_a_missing_key_is_not_read(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _config_map("kv", {"cuda": KV_DATA["cuda"]}), *_kv_from_env_pair("cpu", "cuda"))
    assert code == 3 and out["notChecked"], out


def test_env_from_a_configmap_sets_the_kv_cache_layout(tmp_path, capsys):
    # vLLM 0.33 nixl/base_worker.py: remote LBHNC (HND) against local LBNHC (NHD) without enable_permute_local_kv.
    args = ["Qwen/Qwen3-0.6B", "--kv-transfer-config", json.dumps(NIXL)]
    docs = [_config_map("layout-hnd", {"VLLM_KV_CACHE_LAYOUT": "HND"}),
            _config_map("layout-nhd", {"KV_CACHE_LAYOUT": "NHD"}),
            _deployment("prefill", args, [], image="vllm/vllm-openai:v0.33.0",
                        env_from=[{"configMapRef": {"name": "layout-hnd"}}]),
            _deployment("decode", args, [], image="vllm/vllm-openai:v0.33.0",
                        env_from=[{"configMapRef": {"name": "layout-nhd"}, "prefix": "VLLM_"}])]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "kv-layout-mismatch" in rules(out, "error"), out


def test_an_explicit_env_entry_wins_over_env_from(tmp_path, capsys):
    # Negative control: the decode's own env sets HND again, so the layouts are equal.
    args = ["Qwen/Qwen3-0.6B", "--kv-transfer-config", json.dumps(NIXL)]
    hnd = {"name": "VLLM_KV_CACHE_LAYOUT", "value": "HND"}
    docs = [_config_map("layout-nhd", {"VLLM_KV_CACHE_LAYOUT": "NHD"}),
            _deployment("prefill", args, [hnd], image="vllm/vllm-openai:v0.33.0"),
            _deployment("decode", args, [hnd], image="vllm/vllm-openai:v0.33.0",
                        env_from=[{"configMapRef": {"name": "layout-nhd"}}])]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and "kv-layout-mismatch" not in rules(out), out


def _dynamo_v1alpha1(decode_dtype_key: str) -> list[dict]:
    """A Dynamo v1alpha1 graph whose workers take ``--kv-cache-dtype $KV_DTYPE`` from service-level ``envs``."""
    def worker(sub: str, key: str) -> dict:
        line = ("python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B --block-size 128 --kv-cache-dtype $KV_DTYPE "
                f"--disaggregation-mode {sub} --kv-transfer-config '{json.dumps(NIXL)}'")
        return {"componentType": "worker", "subComponentType": sub, "replicas": 1,
                "envs": [_ref("KV_DTYPE", "dtypes", key), POD_IP],
                "resources": {"limits": {"gpu": "1"}},
                # 1.0.1: --disaggregation-mode and --kv-transfer-config are Dynamo >= 1.0 flags (set 67)
                "extraPodSpec": {"mainContainer": {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.0.1",
                                                   "command": ["/bin/sh", "-c"], "args": [line]}}}
    graph = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
             "spec": {"backendFramework": "vllm",
                      "services": {"Frontend": {"componentType": "frontend", "replicas": 1},
                                   "VllmPrefillWorker": worker("prefill", "fp8"),
                                   "VllmDecodeWorker": worker("decode", decode_dtype_key)}}}
    return [_config_map("dtypes", {"fp8": "fp8", "auto": "auto"}), graph]


def test_dynamo_service_envs_from_a_configmap_are_read(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_dynamo_v1alpha1("auto"))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out


def test_dynamo_service_envs_with_equal_values_pass(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_dynamo_v1alpha1("fp8"))
    assert code in (0, 3) and "kv-cache-dtype-mismatch" not in rules(out), out


def test_inline_keeps_the_input_and_unresolved_references():
    deployment = _deployment("prefill", [], [_ref("A", "cm", "a"), _ref("B", "cm", "missing"), _ref("C", "gone", "c")],
                             env_from=[{"configMapRef": {"name": "cm"}, "prefix": "X_"}, {"secretRef": {"name": "s"}}])
    before = json.dumps(deployment, sort_keys=True)
    out = inline_config_map_refs(deployment, config_maps_of([_config_map("cm", {"a": "1", "bad key": "2", "ok": "3"})]))
    assert json.dumps(deployment, sort_keys=True) == before
    container = out["spec"]["template"]["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "s"}}]
    names = [(v["name"], v.get("value")) for v in container["env"]]
    # envFrom keys first (an invalid name skipped), then the container's own entries, A resolved, B and C kept.
    assert names[:2] == [("X_a", "1"), ("X_ok", "3")] and ("X_bad key", "2") not in names
    assert ("A", "1") in names and ("B", None) in names and ("C", None) in names


def test_inline_without_configmaps_returns_the_same_object():
    deployment = _deployment("prefill", [], [_ref("A", "cm", "a")])
    assert inline_config_map_refs(deployment, {}) is deployment
    assert inline_config_map_refs(deployment, config_maps_of([_config_map("other", {"a": "1"})])) is deployment
