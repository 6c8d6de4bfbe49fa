"""Variants of what the thirtieth public-report set (tests/unit/data/public_reports_30) taught, with negative controls.

A Dynamo ``nvidia.com/v1beta1`` component that spans several pods (``spec.components[].multinode.nodeCount``): its
main container names the GPUs of one pod (``nvidia.com/gpu`` under the container's ``resources.limits``), and
Dynamo's operator launches the worker's TP x PP x DP ranks over every pod of the group (backend_vllm.go
``updateVLLMMultinodeArgs``, the same launch as a v1alpha1 multinode service's). The checker read the v1alpha1
shape only, so NVIDIA's Kimi-K3 recipes (TP 16 over four 4-GPU GB200 pods, TP 8 over two 4-GPU GB300 pods) were
refused for ``parallelism-gpu-count`` (:func:`pdd_operator.compat.dynamo_resources.component_multinode`).

Dynamo KVBM's ``PdConnector`` (a cache connector plus NixlConnector) turns vLLM's hybrid KV cache manager off by itself
when a child does not support HMA, while a plain NixlConnector keeps it on from vLLM 0.22.0; ``is_hma_enabled`` is
hashed, so a PdConnector prefill and a NixlConnector decode refuse every handshake (ai-dynamo/dynamo#12821, on
vllm-runtime 1.3.0-rc.9). The checker read PdConnector's HMA as NixlConnector's: the pair passed in silence, and the
fixed pair (--disable-hybrid-kv-cache-manager on the decode, #12940) was held for a mismatch
(:mod:`pdd_operator.compat.connector_hma`). vllm-runtime 1.3.0/1.3.1 are now read as vLLM 0.23.0 (Dynamo's
release-artifacts and compatibility pages).

Flags bound an unknown engine version from below: vLLM's parser refuses a flag it does not define, so an engine run
with ``--kda-prefill-backend`` (absent from the 0.24.0-0.26.0 sdists, present in 0.27.0: set 70 dated it) runs 0.27.0 or later
(:mod:`pdd_operator.vllm.added_flags`). The Kimi-K3 recipe with HMA explicitly off on the decode only, on an image
naming no release (vllm-runtime:1.4.0-kimi-k3-dev.1, built on vllm/vllm-openai:kimi-k3), was "not checked" because
hma-flag-mismatch refuses only from 0.18.0; from that floor every release refuses it.
"""

from __future__ import annotations

import json

from pdd_operator.vllm.added_flags import flags_floor
from tests.unit.test_turn2_variants import check, pd, rules

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
RULE = "parallelism-gpu-count"


def _component(name, mode, args, gpus, nodes=None, image="nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1", script=False):
    words = ["--model", "meta-llama/Llama-3.1-8B-Instruct", *args, "--disaggregation-mode", mode,
             "--kv-transfer-config", KV]
    if script:
        quoted = " ".join(f"'{w}'" if "{" in w else w for w in words)
        command, argv = ["/bin/sh", "-c"], [f"set -eu\nexec python3 -m dynamo.vllm {quoted}\n"]
    else:
        command, argv = ["python3", "-m", "dynamo.vllm"], words
    main = {"name": "main", "image": image, "command": command, "args": argv,
            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}}
    component = {"name": name, "type": mode, "replicas": 1, "podTemplate": {"spec": {"containers": [main]}}}
    if nodes:
        component["multinode"] = {"nodeCount": nodes}
    return component


def _graph(*components):
    frontend = {"name": "Frontend", "type": "frontend", "replicas": 1,
                "podTemplate": {"spec": {"containers": [{"name": "main",
                                                         "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1"}]}}}
    return {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "llama-disagg"},
            "spec": {"backendFramework": "vllm", "components": [frontend, *components]}}


def test_tp8_over_two_four_gpu_pods_of_v1beta1_components_is_not_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _graph(_component("Prefill", "prefill", ["--tensor-parallel-size", "8"], 4, 2),
                                               _component("Decode", "decode", ["--tensor-parallel-size", "8"], 4, 2)))
    assert RULE not in rules(out) and code == 0


def test_a_shell_script_worker_spanning_four_pods_with_tp16_is_not_refused(tmp_path, capsys):
    tp16 = ["--tensor-parallel-size", "16"]
    code, out = check(tmp_path, capsys, _graph(_component("Prefill", "prefill", tp16, 4, 4, script=True),
                                               _component("Decode", "decode", tp16, 4, 4, script=True)))
    assert RULE not in rules(out, "error")


def test_without_multinode_the_same_tp8_on_four_gpus_is_still_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _graph(_component("Prefill", "prefill", ["--tensor-parallel-size", "8"], 4),
                                               _component("Decode", "decode", ["--tensor-parallel-size", "8"], 4)))
    assert code == 1 and RULE in rules(out, "error")


def test_a_group_with_fewer_gpus_than_ranks_is_still_refused(tmp_path, capsys):
    # TP 8 x PP 2 = 16 ranks over two pods of 4 GPUs (8 GPUs): the operator spreads them and half find no device.
    args = ["--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"]
    code, out = check(tmp_path, capsys, _graph(_component("Prefill", "prefill", args, 4, 2),
                                               _component("Decode", "decode", args, 4, 2)))
    assert code == 1 and RULE in rules(out, "error")


