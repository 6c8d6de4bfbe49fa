"""Shell and Slurm batch scripts that start P/D vLLM engines are read (issue 9: "real-world cases ... go through ``pdd
check`` ... in their orchestrators' own formats"), by :mod:`pdd_operator.compat.script_inputs`.

The scripts below are written in the shapes of public ones, not copied:

- vLLM's ``tests/v1/kv_connector/nixl_integration/run_accuracy_test.sh`` (vllm-project/vllm 002a105): loops that
  start prefill and decode instances, each ``CUDA_VISIBLE_DEVICES=$GPU_ID VLLM_NIXL_SIDE_CHANNEL_PORT=$SIDE_CHANNEL_PORT
  vllm serve $model_name --port $PORT --block-size ${PREFILL_BLOCK_SIZE} ... --kv-transfer-config '$KV_CONFIG'`` built
  in a string and run by ``eval "... &"``, then ``toy_proxy_server.py --prefiller-ports ... --decoder-ports ...``
  (kv_role kv_both on both: the proxy names the roles);
- vLLM's ``examples/online_serving/disaggregated_serving`` launch scripts and users' scripts in bug reports: two
  ``CUDA_VISIBLE_DEVICES=N nohup vllm serve ... &`` lines with ``kv_producer`` / ``kv_consumer``, a ``pip install
  vllm==X`` pin;
- NVIDIA/cloudai's ``tests/ref_data/vllm-disagg.sbatch`` and ``vllm-disagg-2nodes.sbatch`` (ac7e603, 5d2ad40): ``#SBATCH
  -N``, ``srun --export=ALL,CUDA_VISIBLE_DEVICES=0,1,... -N1 --container-image=... vllm serve ... &`` steps, on one node
  or on two (``--nodelist``).

Without the reader each of them was "not checked" (exit 3) as a whole; the faulty variants below are refused for the
rule vLLM's code fails on, the valid ones pass, and what the script does not show stays "not checked" or a warning.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main
from pdd_operator.compat.script_inputs import _export, _least_gpus, _node, script_engines
from pdd_operator.vllm.script import Launch, launches
from tests.unit.cli_check import check_text as _check

KV_BOTH = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'


def _errors(out: dict) -> set[str]:
    return {f["rule"] for r in out["results"] for f in r["findings"] if f["severity"] == "error"}


# --- vLLM's accuracy-test shape: loops, eval, a proxy naming the roles -------------------------------------------------


def _accuracy(prefill_bs: int = 128, decode_bs: int = 128, decode_gpu: str = "$((i + 2))") -> str:
    engine = """  BASE_CMD="CUDA_VISIBLE_DEVICES=$GPU_ID \\
  VLLM_NIXL_SIDE_CHANNEL_PORT=$SIDE_CHANNEL_PORT \\
  vllm serve $MODEL \\
  --port $PORT \\
  --enforce-eager \\
  --block-size {bs} \\
  --gpu-memory-utilization $GPU_MEMORY_UTILIZATION \\
  --kv-transfer-config '$KV_CONFIG'"
  eval "$BASE_CMD 2>&1 | tee -a {role}_instance_$i.log &"
"""
    return f"""#!/bin/bash
