"""Where the operator's memory goes, by package: a tracemalloc report for ``pdd run`` (diagnostics).

With ``PDD_TRACEMALLOC=<frames>`` in its environment, ``pdd run`` starts :mod:`tracemalloc` once its
modules are imported (the imports are a fixed floor, and tracing them takes minutes), keeping
``<frames>`` frames per allocation (tracing slows Python down several times: a measurement, never a
production setting). On ``SIGUSR1`` it writes
:func:`report` of a snapshot to ``PDD_TRACEMALLOC_OUT`` (default ``pdd-tracemalloc.json`` in the
working directory).

Each live allocation is charged to the innermost frame of its traceback that lies in a known
package (:data:`PACKAGES`): a ``json.loads`` called from the caches counts for ``pdd_operator``, a
dict built by kopf's watcher for ``kopf``. Allocations with no such frame are ``other`` (the
interpreter, the standard library on its own, imports).
"""

from __future__ import annotations

import json
import os
import signal
import tracemalloc
from collections.abc import Iterable
from pathlib import Path

#: Packages whose share is reported, by the path fragment that marks their files.
PACKAGES = {"pdd_operator": "/pdd_operator/", "kopf": "/kopf/", "kubernetes": "/kubernetes/",
            "aiohttp": "/aiohttp/", "urllib3": "/urllib3/", "pydantic": "/pydantic", "yaml": "/yaml/",
            "prometheus_client": "/prometheus_client/"}


def package_of(filenames: Iterable[str]) -> str:
    """The package charged for an allocation whose traceback has ``filenames``, innermost first."""
    for filename in filenames:
        for package, marker in PACKAGES.items():
            if marker in filename:
                return package
    return "other"


def shares(snapshot: tracemalloc.Snapshot) -> dict[str, int]:
    """Bytes of live allocations per package (:func:`package_of`), largest first."""
    out: dict[str, int] = {}
    for stat in snapshot.statistics("traceback"):
        # tracemalloc keeps the most recent frame last: walk from the innermost outwards.
        package = package_of(frame.filename for frame in reversed(stat.traceback))
        out[package] = out.get(package, 0) + stat.size
    return dict(sorted(out.items(), key=lambda item: -item[1]))


def report(snapshot: tracemalloc.Snapshot, top: int = 15) -> dict:
    """``{"traced_bytes", "by_package": {package: bytes}, "top": [[where, bytes], ...]}``: the totals and
    the ``top`` allocation sites (file:line of the innermost frame)."""
    sites = snapshot.statistics("lineno")[:top]
    return {"traced_bytes": sum(s.size for s in snapshot.statistics("filename")), "by_package": shares(snapshot),
            "top": [[f"{s.traceback[0].filename}:{s.traceback[0].lineno}", s.size] for s in sites]}


def start_from_env(environ: dict[str, str] | os._Environ = os.environ) -> bool:
    """Start tracing and install the ``SIGUSR1`` handler when ``PDD_TRACEMALLOC`` is set (see the module
    docstring); True when it did. Raises ``ValueError`` when the value is not a positive integer."""
    raw = environ.get("PDD_TRACEMALLOC")
    if not raw:
        return False
    frames = int(raw)
    if frames < 1:
        raise ValueError(f"PDD_TRACEMALLOC must be a positive number of frames, got {raw!r}")
    out = Path(environ.get("PDD_TRACEMALLOC_OUT", "pdd-tracemalloc.json"))
    tracemalloc.start(frames)

    def dump(_signum, _frame) -> None:
        out.write_text(json.dumps(report(tracemalloc.take_snapshot()), indent=1))

    signal.signal(signal.SIGUSR1, dump)
    return True
