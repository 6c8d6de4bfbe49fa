"""Dynamo workers whose flags are a container ``args`` list, and multinode services whose launch Dynamo's operator
spreads over the group's pods.

Expected verdicts written from ai-dynamo/dynamo deploy/cloud/operator/internal/dynamo/backend_vllm.go
(``updateVLLMMultinodeArgs``: TP x PP beyond one pod's ``limits.gpu`` is launched over the pods; else TP x PP x DP
beyond it gets ``--data-parallel-size-local`` = GPUs // (TP x PP) per pod, ``injectDataParallelLaunchFlags``; else
nothing is rewritten) and from vLLM (every DP rank joins a group of ``--data-parallel-size`` ranks at startup,
vllm/v1/engine/core.py ``DPEngineCoreProc``), before the checker ran on them.
"""

from __future__ import annotations

import pytest

from pdd_operator.compat.dynamo_resources import multinode_launch
from tests.unit.test_turn2_variants import check, rules

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _graph(decode_args: list[str], *, prefill_args: list[str] | None = None, gpus: str | None = "4", nodes: int = 2,
           command: list[str] | None = None, model: str = "nvidia/DeepSeek-R1-FP4") -> dict:
    def worker(sub: str, args: list[str]) -> dict:
        main = {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.8.0",
                "command": list(command if command is not None else ["python3", "-m", "dynamo.vllm"]),
                # --connector none: Dynamo 0.8.0's worker refuses --kv-transfer-config beside its default --connector
                # nixl (dynamo-connector-flag, set 67)
                "args": ["--model", model, "--connector", "none", "--kv-transfer-config", KV, "--enable-expert-parallel",
                         *args]}
        service = {"componentType": "worker", "subComponentType": sub, "replicas": 1,
                   "resources": {"limits": {"gpu": gpus}} if gpus is not None else {},
                   "extraPodSpec": {"mainContainer": main}}
        if nodes > 1:
            service["multinode"] = {"nodeCount": nodes}
        return service
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"backendFramework": "vllm", "services": {
                "prefill": worker("prefill", prefill_args if prefill_args is not None else decode_args),
                "decode": worker("decode", decode_args)}}}


def _gpu_findings(out: dict, severity: str) -> list[str]:
    return [f["message"] for r in out["results"] for f in r["findings"]
            if f["rule"] == "parallelism-gpu-count" and f["severity"] == severity]


# --- the launch Dynamo's operator builds -------------------------------------------------------------------------


@pytest.mark.parametrize("args, gpus, nodes, spread, group, note", [
    # DP 8 x TP 1 on 2 pods of 4: --data-parallel-size-local 4 on each pod
    (["--data-parallel-size", "8"], "4", 2, True, 8, "--data-parallel-size-local 4"),
    # TP 2 x DP 8 on 2 pods of 8: local 8 // 2 = 4 ranks a pod
    (["--tensor-parallel-size", "2", "--data-parallel-size", "8"], "8", 2, True, 16, "--data-parallel-size-local 4"),
    # TP 8 x PP 2 = 16 > 8 GPUs: launched over the pods (Ray or --nnodes)
    (["--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"], "8", 2, True, 16, "launches them over the 2"),
    # DP 4 fits one pod of 4: nothing rewritten, every pod runs it as written
    (["--data-parallel-size", "4"], "4", 2, False, None, ""),
    # a joined args string (sh -c form): the operator splits args on blanks
    (["python3 -m dynamo.vllm --data-parallel-size 8 --tensor-parallel-size 1"], "4", 2, True, 8, "local 4"),
])
def test_the_operator_launch_is_read_from_args_and_gpus(args, gpus, nodes, spread, group, note):
    got = multinode_launch({"args": args}, {"resources": {"limits": {"gpu": gpus}}}, nodes)
    assert (got.spread, got.group_gpus, got.caveat) == (spread, group, "") and note in got.note


@pytest.mark.parametrize("args", [["-dp", "8"], ["--data-parallel-size=8"], ["--data_parallel_size", "8"]])
def test_other_spellings_are_read_as_later_operators_do_with_a_caveat(args):
    got = multinode_launch({"args": args}, {"resources": {"limits": {"gpu": "4"}}}, 2)
    assert got.spread and got.group_gpus == 8 and args[0] in got.caveat and "normalizeVLLMFlags" in got.caveat