PD_KVBM = ('{"kv_connector":"PdConnector","kv_role":"kv_both","kv_connector_module_path":"kvbm.vllm_integration.connector",'
           '"kv_connector_extra_config":{"connectors":[{"kv_connector":"DynamoConnector","kv_role":"kv_both",'
           '"kv_connector_module_path":"kvbm.vllm_integration.connector"},{"kv_connector":"NixlConnector","kv_role":"kv_both"}]}}')
PD_LMCACHE = ('{"kv_connector":"PdConnector","kv_role":"kv_both","kv_connector_module_path":"kvbm.vllm_integration.connector",'
              '"kv_connector_extra_config":{"connectors":[{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"},'
              '{"kv_connector":"NixlConnector","kv_role":"kv_both"}]}}')
HMA = "hma-flag-mismatch"


def _kvbm_services(tag, decode_extra=()):
    def worker(mode, kv, extra=()):
        return {"componentType": "worker", "subComponentType": mode, "resources": {"limits": {"gpu": "1"}},
                "extraPodSpec": {"mainContainer": {
                    "image": f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{tag}", "command": ["python3", "-m", "dynamo.vllm"],
                    "args": ["--model", "Qwen/Qwen3-8B", "--disaggregation-mode", mode, "--kv-transfer-config", kv,
                             *extra]}}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "kvbm"},
            "spec": {"services": {"VllmPrefillWorker": worker("prefill", PD_KVBM),
                                  "VllmDecodeWorker": worker("decode", KV, decode_extra)}}}


def test_a_kvbm_pdconnector_prefill_and_a_nixl_decode_on_runtime_130_are_an_hma_mismatch(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _kvbm_services("1.3.0"))
    assert code == 1 and HMA in rules(out, "error")
    message = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == HMA)
    assert "PdConnector[DynamoConnector, NixlConnector] turns HMA off" in message


def test_hma_off_on_the_decode_too_pairs_with_the_pdconnector_prefill(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _kvbm_services("1.3.1", ["--disable-hybrid-kv-cache-manager"]))
    assert HMA not in rules(out) and code == 0


def test_an_lmcache_pdconnector_on_a_v024_deployment_pair_is_an_hma_mismatch(tmp_path, capsys):
    docs = pd("kvbm", ["--kv-transfer-config", PD_LMCACHE], ["--kv-transfer-config", KV], image="vllm/vllm-openai:v0.24.0")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and HMA in rules(out, "error")


def test_before_022_every_connector_turns_hma_off_so_the_pair_matches(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _kvbm_services("1.2.1"))
    assert HMA not in rules(out)


def test_a_pdconnector_of_nixl_only_keeps_hma_like_its_decode(tmp_path, capsys):
    nixl_only = PD_KVBM.replace('{"kv_connector":"DynamoConnector","kv_role":"kv_both",'
                                '"kv_connector_module_path":"kvbm.vllm_integration.connector"},', "")
    docs = pd("kvbm", ["--kv-transfer-config", nixl_only], ["--kv-transfer-config", KV], image="vllm/vllm-openai:v0.24.0")
    code, out = check(tmp_path, capsys, *docs)
    assert HMA not in rules(out)


def test_a_pdconnector_on_an_image_of_unknown_vllm_is_not_claimed(tmp_path, capsys):
    # a dev image names neither its vLLM nor its KVBM: the wrapper's HMA handling is not known, nothing is claimed
    docs = pd("kvbm", ["--kv-transfer-config", PD_KVBM], ["--kv-transfer-config", KV],
              image="nvcr.io/nvidian/dynamo-dev/someone:dynamo-latest-vllm-kvbm-runtime")
    code, out = check(tmp_path, capsys, *docs)
    assert HMA not in rules(out) and "hma-flag-mismatch" not in json_text(out)


def json_text(out) -> str:
    return json.dumps(out.get("notChecked", []))


K3_IMAGE = "registry.example.com/inference/vllm:kimi-k3-patched"  # a build that names no vLLM release


def _hma_pair(p_extra, d_extra):
    return pd("k3", ["--kv-transfer-config", KV, "--no-disable-hybrid-kv-cache-manager", *p_extra],
              ["--kv-transfer-config", KV, "--disable-hybrid-kv-cache-manager", *d_extra], image=K3_IMAGE)


def test_the_flag_floor_is_the_release_after_the_last_read_without_it():
    assert flags_floor({"--kda-prefill-backend": "flashkda", "--kernel-config": "{}"}) == (
        (0, 27, 0), "--kda-prefill-backend")
    assert flags_floor({"--tensor-parallel-size": "8"}) is None


def test_an_hma_mismatch_on_an_unknown_build_with_kda_flags_is_an_error_from_the_flag_floor(tmp_path, capsys):
    kda = ["--kda-prefill-backend", "flashkda"]
    code, out = check(tmp_path, capsys, *_hma_pair(kda, kda))
    assert code == 1 and HMA in rules(out, "error")
    message = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == HMA)
    assert "from 0.27.0 on (the first that may have --kda-prefill-backend" in message


def test_a_floor_below_the_rule_or_on_one_role_only_stays_not_checked(tmp_path, capsys):
    kernel = ["--kernel-config", '{"enable_cutedsl_warmup":true}']  # floor 0.15: 0.15-0.17 do not hash HMA
    code, out = check(tmp_path, capsys, *_hma_pair(kernel, kernel))
    assert code == 3 and HMA not in rules(out, "error")
    code, out = check(tmp_path, capsys, *_hma_pair(["--kda-prefill-backend", "flashkda"], []))
    assert code == 3 and HMA not in rules(out, "error")
