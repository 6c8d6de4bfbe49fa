"""Variants of what the twenty-fourth public-report set (tests/unit/data/public_reports_24) taught, with negative
controls.

- AIBrix's rebuilt vLLM images: ``aibrix/vllm-openai-aibrix-kvcache-nixl:v0.10.2-nixl-0.7.1-ucx-1.19.0`` is vLLM
  0.10.2 with AIBrix's KV cache, NIXL and UCX (the manifest of vllm-project/aibrix#1772). The version reader took only
  vLLM's own image names, so such a pair was "vLLM version unknown" and its version-bound rules (prefill TP > decode
  TP before 0.14) were never applied. It now reads the tag of ``vllm-openai-<extras>`` images under AIBrix's
  namespace (:data:`pdd_operator.vllm.versions.DERIVED_VLLM_OPENAI_NAMESPACES`).
- A RoleBasedGroup role's name (``spec.roles[].name``: ``prefill``, ``decode``) says which P/D role its engines serve,
  as a Kthena ModelServing role's name or a Dynamo component's ``type`` does. The checker took it for a mere name, so
  an engine of such a role that sets no connector (rbg's Dynamo sample moved to vLLM with its ``sh -c`` command cut by
  a line break, which leaves ``--disaggregation-mode`` and ``--kv-transfer-config`` on a line of their own) was read
  as an aggregated server beside the pair and the whole group as "not checked". It is now that role's engine and is
  refused for its missing connector (kv-connector-missing).
- A DynamoGraphDeployment (``nvidia.com/v1beta1``) component may ask for its GPUs through a ``device`` field (Dynamo's
  HAMi template): the operator merges ``device.resources`` into the main container, the device's value winning. The
  checker read the podTemplate alone, so a worker's GPUs were unknown and a TP 2 worker on one GPU passed. The field
  is now applied before the walk (:func:`pdd_operator.compat.dynamo_devices.resolve_component_devices`).
"""

from __future__ import annotations

import pytest

from pdd_operator.compat.dynamo_devices import resolve_component_devices
from pdd_operator.vllm.versions import is_vllm_image, version_from_image
from tests.unit.test_turn2_variants import check, pd, rules

# --- AIBrix's vllm-openai-<extras> images --------------------------------------------------------------------------


@pytest.mark.parametrize(("image", "version"), [
    ("aibrix-container-registry-cn-beijing.cr.volces.com/aibrix/vllm-openai-aibrix-kvcache-nixl:"
     "v0.10.2-nixl-0.7.1-ucx-1.19.0", (0, 10, 2)),
    ("aibrix/vllm-openai-nixl:v0.11.0", (0, 11, 0)),
    ("registry.example:5000/aibrix/vllm-openai-aibrix-kvcache:v0.9.2-cu128", (0, 9, 2)),
])
def test_aibrix_rebuilt_vllm_openai_images_name_their_vllm_release(image, version):
    assert is_vllm_image(image)
    assert version_from_image(image) == version


@pytest.mark.parametrize("image", [
    "aibrix/vllm-openai-aibrix-kvcache-nixl:latest",  # no release in the tag
    "aibrix/gateway-plugins:v0.5.0",                # AIBrix's own components version themselves
    # (someone/vllm-openai-custom:v0.10.2 and aibrix/vllm-openaiX:v0.10.2 are custom vLLM images whose tag starts
    # with a release: read as that release since set 37, test_noticed_kinds_37.py)
])
def test_other_images_stay_unknown(image):
    assert version_from_image(image) is None


