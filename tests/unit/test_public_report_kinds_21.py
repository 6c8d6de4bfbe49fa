"""Variants of what the twenty-first public-report set (tests/unit/data/public_reports_21) taught, with negative
controls.

Three kinds the set found.

First, one side of a P/D deployment shared by several engines of the other side, whose labels and
names tell them apart rather than join them. llm-d's context-length-aware guide runs one ``decode`` Deployment beside
two prefill pools, ``prefill-short`` and ``prefill-long``, each with its own ``app`` label and a
``llm-d.ai/context-length-range`` label; its EPP sends each request's prefill to one pool and its decode to the one
decode, which pulls the KV from that pool (NIXL's ``kv_transfer_params`` name the remote engine). No label set and no
name is shared once the role is set aside, so nothing was paired and every fault in the group passed as "not checked".
Now, where one side of a model has a single engine in a namespace, every engine of the other side pairs with it
(:func:`pdd_operator.compat.manifests.pair_engines`); where both sides have several, which meet which is still not in
the files and they stay unpaired.

Second, a kubelet ``$(VAR)`` inside an ``sh -c`` script whose value is set in the pod but not in these files
(LeaderWorkerSet's ``$(LWS_LEADER_ADDRESS)``, llm-d-modelservice's one-pod-per-DP-rank chart): the kubelet writes the
value into the script, which the shell then reads. It was expanded to ``<unknown:NAME>`` and read as script source, where
``<`` and ``>`` are redirections: the engine's command line ended there, losing ``--data-parallel-rank`` and
``--kv-transfer-config`` (a false refusal: kv-connector-missing and 8 ranks on one GPU). It now stays the shell's own
``${NAME}``, one word of unknown value (:meth:`pdd_operator.vllm.expansion.ContainerEnv.kube_in_script`).

Third, a written ``CUDA_VISIBLE_DEVICES`` listing fewer devices than the engine's ranks (llm-d-modelservice's
heterogeneous example: TP 2 with ``CUDA_VISIBLE_DEVICES=0`` on a DRA claim of 2 GPUs): vLLM binds rank i to ``cuda:i``
of the visible devices, so the engine fails at startup whatever the pod holds (``parallelism-gpu-count``).
"""

from __future__ import annotations

import pytest

from pdd_operator.vllm.args import command_launches
from pdd_operator.vllm.expansion import ContainerEnv, unknown
from tests.unit.test_turn2_variants import KV, check, container, rules, workload

MODEL = "Qwen/Qwen3-0.6B"


def _engine(name, role, args=(), image="vllm/vllm-openai:v0.23.0", namespace="default", model=MODEL, **labels):
    """A Deployment ``name`` of one vLLM engine of ``role`` whose ``app`` label is its own name (as llm-d's
    context-length-aware guide writes them), plus any ``labels``."""
    doc = workload(name, role, container([model, "--kv-transfer-config", KV, *args], image=image), namespace=namespace,
                   app=name)
    for meta in (doc["metadata"], doc["spec"]["template"]["metadata"]):
        meta["labels"].update(labels)
    return doc


def _pools(long_args=(), long_image="vllm/vllm-openai:v0.23.0"):
    return [_engine("decode", "decode"),
            _engine("prefill-short", "prefill", **{"llm-d.ai/context-length-range": "0-1000"}),
            _engine("prefill-long", "prefill", long_args, image=long_image, **{"llm-d.ai/context-length-range": "1000-32768"})]


def test_two_prefill_pools_share_the_only_decode(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pools())
    assert code == 0 and not out["notChecked"], out
    assert sorted(r["object"].split(" + ")[0].split(" ")[0] for r in out["results"]) == [
        "Deployment/prefill-long", "Deployment/prefill-short"]
    assert all("the only decode engine of model Qwen/Qwen3-0.6B" in r["pairedBy"] for r in out["results"])


def test_a_fault_on_one_pool_is_refused_and_named_on_that_pool(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pools(long_image="vllm/vllm-openai:v0.24.0"))
    assert code == 1, out
    refused = [r["object"] for r in out["results"] if "vllm-version-mismatch" in
               {f["rule"] for f in r["findings"] if f["severity"] == "error"}]
    assert len(refused) == 1 and refused[0].startswith("Deployment/prefill-long"), out


