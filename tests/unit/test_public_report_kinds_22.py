"""Variants of what the twenty-second public-report set (tests/unit/data/public_reports_22) taught, with negative
controls.

A RoleBasedGroup (sgl-project/rbg, ``workloads.x-k8s.io/v1alpha2``) whose roles are built from ``spec.roleTemplates``:
a role's pattern names a template (``templateRef: {name, patch}``) and its controller builds the role's pod template as
that template with the patch applied by Strategic Merge Patch (rbg KEP-8). rbg's own vLLM sample keeps the image and
the env (``POD_IP``) in the template and only the command, args and resources in each role's patch. The checker read
the patch alone: no image (the vLLM version unknown) and none of the template's env, so a NIXL pair that sets
``VLLM_NIXL_SIDE_CHANNEL_HOST=$(POD_IP)`` in the template was refused (side-channel-host-not-routable). It now reads
the merged template (:func:`pdd_operator.compat.role_templates.resolve_role_templates`).
"""

from __future__ import annotations

import copy

from pdd_operator.compat.role_templates import resolve_role_templates, strategic_merge
from tests.unit.test_turn2_variants import check, rules

KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
HOST = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "$(POD_IP)"}


def _role(name, args, gpus=1, pattern="standalonePattern", ref="vllm-base", patch_env=None):
    container = {"name": "vllm", "command": ["vllm", "serve"], "args": list(args),
                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
    if patch_env is not None:
        container["env"] = patch_env
    return {"name": name, "replicas": 1,
            pattern: {"templateRef": {"name": ref, "patch": {"spec": {"containers": [container]}}}}}


def _rbg(p_args=(), d_args=(), image="vllm/vllm-openai:v0.32.0", template_env=(HOST,), model="Qwen/Qwen3-0.6B",
         d_gpus=1, ref="vllm-base", p_patch_env=None):
    env = [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}, *template_env]
    return {"apiVersion": "workloads.x-k8s.io/v1alpha2", "kind": "RoleBasedGroup", "metadata": {"name": "pd"},
            "spec": {"roleTemplates": [{"name": "vllm-base", "template": {
                "metadata": {"labels": {"app": "vllm"}},
                "spec": {"containers": [{"name": "vllm", "image": image, "env": env}]}}}],
                "roles": [_role("prefill", [model, "--kv-transfer-config", KV_P, *p_args], ref=ref,
                                patch_env=p_patch_env),
                          _role("decode", [model, "--kv-transfer-config", KV_D, *d_args], d_gpus, ref=ref)]}}


# --- the merge itself ------------------------------------------------------------------------------------------


def test_containers_merge_by_name_and_env_by_name():
    base = {"spec": {"containers": [{"name": "vllm", "image": "img:1", "env": [{"name": "A", "value": "1"},
                                                                           {"name": "B", "value": "2"}]}]}}
    patch = {"spec": {"containers": [{"name": "vllm", "args": ["x"], "env": [{"name": "B", "value": "3"}]},
                                     {"name": "side", "image": "img:2"}]}}
    merged = strategic_merge(base, patch)
    vllm, side = merged["spec"]["containers"]
    assert vllm == {"name": "vllm", "image": "img:1", "args": ["x"],
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]}
    assert side == {"name": "side", "image": "img:2"}
    assert base["spec"]["containers"][0]["env"][1]["value"] == "2"  # neither input is modified


def test_lists_without_a_merge_key_and_scalars_are_replaced_and_null_deletes():
    base = {"args": ["a", "b"], "image": "img:1", "tolerations": [{"key": "x"}], "keep": 1}
    merged = strategic_merge(base, {"args": ["c"], "image": "img:2", "tolerations": [{"key": "y"}], "keep": None})
    assert merged == {"args": ["c"], "image": "img:2", "tolerations": [{"key": "y"}]}


def test_a_template_patch_beside_the_ref_applies_after_the_refs_own_patch():
    doc = _rbg()
    role = doc["spec"]["roles"][0]["standalonePattern"]
    role["templatePatch"] = {"spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.33.0"}]}}
    resolve_role_templates(doc)
    pattern = doc["spec"]["roles"][0]["standalonePattern"]
    assert set(pattern) == {"template"}
    assert pattern["template"]["spec"]["containers"][0]["image"] == "vllm/vllm-openai:v0.33.0"
    assert pattern["template"]["spec"]["containers"][0]["args"][0] == "Qwen/Qwen3-0.6B"


def test_a_ref_to_no_template_and_a_doc_without_role_templates_are_left_as_written():
    doc = _rbg(ref="missing")
    before = copy.deepcopy(doc)
    resolve_role_templates(doc)
    assert doc == before
    plain = {"kind": "Deployment", "spec": {"template": {"spec": {"containers": []}}}}
    resolve_role_templates(plain)
    assert plain == {"kind": "Deployment", "spec": {"template": {"spec": {"containers": []}}}}


# --- what the checker says -----------------------------------------------------------------------------------------


def test_the_template_env_and_image_reach_the_engines(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _rbg())
    assert code == 0 and not out["notChecked"], out
    assert rules(out, "error") == set() and "vllm-version-unknown" not in rules(out), out
    assert [r["vllmVersion"] for r in out["results"]] == ["0.32.0"], out


def test_a_tp2_decode_and_an_eager_prefill_built_from_the_template_pass(tmp_path, capsys):
    for doc in (_rbg(d_args=["--tensor-parallel-size", "2"], d_gpus=2), _rbg(p_args=["--enforce-eager"])):
        code, out = check(tmp_path, capsys, doc)
        assert code == 0 and rules(out, "error") == set(), out


def test_without_the_host_in_the_template_the_pair_is_still_refused(tmp_path, capsys):
    """Negative control: the merge gives the engines only what the template holds."""
    code, out = check(tmp_path, capsys, _rbg(template_env=()))
    assert code == 1 and "side-channel-host-not-routable" in rules(out, "error"), out


def test_a_fault_in_one_roles_patch_is_still_found(tmp_path, capsys):
    """The patch's own args win over nothing and still reach the engine: a KV cache dtype on the decode only."""
    code, out = check(tmp_path, capsys, _rbg(d_args=["--kv-cache-dtype", "fp8"]))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out


def test_the_patch_env_overrides_the_template_env_by_name(tmp_path, capsys):
    """The prefill's patch sets its advertised side-channel host to 0.0.0.0 over the template's pod IP: refused."""
    code, out = check(tmp_path, capsys, _rbg(p_patch_env=[{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "0.0.0.0"}]))
    assert code == 1 and "side-channel-host-not-routable" in rules(out, "error"), out