def test_a_prefill_tp_above_decode_tp_on_an_aibrix_image_is_refused_for_its_release(tmp_path, capsys):
    image = "aibrix/vllm-openai-aibrix-kvcache-nixl:v0.11.0-nixl-0.7.1-ucx-1.19.0"
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    prefill, decode = pd("llama", ["--kv-transfer-config", kv, "--tensor-parallel-size", "2"],
                         ["--kv-transfer-config", kv], model="meta-llama/Llama-3.1-8B-Instruct", image=image)
    prefill["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
    code, out = check(tmp_path, capsys, prefill, decode)
    assert code == 1 and "hetero-tp-p-gt-d-unsupported" in rules(out, "error")
    assert "vllm-version-unknown" not in rules(out)


def test_the_same_pair_on_a_release_that_reads_from_a_larger_prefill_tp_passes(tmp_path, capsys):
    image = "aibrix/vllm-openai-aibrix-kvcache-nixl:v0.20.1-nixl-0.8.0"
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    prefill, decode = pd("llama", ["--kv-transfer-config", kv, "--tensor-parallel-size", "2"],
                         ["--kv-transfer-config", kv], model="meta-llama/Llama-3.1-8B-Instruct", image=image)
    prefill["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
    code, out = check(tmp_path, capsys, prefill, decode)
    assert code == 0 and not rules(out, "error") and "vllm-version-unknown" not in rules(out)


# --- RoleBasedGroup role names ---------------------------------------------------------------------------------------

KV_BOTH = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _rbg(roles, image="vllm/vllm-openai:v0.32.0"):
    """A v1alpha2 RoleBasedGroup: roles = [(name, command)], each a standalone role built from one roleTemplate that
    holds the image and the pod-IP side-channel host."""
    env = [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    return {"apiVersion": "workloads.x-k8s.io/v1alpha2", "kind": "RoleBasedGroup", "metadata": {"name": "pd"},
            "spec": {"roleTemplates": [{"name": "base", "template": {"spec": {"containers": [
                {"name": "engine", "image": image, "env": env}]}}}],
                "roles": [{"name": name, "replicas": 1, "standalonePattern": {"templateRef": {"name": "base", "patch": {
                    "spec": {"containers": [{"name": "engine", "command": command,
                                             "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}}
                          for name, command in roles]}}


def test_a_decode_role_whose_engine_sets_no_connector_is_refused(tmp_path, capsys):
    doc = _rbg([("prefill", ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--kv-transfer-config", KV_BOTH]),
                ("decode", ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"])])
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and "kv-connector-missing" in rules(out, "error")


def test_dynamo_workers_whose_script_line_break_cuts_off_the_flags_are_refused(tmp_path, capsys):
    def script(mode):
        return ["sh", "-c", "python3 -m dynamo.vllm --model Qwen/Qwen3-8B\n"
                f"--disaggregation-mode {mode} --kv-transfer-config '{KV_BOTH}'"]
    doc = _rbg([("router", ["sh", "-c", "python -m dynamo.frontend --http-port 8000"]),
                ("prefill", script("prefill")), ("decode", script("decode"))],
               image="nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0")
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and "kv-connector-missing" in rules(out, "error")
    said = [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "kv-connector-missing"]
    assert any("runs aggregated" in m for m in said)


def test_the_same_workers_with_each_command_on_one_line_pass(tmp_path, capsys):
    def script(mode):
        return ["sh", "-c", f"python3 -m dynamo.vllm --model Qwen/Qwen3-8B --disaggregation-mode {mode} "
                f"--kv-transfer-config '{KV_BOTH}'"]
    doc = _rbg([("prefill", script("prefill")), ("decode", script("decode"))],
               image="nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0")
    code, out = check(tmp_path, capsys, doc)
    assert code == 0 and not rules(out, "error")


def test_roles_named_for_nothing_p_d_keep_their_aggregated_engines_out_of_any_pair(tmp_path, capsys):
    doc = _rbg([("chat", ["vllm", "serve", "Qwen/Qwen3-8B"]), ("embed", ["vllm", "serve", "Qwen/Qwen3-Embedding-0.6B"])])
    code, out = check(tmp_path, capsys, doc, extra=("--allow-empty",))
    assert code == 0 and not out.get("results") and not out.get("notChecked")


# --- Dynamo v1beta1 component device field ---------------------------------------------------------------------------


def _dgd(d_args=(), device_gpus="1", pod_gpus=None, device=True):
    """A v1beta1 DynamoGraphDeployment: prefill and decode dynamo.vllm workers (runtime 1.2.1), each asking for its
    GPUs through ``device`` (``device_gpus``) and, if ``pod_gpus``, also in its container's limits."""
    def component(name, mode, extra):
        container = {"name": "main", "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1",
                     "command": ["python3", "-m", "dynamo.vllm"],
                     "args": ["--model", "Qwen/Qwen3-8B", "--disaggregation-mode", mode, "--kv-transfer-config",
                              KV_BOTH, *extra]}
        if pod_gpus is not None:
            container["resources"] = {"limits": {"nvidia.com/gpu": pod_gpus}}
        out = {"name": name, "type": mode, "replicas": 1, "podTemplate": {"spec": {"containers": [container]}}}
        if device:
            out["device"] = {"resources": {"nvidia.com/gpu": device_gpus, "nvidia.com/gpumem": "40000"},
                             "schedulerName": "hami-scheduler", "nodeSelector": {"gpu": "on"},
                             "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}
        return out
    return {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"components": [component("VllmPrefillWorker", "prefill", ()),
                                    component("VllmDecodeWorker", "decode", d_args)]}}


def test_the_device_field_reaches_the_main_container_and_the_pod():
    doc = _dgd(pod_gpus="1", device_gpus="2")
    doc["spec"]["components"][0]["podTemplate"]["spec"]["containers"].insert(0, {"name": "sidecar", "image": "x"})
    resolve_component_devices(doc)
    spec = doc["spec"]["components"][0]["podTemplate"]["spec"]
    sidecar, main = spec["containers"]
    assert main["resources"]["limits"] == {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "40000"}
    assert "resources" not in sidecar
    assert spec["schedulerName"] == "hami-scheduler" and spec["nodeSelector"] == {"gpu": "on"}
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists"}]


def test_other_documents_are_left_as_written():
    doc = _dgd()
    doc["kind"] = "SomethingElse"
    before = repr(doc)
    resolve_component_devices(doc)
    assert repr(doc) == before


def test_a_tp2_worker_given_one_gpu_through_its_device_field_is_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _dgd(d_args=("--tensor-parallel-size", "2")))
    assert code == 1 and "parallelism-gpu-count" in rules(out, "error")


def test_the_device_count_wins_over_the_containers_own(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _dgd(d_args=("--tensor-parallel-size", "2"), device_gpus="2", pod_gpus="1"))
    assert code == 0 and not rules(out, "error")


def test_without_a_device_field_the_containers_own_count_is_read_as_before(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _dgd(d_args=("--tensor-parallel-size", "2"), pod_gpus="1", device=False))
    assert code == 1 and "parallelism-gpu-count" in rules(out, "error")


# --- found by the suite's fuzz test while this set was built ---------------------------------------------------------


def test_a_superscript_digit_flag_value_is_no_integer_and_no_crash():
    from pdd_operator.vllm.scheduler_budget import human_int
    assert human_int("¹") is None and human_int("8192") == 8192 and human_int("32k") == 32000
