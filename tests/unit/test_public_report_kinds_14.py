"""Variants of the kinds of fault the fourteenth public-report set (tests/unit/data/public_reports_14) found, with
negative controls:

1. the GPUs a pod needs for its data-parallel ranks: TP x PP x the DP ranks vLLM starts in that pod
   (``--data-parallel-size-local``; 1 for an external-LB ``--data-parallel-rank``), whatever
   ``--data-parallel-address`` says (:mod:`pdd_operator.compat.data_parallel`);
2. the block size vLLM gives a plain-attention model of a family the table lacked (OPT, GPT-2, Falcon, ...), pinned at
   16 on CUDA where the head size is known and not 256/512, on every release (:mod:`pdd_operator.vllm.block_size`);
3. NIXL backends: roles whose ``kv_connector_extra_config.backends`` share none (the default ``["UCX"]`` against
   ``["LIBFABRIC"]``), EFA known from ``FI_PROVIDER=efa``, and no UCX or IPC_LOCK warnings where they do not apply
   (LIBFABRIC only; a privileged container);
4. ``VLLM_SSM_CONV_STATE_LAYOUT=DS`` on one role of a model of unknown architecture: not checked, and an error once
   the model's config.json shows linear-attention layers.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.data_parallel import local_data_parallel, spans_nodes
from pdd_operator.vllm.architectures import traits
from pdd_operator.vllm.args import parse_flags
from pdd_operator.vllm.block_size import default_block_size, likely_block_size
from pdd_operator.vllm.model_config import facts_from_config
from tests.unit.test_turn2_variants import check, rules

POD_IP = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def _kv(backends: list[str] | None = None, role: str = "kv_both") -> str:
    kv: dict = {"kv_connector": "NixlConnector", "kv_role": role}
    if backends is not None:
        kv["kv_connector_extra_config"] = {"backends": backends}
    return json.dumps(kv)


def _container(args: list[str], *, image: str = "vllm/vllm-openai:v0.24.0", gpus: int = 1, env: list[dict] = (),
               resources: dict | None = None, security: dict | None = None, command: list[str] | None = None) -> dict:
    out = {"name": "vllm", "image": image, "command": command or ["vllm", "serve"], "args": list(args),
           "env": [POD_IP, *env], "resources": {"limits": {"nvidia.com/gpu": str(gpus), **(resources or {})}}}
    if security is not None:
        out["securityContext"] = security
    return out


def _deployment(role: str, container: dict, host_network: bool = False) -> dict:
    labels = {"app": "t", "role": role}
    spec = {"containers": [container], **({"hostNetwork": True} if host_network else {})}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"t-{role}", "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": spec}}}


def _pair(p_args: list[str], d_args: list[str], **kw) -> list[dict]:
    host_network = kw.pop("host_network", False)
    return [_deployment("prefill", _container(p_args, **kw), host_network),
            _deployment("decode", _container(d_args, **kw), host_network)]


def _pddeployment(spec: dict) -> dict:
    return {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "p"}, "spec": spec}


def _messages(out: dict, rule: str) -> list[str]:
    return [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule]


# --- 1. data-parallel ranks in one pod ---------------------------------------------------------------------


MOE = "Qwen/Qwen3-30B-A3B"


def _dp(extra: list[str]) -> list[str]:
    return [MOE, "--tensor-parallel-size", "4", "--enable-expert-parallel", "--kv-transfer-config", _kv(), *extra]


def test_local_dp_ranks_with_an_address_need_their_gpus(tmp_path, capsys):
    # vllm 0.32 arg_utils.py: --data-parallel-size-local 2 starts two engine cores of TP 4 here (8 GPUs); the
    # address only names the head, which this pod is.
    extra = ["--data-parallel-size", "4", "--data-parallel-size-local", "2", "--data-parallel-address", "10.0.0.1"]
    code, out = check(tmp_path, capsys, *_pair(_dp(extra), _dp(extra), gpus=4))
    assert code == 1 and "parallelism-gpu-count" in rules(out, "error"), out
    assert "DP-local 2" in _messages(out, "parallelism-gpu-count")[0]


def test_local_dp_ranks_with_their_gpus_pass(tmp_path, capsys):
    extra = ["--data-parallel-size", "4", "--data-parallel-size-local", "2", "--data-parallel-address", "10.0.0.1"]
    code, out = check(tmp_path, capsys, *_pair(_dp(extra), _dp(extra), gpus=8))
    assert "parallelism-gpu-count" not in rules(out) and code == 0, out


def test_a_headless_secondary_still_starts_its_local_ranks(tmp_path, capsys):
    # vllm serve --headless (entrypoints/cli/serve.py run_headless) starts data_parallel_size_local engine cores.
    extra = ["--headless", "--data-parallel-size", "4", "--data-parallel-size-local", "2",
             "--data-parallel-start-rank", "2", "--data-parallel-address", "10.0.0.1"]
    code, out = check(tmp_path, capsys, *_pair(_dp(extra), _dp(extra), gpus=4))
    assert code == 1 and "parallelism-gpu-count" in rules(out, "error"), out


@pytest.mark.parametrize("address", [[], ["--data-parallel-address", "10.0.0.1"]])
def test_an_external_lb_rank_runs_one_engine_core(tmp_path, capsys, address):
    # --data-parallel-rank: external load balancing, data_parallel_size_local forced to 1 (arg_utils.py), so TP 4
    # needs 4 GPUs, not 4 x --data-parallel-size.
    extra = ["--data-parallel-size", "4", "--data-parallel-rank", "1", *address]
    code, out = check(tmp_path, capsys, *_pair(_dp(extra), _dp(extra), gpus=4))
    assert "parallelism-gpu-count" not in rules(out), out


def test_nnodes_splits_the_world_and_is_not_judged_per_pod(tmp_path, capsys):
    # --nnodes 2: TP 16 over two nodes of 8 GPUs (world // nnodes ranks here).
    args = [MOE, "--tensor-parallel-size", "16", "--nnodes", "2", "--node-rank", "0", "--kv-transfer-config", _kv()]
    code, out = check(tmp_path, capsys, *_pair(args, args, gpus=8))
    assert "parallelism-gpu-count" not in rules(out), out


def _lws(role: str, line: str, gpus: int) -> dict:
    """A LeaderWorkerSet of size 2 whose leader and worker each run their own vllm serve (mp backend, no Ray)."""
    labels = {"app": "t", "role": role}

    def pod(script: str) -> dict:
        return {"metadata": {"labels": labels}, "spec": {"containers": [_container(
            ["-c", script], command=["/bin/bash"], gpus=gpus)]}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": f"t-{role}", "labels": labels},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {
                "size": 2, "leaderTemplate": pod(line), "workerTemplate": pod(line + " --headless")}}}


@pytest.mark.parametrize(("local", "refused"), [(2, True), (1, False)])
def test_a_leaderworkerset_leader_counts_its_local_ranks(tmp_path, capsys, local, refused):
    line = (f"vllm serve {MOE} --tensor-parallel-size 8 --enable-expert-parallel --data-parallel-size 2 "
            f"--data-parallel-size-local {local} --data-parallel-address $(LWS_LEADER_ADDRESS) "
            f"--kv-transfer-config '{_kv()}'")
    code, out = check(tmp_path, capsys, _lws("prefill", line, 8), _lws("decode", line, 8))
    assert ("parallelism-gpu-count" in rules(out, "error")) is refused, out


def test_a_pddeployment_with_local_dp_in_extra_args_is_refused(tmp_path, capsys):
    spec = {"model": {"name": MOE}, "engine": {"image": "vllm/vllm-openai:v0.24.0"},
            "prefill": {"replicas": 1, "tensorParallelSize": 4,
                        "extraArgs": ["--data-parallel-size", "2", "--data-parallel-size-local", "2"]},
            "decode": {"replicas": 1, "tensorParallelSize": 4}}
    code, out = check(tmp_path, capsys, _pddeployment(spec))
    assert code == 1 and "parallelism-gpu-count" in rules(out, "error"), out


def test_local_dp_and_spans_from_flags():
    def flags(line: str) -> dict:
        return parse_flags(["vllm", "serve", "m", *line.split()])[1]
    assert local_data_parallel(flags("--data-parallel-size 4")) == 4
    assert local_data_parallel(flags("--data-parallel-size 4 --data-parallel-size-local 2")) == 2
    assert local_data_parallel(flags("--data-parallel-size 4 --data-parallel-rank 3")) == 1
    assert local_data_parallel(flags("--data-parallel-size 4 --data-parallel-backend ray")) is None
    assert local_data_parallel(flags("--nnodes 2 --data-parallel-size-local 1")) is None
    assert not spans_nodes(flags("--data-parallel-size 2 --data-parallel-address 10.0.0.1"))
    assert spans_nodes(flags("--data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-address 10.0.0.1"))
    assert spans_nodes(flags("--data-parallel-size 2 --data-parallel-size-local 2 --headless"))
    assert spans_nodes(flags("--data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-start-rank 2"))


# --- 2. block size of plain-attention families ---------------------------------------------------------------


def test_opt_decode_default_against_a_larger_prefill_block_is_refused(tmp_path, capsys):
    # opt-125m: head size 64, so 16 on CUDA also from 0.29 (FA4's 128 is for head size 256); pull: 16 % 32 != 0.
    p = ["facebook/opt-125m", "--block-size", "32", "--kv-transfer-config", _kv()]
    d = ["facebook/opt-125m", "--kv-transfer-config", _kv()]
    code, out = check(tmp_path, capsys, *_pair(p, d, image="vllm/vllm-openai:v0.30.0"))
    assert code == 1 and "block-size-direction" in rules(out, "error"), out
    assert "architecture-unknown" not in rules(out)


def test_opt_decode_default_that_is_a_multiple_passes(tmp_path, capsys):
    p = ["facebook/opt-125m", "--block-size", "8", "--kv-transfer-config", _kv()]
    d = ["facebook/opt-125m", "--kv-transfer-config", _kv()]
    code, out = check(tmp_path, capsys, *_pair(p, d, image="vllm/vllm-openai:v0.30.0"))
    assert code == 0 and not rules(out, "error") and "block-size-partial" not in rules(out), out


def test_gpt2_with_an_unknown_version_is_refused_on_every_release(tmp_path, capsys):
    # The decode's default is 16 up to 0.33 and 64 from 0.34 (CacheConfig.DEFAULT_BLOCK_SIZE): 128 is refused on
    # every release; 64 only up to 0.33 (a warning; the version-bounded rules leave the pair not checked, exit 3).
    p = ["openai-community/gpt2", "--block-size", "128", "--kv-transfer-config", _kv()]
    d = ["openai-community/gpt2", "--kv-transfer-config", _kv()]
    code, out = check(tmp_path, capsys, *_pair(p, d, image="vllm/vllm-openai:latest"))
    assert code == 1 and "block-size-direction" in rules(out, "error"), out
    p[2] = "64"
    code, out = check(tmp_path, capsys, *_pair(p, d, image="vllm/vllm-openai:latest"))
    assert code == 3 and "block-size-direction" in rules(out, "warning"), out
    for tag, want in (("v0.33.0", 1), ("v0.34.0", 0)):  # 16 is no multiple of 64; 64 is
        code, out = check(tmp_path, capsys, *_pair(p, d, image=f"vllm/vllm-openai:{tag}"))
        assert code == want and ("block-size-direction" in rules(out, "error")) == (want == 1), out


def _config(path, **config) -> tuple[str, ...]:
    path.write_text(json.dumps(config))
    return ("--model-config", str(path))


def test_a_falcon_config_pins_the_default(tmp_path, capsys):
    extra = _config(tmp_path / "config.json", architectures=["FalconForCausalLM"], model_type="falcon",
                    hidden_size=4544, num_attention_heads=71)
    p = ["/models/falcon", "--block-size", "32", "--kv-transfer-config", _kv()]
    d = ["/models/falcon", "--kv-transfer-config", _kv()]
    code, out = check(tmp_path, capsys, *_pair(p, d, image="vllm/vllm-openai:v0.31.0"), extra=extra)
    assert code == 1 and "block-size-direction" in rules(out, "error"), out


def test_a_head_size_of_256_is_not_pinned_from_0_29(tmp_path, capsys):
    # GPT-J 6B: head size 256; FLASH_ATTN prefers 128 under FA4 on compute capability 10.x/11.x (0.29+).
    extra = _config(tmp_path / "config.json", architectures=["GPTJForCausalLM"], model_type="gptj", n_embd=4096,
                    n_head=16)
    p = ["/models/gptj", "--block-size", "32", "--kv-transfer-config", _kv()]
    d = ["/models/gptj", "--kv-transfer-config", _kv()]
    code, out = check(tmp_path, capsys, *_pair(p, d, image="vllm/vllm-openai:v0.31.0"), extra=extra)
    assert code == 0 and "block-size-partial" in rules(out, "warning"), out


def test_a_pddeployment_of_opt_is_refused(tmp_path, capsys):
    spec = {"model": {"name": "facebook/opt-350m"}, "engine": {"image": "vllm/vllm-openai:v0.31.0"},
            "prefill": {"replicas": 1, "blockSize": 32}, "decode": {"replicas": 1}}
    code, out = check(tmp_path, capsys, _pddeployment(spec))
    assert code == 1 and "block-size-direction" in rules(out, "error"), out


@pytest.mark.parametrize("name", ["facebook/opt-125m", "gpt2", "EleutherAI/gpt-j-6b", "EleutherAI/pythia-1.4b",
                                  "tiiuae/falcon-7b", "bigscience/bloom-560m", "bigcode/starcoder2-3b",
                                  "microsoft/phi-2"])
def test_plain_families_are_known_by_name(name):
    assert traits(None, None, None, name).architecture == "dense"


def test_hybrids_are_not_taken_for_plain_families():
    assert traits(None, None, None, "tiiuae/falcon-h1-1.5b").architecture == "hybrid-ssm"
    assert traits(None, None, None, "tiiuae/falcon-mamba-7b").architecture is None


def test_config_model_type_and_head_size():
    facts = facts_from_config({"architectures": ["OPTNewForCausalLM"], "model_type": "opt", "hidden_size": 768,
                               "num_attention_heads": 12})
    assert facts.architecture == "dense" and facts.head_size == 64
    assert facts_from_config({"architectures": ["GPT2LMHeadModel"], "n_embd": 768, "n_head": 12}).architecture == "dense"
    assert facts_from_config({"head_dim": 256, "hidden_size": 2048, "num_attention_heads": 8}).head_size == 256


def test_default_block_size_over_every_release():
    gpu = {"nvidia.com/gpu": "1"}
    # 16 up to 0.33, 64 from 0.34 (CacheConfig.DEFAULT_BLOCK_SIZE): the releases disagree
    assert default_block_size(None, "vllm/vllm-openai:latest", gpu, "dense", head_size=64) is None
    assert default_block_size(None, "vllm/vllm-openai:latest", gpu, "dense", head_size=256) is None
    assert default_block_size(None, "vllm/vllm-openai:latest", gpu, "dense") is None
    assert default_block_size((0, 30, 0), "vllm/vllm-openai:v0.30.0", gpu, "dense", head_size=128) == 16
    assert likely_block_size((0, 30, 0), "vllm/vllm-openai:v0.30.0", gpu, "dense", head_size=256).depends_on
    assert default_block_size(None, "vllm/vllm-openai:latest", gpu, "mla", head_size=64) is None


# --- 3. NIXL backends ------------------------------------------------------------------------------------------


def _model(kv: str) -> list[str]:
    return ["Qwen/Qwen3-8B", "--kv-transfer-config", kv]


def test_libfabric_prefill_and_default_ucx_decode_share_no_backend(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(_model(_kv(["LIBFABRIC"])), _model(_kv())))
    assert code == 1 and "nixl-backend-fabric-mismatch" in rules(out, "error"), out
    assert "share no backend" in _messages(out, "nixl-backend-fabric-mismatch")[0]


@pytest.mark.parametrize(("prefill", "decode"), [(["LIBFABRIC"], ["LIBFABRIC"]), (["UCX", "LIBFABRIC"], None),
                                                 (None, None)])
def test_roles_sharing_a_backend_pass(tmp_path, capsys, prefill, decode):
    code, out = check(tmp_path, capsys, *_pair(_model(_kv(prefill)), _model(_kv(decode))))
    assert code == 0 and "nixl-backend-fabric-mismatch" not in rules(out), out


def test_fi_provider_efa_with_ucx_only_warns(tmp_path, capsys):
    env = [{"name": "FI_PROVIDER", "value": "efa"}]
    code, out = check(tmp_path, capsys, *_pair(_model(_kv()), _model(_kv()), env=env))
    assert code == 0 and "nixl-backend-fabric-mismatch" in rules(out, "warning"), out
    assert "FI_PROVIDER=efa" in _messages(out, "nixl-backend-fabric-mismatch")[0]


def _dynamo(prefill: list[str] | None, decode: list[str] | None) -> dict:
    def worker(sub: str, backends: list[str] | None) -> dict:
        return {"componentType": "worker", "subComponentType": sub, "replicas": 1,
                "extraPodSpec": {"mainContainer": {
                    "image": "vllm/vllm-openai:v0.24.0", "command": ["python3", "-m", "dynamo.vllm"],
                    "args": ["--model", "Qwen/Qwen3-8B", "--disaggregation-mode", sub,
                             "--kv-transfer-config", _kv(backends)],
                    "env": [POD_IP], "resources": {"limits": {"nvidia.com/gpu": "1"}}}}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"backendFramework": "vllm",
                     "services": {"Frontend": {"componentType": "frontend", "replicas": 1},
                                  "VllmPrefillWorker": worker("prefill", prefill),
                                  "VllmDecodeWorker": worker("decode", decode)}}}


@pytest.mark.parametrize(("decode", "refused"), [(None, True), (["LIBFABRIC"], False)])
def test_dynamo_workers_backends_are_compared(tmp_path, capsys, decode, refused):
    code, out = check(tmp_path, capsys, _dynamo(["LIBFABRIC"], decode))
    assert ("nixl-backend-fabric-mismatch" in rules(out, "error")) is refused, out


def test_a_pddeployment_on_efa_with_libfabric_passes_the_backend_rule(tmp_path, capsys):
    spec = {"model": {"name": "Qwen/Qwen3-8B"},
            "engine": {"image": "vllm/vllm-openai:v0.24.0", "env": [{"name": "FI_PROVIDER", "value": "efa"}]},
            "kvTransfer": {"backends": ["LIBFABRIC"]},
            "prefill": {"replicas": 1}, "decode": {"replicas": 1}}
    code, out = check(tmp_path, capsys, _pddeployment(spec))
    assert "nixl-backend-fabric-mismatch" not in rules(out), out


EFA = {"vpc.amazonaws.com/efa": "4"}


def test_libfabric_only_on_the_host_network_gets_no_ucx_device_warning(tmp_path, capsys):
    kv = _kv(["LIBFABRIC"])
    code, out = check(tmp_path, capsys, *_pair(_model(kv), _model(kv), resources=EFA, host_network=True,
                                               security={"capabilities": {"add": ["IPC_LOCK"]}}))
    assert "ucx-net-devices-unscoped" not in rules(out) and not rules(out, "error"), out


def test_ucx_on_the_host_network_still_gets_the_ucx_device_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(_model(_kv()), _model(_kv()), resources={"rdma/ib": "1"},
                                               host_network=True))
    assert "ucx-net-devices-unscoped" in rules(out, "warning"), out


@pytest.mark.parametrize(("image", "security", "ceiling_unread"), [
    # vLLM's vllm-openai image runs as root: privileged root holds CAP_IPC_LOCK, which ib_umem_get lets pin past any
    # RLIMIT_MEMLOCK, so the runtime's ceiling does not matter (branch i9-fixU re-derived the rule's third case)
    ("vllm/vllm-openai:v0.24.0", {"privileged": True}, False),
    ("ghcr.io/llm-d/llm-d-cuda:v0.9.0", {"privileged": True, "runAsUser": 0}, False),
    # an image whose user is not known to be root: a non-root process loses the capabilities at execve
    ("ghcr.io/llm-d/llm-d-cuda:v0.9.0", {"privileged": True}, True),
])
def test_a_privileged_container_has_ipc_lock(tmp_path, capsys, image, security, ceiling_unread):
    kv = _kv(["LIBFABRIC"])
    code, out = check(tmp_path, capsys, *_pair(_model(kv), _model(kv), resources=EFA, security=security, image=image))
    messages = _messages(out, "memlock-insufficient")
    assert not any("lacks the IPC_LOCK" in m for m in messages), out
    assert bool(messages) == ceiling_unread, out
    assert all("memlock ceiling is not checked" in m for m in messages), out


def test_a_container_without_ipc_lock_is_still_told(tmp_path, capsys):
    kv = _kv(["LIBFABRIC"])
    code, out = check(tmp_path, capsys, *_pair(_model(kv), _model(kv), resources=EFA))
    assert any("lacks the IPC_LOCK" in m for m in _messages(out, "memlock-insufficient")), out


# --- 4. conv-state layout on one role of an unknown model ----------------------------------------------------


DS = [{"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}]


def _layouts(model: str, prefill_env: list[dict], decode_env: list[dict], image: str = "vllm/vllm-openai:v0.24.0"):
    args = [model, "--kv-transfer-config", _kv()]
    return [_deployment("prefill", _container(args, image=image, env=prefill_env)),
            _deployment("decode", _container(args, image=image, env=decode_env))]


def test_ds_on_one_role_of_an_unknown_model_is_not_checked(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_layouts("acme/new-model-4b", DS, []))
    assert code == 3 and not rules(out, "error"), out
    assert "ssm-conv-layout-ds" in json.dumps(out["notChecked"]), out


def test_ds_on_one_role_with_a_hybrid_config_is_refused(tmp_path, capsys):
    extra = _config(tmp_path / "config.json", architectures=["AcmeLinearForCausalLM"],
                    layer_types=["linear_attention", "full_attention"])
    code, out = check(tmp_path, capsys, *_layouts("acme/new-model-4b", DS, []), extra=extra)
    assert code == 1 and "ssm-conv-layout-ds" in rules(out, "error"), out


def test_ds_on_both_roles_of_an_unknown_model_is_checked(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_layouts("acme/new-model-4b", DS, DS))
    assert code == 0 and not out["notChecked"], out


def test_ds_on_one_role_of_a_known_dense_model_passes(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_layouts("Qwen/Qwen3-8B", DS, []))
    assert code == 0 and not out["notChecked"] and "ssm-conv-layout-ds" not in rules(out), out


def test_ds_on_one_role_before_0_20_is_not_judged(tmp_path, capsys):
    # VLLM_SSM_CONV_STATE_LAYOUT exists from 0.20.0 (envs.py); the rule's bound.
    code, out = check(tmp_path, capsys, *_layouts("acme/new-model-4b", DS, [], image="vllm/vllm-openai:v0.19.0"))
    assert "ssm-conv-layout-ds" not in json.dumps(out["notChecked"]), out


def test_ds_on_one_role_with_an_unknown_version_is_not_checked(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_layouts("acme/new-model-4b", DS, [], image="vllm/vllm-openai:latest"))
    assert code == 3 and not rules(out, "error") and "ssm-conv-layout-ds" in json.dumps(out["notChecked"]), out
