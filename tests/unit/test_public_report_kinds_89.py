"""Variants of what the eighty-ninth public-report set (tests/unit/data/public_reports_89) taught: the long tail's
own formats, with negative controls.

- A Kustomize role overlay (llm-d's guides and their forks: ``overlays/prefill/kustomization.yaml`` that patches the
  base's Deployment with a patch file named by path and renames it ``prefill``) holds no KV connector in its own text:
  the connector is in the patch file and the base, neither in the files given. It patches bases and names one P/D
  role, so it is "not checked" (exit 3, run kustomize build), not "nothing to check" (exit 4). A kustomization that
  patches nothing, or names no role, or both roles, is a plain kustomization (set 102: not checked, its bases
  are not in the files);
- a user's Dynamo SDK ``dynamo serve`` config without the examples' ``ServiceArgs`` (a ``VllmWorker``/``PrefillWorker``
  section, or Dynamo's own ``DynamoNixlConnector``, registered in no vLLM release) is "not checked" as a Dynamo serve
  config, with the reason that says what to do, not described as Helm values.
"""

from __future__ import annotations

import pytest
import yaml

from tests.unit.cli_check import check_text

_GROUP = "kustomize.config.k8s.io"


def _check(tmp_path, capsys, doc: dict) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, yaml.safe_dump(doc), "kustomization.yaml")


RENAME_PREFILL = """- op: replace
  path: /metadata/name
  value: prefill
"""

ROLE_OVERLAYS = {
    # zdtsw/llm-d weka overlays/prefill: a strategic-merge patch by path and an inline JSON 6902 rename
    "patch-by-path-and-rename": {
        "apiVersion": f"{_GROUP}/v1beta1", "kind": "Kustomization", "resources": ["../../base"],
        "patches": [{"path": "deployment-patch.yaml"},
                    {"target": {"kind": "Deployment", "name": "llm-d-model-server"}, "patch": RENAME_PREFILL}]},
    # the role in the patch file's name, the older patchesStrategicMerge field, a Component
    "component-patch-file-named-for-the-role": {
        "apiVersion": f"{_GROUP}/v1alpha1", "kind": "Component",
        "patchesStrategicMerge": ["decode-patch.yaml"]},
    # the role in nameSuffix, a JSON 6902 patch by path on a LeaderWorkerSet
    "name-suffix-and-json6902-path": {
        "apiVersion": f"{_GROUP}/v1beta1", "kind": "Kustomization", "resources": ["../../base"],
        "nameSuffix": "-decoder",
        "patchesJson6902": [{"target": {"group": "leaderworkerset.x-k8s.io", "version": "v1",
                                        "kind": "LeaderWorkerSet", "name": "vllm"}, "path": "tp.yaml"}]},
    # the role in a label the overlay sets on the patched pods
    "role-label": {
        "apiVersion": f"{_GROUP}/v1beta1", "kind": "Kustomization", "resources": ["../base"],
        "labels": [{"pairs": {"llm-d.ai/role": "prefill"}, "includeSelectors": True}],
        "patches": [{"path": "args.yaml", "target": {"kind": "Deployment"}}]},
}


@pytest.mark.parametrize("name", ROLE_OVERLAYS)
def test_a_kustomize_overlay_of_one_pd_role_is_not_checked(tmp_path, capsys, name):
    doc = ROLE_OVERLAYS[name]
    code, out = _check(tmp_path, capsys, doc)
    assert code == 3 and not out["inputErrors"], out
    [entry] = out["notChecked"]
    assert entry["object"] == f"{doc['kind']} ({_GROUP})"
    assert "kustomize build" in entry["reason"] and ("prefill" in entry["reason"] or "decode" in entry["reason"])


