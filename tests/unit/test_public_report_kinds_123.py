"""Kinds of held-out set 123 (P/D started by batch systems: tpu-inference's Kueue-admitted 1P1D JobSets), each fixed
with variants (other formats, models, releases, connectors) and negative controls.

1. A batch workload's named pod groups are the engines' roles: a JobSet's ``spec.replicatedJobs[].name`` and a
   Volcano Job's ``spec.tasks[].name`` (``prefill``, ``decode``) say which role the engine in the group serves, as a
   RoleBasedGroup role's name does, so a decode group whose engine has no ``--kv-transfer-config`` is that pair's
   decode without a connector (``kv-connector-missing``), not an aggregated server beside a lone prefill.
2. ``kv-connector-missing`` holds on every release and beside any connector (``Rule.any_release``): an engine with
   no kv_transfer_config has no connector at all, so a decode without one beside a platform plugin's prefill
   (TPUConnector from tpu_inference) or on an image whose release is unknown is refused, not "not checked".
3. ``max-model-len-exceeds-model`` is one engine's own config check on every release (``Rule.one_engine``,
   ``Rule.any_release``): it refuses an engine whose pair the KV rules do not describe (a platform plugin's
   connector, an unknown image) and an engine with no counterpart in the files, as ``tp-heads-indivisible`` does.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import check, rules

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
TPU_MODULE = "tpu_inference.distributed.tpu_connector"


def _tpu(role: str) -> str:
    kv_role = "kv_producer" if role == "prefill" else "kv_consumer"
    return json.dumps({"kv_connector": "TPUConnector", "kv_connector_module_path": TPU_MODULE, "kv_role": kv_role})


def _container(args: list[str], image: str, env: dict[str, str] | None = None, gpu: str = "nvidia.com/gpu") -> dict:
    """One engine container; NIXL's side channel binds and advertises the pod IP (downward API)."""
    pod_ip = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    return {"name": "workload", "image": image, "command": ["vllm", "serve"], "args": args,
            "env": [pod_ip, *({"name": k, "value": v} for k, v in (env or {}).items())],
            "resources": {"limits": {gpu: "1"}}}


def _jobset(groups: dict[str, dict]) -> dict:
    """A JobSet whose replicatedJobs are ``groups`` (name -> container), each one Indexed Job of one pod."""
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "pd", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"network": {"enableDNSHostnames": True}, "replicatedJobs": [
                {"name": name, "replicas": 1, "template": {"spec": {
                    "parallelism": 1, "completions": 1, "completionMode": "Indexed",
                    "template": {"spec": {"restartPolicy": "Never", "containers": [c]}}}}}
                for name, c in groups.items()]}}


def _vcjob(groups: dict[str, dict]) -> dict:
    """A Volcano Job whose tasks are ``groups`` (name -> container)."""
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "pd"},
            "spec": {"schedulerName": "volcano", "minAvailable": len(groups), "tasks": [
                {"name": name, "replicas": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [c]}}}
                for name, c in groups.items()]}}


def _deployment(role: str, container: dict) -> dict:
    labels = {"app": "t", "llm-d.ai/role": role}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"t-{role}", "labels": labels},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}


# --- 1. a batch workload's named groups are the roles ---------------------------------------------------------------


@pytest.mark.parametrize("wrap", [_jobset, _vcjob], ids=["jobset", "volcano-job"])
@pytest.mark.parametrize(("image", "model"), [("vllm/vllm-openai:v0.23.0", "Qwen/Qwen3-0.6B"),
                                              ("vllm/vllm-openai:v0.34.0", "meta-llama/Llama-3.1-8B-Instruct")])
def test_a_decode_group_without_a_connector_is_kv_connector_missing(tmp_path, capsys, wrap, image, model):
    doc = wrap({"prefill": _container([model, "--kv-transfer-config", NIXL], image),
                "decode": _container([model], image),
                "benchmark": {"name": "client", "image": image, "command": ["vllm", "bench", "serve"]}})
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and "kv-connector-missing" in rules(out, "error"), out


@pytest.mark.parametrize("wrap", [_jobset, _vcjob], ids=["jobset", "volcano-job"])
def test_a_prefill_group_without_a_connector_is_kv_connector_missing(tmp_path, capsys, wrap):
    image, model = "vllm/vllm-openai:v0.26.0", "Qwen/Qwen3-0.6B"
    doc = wrap({"prefill-0": _container([model], image),
                "decode-0": _container([model, "--kv-transfer-config", NIXL], image)})
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and "kv-connector-missing" in rules(out, "error"), out


@pytest.mark.parametrize("wrap", [_jobset, _vcjob], ids=["jobset", "volcano-job"])
def test_named_groups_with_both_connectors_pass(tmp_path, capsys, wrap):
    image, model = "vllm/vllm-openai:v0.23.0", "Qwen/Qwen3-0.6B"
    doc = wrap({"prefill": _container([model, "--kv-transfer-config", NIXL], image),
                "decode": _container([model, "--kv-transfer-config", NIXL], image)})
    code, out = check(tmp_path, capsys, doc)
    assert code == 0 and not rules(out, "error"), out


@pytest.mark.parametrize("wrap", [_jobset, _vcjob], ids=["jobset", "volcano-job"])
def test_groups_not_named_for_a_role_without_connectors_are_nothing_to_check(tmp_path, capsys, wrap):
    image, model = "vllm/vllm-openai:v0.23.0", "Qwen/Qwen3-0.6B"
    doc = wrap({"server-a": _container([model], image), "server-b": _container([model], image)})
    code, out = check(tmp_path, capsys, doc)
    assert code == 4 and not out["notChecked"], out


