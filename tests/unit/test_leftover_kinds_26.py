"""The known leftover misses of issue 9 (session 26), each as a kind, with variants and negative controls.

1. Shell defaults (``${TP:-4}``, ``${GPU_D:-2}``, ``${V:=x}``) in ``sh -c`` / ``bash -c`` scripts: the shell expands a
   default where nothing sets the variable (POSIX Shell Command Language 2.6.2). They were all read as unknown (the
   image's ENV might set the name), which hid faulty pairs (set 22's E/P/D script, decode on the prefill's GPU). Now a
   default is read where no ``env`` entry, no ``valueFrom``/unread ``envFrom`` source, no platform variable and no known
   image ``ENV`` (vLLM docker/Dockerfile v0.18.0-v0.24.0, vllm-openai stages: :mod:`pdd_operator.vllm.image_env`) may
   set it; where one may, the rules it feeds say "not checked". The faults judged on the defaults are vLLM's own:
   two engines on one GPU at 0.7 + 0.7 (vllm/v1/worker/utils.py ``request_memory`` 0.24.0, from gpu_worker.py
   ``init_device``: "Free memory on device ... is less than desired GPU memory utilization"), and a TP larger than
   the GPUs the pod gets (torch.cuda device index past ``device_count`` in ``init_device``, 0.24.0).
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
import yaml

from pdd_operator.cli import main
from pdd_operator.vllm.args import container_launches
from pdd_operator.vllm.expansion import unknown
from pdd_operator.vllm.flags import parse_flags
from tests.helpers import shared_file
from tests.unit.test_turn2_variants import KV, check, container, pd, rules, workload

KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
MODEL = "Qwen/Qwen3-8B"

# --- 1. shell defaults ------------------------------------------------------------------------------------------

#: One container, prefill and decode started by one script, their GPUs and fractions all script defaults.
ONE_CONTAINER = """set -e
GPU_P="${GPU_P:-0}"
GPU_D="${GPU_D:-0}"
: "${FRACTION:=0.7}"
CUDA_VISIBLE_DEVICES=$GPU_P VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve MODEL --port 8100 \\
  --gpu-memory-utilization $FRACTION --kv-transfer-config 'KV_P' &
CUDA_VISIBLE_DEVICES=$GPU_D VLLM_NIXL_SIDE_CHANNEL_PORT=5560 vllm serve MODEL --port 8200 \\
  --gpu-memory-utilization ${FRACTION} --kv-transfer-config 'KV_D' &