set -xe
KV_CONFIG='{KV_BOTH}'
MODEL=Qwen/Qwen3-0.6B
GPU_MEMORY_UTILIZATION=0.2
PREFILL_PORTS=()
DECODE_PORTS=()
for i in 0 1; do
  GPU_ID=$i
  PORT=$((8100 + i))
  SIDE_CHANNEL_PORT=$((5559 + i))
{engine.format(bs=prefill_bs, role="prefill")}  PREFILL_PORTS+=($PORT)
done
for i in 0; do
  GPU_ID={decode_gpu}
  PORT=$((8200 + i))
  SIDE_CHANNEL_PORT=$((5659 + i))
{engine.format(bs=decode_bs, role="decode")}  DECODE_PORTS+=($PORT)
done
PROXY_CMD="python3 toy_proxy_server.py --port 8192"
PROXY_CMD+=" --prefiller-hosts localhost localhost --prefiller-ports ${{PREFILL_PORTS[@]}}"
PROXY_CMD+=" --decoder-hosts localhost --decoder-ports ${{DECODE_PORTS[@]}}"
$PROXY_CMD &
wait
"""


def test_the_accuracy_test_shape_is_read_and_valid(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _accuracy())
    assert code == 0 and not out["notChecked"] and not out["inputErrors"], out
    # two prefill instances (one loop line, iterations #1 #2) each paired with the one decode, on their script lines
    objects = sorted(r["object"] for r in out["results"])
    script = f"{tmp_path / 'run.sh'} (shell script)"
    assert objects == [f"{script} line 20 #1 + {script} line 35", f"{script} line 20 #2 + {script} line 35"], objects


def test_a_decode_block_size_that_is_no_multiple_of_the_prefill_one_is_refused(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _accuracy(prefill_bs=128, decode_bs=16))
    assert code == 1 and _errors(out) == {"block-size-direction"}, out


def test_equal_block_sizes_other_than_the_default_pass(tmp_path, capsys):  # control
    code, out = _check(tmp_path, capsys, _accuracy(prefill_bs=64, decode_bs=64))
    assert code == 0 and not _errors(out), out


def test_a_decode_on_a_prefill_gpu_is_refused(tmp_path, capsys):
    # GPU_MEMORY_UTILIZATION 0.2 each: two engines on GPU 0 take 0.4 of it, which fits; at 0.9 each they do not
    text = _accuracy(decode_gpu="0").replace("GPU_MEMORY_UTILIZATION=0.2", "GPU_MEMORY_UTILIZATION=0.9")
    code, out = _check(tmp_path, capsys, text)
    assert code == 1 and _errors(out) == {"engines-share-gpu"}, out
    code, out = _check(tmp_path, capsys, _accuracy(decode_gpu="0"), "fits.sh")  # control: 0.2 + 0.2 of GPU 0
    assert code == 0 and not _errors(out), out


# --- the two-line launch script of examples and bug reports ------------------------------------------------------------


def _launch(version: str = "0.10.1", prefill: str = "", decode: str = "", gpus: tuple[str, str] = ("0", "1"),
            ports: tuple[int, int] = (8100, 8200)) -> str:
    return f"""#!/usr/bin/env bash
# prefill on GPU {gpus[0]}, decode on GPU {gpus[1]}, the proxy in front
pip install vllm=={version}
CUDA_VISIBLE_DEVICES={gpus[0]} VLLM_NIXL_SIDE_CHANNEL_PORT=5559 nohup vllm serve meta-llama/Llama-3.1-8B-Instruct \\
  --port {ports[0]} {prefill} \\
  --kv-transfer-config '{KV_P}' > prefill.log 2>&1 &
CUDA_VISIBLE_DEVICES={gpus[1]} VLLM_NIXL_SIDE_CHANNEL_PORT=5569 nohup vllm serve meta-llama/Llama-3.1-8B-Instruct \\
  --port {ports[1]} {decode} \\
  --kv-transfer-config '{KV_D}' > decode.log 2>&1 &
python3 disagg_proxy_demo.py --prefill localhost:{ports[0]} --decode localhost:{ports[1]} --port 8000
"""


def test_the_launch_script_is_valid(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _launch())
    assert code == 0 and not out["notChecked"], out
    assert [r["vllmVersion"] for r in out["results"]] == ["0.10.1"], out  # from the pip install pin


def test_the_api_server_module_and_exports_between_engines_are_read(tmp_path, capsys):
    text = f"""#!/bin/bash
