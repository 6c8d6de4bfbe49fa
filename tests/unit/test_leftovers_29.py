"""Issue 9 leftovers (session 29, helper F): the checker's known gaps, each a kind with controls.

a. A third-party or unknown connector inside a NIXL role's MultiConnector gets the "not checked" note a bare
   third-party connector's pair gets (``multi-connector-child-not-checked``, a warning; one wording:
   ``multi_connector.NOT_DESCRIBED``).
b. A shell or Slurm script's GPU request (``--gres=gpu:N``) is AMD's where the script shows a ROCm host
   (``HIP_VISIBLE_DEVICES``, ``ROCR_VISIBLE_DEVICES``, amd-smi, a rocm image) and no NVIDIA one
   (``block_size.script_gpu_resource``): no CUDA-only finding (the CUDA default block size) on such a script.
c. The shell reader applies ``unset`` (and ``env -u``) and scopes a subshell's ``( export X=1; vllm serve ... )``
   assignments and exports to the commands inside it (``vllm.script._Shell.unset``, ``subshell``); a ``{ ...; }``
   group stays in the same shell (controls).
d. ``same-role-port-conflict`` also finds replicas of one role on the host network that the manifest pins to one
   node (``nodeName``, a ``kubernetes.io/hostname`` selector, required node affinity admitting one node): they all
   bind the same HTTP and NIXL side-channel ports there.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.rules.multi_connector import NOT_DESCRIBED
from pdd_operator.vllm.block_size import script_gpu_resource
from pdd_operator.vllm.script import launches
from tests.unit.cli_check import check_text
from tests.unit.test_public_report_kinds_14 import _messages, _pair
from tests.unit.test_turn2_variants import check, rules

MODEL = "Qwen/Qwen3-8B"
CHILD = "multi-connector-child-not-checked"


def _multi(*children: dict, role: str = "kv_both") -> str:
    return json.dumps({"kv_connector": "MultiConnector", "kv_role": role,
                       "kv_connector_extra_config": {"connectors": list(children)}})


NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
PEGA = {"kv_connector": "PegaKVConnector", "kv_role": "kv_both", "kv_connector_module_path": "pegaflow.connector"}
OFFLOAD = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
           "kv_connector_extra_config": {"cpu_bytes_to_use": 1000000000}}


@pytest.mark.parametrize("tag", ["v0.33.0", "latest"])
def test_a_third_party_child_beside_nixl_is_named_not_checked(tmp_path, capsys, tag):
    args = [MODEL, "--kv-transfer-config", _multi(NIXL, PEGA)]
    code, out = check(tmp_path, capsys, *_pair(args, args, image=f"vllm/vllm-openai:{tag}"))
    assert CHILD in rules(out, "warning") and not rules(out, "error"), out
    message = _messages(out, CHILD)[0]
    assert "PegaKVConnector" in message and NOT_DESCRIBED in message, out


def test_the_bare_third_party_connector_says_the_same(tmp_path, capsys):
    kv = json.dumps(PEGA)
    code, out = check(tmp_path, capsys, *_pair([MODEL, "--kv-transfer-config", kv], [MODEL, "--kv-transfer-config", kv],
                                               image="vllm/vllm-openai:v0.33.0"))
    assert code == 3 and NOT_DESCRIBED in json.dumps(out["notChecked"]), out


@pytest.mark.parametrize("other", [OFFLOAD, {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}])
def test_a_vllm_child_beside_nixl_gets_no_note(tmp_path, capsys, other):
    args = [MODEL, "--kv-transfer-config", _multi(NIXL, other)]
    code, out = check(tmp_path, capsys, *_pair(args, args, image="vllm/vllm-openai:v0.33.0"))
    assert CHILD not in rules(out), out


def test_a_miscased_vllm_child_is_left_to_the_registry_rule(tmp_path, capsys):
    args = [MODEL, "--kv-transfer-config", _multi(NIXL, {**OFFLOAD, "kv_connector": "offloadingConnector"})]
    code, out = check(tmp_path, capsys, *_pair(args, args, image="vllm/vllm-openai:v0.33.0"))
    assert CHILD not in rules(out), out


def test_the_nixl_child_is_still_judged(tmp_path, capsys):
    p = [MODEL, "--kv-transfer-config", _multi(NIXL, PEGA)]
    d = [MODEL, "--kv-cache-dtype", "fp8", "--kv-transfer-config", _multi(NIXL, PEGA)]
    code, out = check(tmp_path, capsys, *_pair(p, d, image="vllm/vllm-openai:v0.33.0"))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error") and CHILD in rules(out, "warning"), out


# --- b. ROCm scripts ------------------------------------------------------------------------------------------------


def _sbatch(signs: str) -> str:
    kv_p = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
    kv_d = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
    return f"""#!/bin/bash