wait
""".replace("MODEL", MODEL).replace("KV_P", KV_P).replace("KV_D", KV_D)


def _one_container(env=(), env_from=None, kind="Deployment", image="vllm/vllm-openai:v0.24.0"):
    c = container([ONE_CONTAINER], command=["/bin/bash", "-c"], env=env, gpus=2, image=image)
    if env_from is not None:
        c["envFrom"] = env_from
    return workload("epd", "both", c, kind=kind)


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet"])
def test_engines_on_one_gpu_by_default_are_refused(tmp_path, capsys, kind):
    code, out = check(tmp_path, capsys, _one_container(kind=kind))
    assert code == 1 and "engines-share-gpu" in rules(out, "error")


def test_an_env_value_wins_over_the_default(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _one_container(env=[{"name": "GPU_D", "value": "1"}]))
    assert "engines-share-gpu" not in rules(out, "error")


def test_a_default_an_unread_source_may_override_is_not_judged(tmp_path, capsys):
    # GPU_D may come from a ConfigMap not in the files: the decode's device is unknown, never the default's 0
    out = check(tmp_path, capsys, _one_container(env_from=[{"configMapRef": {"name": "gpus"}}]))[1]
    assert "engines-share-gpu" not in rules(out, "error")
    value_from = [{"name": "GPU_D", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['gpu']"}}}]
    code, out = check(tmp_path, capsys, _one_container(env=value_from))
    assert code == 0 and not rules(out, "error")  # nor parallelism-gpu-count on the downward-API value


def _tp_pair(script_tp: str, gpus: int, env=(), kind="Deployment"):
    docs = []
    for role, kv in (("prefill", KV_P), ("decode", KV_D)):
        script = f"exec vllm serve {MODEL} --tensor-parallel-size {script_tp} --kv-transfer-config '{kv}'"
        docs.append(workload(f"q-{role}", role, container([script], command=["sh", "-c"], gpus=gpus, env=env),
                             kind=kind, app="q"))
    return docs


@pytest.mark.parametrize("form", ["${TP:-4}", '"${TP:=4}"', "${TP-4}"])
def test_a_tp_default_past_the_pods_gpus_is_refused(tmp_path, capsys, form):
    code, out = check(tmp_path, capsys, *_tp_pair(form, gpus=2))
    assert code == 1 and "parallelism-gpu-count" in rules(out, "error")


def test_a_tp_default_within_the_gpus_or_overridden_passes(tmp_path, capsys):
    assert "parallelism-gpu-count" not in rules(check(tmp_path, capsys, *_tp_pair("${TP:-2}", gpus=2))[1], "error")
    overridden = _tp_pair("${TP:-4}", gpus=2, env=[{"name": "TP", "value": "2"}])
    assert "parallelism-gpu-count" not in rules(check(tmp_path, capsys, *overridden)[1], "error")


def test_a_tp_default_under_an_unread_env_from_is_not_checked(tmp_path, capsys):
    docs = _tp_pair("${TP:-4}", gpus=2)
    for d in docs:
        d["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "engine-env"}}]
    code, out = check(tmp_path, capsys, *docs)
    assert "parallelism-gpu-count" not in rules(out, "error")


def _lws(script_tp: str):
    docs = []
    for role, kv in (("prefill", KV_P), ("decode", KV_D)):
        script = f"vllm serve {MODEL} --tensor-parallel-size {script_tp} --kv-transfer-config '{kv}'"
        c = container([script], command=["/bin/sh", "-c"], gpus=2)
        template = {"metadata": {"labels": {"app": "q", "llm-d.ai/role": role}}, "spec": {"containers": [c]}}
        docs.append({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                     "metadata": {"name": f"q-{role}", "labels": {"app": "q", "llm-d.ai/role": role}},
                     "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1, "workerTemplate": template}}})
    return docs


def test_lws_tp_default_past_the_gpus_is_refused_and_within_passes(tmp_path, capsys):
    assert "parallelism-gpu-count" in rules(check(tmp_path, capsys, *_lws("${TP:-4}"))[1], "error")
    assert "parallelism-gpu-count" not in rules(check(tmp_path, capsys, *_lws("${TP:-2}"))[1], "error")


def _dynamo(script_tp: str, gpus: str = "2"):
    def worker(sub: str) -> dict:
        script = (f"python3 -m dynamo.vllm --model {MODEL} --disaggregation-mode {sub} "
                  f"--tensor-parallel-size {script_tp} --kv-transfer-config '{KV}'")
        main = {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1", "command": ["/bin/sh", "-c"], "args": [script]}
        return {"componentType": "worker", "subComponentType": sub, "replicas": 1,
                "resources": {"limits": {"gpu": gpus}}, "extraPodSpec": {"mainContainer": main}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"services": {"VllmPrefillWorker": worker("prefill"), "VllmDecodeWorker": worker("decode")}}}


def test_dynamo_tp_default_past_the_gpus_is_refused_and_within_passes(tmp_path, capsys):
    assert "parallelism-gpu-count" in rules(check(tmp_path, capsys, _dynamo("${TP:-4}"))[1], "error")
    assert "parallelism-gpu-count" not in rules(check(tmp_path, capsys, _dynamo("${TP:-2}"))[1], "error")


def _flag(script: str, flag: str, image: str, env=()) -> object:
    c = {"name": "e", "image": image, "command": ["bash", "-c"], "args": [script], "env": list(env)}
    (launch,) = container_launches(c, image_runs_vllm=True)
    return parse_flags(list(launch.argv))[1].get(flag)


def test_the_official_images_env_decides_a_default_it_sets():
    # vllm/vllm-openai sets UV_LINK_MODE=copy (docker/Dockerfile vllm-base, 0.18.0-0.24.0): its value, not the default
    script = "vllm serve m --served-model-name ${UV_LINK_MODE:-x}"
    assert _flag(script, "--served-model-name", "vllm/vllm-openai:v0.24.0") == "copy"
    assert _flag(script, "--served-model-name", "docker.io/vllm/vllm-openai:v0.24.0") == "copy"
    assert _flag(script, "--served-model-name", "example.com/me/engine:1") == "x"  # an image whose ENV is not read
    # NVIDIA_VISIBLE_DEVICES: the CUDA base sets it and the device plugin replaces it: unknown, never the default
    gpus = "vllm serve m --served-model-name ${NVIDIA_VISIBLE_DEVICES:-0}"
    assert _flag(gpus, "--served-model-name", "vllm/vllm-openai:v0.24.0") == unknown("NVIDIA_VISIBLE_DEVICES")


def test_platform_variables_are_not_defaulted():
    # a Service named "engine" gives the kubelet's ENGINE_PORT; LWS gives LWS_GROUP_SIZE: their defaults are not read
    for name in ("ENGINE_PORT", "LWS_GROUP_SIZE"):
        assert _flag(f"vllm serve m --served-model-name ${{{name}:-1}}", "--served-model-name", "img:1") == unknown(name)


@pytest.mark.parametrize("form, want", [("${P,,}", "cuda"), ("${P^^}", "CUDA"), ("${P^}", "Cuda"), ("${Q,}", "cUDA")])
def test_bash_case_modification_is_read(form, want):
    env = [{"name": "P", "value": "cuda"}, {"name": "Q", "value": "CUDA"}]
    assert _flag(f"vllm serve m --served-model-name {form}", "--served-model-name", "img:1", env) == want


# --- 2. values from Secrets (and ConfigMaps) given in the same input --------------------------------------------
# k8s.io/api core/v1: Secret.data is base64, stringData plain and written over data; EnvVarSource.secretKeyRef and
# EnvFromSource.secretRef resolve like their ConfigMap twins. A Secret not in the files leaves the values unknown.


def _secret(name, data=None, string_data=None, namespace="default"):
    doc = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}}
    if data is not None:
        doc["data"] = {k: base64.b64encode(v.encode()).decode() if isinstance(v, str) else v for k, v in data.items()}
    if string_data is not None:
        doc["stringData"] = string_data
    return doc


def _tp_from(value_from=None, env_from=None, script_tp="$(TP)"):
    docs = _tp_pair(script_tp, gpus=2)
    for d in docs:
        c = d["spec"]["template"]["spec"]["containers"][0]
        if value_from is not None:
            c["env"].append({"name": "TP", "valueFrom": value_from})
        if env_from is not None:
            c["envFrom"] = env_from
    return docs


SECRET_TP = {"secretKeyRef": {"name": "engine", "key": "tp"}}


@pytest.mark.parametrize("secret", [_secret("engine", {"tp": "4"}), _secret("engine", string_data={"tp": "4"}),
                                    _secret("engine", {"tp": "2"}, string_data={"tp": "4"})],
                         ids=["data-base64", "stringData", "stringData-over-data"])
def test_a_secret_key_in_the_input_is_read(tmp_path, capsys, secret):
    code, out = check(tmp_path, capsys, *_tp_from(SECRET_TP), secret)
    assert code == 1 and "parallelism-gpu-count" in rules(out, "error")


def test_a_secret_key_that_fits_passes_and_an_absent_secret_is_not_judged(tmp_path, capsys):
    out = check(tmp_path, capsys, *_tp_from(SECRET_TP), _secret("engine", {"tp": "2"}))[1]
    assert "parallelism-gpu-count" not in rules(out, "error")
    for docs in (_tp_from(SECRET_TP), [*_tp_from(SECRET_TP), _secret("engine", {"other": "4"})],
                 [*_tp_from(SECRET_TP), {**_secret("engine"), "data": {"tp": "not base64!"}}],
                 [*_tp_from(SECRET_TP), _secret("engine", {"tp": "4"}, namespace="elsewhere")]):
        code, out = check(tmp_path, capsys, *docs)
        assert code != 2 and "parallelism-gpu-count" not in rules(out, "error"), docs[-1]


def test_env_from_a_secret_in_the_input_is_read_over_a_script_default(tmp_path, capsys):
    env_from = [{"secretRef": {"name": "engine-env"}}]
    docs = _tp_from(env_from=env_from, script_tp="${TP:-2}")
    assert "parallelism-gpu-count" in rules(check(tmp_path, capsys, *docs, _secret("engine-env", {"TP": "4"}))[1],
                                            "error")
    # the Secret's keys are all it sets: TP not among them, the default stands (and fits)
    out = check(tmp_path, capsys, *docs, _secret("engine-env", {"OTHER": "4"}))[1]
    assert "parallelism-gpu-count" not in rules(out, "error")
    # absent from the files: TP unknown, never the default's 2 judged as the value, never an error
    code, out = check(tmp_path, capsys, *_tp_from(env_from=env_from, script_tp="${TP:-4}"))
    assert code != 2 and "parallelism-gpu-count" not in rules(out, "error")
    # a ConfigMap of the same name is another object: the secretRef does not read it
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "engine-env"}, "data": {"TP": "4"}}
    code, out = check(tmp_path, capsys, *_tp_from(env_from=env_from, script_tp="${TP:-4}"), cm)
    assert "parallelism-gpu-count" not in rules(out, "error")


def _kserve(main: dict) -> dict:
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService", "metadata": {"name": "q"},
            "spec": {"model": {"uri": f"hf://{MODEL}", "name": MODEL}, "replicas": 1,
                     "router": {"scheduler": {}, "route": {}, "gateway": {}},
                     "template": {"containers": [dict(main)]},
                     "prefill": {"replicas": 1, "template": {"containers": [dict(main)]}}}}


def _kserve_main(args=(), secret_args=True):
    """KServe's templated main container on 0.33 with expandable segments (expandable-segments-with-nixl, rules/
    memory.py; KServe's templates append ``${VLLM_ADDITIONAL_ARGS}``), its extra flags from a Secret."""
    env = [{"name": "PYTORCH_CUDA_ALLOC_CONF", "value": "expandable_segments:True"},
           {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    if secret_args:
        env.append({"name": "VLLM_ADDITIONAL_ARGS", "valueFrom": {"secretKeyRef": {"name": "args", "key": "extra"}}})
    c = {"name": "main", "image": "vllm/vllm-openai:v0.33.0", "env": env,
         "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    if args:
        c["args"] = list(args)
    return c


def test_vllm_additional_args_from_a_secret_in_the_input_are_read(tmp_path, capsys):
    nixl = f"--kv_transfer_config '{KV}'"
    code, out = check(tmp_path, capsys, _kserve(_kserve_main()), _secret("args", {"extra": nixl}))
    assert code == 1 and rules(out, "error") == {"expandable-segments-with-nixl"}
    code, out = check(tmp_path, capsys, _kserve(_kserve_main()),
                      _secret("args", {"extra": f"{nixl} --enable-cumem-allocator"}))
    assert code == 3 and not rules(out, "error")


def test_vllm_additional_args_from_an_absent_secret_may_hold_the_fix(tmp_path, capsys):
    # the connector in args, the extra flags in a Secret not in the files: --enable-cumem-allocator may be there
    code, out = check(tmp_path, capsys, _kserve(_kserve_main(args=["--kv-transfer-config", KV])))
    assert code == 3 and not rules(out, "error")
    # control: no VLLM_ADDITIONAL_ARGS at all, so nothing can hold the fix: refused
    code, out = check(tmp_path, capsys, _kserve(_kserve_main(args=["--kv-transfer-config", KV], secret_args=False)))
    assert code == 1 and rules(out, "error") == {"expandable-segments-with-nixl"}


# --- 3. image tags that name no release -------------------------------------------------------------------------
# vLLM's images: releases are tagged v<version>; nightlies nightly-<setuptools-scm version> or nightly-<commit>;
# ``latest``, CUDA-variant nightlies (cu130-nightly) and digests name no version. A development build is commits
# after its release line's last tag (setuptools-scm guess-next-dev), i.e. no release's code: "unknown/unreleased after
# X", and every version-dependent rule says "not checked" (hetero block sizes, refused 0.9.0 <= v < 0.11.1 here).

UNPLACED_TAGS = ["latest", "nightly", "nightly-0123456789abcdef0123456789abcdef01234567", "cu130-nightly", "digest",
                 "nightly-0.10.2.dev5", "0.10.2rc1.dev265+g1a2b3c4"]


def _block_pair(tag: str):
    image = "vllm/vllm-openai@sha256:" + "a" * 64 if tag == "digest" else f"vllm/vllm-openai:{tag}"
    return pd("q", ["--kv-transfer-config", KV, "--block-size", "16"],
              ["--kv-transfer-config", KV, "--block-size", "32"], image=image)


@pytest.mark.parametrize("tag", UNPLACED_TAGS)
def test_a_tag_that_names_no_release_leaves_version_rules_not_checked(tmp_path, capsys, tag):
    code, out = check(tmp_path, capsys, *_block_pair(tag))
    assert code == 3 and not rules(out, "error") and "vllm-version-unknown" in rules(out, "warning")
    assert all(r["vllmVersion"] == "unknown" for r in out["results"])


@pytest.mark.parametrize("tag", ["nightly-0.34.0.dev3", "0.20.2rc1.dev265+g1a2b3c4"])
def test_a_dev_tag_past_every_refusing_release_is_judged_from_its_floor(tmp_path, capsys, tag):
    # no release from its line on refuses hetero block sizes: sound to pass, with the version still called unknown
    code, out = check(tmp_path, capsys, *_block_pair(tag))
    assert code == 0 and not rules(out, "error") and "vllm-version-unknown" in rules(out, "warning")


def test_a_release_tag_still_judges_and_an_old_one_refuses(tmp_path, capsys):
    assert check(tmp_path, capsys, *_block_pair("v0.24.0"))[0] == 0
    assert "block-size-hetero-unsupported" in rules(check(tmp_path, capsys, *_block_pair("v0.10.0"))[1], "error")


@pytest.mark.parametrize("tag, line", [("nightly-0.34.0.dev3", "0.34.0"), ("nightly-v0.33.1.dev12+gabcdef12", "0.33.1")])
def test_a_prefixed_dev_tag_is_read_as_unreleased_after_its_line(tmp_path, capsys, tag, line):
    out = check(tmp_path, capsys, *_block_pair(tag))[1]
    message = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "vllm-version-unknown")
    assert "unreleased development build" in message and f"before {line}" in message, message
    assert "without a reachable release tag" not in message


def test_a_pddeployment_on_a_dev_image_says_unreleased():
    from pdd_operator.compat import evaluate
    from tests.helpers import make_spec
    report = evaluate(make_spec(engine={"image": "vllm/vllm-openai:nightly-0.34.0.dev3"}))
    unknown_version = [f for f in report.findings if f.rule == "vllm-version-unknown"]
    assert unknown_version and "unreleased development build" in unknown_version[0].message
    assert "spec.engine.image tag" in unknown_version[0].message


# --- 4. CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES against TP x PP x DP-local ---------------------------------
# CUDA (and torch/cuda/__init__.py _parse_visible_devices, torch 2.13) reads CUDA_VISIBLE_DEVICES as ordinals or
# GPU-/MIG- UUIDs up to the first entry naming none; "all" and "" show no device, a repeat empties the list. vLLM binds
# rank i to cuda:i (vllm/v1/worker/gpu_worker.py init_device, 0.24.0): fewer visible devices than ranks fail at start.
# NVIDIA_VISIBLE_DEVICES is the container runtime's, honoured or not by the node: at most a warning.

from pdd_operator.compat.rules.parallelism import visible_ids  # noqa: E402


@pytest.mark.parametrize("raw, want", [("all", []), ("", []), ("none", []), ("0,1", ["0", "1"]), ("0, 1", ["0", "1"]),
                                       ("1gpu,2", ["1", "2"]), ("0,all,1", ["0"]), ("0,0", []), ("-1,0", []),
                                       ("GPU-a,GPU-b", ["GPU-a", "GPU-b"]), ("GPU-a,1", ["GPU-a"]), ("MIG-x", ["MIG-x"])])
def test_visible_ids_read_as_cuda_reads_them(raw, want):
    assert visible_ids(raw) == want


def _cvd_pair(value: str | None, tp: int = 2, gpus: int = 2, name="CUDA_VISIBLE_DEVICES", image="vllm/vllm-openai:v0.24.0"):
    env = [] if value is None else [{"name": name, "value": value}]
    return pd("q", ["--kv-transfer-config", KV, "--tensor-parallel-size", str(tp)],
              ["--kv-transfer-config", KV, "--tensor-parallel-size", str(tp)], env=env, gpus=gpus, image=image)


def _gpu_findings(out, severity):
    return [f["message"] for r in out["results"] for f in r["findings"]
            if f["rule"] == "parallelism-gpu-count" and f["severity"] == severity]


@pytest.mark.parametrize("value, tp", [("all", 1), ("all", 2), ("", 1), ("0,0", 2), ("0", 2), ("0,none", 2)])
def test_cuda_visible_devices_hiding_the_ranks_devices_is_refused(tmp_path, capsys, value, tp):
    code, out = check(tmp_path, capsys, *_cvd_pair(value, tp=tp))
    assert code == 1 and len(_gpu_findings(out, "error")) == 2, out


@pytest.mark.parametrize("value, tp", [("0,1", 2), ("1", 1), ("GPU-a,GPU-b", 2), (None, 2)])
def test_cuda_visible_devices_that_show_enough_pass(tmp_path, capsys, value, tp):
    out = check(tmp_path, capsys, *_cvd_pair(value, tp=tp))[1]
    assert not _gpu_findings(out, "error")


def test_rocm_device_lists_take_precedence_so_cuda_visible_devices_is_not_judged(tmp_path, capsys):
    docs = _cvd_pair("", tp=1)
    for d in docs:
        d["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "ROCR_VISIBLE_DEVICES", "value": "0"})
    assert not _gpu_findings(check(tmp_path, capsys, *docs)[1], "error")


def test_an_empty_cuda_visible_devices_on_a_cpu_engine_is_not_a_shortage(tmp_path, capsys):
    docs = _cvd_pair("", tp=1, image="public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.24.0")
    for d in docs:
        del d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
    assert not _gpu_findings(check(tmp_path, capsys, *docs)[1], "error")


@pytest.mark.parametrize("value", ["void", "none", "", "0"])
def test_nvidia_visible_devices_that_may_hide_gpus_is_a_warning(tmp_path, capsys, value):
    code, out = check(tmp_path, capsys, *_cvd_pair(value, tp=2, name="NVIDIA_VISIBLE_DEVICES"))
    assert not _gpu_findings(out, "error") and len(_gpu_findings(out, "warning")) == 2, out


@pytest.mark.parametrize("value", ["all", "0,1", "GPU-a,GPU-b"])
def test_nvidia_visible_devices_all_or_enough_says_nothing(tmp_path, capsys, value):
    out = check(tmp_path, capsys, *_cvd_pair(value, tp=2, name="NVIDIA_VISIBLE_DEVICES"))[1]
    assert not _gpu_findings(out, "error") and not _gpu_findings(out, "warning")


# --- 5. no --max-model-len: the model's own context decides at start, a warning whose fix names the user's field ----
# vllm/config/scheduler.py SchedulerConfig.verify_max_model_len (0.18.0, 0.24.0, 0.32.0) raises with chunked prefill off
# and max_num_batched_tokens < max_model_len; without --max-model-len that is the model's own length (ModelConfig
# _get_and_verify_max_len: config.json capped by the tokenizer's model_max_length), not in the manifest: a warning.

V2_LITE = "deepseek-ai/DeepSeek-V2-Lite-Chat"
BUDGET = ["--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192"]


def _finding(out, rule):
    return next(f for r in out["results"] for f in r["findings"] if f["rule"] == rule)


def test_no_max_model_len_stays_a_warning_naming_the_flag_in_a_deployment(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *pd("v2", ["--kv-transfer-config", KV, *BUDGET], ["--kv-transfer-config", KV],
                                             model=V2_LITE, image="vllm/vllm-openai:v0.32.0"))
    warning = _finding(out, "max-num-batched-tokens-unverified")
    assert warning["severity"] == "warning" and not rules(out, "error") and code == 0
    assert "--max-model-len" in warning["fix"] and "spec." not in warning["fix"]
    # control: a --max-model-len over the budget is vLLM's certain refusal, its fix in the same format
    code, out = check(tmp_path, capsys, *pd("v2", ["--kv-transfer-config", KV, *BUDGET, "--max-model-len", "32768"],
                                             ["--kv-transfer-config", KV], model=V2_LITE, image="vllm/vllm-openai:v0.32.0"))
    error = _finding(out, "max-num-batched-tokens-below-max-model-len")
    assert code == 1 and "--max-model-len" in error["fix"] and "spec." not in error["fix"]


def test_no_max_model_len_in_a_pddeployment_names_its_spec_field():
    from pdd_operator.compat import evaluate
    from tests.helpers import make_spec
    report = evaluate(make_spec(model={"name": V2_LITE, "hfArchitecture": "DeepseekV2ForCausalLM"},
                                engine={"image": "vllm/vllm-openai:v0.32.0"}, prefill={"extraArgs": BUDGET}))
    warning = next(f for f in report.findings if f.rule == "max-num-batched-tokens-unverified")
    assert warning.severity == "warning" and "spec.model.maxModelLen" in warning.fix, warning.fix
    report = evaluate(make_spec(model={"name": V2_LITE, "hfArchitecture": "DeepseekV2ForCausalLM", "maxModelLen": 32768},
                                engine={"image": "vllm/vllm-openai:v0.32.0"}, prefill={"extraArgs": BUDGET}))
    error = next(f for f in report.findings if f.rule == "max-num-batched-tokens-below-max-model-len")
    assert "spec.model.maxModelLen" in error.fix and "spec.prefill.extraArgs" in error.fix, error.fix


# --- issue 9 point 6: a finding speaks of the user's own format ----------------------------------------------------
# Every held-out set's and turn2's inputs that hold no PDDeployment (Deployments, StatefulSets, LWS, Dynamo graphs,
# KServe, RoleBasedGroups, ...) go through ``pdd check``; no fix, message or "not checked" reason may name a
# PDDeployment field (KServe's own spec.model.uri / spec.prefill.template are not PDDeployment fields).

PDD_FIELD = re.compile(
    r"spec\.(engine|kvTransfer|kvCache|network|speculative)\b"
    r"|spec\.(prefill|decode)\.(extraArgs|tensorParallelSize|pipelineParallelSize|blockSize|numSpeculativeTokens|env)\b"
    r"|spec\.model\.(maxModelLen|hfArchitecture|architecture|ssmKind|numKvHeads|mambaNGroups|configMapRef|dtype|"
    r"trustRemoteCode|revision|servedModelName|hfTokenSecretRef)\b")

_DATA = Path(__file__).parent / "data"


def _pdd_field_mentions(path: Path, capsys) -> list[str]:
    main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    texts = [json.dumps(u) for u in out.get("notChecked", [])]
    texts += [f"{f['rule']}: {f['message']} Fix: {f['fix']}" for r in out["results"] for f in r["findings"]]
    return [t[:300] for t in texts if PDD_FIELD.search(t)]


def test_findings_on_other_formats_never_name_pddeployment_fields(capsys):
    inputs = sorted([*_DATA.glob("public_reports*/inputs/**/*.yaml"),
                     *(shared_file("cases/turn2/cases.yaml").parent / "inputs").glob("**/*.yaml")])
    # a Helm chart folder is one input (its templates are Go templates, not YAML): it is checked as a whole elsewhere
    inputs = [p for p in inputs if not any((d / "Chart.yaml").is_file() for d in p.parents[:4])]
    foreign = [p for p in inputs
               if not any(isinstance(d, dict) and d.get("kind") == "PDDeployment" for d in yaml.safe_load_all(p.read_text()))]
    assert len(foreign) > 300
    bad = {str(p.relative_to(p.parents[2])): got for p in foreign if (got := _pdd_field_mentions(p, capsys))}
    assert not bad, bad


def test_the_format_check_sees_a_pddeployment_field_where_one_is_named(tmp_path, capsys):
    # control: the same pattern finds the PDDeployment wording of the conv-layout fix, and not its manifest twin
    docs = pd("glm", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV], model="example/unknown-hybrid-1b",
              env=[{"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}])
    del docs[1]["spec"]["template"]["spec"]["containers"][0]["env"][-1]
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert not _pdd_field_mentions(path, capsys)
    assert PDD_FIELD.search("or pass the model's config.json (--model-config, spec.model.configMapRef)")
    assert not PDD_FIELD.search("spec.model.uri spec.prefill.template.containers")


# --- 2b. a variable of unknown value where flags stand ($EXTRA_ARGS, ${VLLM_ARGS}) ----------------------------------
# vLLM's argparse reads whatever words such a variable expands to, a later flag over an earlier one
# (vllm/entrypoints/openai/cli_args.py, FlexibleArgumentParser), so every flag a rule needs is unknown for that engine:
# "not checked", never a pass on the written flags alone; where its value is in the files it is read.

from pdd_operator.vllm.flags import loose_unknown  # noqa: E402


@pytest.mark.parametrize("argv, want", [
    (["vllm", "serve", "m", "--enforce-eager", "<unknown:EXTRA>"], "EXTRA"),
    (["vllm", "serve", "m", "<unknown:EXTRA>"], "EXTRA"),
    (["dynamo.vllm", "<unknown:ARGS>"], "ARGS"),
    (["vllm", "serve", "<unknown:MODEL>", "--block-size", "16"], None),     # the model
    (["vllm", "serve", "m", "--max-model-len", "<unknown:LEN>"], None),      # a flag's value
    (["vllm", "serve", "m", "--block-size=<unknown:BS>"], None),
])
def test_loose_unknown_words_are_told_from_values_and_the_model(argv, want):
    assert loose_unknown(argv) == want


def _hetero_block(decode_script_tail: str, env=(), image="vllm/vllm-openai:v0.10.0"):
    docs = []
    for role, kv, bs, tail in (("prefill", KV_P, 16, ""), ("decode", KV_D, 32, decode_script_tail)):
        script = f"exec vllm serve {MODEL} --block-size {bs} --kv-transfer-config '{kv}' {tail}"
        docs.append(workload(f"q-{role}", role, container([script], command=["sh", "-c"], image=image, env=env),
                             app="q"))
    return docs


def test_an_unknown_args_variable_leaves_the_flag_rules_not_checked(tmp_path, capsys):
    # control: hetero block sizes on 0.10.0 are refused (block-size-hetero-unsupported)
    assert "block-size-hetero-unsupported" in rules(check(tmp_path, capsys, *_hetero_block(""))[1], "error")
    for tail in ("$EXTRA_ARGS", '"${VLLM_ARGS}"', "--enforce-eager $EXTRA_ARGS"):
        code, out = check(tmp_path, capsys, *_hetero_block(tail))
        assert code == 3 and "block-size-hetero-unsupported" not in rules(out, "error"), tail
        assert any("EXTRA_ARGS" in u["reason"] or "VLLM_ARGS" in u["reason"] for u in out["notChecked"]), out


def test_an_args_variable_whose_value_is_in_the_files_is_read(tmp_path, capsys):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "args"}, "data": {"extra": "--block-size 16"}}
    env = [{"name": "EXTRA_ARGS", "valueFrom": {"configMapKeyRef": {"name": "args", "key": "extra"}}}]
    code, out = check(tmp_path, capsys, *_hetero_block("$EXTRA_ARGS", env=env), cm)
    assert code == 0 and not rules(out, "error")  # the later --block-size 16 wins: equal block sizes
    secret = _secret("args", {"extra": "--enforce-eager"})
    env = [{"name": "EXTRA_ARGS", "valueFrom": {"secretKeyRef": {"name": "args", "key": "extra"}}}]
    code, out = check(tmp_path, capsys, *_hetero_block("$EXTRA_ARGS", env=env), secret)
    assert code == 1 and "block-size-hetero-unsupported" in rules(out, "error")
    # set nowhere at all (no env entry, no envFrom): a bare $EXTRA_ARGS still reads as unknown, never as empty
    assert check(tmp_path, capsys, *_hetero_block("$EXTRA_ARGS"))[0] == 3