export MODEL=Qwen/Qwen3-8B
export CUDA_VISIBLE_DEVICES=0
export VLLM_NIXL_SIDE_CHANNEL_PORT=5559
python3 -m vllm.entrypoints.openai.api_server --model $MODEL --port 8100 --kv-transfer-config '{KV_P}' &
export CUDA_VISIBLE_DEVICES={{GPU}}
export VLLM_NIXL_SIDE_CHANNEL_PORT=5569
python3 -m vllm.entrypoints.openai.api_server --model $MODEL --port 8200 --kv-transfer-config '{KV_D}' &
wait
"""
    code, out = _check(tmp_path, capsys, text.replace("{GPU}", "1"))
    assert code == 0 and not _errors(out) and len(out["results"]) == 1, out
    code, out = _check(tmp_path, capsys, text.replace("{GPU}", "0"), "same.sh")  # the export before each engine counts
    assert code == 1 and _errors(out) == {"engines-share-gpu"}, out


def test_two_scripts_checked_together_are_not_cross_paired(tmp_path, capsys):
    (tmp_path / "a.sh").write_text(_launch())
    (tmp_path / "b.sh").write_text(_launch())
    code = main(["check", str(tmp_path / "a.sh"), str(tmp_path / "b.sh"), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    objects = sorted(r["object"] for r in out["results"])
    assert code == 0 and len(objects) == 2 and all(o.count("a.sh") == 2 or o.count("b.sh") == 2 for o in objects), out


def test_a_path_that_names_a_role_does_not_name_the_engines_roles(tmp_path, capsys):
    (tmp_path / "decode").mkdir()
    code, out = _check(tmp_path / "decode", capsys, _accuracy(prefill_bs=128, decode_bs=16), "prefill.sh")
    assert code == 1 and _errors(out) == {"block-size-direction"}, out


def test_a_kv_cache_dtype_on_one_role_only_is_refused_on_the_scripts_line(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _launch(prefill="--kv-cache-dtype fp8"))
    assert code == 1 and _errors(out) == {"kv-cache-dtype-mismatch"}, out
    script = f"{tmp_path / 'run.sh'} (shell script)"
    assert out["results"][0]["object"] == f"{script} line 4 + {script} line 7", out
    fixes = [f["fix"] for r in out["results"] for f in r["findings"] if f["rule"] == "kv-cache-dtype-mismatch"]
    assert "vllm serve lines" in fixes[0] and "container" not in fixes[0], fixes


def test_prefill_tp_above_decode_tp_is_refused_before_0_14_only(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _launch(prefill="--tensor-parallel-size 2", gpus=("0,2", "1")))
    assert code == 1 and "hetero-tp-p-gt-d-unsupported" in _errors(out), out
    code, out = _check(tmp_path, capsys, _launch("0.14.0", prefill="--tensor-parallel-size 2", gpus=("0,2", "1")),
                       "new.sh")  # control: supported from 0.14.0
    assert "hetero-tp-p-gt-d-unsupported" not in _errors(out), out


@pytest.mark.parametrize("version, refused", [("0.10.1", False), ("0.25.0", True), ("0.30.0", True)])
def test_two_engines_on_one_port_of_one_host_are_refused(tmp_path, capsys, version, refused):
    """One HTTP --port: vLLM's HTTP socket sets SO_REUSEPORT through 0.24.x (both listen, a warning), from 0.25.0
    only with more than one API server (the second fails)."""
    code, out = _check(tmp_path, capsys, _launch(version, ports=(8100, 8100)))
    assert ("listener-port-conflict" in _errors(out)) is refused, out
    assert any(f["rule"] == "listener-port-conflict" for r in out["results"] for f in r["findings"]), out


def test_two_engines_on_one_gpu_are_refused(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _launch(gpus=("0", "0")))
    assert code == 1 and _errors(out) == {"engines-share-gpu"}, out


# --- Slurm: srun steps on one node or on two ---------------------------------------------------------------------------


def _sbatch(nodes: tuple[str, str] = ("gpu-a01", "gpu-a02"), export: tuple[str, str] = ("", ""),
            job_nodes: int = 2, image: str = "vllm/vllm-openai:v0.11.0") -> str:
    steps = "".join(
        f"srun --nodelist={node} -N1 --ntasks=1 --container-image={image} --export=ALL{extra} \\\n"
        f"    vllm serve $MODEL --port {port} --tensor-parallel-size 4 --kv-transfer-config '{kv}' &\n"
        for node, extra, port, kv in zip(nodes, export, (8100, 8200), (KV_P, KV_D), strict=True))
    return f"""#!/bin/bash
