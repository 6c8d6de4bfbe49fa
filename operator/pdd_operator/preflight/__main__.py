"""``python -m pdd_operator.preflight``: the init container's entry point.

Writes the JSON verdict to the termination message file and to stdout. Exit code: 0 when RDMA is
ready or the policy is ``warn``; 1 otherwise (the pod does not start, and says why).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pdd_operator.preflight import run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pdd_operator.preflight", description=__doc__)
    p.add_argument("--policy", choices=["fail", "warn"], default="warn")
    p.add_argument("--min-memlock", type=int, default=1 << 30, help="bytes; an unlimited limit always passes")
    p.add_argument("--sys-root", default="/sys/class/infiniband", help="where RDMA devices are listed")
    p.add_argument("--termination-log", default="/dev/termination-log")
    args = p.parse_args(argv)
    result = run(Path(args.sys_root), args.min_memlock)
    text = result.to_json()
    print(text)
    try:
        Path(args.termination_log).write_text(text)
    except OSError as exc:
        print(f"cannot write {args.termination_log}: {exc}", file=sys.stderr)
    return 0 if result.ready or args.policy == "warn" else 1


if __name__ == "__main__":
    sys.exit(main())