@pytest.mark.parametrize("args, service, why", [
    (["--data-parallel-size", "16"], {}, "without a literal resources.limits.gpu"),
    (["--data-parallel-size", "$(DP)"], {"resources": {"limits": {"gpu": "4"}}}, "not a literal integer"),
])
def test_a_launch_the_manifest_does_not_settle_is_not_known(args, service, why):
    got = multinode_launch({"args": args}, service, 2)
    assert got.group_gpus is None and why in got.note


def test_flags_in_command_are_not_read_by_the_operator():
    # getExpandedArgs reads container.Args only: DP 16 in command is not seen, so nothing is spread
    got = multinode_launch({"command": ["python3", "-m", "dynamo.vllm", "--data-parallel-size", "16"], "args": []},
                           {"resources": {"limits": {"gpu": "4"}}}, 2)
    assert not got.spread and got.gpus == 4


# --- the verdicts ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dp, refused", [("16", True), ("8", False), ("4", False)])
def test_dp_past_the_groups_gpus_is_refused(tmp_path, capsys, dp, refused):
    # 2 pods x 4 GPUs: DP 16 x TP 1 needs 16 GPUs, and ranks 8-15 never start
    code, out = check(tmp_path, capsys, _graph(["--data-parallel-size", dp], prefill_args=["--data-parallel-size", "8"]))
    errors = _gpu_findings(out, "error")
    assert (code == 1 and len(errors) == 1 and errors[0].startswith("decode") and "8 GPUs in all" in errors[0]) \
        if refused else not errors


def test_tp_pp_past_the_groups_gpus_is_refused(tmp_path, capsys):
    # TP 8 x PP 2 x DP 2 = 32 ranks over 2 pods of 8 GPUs (16): Ray or --nnodes, neither finds 32 GPUs
    doc = _graph(["--tensor-parallel-size", "8", "--pipeline-parallel-size", "2", "--data-parallel-size", "2"],
                 prefill_args=["--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"], gpus="8")
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and len(_gpu_findings(out, "error")) == 1


def test_a_whole_engine_per_pod_is_judged_per_pod(tmp_path, capsys):
    # DP 16 in command, not args: the operator sees DP 1 and rewrites nothing, so each pod starts 16 ranks on 4 GPUs
    doc = _graph([], command=["python3", "-m", "dynamo.vllm", "--data-parallel-size", "16"])
    code, out = check(tmp_path, capsys, doc)
    errors = _gpu_findings(out, "error")
    assert code == 1 and len(errors) == 2 and "requests 4 GPU(s)" in errors[0]


def test_an_unknown_launch_is_not_checked(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _graph(["--data-parallel-size", "16"], gpus=None))
    reasons = [u["reason"] for u in out["notChecked"]]
    assert code == 3 and not _gpu_findings(out, "error")
    assert any(r.startswith("parallelism-gpu-count cannot be decided") and "limits.gpu" in r for r in reasons)


# --- args lists as the engine command ----------------------------------------------------------------------------


@pytest.mark.parametrize("nodes", [1, 2])
def test_an_args_list_after_python_m_dynamo_vllm_is_the_engine_command(tmp_path, capsys, nodes):
    gpus = "8" if nodes == 1 else "4"
    code, out = check(tmp_path, capsys, _graph(["--data-parallel-size", "8", "--kv-cache-dtype", "fp8"],
                                               prefill_args=["--data-parallel-size", "8"], gpus=gpus, nodes=nodes))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error")
    code, out = check(tmp_path, capsys, _graph(["--data-parallel-size", "8"], gpus=gpus, nodes=nodes))
    assert code == 0 and not rules(out, "error")


@pytest.mark.parametrize("shell", ["/bin/bash", "sh"])
def test_a_shell_c_followed_by_flags_starts_no_engine(tmp_path, capsys, shell):
    # the kubelet runs `bash -c --model ...`: bash refuses --model as its own option and exits 2
    code, out = check(tmp_path, capsys, _graph(["--data-parallel-size", "8"], command=[shell, "-c"]))
    assert code == 3 and not out["results"]
    reasons = [u["reason"] for u in out["notChecked"]]
    assert len(reasons) == 2 and all("starts no engine" in r and "python3, -m, dynamo.vllm" in r for r in reasons)