#SBATCH --job-name=pd
#SBATCH --nodes={job_nodes}
#SBATCH --gpus-per-node=4
MODEL=meta-llama/Llama-3.1-8B-Instruct
export VLLM_NIXL_SIDE_CHANNEL_PORT=5600
{steps}wait
"""


def test_a_localhost_side_channel_across_two_nodes_is_refused(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _sbatch(), "pd.sbatch")
    assert code == 1 and _errors(out) == {"side-channel-host-not-routable"}, out
    finding = next(f for r in out["results"] for f in r["findings"] if f["severity"] == "error")
    assert "line of the script" in finding["fix"] and "downward API" not in finding["fix"], finding
    assert "run on different nodes" in finding["message"] and "pods" not in finding["message"], finding


def test_each_node_s_own_side_channel_host_passes(tmp_path, capsys):  # control
    text = _sbatch(export=(",VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1", ",VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2"))
    code, out = _check(tmp_path, capsys, text, "pd.sbatch")
    assert code == 0 and not _errors(out), out


def test_both_steps_on_one_node_share_its_ports(tmp_path, capsys):
    # one node: localhost is right, but both engines bind side-channel port 5600 there, and both TP 4 engines take
    # the node's 4 GPUs (no CUDA_VISIBLE_DEVICES) at 0.9 of their memory each
    code, out = _check(tmp_path, capsys, _sbatch(nodes=("gpu-a01", "gpu-a01"), job_nodes=1), "pd.sbatch")
    assert code == 1 and _errors(out) == {"side-channel-port-conflict", "engines-share-gpu"}, out
    apart = _sbatch(nodes=("gpu-a01", "gpu-a01"), job_nodes=1, export=(
        ",CUDA_VISIBLE_DEVICES=0,1,2,3", ",CUDA_VISIBLE_DEVICES=4,5,6,7,VLLM_NIXL_SIDE_CHANNEL_PORT=5700")).replace(
        "--gpus-per-node=4", "--gpus-per-node=8")
    code, out = _check(tmp_path, capsys, apart, "apart.sbatch")  # control: own GPUs and ports on the one node
    assert code == 0 and not _errors(out), out


def test_steps_on_nodes_the_script_does_not_name_are_never_refused_for_placement(tmp_path, capsys):
    # localhost (unset) is right on one node and wrong on two; the script does not say which
    text = _sbatch(nodes=("$PREFILL_NODE", "$DECODE_NODE"), export=("", ",VLLM_NIXL_SIDE_CHANNEL_PORT=5700"))
    code, out = _check(tmp_path, capsys, text, "pd.sbatch")
    assert code != 1 and not _errors(out), out
    assert out["results"] and all(r["vllmVersion"] == "0.11.0" for r in out["results"]), out


# --- what the script does not show -------------------------------------------------------------------------------------


def test_flags_from_a_function_s_arguments_from_outside_are_not_checked(tmp_path, capsys):
    text = """#!/bin/bash
start() {
  CUDA_VISIBLE_DEVICES=$2 VLLM_NIXL_SIDE_CHANNEL_PORT=$3 vllm serve Qwen/Qwen3-0.6B --port $4 --block-size $BLOCK \\
    --kv-transfer-config "{\\"kv_connector\\":\\"NixlConnector\\",\\"kv_role\\":\\"$1\\"}" &
}
start kv_producer 0 5559 8100
start kv_consumer 1 5569 8200
"""
    code, out = _check(tmp_path, capsys, text)
    assert code == 3 and not _errors(out), out
    reasons = " ".join(s["reason"] for s in out["notChecked"])
    assert "block-size-direction" in reasons, out  # $BLOCK is set where the script runs


def test_an_engine_in_a_here_document_is_not_read_and_its_peer_is_not_checked(tmp_path, capsys):
    text = f"""#!/bin/bash
