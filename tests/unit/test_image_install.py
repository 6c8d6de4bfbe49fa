"""The operator image's install step, run here exactly as images/operator/Dockerfile runs it (no
container engine exists on these machines): a build context with only what the Dockerfile COPYs, a
clean Python prefix, the Dockerfile's own ``pip install`` arguments, then its smoke command and the
chart's entry point (``pdd run --help``) from that prefix."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import venv

import pytest

from tests.helpers import ROOT

DOCKERFILE = ROOT / "images" / "operator" / "Dockerfile"


def dockerfile_steps() -> tuple[list[list[str]], list[str]]:
    """The COPY source lists and the ``pip install`` arguments of the Dockerfile's RUN."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    copies = [line.split()[1:-1] for line in text.splitlines() if line.startswith("COPY ")]
    run = next(line for line in text.splitlines() if line.startswith("RUN "))
    pip = next(part for part in run[4:].split("&&") if "pip install" in part)
    return copies, shlex.split(pip)[2:]  # after "pip install"


@pytest.mark.timeout(900)
def test_package_installs_into_a_clean_prefix_as_the_dockerfile_does(tmp_path):
    copies, pip_args = dockerfile_steps()
    assert "." in pip_args and any(a.startswith("uvloop==") for a in pip_args)
    context = tmp_path / "context"
    context.mkdir()
    for sources in copies:
        for src in sources:
            path = ROOT / src
            if path.is_dir():
                shutil.copytree(path, context / src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
            else:
                shutil.copy2(path, context / src)
    prefix = tmp_path / "prefix"
    venv.create(prefix, with_pip=True)
    # As in the image: nothing but the installed package on the path (a PYTHONPATH of the caller's checkout would
    # hide a package that lacks a module).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    py = prefix / "bin" / "python"
    proc = subprocess.run([str(py), "-m", "pip", "install", "--quiet", *pip_args], cwd=context, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    pdd = prefix / "bin" / "pdd"
    for args in (["--help"], ["run", "--help"], ["rbac", "--no-webhook"], ["crd"]):
        out = subprocess.run([str(pdd), *args], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
        assert out.returncode == 0, (args, out.stderr)
    # Package data (pins.json) and the modules `pdd run` imports came along; nothing is read from the checkout.
    code = ("import pdd_operator, pdd_operator.controller.handlers, pdd_operator.controller.webhook_certs, uvloop;"
            "from pdd_operator.pins import pins; print(pdd_operator.__file__, pins()['vllm'])")
    out = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(str(prefix)) and re.search(r" \d+\.\d+\.\d+$", out.stdout.strip())
    assert sys.prefix != str(prefix)
