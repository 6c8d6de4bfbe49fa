"""The "input not read" kind of the unbiased sets 129 and 130 (issue 9, fix K): P/D deployments the checker took for
no deployment at all (exit 4, nothing to check).

- A README named by itself was only searched for ``docker build`` lines: its commands (shell code blocks, one-command
  steps) are read now, as a script (:func:`pdd_operator.compat.markdown_inputs.markdown_commands`).
- A launcher of its own run with vLLM's engine options (``python3 prefill_worker.py --model M ... --kv-transfer-config
  '{...}'``, triton-inference-server/triton_distributed's workers, which hand them to ``AsyncEngineArgs``) is read as
  the in-process vLLM engine with those options (:func:`pdd_operator.vllm.script.launcher_engine`), the release from
  the file's ``pip install vllm==X`` (or a container's image); options the launcher adds itself stay unread.
- ``v0-pynccl-kv-rank`` judges 0.7.0-0.8.x too (PyNcclPipe's rank-0-listens group is the same code there).
- Whatever shows a P/D deployment whose engines cannot be read (programs named for prefill and decode, a served
  Dynamo SDK disaggregated graph, a chart preset naming NIXL) is "not checked", naming it
  (:func:`pdd_operator.compat.manifests.pd_signal`); prose that only mentions P/D, a lone engine, and the llm-d
  simulator preset stay nothing to check.
"""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.cli import main
from pdd_operator.compat.manifests import pd_signal
from pdd_operator.compat.markdown_inputs import markdown_commands
from pdd_operator.vllm.script import launcher_engine
from tests.unit.cli_check import check_text

MODEL = "deepseek-ai/DeepSeek-R1-Distill-Llama-8B"


def _kv(role: str, rank: int | None, connector: str = "PyNcclConnector") -> str:
    kv = {"kv_connector": connector, "kv_role": role, "kv_parallel_size": 2}
    if rank is not None:
        kv["kv_rank"] = rank
    return json.dumps(kv, separators=(",", ":"))


def _worker(program: str, gpu: int, role: str, rank: int | None, model: str = MODEL, env: str = "",
            extra: str = "") -> str:
    return (f"{env}CUDA_VISIBLE_DEVICES={gpu} python3 {program} \\\n    --model {model} \\\n    --max-model-len 100 \\\n"
            f"    --gpu-memory-utilization 0.8 \\\n    --enforce-eager {extra}\\\n    --kv-transfer-config \\\n"
            f"    '{_kv(role, rank)}'\n")


def _readme(pin: str = "vllm==0.7.0", ranks: tuple = (0, 1), env: str = "", model: str = MODEL,
            programs: tuple[str, str] = ("prefill_worker.py", "decode_worker.py"), extra: str = "") -> str:
    return ("# vLLM disaggregated prefill\n\nInstall:\n```bash\nuv pip install " + pin + "\n```\n\n"
            "**Terminal 1 - Prefill Worker:**\n```bash\n" + _worker(programs[0], 0, "kv_producer", ranks[0], model, env,
                                                                   extra)
            + "```\n\n**Terminal 2 - Decode Worker:**\n```bash\n"
            + _worker(programs[1], 1, "kv_consumer", ranks[1], model, env, extra)
            + "```\n\nThe output:\n```\nAnnotated(data=' Well', event=None)\n```\n")


def _check(tmp_path, capsys, text: str, name: str = "README.md") -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, name)


def _errors(out: dict) -> set[str]:
    return {f["rule"] for r in out["results"] for f in r["findings"] if f["severity"] == "error"}


def _reasons(out: dict) -> str:
    return " ".join(s["reason"] for s in out["notChecked"])


# --- launchers read as engines --------------------------------------------------------------------------------------

def test_launcher_engine_reads_engine_options_only():
    words = ["python3", "prefill_worker.py", "--model", "m", "--max-model-len", "100", "--port", "8100",
             "--enforce-eager", "--kv-transfer-config", "{}"]
    assert launcher_engine(words) == (0, ["vllm", "serve", "m", "--max-model-len", "100", "--enforce-eager",
                                          "--kv-transfer-config", "{}"])
    # mostly the launcher's own options: not taken for vLLM's
    assert launcher_engine(["python3", "w.py", "--namespace", "a", "--component", "b", "--endpoint", "c", "--model",
                            "m", "--kv-transfer-config", "{}"]) is None
    # no KV transfer: not a P/D engine launcher
    assert launcher_engine(["python3", "w.py", "--model", "m", "--max-model-len", "100", "--enforce-eager"]) is None
    # a module run with -m is not a program file of its own (read elsewhere)
    assert launcher_engine(["python3", "-m", "pkg.w", "--model", "m", "--enforce-eager", "--dtype", "half",
                            "--kv-transfer-config", "{}"]) is None