cat > /tmp/prefill.sh <<EOT
vllm serve Qwen/Qwen3-0.6B --port 8100 --kv-transfer-config '{KV_P}'
EOT
bash /tmp/prefill.sh &
CUDA_VISIBLE_DEVICES=1 vllm serve Qwen/Qwen3-0.6B --port 8200 --kv-transfer-config '{KV_D}' &
"""
    code, out = _check(tmp_path, capsys, text)
    assert code == 3 and not out["results"] and "line 6" in out["notChecked"][0]["object"], out


def test_a_script_whose_engines_cannot_be_found_stays_not_checked_as_a_whole(tmp_path, capsys):
    text = f"#!/bin/bash\n$LAUNCHER --kv-transfer-config '{KV_P}'\n"
    code, out = _check(tmp_path, capsys, text)
    assert code == 3 and not out["results"], out


# --- the pieces --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("wrapper", "job_nodes", "node"), [
    ((), None, "batch-host"),  # no srun: where the script runs
    (("srun", "-w", "n1"), 2, "n1"), (("srun", "--nodelist=n2"), 2, "n2"), (("srun", "--nodelist", "n3"), None, "n3"),
    (("srun", "-N1"), 1, "batch-host"),  # a one-node job
    (("srun", "-N1"), 2, None), (("srun", "-w", "<unknown:scontrol>"), 2, None), (("srun", "-w", "n[1-2]"), 2, None),
    (("srun", "--relative=1"), 2, "job-node-1"), (("srun", "-r", "0"), 2, "batch-host"),
    (("ssh", "user@10.0.0.5"), None, "10.0.0.5"), (("ssh", "$HOST"), None, "$HOST"),
])
def test_the_node_an_engine_runs_on(wrapper, job_nodes, node):
    assert _node(wrapper, job_nodes) == node


def test_srun_export_sets_the_engine_environment():
    srun = ["-N1", "--export=ALL,CUDA_VISIBLE_DEVICES=0,1,VLLM_NIXL_SIDE_CHANNEL_PORT=5557", "--overlap"]
    assert _export(srun, {"A": "1"}) == {"A": "1", "CUDA_VISIBLE_DEVICES": "0,1", "VLLM_NIXL_SIDE_CHANNEL_PORT": "5557"}
    assert _export(["--export=NONE,B=2"], {"A": "1"}) == {"B": "2"}
    assert _export(["-N1"], {"A": "1"}) == {"A": "1"}


def test_a_node_s_gpus_are_read_from_device_lists_only_where_every_engine_writes_one():
    assert _least_gpus([Launch(("vllm", "serve"), {"CUDA_VISIBLE_DEVICES": "0,1"}),
                        Launch(("vllm", "serve"), {"CUDA_VISIBLE_DEVICES": "3"})]) == 4
    assert _least_gpus([Launch(("vllm", "serve"), {"CUDA_VISIBLE_DEVICES": "0"}), Launch(("vllm", "serve"))]) is None


_ESCAPED_KV_P = KV_P.replace('"', '\\"')  # inside the double quotes of bash -c "..."


def test_srun_around_bash_c_gives_its_options_and_line_to_the_engine():
    script = f"""#!/bin/bash
srun -w node7 --export=ALL,X=1 bash -c "vllm serve m --kv-transfer-config '{_ESCAPED_KV_P}'" &
"""
    (launch,) = launches(script)
    assert launch.line == 2 and launch.wrapper[:3] == ("srun", "-w", "node7"), launch
    engines, _ = script_engines("job.sh", script)
    assert [e.where for e in engines] == ["job.sh (shell script) line 2"]


def test_other_formats_and_scripts_without_kv_transfer_are_not_read():
    assert script_engines("u.service", "[Service]\nExecStart=vllm serve m --kv-transfer-config '{}'\n") is None
    assert script_engines("a.sh", "#!/bin/bash\nvllm serve m --port 8000 &\n") is None