NOT_ROLE_OVERLAYS = {
    # patches, but names no P/D role (a namespace overlay of some other service)
    "no-role": {"apiVersion": f"{_GROUP}/v1beta1", "kind": "Kustomization", "resources": ["../base"],
                "patches": [{"path": "replicas.yaml"}], "namespace": "serving"},
    # names a role, but patches nothing: it only lists resources, which are checked when given themselves
    "no-patch": {"apiVersion": f"{_GROUP}/v1beta1", "kind": "Kustomization", "resources": ["../../prefill"]},
    # patches and names both roles: a whole build, not one role's overlay
    "both-roles": {"apiVersion": f"{_GROUP}/v1beta1", "kind": "Kustomization",
                   "resources": ["prefill.yaml", "decode.yaml"], "patches": [{"path": "namespace.yaml"}]},
}


@pytest.mark.parametrize("name", NOT_ROLE_OVERLAYS)
def test_other_kustomizations_are_not_checked_naming_the_build(tmp_path, capsys, name):
    """Set 102 changed this control from "nothing to check": their bases are not among the files, so what they deploy
    is unseen. They are not described as one role's overlay, and the reason names the command to run."""
    code, out = _check(tmp_path, capsys, NOT_ROLE_OVERLAYS[name])
    assert code == 3 and not out.get("inputErrors"), out
    [entry] = out["notChecked"]
    assert "overlay of the" not in entry["reason"] and f"kubectl kustomize {tmp_path} | pdd check -" in entry["reason"]


def test_a_role_overlay_with_the_connector_inline_keeps_its_reason(tmp_path, capsys):
    """The overlay that carries the KV connector itself keeps the reason it had (the patches configure P/D)."""
    doc = {"apiVersion": f"{_GROUP}/v1beta1", "kind": "Kustomization", "resources": ["../base"],
           "patches": [{"target": {"kind": "Deployment", "name": "prefill"}, "patch": (
               "- op: add\n  path: /spec/template/spec/containers/0/args/-\n"
               "  value: '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'\n")}]}
    code, out = _check(tmp_path, capsys, doc)
    assert code == 3 and "patches configure prefill/decode KV transfer" in out["notChecked"][0]["reason"], out


# --- Dynamo SDK service configs without the examples' ServiceArgs -------------------------------------------------

# ealbalas/disaggregated-prefill-decode-research dynamo-pace/configs/disagg_1p1d.yaml, shortened
DYNAMO_SDK_USER_CONFIG = {
    "Frontend": {"host": "0.0.0.0", "port": 8000},
    "Router": {"type": "kv"},
    "VllmWorker": {"model": "${MODEL}", "tensor_parallel_size": 1, "enforce_eager": True},
    "Prefill": {"num_workers": 1},
    "Decode": {"num_workers": 1},
    "KvTransfer": {"kv_connector": "DynamoNixlConnector", "kv_role": "kv_both", "kv_port": 14579},
}


@pytest.mark.parametrize("variant", ["as-published", "prefill-worker-section", "connector-only"])
def test_a_dynamo_sdk_user_config_is_described_as_one(tmp_path, capsys, variant):
    """A user's ``dynamo serve`` config (a VllmWorker/PrefillWorker section, or Dynamo's DynamoNixlConnector) is "not
    checked" as a Dynamo serve config, not as Helm values."""
    doc = dict(DYNAMO_SDK_USER_CONFIG)
    if variant == "prefill-worker-section":
        doc["PrefillWorker"] = doc.pop("VllmWorker")
    elif variant == "connector-only":
        doc["Worker"] = doc.pop("VllmWorker")
    code, out = _check(tmp_path, capsys, doc)
    assert code == 3 and [e["object"] for e in out["notChecked"]] == ["Dynamo serve config (Dynamo SDK service sections)"]


def test_kindless_values_naming_upstream_nixl_stay_helm_values(tmp_path, capsys):
    """Control: chart values that name upstream vLLM's NixlConnector and have no Dynamo SDK worker section are still
    described as Helm values."""
    doc = {"decode": {"containers": [{"args": ["--kv-transfer-config",
                                               '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']}]},
           "VllmWorkerCount": 2}
    code, out = _check(tmp_path, capsys, doc)
    assert code == 3 and out["notChecked"][0]["object"] == "Helm values (a document with no kind)", out