def test_a_plain_job_list_named_tasks_is_not_taken_for_roles(tmp_path, capsys):
    """Only a JobSet's replicatedJobs and a Volcano Job's tasks: another kind's ``tasks`` list names no pod group."""
    image, model = "vllm/vllm-openai:v0.23.0", "Qwen/Qwen3-0.6B"
    doc = _vcjob({"prefill": _container([model, "--kv-transfer-config", NIXL], image),
                  "decode": _container([model], image)})
    doc["kind"], doc["apiVersion"] = "PipelineRun", "tekton.dev/v1"
    code, out = check(tmp_path, capsys, doc)
    assert "kv-connector-missing" not in rules(out), out


# --- 2. kv-connector-missing on any release, beside any connector ----------------------------------------------------


@pytest.mark.parametrize("image", ["vllm/vllm-tpu:nightly", "registry.example.com/team/vllm:custom"])
def test_a_decode_without_a_connector_beside_a_plugin_prefill_is_kv_connector_missing(tmp_path, capsys, image):
    model = "Qwen/Qwen3-0.6B"
    docs = [_deployment("prefill", _container([model, "--kv-transfer-config", _tpu("prefill")], image,
                                              gpu="google.com/tpu")),
            _deployment("decode", _container([model], image, gpu="google.com/tpu"))]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "kv-connector-missing" in rules(out, "error"), out


def test_the_tpu_jobset_without_the_decode_connector_is_kv_connector_missing(tmp_path, capsys):
    model, image = "Qwen/Qwen3-0.6B", "vllm/vllm-tpu:nightly"
    doc = _jobset({"prefill": _container([model, "--kv-transfer-config", _tpu("prefill")], image, gpu="google.com/tpu"),
                   "decode": _container([model], image, gpu="google.com/tpu")})
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and "kv-connector-missing" in rules(out, "error"), out


def test_a_plugin_pair_with_both_connectors_stays_not_checked(tmp_path, capsys):
    model, image = "Qwen/Qwen3-0.6B", "vllm/vllm-tpu:nightly"
    doc = _jobset({"prefill": _container([model, "--kv-transfer-config", _tpu("prefill")], image, gpu="google.com/tpu"),
                   "decode": _container([model, "--kv-transfer-config", _tpu("decode")], image, gpu="google.com/tpu")})
    code, out = check(tmp_path, capsys, doc)
    assert code == 3 and not rules(out, "error") and out["notChecked"], out


# --- 3. max-model-len-exceeds-model on one engine, on any release ---------------------------------------------------


@pytest.mark.parametrize("wrap", [_jobset, _vcjob], ids=["jobset", "volcano-job"])
@pytest.mark.parametrize("image", ["vllm/vllm-tpu:nightly", "registry.example.com/team/vllm:custom"])
def test_a_too_long_context_on_a_plugin_pair_is_refused(tmp_path, capsys, wrap, image):
    """Qwen3-0.6B derives 40960 tokens (max_position_embeddings, no RoPE scaling): 65536 on the decode is refused
    by ModelConfig before the TPU platform or its connector is reached."""
    model = "Qwen/Qwen3-0.6B"
    doc = wrap({"prefill": _container([model, "--kv-transfer-config", _tpu("prefill")], image, gpu="google.com/tpu"),
                "decode": _container([model, "--max-model-len", "65536", "--kv-transfer-config", _tpu("decode")],
                                     image, gpu="google.com/tpu")})
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and "max-model-len-exceeds-model" in rules(out, "error"), out


def test_a_too_long_context_allowed_by_the_environment_stays_not_checked(tmp_path, capsys):
    model, image = "Qwen/Qwen3-0.6B", "vllm/vllm-tpu:nightly"
    doc = _jobset({"prefill": _container([model, "--kv-transfer-config", _tpu("prefill")], image, gpu="google.com/tpu"),
                   "decode": _container([model, "--max-model-len", "65536", "--kv-transfer-config", _tpu("decode")],
                                        image, {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}, gpu="google.com/tpu")})
    code, out = check(tmp_path, capsys, doc)
    assert code == 3 and not rules(out, "error"), out


@pytest.mark.parametrize(("image", "model", "length"), [("vllm/vllm-openai:v0.23.0", "Qwen/Qwen3-0.6B", "65536"),
                                                        ("vllm/vllm-openai:v0.34.0", "Qwen/Qwen3-0.6B", "50000")])
def test_a_lone_engine_with_a_too_long_context_is_refused(tmp_path, capsys, image, model, length):
    """One engine with a connector and no counterpart stays "not checked" for its pair, but its own config check
    stops it at startup all the same."""
    doc = _deployment("prefill", _container([model, "--max-model-len", length, "--kv-transfer-config", NIXL], image))
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and "max-model-len-exceeds-model" in rules(out, "error"), out


def test_a_lone_engine_within_its_context_stays_not_checked(tmp_path, capsys):
    doc = _deployment("prefill", _container(["Qwen/Qwen3-0.6B", "--max-model-len", "32768", "--kv-transfer-config",
                                             NIXL], "vllm/vllm-openai:v0.23.0"))
    code, out = check(tmp_path, capsys, doc)
    assert code == 3 and not rules(out, "error"), out