#SBATCH --nodes=2
#SBATCH --gres=gpu:8
MODEL=Qwen/Qwen3-0.6B
{signs}
export VLLM_NIXL_SIDE_CHANNEL_PORT=5600
srun --nodelist=n-a01 -N1 --ntasks=1 --export=ALL,VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1 \\
    vllm serve $MODEL --port 8100 --block-size 128 --kv-transfer-config '{kv_p}' &
srun --nodelist=n-a02 -N1 --ntasks=1 --export=ALL,VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2 \\
    vllm serve $MODEL --port 8200 --kv-transfer-config '{kv_d}' &
wait
"""


def _check_script(tmp_path, capsys, text: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, "pd.sbatch", "--vllm-version", "0.33.0")


@pytest.mark.parametrize("signs", ["export HIP_VISIBLE_DEVICES=0,1,2,3,4,5,6,7", "export ROCR_VISIBLE_DEVICES=0,1",
                                   "amd-smi list", "module load rocm/6.4"])
def test_a_rocm_script_gets_no_cuda_default_block_size(tmp_path, capsys, signs):
    code, out = _check_script(tmp_path, capsys, _sbatch(signs))
    assert code == 0 and "block-size-direction" not in rules(out), out
    assert "block-size-partial" in rules(out, "warning"), out  # the likely size, and what decides it on ROCm


@pytest.mark.parametrize("signs", ["export CUDA_VISIBLE_DEVICES=0,1,2,3", "nvidia-smi", "nvidia-smi || rocm-smi"])
def test_a_cuda_or_either_script_keeps_the_cuda_default(tmp_path, capsys, signs):  # controls
    code, out = _check_script(tmp_path, capsys, _sbatch(signs))
    assert code == 1 and "block-size-direction" in rules(out, "error"), out


def test_script_gpu_resource():
    assert script_gpu_resource("export HIP_VISIBLE_DEVICES=0") == "amd.com/gpu"
    assert script_gpu_resource("srun --container-image=rocm/vllm:latest vllm serve m") == "amd.com/gpu"
    assert script_gpu_resource("nvidia-smi; rocm-smi") == "nvidia.com/gpu"
    assert script_gpu_resource("vllm serve m") == "nvidia.com/gpu"


# --- c. unset, env -u and subshells in scripts ----------------------------------------------------------------------

PORT = "VLLM_NIXL_SIDE_CHANNEL_PORT"


def _ports(script: str) -> list[tuple[str, str | None]]:
    return [(x.argv[-1], x.env.get(PORT)) for x in launches(script)]


def test_unset_removes_an_exported_variable():
    assert _ports(f"export {PORT}=5601\nunset {PORT}\nvllm serve m --port 8100 &\n") == [("8100", None)]
    assert _ports(f"export {PORT}=5601\nunset -v X {PORT}\nvllm serve m --port 8100 &\n") == [("8100", None)]
    assert _ports(f"export {PORT}=5601\nvllm serve m --port 8100 &\n") == [("8100", "5601")]  # control


def test_env_u_removes_a_variable_from_one_command():
    text = f"export {PORT}=5601\nenv -u {PORT} vllm serve m --port 8100 &\nvllm serve m --port 8200 &\n"
    assert _ports(text) == [("8100", None), ("8200", "5601")]
    assert _ports(f"env {PORT}=5601 vllm serve m --port 8100 &\nvllm serve m --port 8200 &\n") == [
        ("8100", "5601"), ("8200", None)]  # control: env NAME=value is the one command's


def test_a_subshell_s_exports_stay_inside_it():
    text = f"( export {PORT}=5601; vllm serve m --port 8100 ) &\nvllm serve m --port 8200 &\n"
    assert _ports(text) == [("8100", "5601"), ("8200", None)]
    text = f"export {PORT}=5601\n( unset {PORT}; vllm serve m --port 8100 ) &\nvllm serve m --port 8200 &\n"
    assert _ports(text) == [("8100", None), ("8200", "5601")]
    text = f"{{ export {PORT}=5601; vllm serve m --port 8100 & }}\nvllm serve m --port 8200 &\n"  # control: a group
    assert _ports(text) == [("8100", "5601"), ("8200", "5601")]


def _host(prefill: str, between: str, decode_prefix: str = "") -> str:
    kv_p = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
    kv_d = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
    return f"""#!/bin/bash
