"""The kind of checker fault the sixtieth held-out set (tests/unit/data/public_reports_60) found, with variants
beyond its entries (other releases, installers, wheel names, script formats).

- A shell or Slurm batch script that installs a NIXL wheel (``pip install nixl==X``, ``nixl-cu12``, ``nixl[cu12]``,
  ``uv pip``) before it starts its engines: that wheel is the NIXL every engine it starts loads, as its
  ``pip install vllm==X`` gives their vLLM. The script reader dropped the line, so ``nixl-version-known-bad`` never
  saw NIXL 0.5.1 under vLLM >= 0.11.0, whose NIXL worker builds ``nixl_agent_config(num_threads=...)`` where every
  backend is UCX (vLLM 0.11.1 nixl_connector.py lines 813-831, 0.13.0 the same), an argument NIXL 0.5.1 lacks: the
  engines do not start (:func:`pdd_operator.compat.script_inputs._nixl_pin`). An image an ``srun
  --container-image=`` names is not reached by the batch host's pip; a pin after the engines started, or in a
  comment, is not read.
"""

from __future__ import annotations

import pytest

from .test_script_inputs import KV_BOTH, KV_D, KV_P, _check, _errors

RULE = "nixl-version-known-bad"


def _pair(install: str, vllm: str = "0.11.1", kv_p: str = KV_P, kv_d: str = KV_D, after: str = "") -> str:
    """Two engines of one host behind one install line (``install``: the NIXL part of it)."""
    return f"""#!/bin/bash
pip install vllm=={vllm} {install}
CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve Qwen/Qwen3-8B --port 8100 \\
    --kv-transfer-config '{kv_p}' &
CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve Qwen/Qwen3-8B --port 8200 \\
    --kv-transfer-config '{kv_d}' &
{after}
"""


@pytest.mark.parametrize(("install", "vllm", "kv"), [
    ("nixl==0.5.1", "0.11.1", (KV_P, KV_D)),                       # the set's entry
    ("nixl==0.5.1", "0.11.1", (KV_BOTH, KV_BOTH)),                 # kv_both on both (judged both ways round)
    ('"nixl[cu12]==0.5.1"', "0.13.0", (KV_P, KV_D)),               # the extras spelling, a later release
    ("nixl-cu12==0.4.1", "0.12.0", (KV_P, KV_D)),                  # the CUDA wheel, ray#57201's NIXL
])
def test_a_scripts_nixl_pin_reaches_its_engines(tmp_path, capsys, install, vllm, kv):
    code, out = _check(tmp_path, capsys, _pair(install, vllm, *kv))
    assert code == 1 and RULE in _errors(out), out


def test_uv_pip_on_its_own_line(tmp_path, capsys):
    text = _pair("", "0.11.0").replace("pip install vllm==0.11.0 \n", "pip install vllm==0.11.0\nuv pip install nixl==0.5.1\n")
    code, out = _check(tmp_path, capsys, text)
    assert code == 1 and RULE in _errors(out), out


@pytest.mark.parametrize("install", ["nixl==0.7.1", "nixl==0.6.0", ""])
def test_a_good_or_no_nixl_pin_is_no_error(tmp_path, capsys, install):
    code, out = _check(tmp_path, capsys, _pair(install))
    assert RULE not in _errors(out), out


def test_nixl_before_num_threads_under_a_release_that_does_not_pass_it(tmp_path, capsys):
    """vLLM 0.10.2 builds NixlWrapper(name, None) (nixl_connector.py line 437): no num_threads, NIXL 0.5.1 starts."""
    code, out = _check(tmp_path, capsys, _pair("nixl==0.5.1", "0.10.2"))
    assert RULE not in _errors(out), out


def test_a_commented_or_late_pin_is_not_read(tmp_path, capsys):
    commented = _pair("", "0.11.1").replace("pip install vllm==0.11.1 \n",
                                            "pip install vllm==0.11.1\n# pip install nixl==0.5.1\n")
    code, out = _check(tmp_path, capsys, commented)
    assert RULE not in _errors(out), out
    late = _pair("", "0.11.1", after="pip install nixl==0.5.1")
    code, out = _check(tmp_path, capsys, late)
    assert RULE not in _errors(out), out


def _slurm(image: str) -> str:
    srun = f"srun --container-image={image} " if image else "srun "
    return f"""#!/bin/bash
#SBATCH -N 1
#SBATCH --gpus-per-node=2
pip install vllm==0.13.0 nixl==0.5.1
CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 {srun}vllm serve Qwen/Qwen3-8B --port 8100 \\
    --kv-transfer-config '{KV_P}' &
CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 {srun}vllm serve Qwen/Qwen3-8B --port 8200 \\
    --kv-transfer-config '{KV_D}' &
wait
"""


def test_slurm_batch_script_without_a_container_image(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _slurm(""), "job.sbatch")
    assert code == 1 and RULE in _errors(out), out


def test_a_container_image_is_not_reached_by_the_batch_hosts_pip(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _slurm("vllm/vllm-openai:v0.13.0"), "job.sbatch")
    assert RULE not in _errors(out), out