@pytest.mark.parametrize("pin", ["vllm==0.7.0", "vllm==0.7.3", "vllm==0.8.5"])
def test_readme_launchers_read_as_engines_of_the_pinned_release(tmp_path, capsys, pin):
    """As published (ranks 0/1): the two workers are read as a pair of the pinned release, never nothing to check
    (exit 4); since fix M the V0 PyNccl pair of a release before 0.9.0 is judged by the rules read back to it (ok,
    exit 0, the others named in vllm-version-unverified)."""
    env = "VLLM_USE_V1=0 " if pin == "vllm==0.8.5" else ""
    code, out = _check(tmp_path, capsys, _readme(pin, env=env))
    assert code == 0, out
    assert not _errors(out), out
    assert out["results"] and "README.md" in out["results"][0]["object"] and "line" in out["results"][0]["object"], out


@pytest.mark.parametrize("pin,ranks,env", [
    ("vllm==0.7.0", (0, 0), ""),                # the decode's rank copied from the prefill's
    ("vllm==0.7.3", (1, 1), ""),                # neither rank 0: nobody listens
    ("vllm==0.7.0", (None, None), ""),          # kv_rank unset on both
    ("vllm==0.8.5", (0, 0), "VLLM_USE_V1=0 "),  # 0.8.x: the V0 engine only with VLLM_USE_V1=0
    ("vllm==0.8.0", (0, 0), "VLLM_USE_V1=0 "),
])
def test_pynccl_kv_rank_before_0_9(tmp_path, capsys, pin, ranks, env):
    code, out = _check(tmp_path, capsys, _readme(pin, ranks, env, model="Qwen/Qwen2.5-7B-Instruct"))
    assert code == 1, out
    assert _errors(out) == {"v0-pynccl-kv-rank"}, out


@pytest.mark.parametrize("pin,env", [
    ("vllm==0.7.0", "VLLM_USE_V1=1 "),  # the V1 engine: no PyNcclPipe built by this path
    ("vllm==0.8.5", ""),                # V1 by default from 0.8.0, fallback not read: not judged
    ("vllm==0.6.6", ""),                # before the first release read
])
def test_pynccl_kv_rank_not_judged_outside_its_engine(tmp_path, capsys, pin, env):
    code, out = _check(tmp_path, capsys, _readme(pin, (0, 0), env))
    assert "v0-pynccl-kv-rank" not in _errors(out), out
    assert code in (1, 3), out


def test_launcher_in_a_shell_script_with_its_own_options(tmp_path, capsys):
    """The same launchers in a script, with options the launcher adds itself (--port, --worker-name): those stay
    unread, the engine options are judged."""
    text = ("#!/bin/bash\npip install vllm==0.7.0\n"
            + _worker("prefill.py", 0, "kv_producer", 0, extra="--port 8100 ").rstrip("\n") + " &\n"
            + _worker("decode.py", 1, "kv_consumer", 0, extra="--worker-name d0 "))
    code, out = _check(tmp_path, capsys, text, "launch.sh")
    assert code == 1 and _errors(out) == {"v0-pynccl-kv-rank"}, out


def test_launchers_on_a_release_read_are_judged(tmp_path, capsys):
    """0.9.0's V0 engine (VLLM_USE_V1=0) runs the PyNccl pair, kv ranks 0/1: judged, nothing fails."""
    code, out = _check(tmp_path, capsys, _readme("vllm==0.9.0", env="VLLM_USE_V1=0 "))
    assert not _errors(out), out
    assert out["results"] and all(r["vllmVersion"] == "0.9.0" for r in out["results"]), out


# --- P/D signals without engines: not checked ----------------------------------------------------------------------

@pytest.mark.parametrize("text,name,seen", [
    ("## Run\n\n```\ncd examples/vllm_nixl\nCUDA_VISIBLE_DEVICES=0,1 python prefill.py\n```\n\n```\n"
     "CUDA_VISIBLE_DEVICES=2,3 python decode.py\n```\n", "README.md", "prefill.py and decode.py"),
    ("1. `cd examples/llm`\n2. `compoundai serve disaggregated.client:Client`\n", "README.md",
     "disaggregated.client:Client"),
    ("#!/bin/bash\ncd examples/llm\ndynamo serve graphs.disagg:Frontend -f ./configs/disagg.yaml\n", "run.sh",
     "graphs.disagg:Frontend"),
    ("#!/bin/bash\npython3 -m workers.prefill_worker --model m &\npython3 -m workers.decode_worker --model m\n",
     "run.sh", "workers.prefill_worker and workers.decode_worker"),
])
def test_pd_deployment_without_engines_is_not_checked(tmp_path, capsys, text, name, seen):
    code, out = _check(tmp_path, capsys, text, name)
    assert code == 3, out
    assert seen in _reasons(out), out