pip install vllm==0.33.0
export {PORT}=5601
{prefill.format(cmd=f"CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen3-0.6B --port 8100 --kv-transfer-config '{kv_p}'")}
{between}
{decode_prefix}CUDA_VISIBLE_DEVICES=1 vllm serve Qwen/Qwen3-0.6B --port 8200 --kv-transfer-config '{kv_d}' &
wait
"""


def _check_sh(tmp_path, capsys, text: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, "pd.sh")


@pytest.mark.parametrize(("prefill", "between", "prefix"), [
    ("{cmd} &", f"unset {PORT}", ""),                                  # the decode runs the default 5600
    (f"( export {PORT}=5602; {{cmd}} ) &", "", ""),   # the prefill's 5602 stays in its subshell
    ("{cmd} &", "", f"env -u {PORT} "),
])
def test_scripts_with_disjoint_side_channel_ports_pass(tmp_path, capsys, prefill, between, prefix):
    code, out = _check_sh(tmp_path, capsys, _host(prefill, between, prefix))
    assert "side-channel-port-conflict" not in rules(out), out


@pytest.mark.parametrize("prefill", ["{cmd} &", f"{{{{ export {PORT}=5601; {{cmd}} & }}}}"])
def test_scripts_whose_engines_share_the_port_are_refused(tmp_path, capsys, prefill):  # controls
    code, out = _check_sh(tmp_path, capsys, _host(prefill, ""))
    assert code == 1 and "side-channel-port-conflict" in rules(out, "error"), out


# --- d. hostNetwork replicas pinned to one node -------------------------------------------------------------------


def _hostnet(role: str, replicas: int, placement: dict, kv_role: str) -> dict:
    labels = {"app": "pin", "role": role}
    kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": kv_role})
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.33.0", "command": ["vllm", "serve"],
                 "args": [MODEL, "--port", "8100" if role == "prefill" else "8200", "--kv-transfer-config", kv],
                 "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": "5600" if role == "prefill" else "5700"},
                         {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    spec = {"hostNetwork": True, "containers": [container], **placement}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"pin-{role}", "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": spec}}}


HOST = "kubernetes.io/hostname"
AFFINITY = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": HOST, "operator": "In", "values": ["gpu-1"]}]}]}}}}


@pytest.mark.parametrize("placement", [{"nodeName": "gpu-1"}, {"nodeSelector": {HOST: "gpu-1"}}, AFFINITY])
def test_host_network_replicas_pinned_to_one_node_share_their_ports(tmp_path, capsys, placement):
    docs = [_hostnet("prefill", 2, placement, "kv_producer"), _hostnet("decode", 1, {}, "kv_consumer")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "same-role-port-conflict" in rules(out, "error"), out
    message = _messages(out, "same-role-port-conflict")[0]
    assert "2 replicas" in message and "8100" in message and "5600" in message, out


@pytest.mark.parametrize(("replicas", "placement"), [
    (1, {"nodeName": "gpu-1"}),                                     # one replica
    (2, {}),                                                        # not pinned: the scheduler spreads them
    (2, {"nodeSelector": {"nvidia.com/gpu.product": "H100"}}),      # a pool of nodes, not one
])
def test_replicas_that_are_not_pinned_together_pass(tmp_path, capsys, replicas, placement):  # controls
    docs = [_hostnet("prefill", replicas, placement, "kv_producer"), _hostnet("decode", 1, {}, "kv_consumer")]
    code, out = check(tmp_path, capsys, *docs)
    assert "same-role-port-conflict" not in rules(out), out


def test_pinned_replicas_in_a_pod_network_pass(tmp_path, capsys):  # control: each pod has its own namespace
    docs = [_hostnet("prefill", 2, {"nodeName": "gpu-1"}, "kv_producer"), _hostnet("decode", 1, {}, "kv_consumer")]
    del docs[0]["spec"]["template"]["spec"]["hostNetwork"]
    code, out = check(tmp_path, capsys, *docs)
    assert "same-role-port-conflict" not in rules(out), out