def test_a_dtype_on_one_pool_is_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pools(long_args=["--dtype=float16"]))
    assert code == 1 and "dtype-mismatch" in rules(out, "error"), out


def test_one_prefill_shared_by_two_decode_pools(tmp_path, capsys):
    docs = [_engine("prefill", "prefill"), _engine("decode-chat", "decode", tier="chat"),
            _engine("decode-batch", "decode", ["--kv-cache-dtype=fp8"], tier="batch")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and len(out["results"]) == 2 and not out["notChecked"], out
    by_decode = {r["object"].split(" + ")[1].split(" ")[0]: {f["rule"] for f in r["findings"] if f["severity"] == "error"}
                 for r in out["results"]}
    assert "kv-cache-dtype-mismatch" in by_decode["Deployment/decode-batch"]
    assert "kv-cache-dtype-mismatch" not in by_decode["Deployment/decode-chat"]


def test_several_of_each_side_without_a_shared_label_stay_unpaired(tmp_path, capsys):
    docs = [_engine("prefill-short", "prefill"), _engine("prefill-long", "prefill"),
            _engine("decode-fast", "decode"), _engine("decode-slow", "decode")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and not out["results"] and len(out["notChecked"]) == 4, out


def test_pools_of_another_model_or_namespace_do_not_join(tmp_path, capsys):
    docs = [_engine("decode", "decode"), _engine("prefill-short", "prefill"),
            _engine("prefill-llama", "prefill", model="meta-llama/Llama-3.1-8B-Instruct"),
            _engine("prefill-other", "prefill", namespace="team-b")]
    code, out = check(tmp_path, capsys, *docs)
    paired = [r["object"].split(" + ")[0].split(" ")[0] for r in out["results"]]
    assert paired == ["Deployment/prefill-short"], out
    assert len(out["notChecked"]) == 2 and code == 3, out


# --- a kubelet $(VAR) of unknown value inside a shell script ----------------------------------------------------


def _launch(script, env=()):
    found = command_launches(["/bin/bash", "-c"], [script], env=ContainerEnv.of(list(env)))
    assert len(found) == 1, found
    return found[0].argv


def test_an_unknown_kubelet_variable_in_a_script_is_one_word_of_unknown_value():
    argv = _launch("vllm serve m --data-parallel-address $(LWS_LEADER_ADDRESS) --data-parallel-rank $(LWS_WORKER_INDEX)"
                   f" --kv-transfer-config '{KV}'")
    assert argv[argv.index("--data-parallel-address") + 1] == unknown("LWS_LEADER_ADDRESS")
    assert argv[argv.index("--data-parallel-rank") + 1] == unknown("LWS_WORKER_INDEX")
    assert argv[-2:] == ("--kv-transfer-config", KV)


def test_an_unknown_kubelet_variable_inside_double_quotes_keeps_the_rest_of_the_word():
    argv = _launch('vllm serve m --served-model-name "qwen-$(SVC_SERVICE_HOST)" --port 8000')
    assert argv[argv.index("--served-model-name") + 1] == "qwen-" + unknown("SVC_SERVICE_HOST") and argv[-1] == "8000"


def test_an_unknown_kubelet_variable_inside_single_quotes_is_read_literally_as_unknown():
    secret = [{"name": "KV_HOST", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
    argv = _launch("""vllm serve m --kv-transfer-config '{"kv_connector":"NixlConnector","kv_ip":"$(KV_HOST)"}' --port 1""",
                   secret)
    want = '{"kv_connector":"NixlConnector","kv_ip":"' + unknown("KV_HOST") + '"}'
    assert argv[argv.index("--kv-transfer-config") + 1] == want and argv[-1] == "1"


def test_known_and_undefined_kubelet_variables_in_a_script_are_as_before():
    env = ContainerEnv.of([{"name": "LWS_GROUP_SIZE", "value": "8"}])
    assert env.kube_in_script("LWS_GROUP_SIZE") == "8"  # a value written in the manifest is written into the script
    assert env.kube_in_script("NOT_DEFINED") is None  # nothing defines it: the kubelet leaves $(NOT_DEFINED) as written


def _lws_dp(role, extra=()):
    """A LeaderWorkerSet of 8 pods, one GPU and one external-LB DP rank each (llm-d-modelservice's
    output-one-pod-per-dp-rank.yaml), its script reading the LWS variables through the kubelet's $(VAR)."""
    script = ("export CUDA_VISIBLE_DEVICES=0\nvllm serve Qwen/Qwen3-30B-A3B-FP8 --port 8200 --enable-expert-parallel "
              "--tensor-parallel-size 1 --data-parallel-size $(LWS_GROUP_SIZE) --data-parallel-address "
              "$(LWS_LEADER_ADDRESS) --data-parallel-rpc-port 5555 --data-parallel-rank $(LWS_WORKER_INDEX) "
              f"{' '.join(extra)} --kv_transfer_config '{KV}'\n")
    labels = {"llm-d.ai/model": "qwen", "llm-d.ai/role": role}
    c = {"name": "vllm", "image": "vllm/vllm-openai:v0.30.0", "command": ["/bin/bash", "-c"], "args": [script],
         "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
         "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": f"qwen-{role}", "labels": labels},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 8, "workerTemplate": {
                "metadata": {"labels": labels}, "spec": {"containers": [c]}}}}}


def test_one_pod_per_dp_rank_over_lws_variables_is_read_whole(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _lws_dp("prefill"), _lws_dp("decode"))
    assert code == 0 and not rules(out, "error"), out


def test_one_pod_per_dp_rank_still_refuses_a_fault_after_the_lws_variables(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _lws_dp("prefill"), _lws_dp("decode", ["--kv-cache-dtype", "fp8"]))
    assert code == 1 and rules(out, "error") == {"kv-cache-dtype-mismatch"}, out


# --- CUDA_VISIBLE_DEVICES lists fewer devices than the engine's ranks -------------------------------------------


def _claimed_pair(d_env, d_tp="2", d_limits=None):
    """facebook/opt-125m, prefill TP 1 on one GPU, decode TP ``d_tp`` on a DRA claim (no device-plugin count) or on
    ``d_limits``, with ``d_env`` (llm-d-modelservice's output-heterogeneous-pd.yaml, on CUDA both sides)."""
    p = workload("opt-prefill", "prefill", container(["facebook/opt-125m", "--kv-transfer-config", KV],
                                                     image="vllm/vllm-openai:v0.30.0"))
    c = container(["facebook/opt-125m", "--tensor-parallel-size", d_tp, "--kv-transfer-config", KV],
                  image="vllm/vllm-openai:v0.30.0", env=d_env)
    c["resources"] = {"limits": d_limits or {"cpu": "16"}, "claims": [{"name": "gpus"}]}
    d = workload("opt-decode", "decode", c)
    d["spec"]["template"]["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}]
    return p, d


@pytest.mark.parametrize("limits", [None, {"nvidia.com/gpu": "2"}], ids=["dra-claim", "device-plugin"])
def test_fewer_visible_devices_than_ranks_is_refused(tmp_path, capsys, limits):
    code, out = check(tmp_path, capsys, *_claimed_pair([{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}], d_limits=limits))
    assert code == 1 and "parallelism-gpu-count" in rules(out, "error"), out
    message = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "parallelism-gpu-count")
    assert "CUDA_VISIBLE_DEVICES=0 shows it at most 1 device" in message


@pytest.mark.parametrize("env", [
    [{"name": "CUDA_VISIBLE_DEVICES", "value": "0,1"}],  # as many devices as ranks
    [],  # unset: the claim's devices are all visible
    [{"name": "CUDA_VISIBLE_DEVICES", "valueFrom": {"configMapKeyRef": {"name": "gpus", "key": "list"}}}],  # unknown
], ids=["two-listed", "unset", "not-in-files"])
def test_enough_or_unknown_visible_devices_are_not_refused(tmp_path, capsys, env):
    code, out = check(tmp_path, capsys, *_claimed_pair(env))
    assert "parallelism-gpu-count" not in rules(out), out


def test_a_ray_executor_is_not_judged_by_the_drivers_visible_devices(tmp_path, capsys):
    p, d = _claimed_pair([{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}])
    d["spec"]["template"]["spec"]["containers"][0]["args"] += ["--distributed-executor-backend", "ray"]
    code, out = check(tmp_path, capsys, p, d)
    assert "parallelism-gpu-count" not in rules(out, "error"), out