@pytest.mark.parametrize("preset,code", [
    ("basic-gpu-with-nixl-preset", 3),
    ("basic-gpu-with-nixl-and-redis-lookup-preset", 3),
    ("basic-sim-preset", 4),   # the simulator: no engine, nothing to check
    ("basic-gpu-preset", 4),   # names no KV transfer
])
def test_llmd_deployer_values_preset(tmp_path, capsys, preset, code):
    values = (f"sampleApplication:\n  enabled: true\n  baseConfigMapRefName: {preset}\n  model:\n"
              "    modelArtifactURI: hf://Qwen/Qwen3-0.6B\n    modelName: Qwen/Qwen3-0.6B\n"
              "  prefill:\n    replicas: 1\n  decode:\n    replicas: 2\n")
    got, out = _check(tmp_path, capsys, values, "values.yaml")
    assert got == code, out
    if code == 3:
        assert preset in _reasons(out), out


@pytest.mark.parametrize("text,name", [
    # prose that only mentions P/D
    ("# Disaggregated prefill\n\nvLLM can run prefill and decode in separate instances with a KV connector "
     "(kv_role kv_producer / kv_consumer), see the docs.\n", "README.md"),
    # a lone, aggregated engine
    ("Run:\n```bash\npip install vllm==0.9.0\nvllm serve Qwen/Qwen3-0.6B --port 8000\n```\n", "README.md"),
    # programs that name neither role
    ("#!/bin/bash\npython preprocess.py --input data\npython train.py --epochs 3\n", "run.sh"),
    # a Python block in a README is not run as shell
    ("```python\nimport subprocess\nsubprocess.run(['python', 'prefill.py'])\nsubprocess.run(['python', 'decode.py'])\n"
     "```\n", "README.md"),
])
def test_nothing_to_check_stays(tmp_path, capsys, text, name):
    code, _ = _check(tmp_path, capsys, text, name)
    assert code == 4


def test_readme_in_a_folder_is_no_input(tmp_path, capsys):
    """READMEs found in a folder only tie image tags to Dockerfiles, as before: a folder of them alone is an input
    error, not a launcher."""
    (tmp_path / "README.md").write_text(_readme())
    assert main(["check", str(tmp_path)]) == 2


def test_markdown_commands_keep_line_numbers():
    text = "# t\n\n```bash\nvllm serve m\n```\n\n```yaml\nkind: Pod\n```\n3. `python prefill.py`\n"
    script = markdown_commands(text)
    assert script is not None
    lines = script.splitlines()
    assert lines[3] == "vllm serve m" and lines[9] == "python prefill.py" and lines[7] == ""
    assert markdown_commands("# only prose about prefill and decode\n") is None


def test_pd_signal_phrases():
    assert pd_signal("python prefill_worker.py --model m\npython decode_worker.py --model m\n") == (
        "it runs prefill_worker.py and decode_worker.py")
    assert pd_signal("# python prefill.py\n# python decode.py\n") is None  # comments are not read
    assert pd_signal("baseConfigMapRefName: basic-sim-preset\n") is None
    assert pd_signal("python prefill.py\n") is None  # one role only


def _pod(role: str, rank: int, image: str = "vllm/vllm-openai:v0.9.0") -> dict:
    kv = _kv("kv_producer" if role == "prefill" else "kv_consumer", rank)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": role, "labels": {"role": role}}, "spec": {
        "containers": [{"name": "w", "image": image, "env": [{"name": "VLLM_USE_V1", "value": "0"}],
                        "command": ["python3", f"{role}_worker.py", "--model", "Qwen/Qwen3-8B", "--max-model-len",
                                    "4096", "--enforce-eager", "--worker-id", role, "--kv-transfer-config", kv],
                        "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}


@pytest.mark.parametrize("ranks,code,rules", [((0, 1), 0, set()), ((0, 0), 1, {"v0-pynccl-kv-rank"})])
def test_launcher_as_a_container_command(tmp_path, capsys, ranks, code, rules):
    """A container whose command is such a launcher (before: nothing to check, exit 4) is read as the engine."""
    text = yaml.safe_dump_all([_pod("prefill", ranks[0]), _pod("decode", ranks[1])])
    got, out = _check(tmp_path, capsys, text, "pods.yaml")
    assert got == code and _errors(out) == rules, out
    assert out["results"] and out["results"][0]["vllmVersion"] == "0.9.0", out
