"""The operator's memory: handing freed heap back to the OS after a burst (:func:`release`), and where
it goes, by package: a tracemalloc report for ``pdd run`` (diagnostics).

**Why release.** At a restart kopf lists every watched object and runs a worker per object (in
pages, with workers ended soon after, since 2026-12-02: ``handlers.memory_settings``, which lowered
the peak itself); once they are processed, what stays live is small (a traced restart with 300 PDDeployments, 3,600
watched objects: 17 MiB of Python allocations, 3 MiB of them kopf's) but glibc keeps the freed peak
in the process (RSS 202-225 MB against 143 MB for the same objects created one by one; bench/README.md).
:func:`release` runs the garbage collector and glibc's ``malloc_trim(0)``, which returns every free
page of the heap to the kernel, not only its top (glibc >= 2.8, ``man 3 malloc_trim``). That reaches
Python's small objects only with ``PYTHONMALLOC=malloc`` (the chart sets it): Python's own allocator
(pymalloc) keeps them in 1 MiB arenas that go back only when entirely empty, which after a peak
they rarely are (300 PDDeployments: 6 MB released with pymalloc, 70 MB with malloc).
The chart (and the operator image) also capped glibc at 2 malloc arenas (``MALLOC_ARENA_MAX=2``): by
default every thread that allocates may get an arena of its own, up to 8 per core, and each keeps
fragments of a restart's peak that ``malloc_trim`` cannot return (a restart with 1,100 PDDeployments:
RSS 143-150 MB against 168-170 MB with glibc's default, the restart 2-6 s slower; bench/README.md).
Since 2026-12-07 (issue 11, RSS at 1,000 PDDeployments) the settings are :data:`ALLOCATOR_ENV`:

- **one arena** (``MALLOC_ARENA_MAX=1``): every thread allocates from the main heap. The threads that
  allocate at once are few (Python holds the GIL; zlib, TLS and socket reads release it), and a second
  arena's heap kept its own fragments of a burst, which ``malloc_trim`` returns only where whole pages
  are free;
- **large blocks always from mmap** (``MALLOC_MMAP_THRESHOLD_=131072``, glibc's default threshold, but
  fixed): by default glibc raises the threshold to the size of each mmapped block freed (up to 32 MiB;
  ``man 3 mallopt``), so after the first large block (a list page, a large answer) the later ones are
  carved from the heap, and small objects that the caches keep, made meanwhile, can land between them
  and keep their pages resident after the block is freed. Fixed, a block of 128 KiB or more is mapped and
  unmapped on its own. Setting it also stops the dynamic trim threshold; the heap is trimmed by
  :func:`release` anyway. (The mechanism is glibc's documented one; what was measured is the RSS.)

Measured with ``bench/bench_memory.py`` and ``bench/bench_scale.py`` at 1,000 PDDeployments
(bench/README.md, issue 11, 2026-12-07, 22:50).

With ``PDD_TRACEMALLOC=<frames>`` in its environment, ``pdd run`` starts :mod:`tracemalloc` once its
modules are imported (the imports are a fixed floor, and tracing them takes minutes), keeping
``<frames>`` frames per allocation (tracing slows Python down several times: a measurement, never a
production setting). On ``SIGUSR1`` it writes
:func:`report` of a snapshot to ``PDD_TRACEMALLOC_OUT`` (default ``pdd-tracemalloc.json`` in the
working directory); with ``PDD_TRACEMALLOC_PEAK_OUT`` it also keeps the report of the largest traced
memory seen there (polled twice a second).

Each live allocation is charged to the innermost frame of its traceback that lies in a known
package (:data:`PACKAGES`): a ``json.loads`` called from the caches counts for ``pdd_operator``, a
dict built by kopf's watcher for ``kopf``. Allocations with no such frame are ``other`` (the
interpreter, the standard library on its own, imports).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import json
import logging
import os
import signal
import threading
import time
import tracemalloc
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

#: The C allocator's settings ``pdd run`` is started with, in its environment (glibc reads them when the
#: process starts): the chart's Deployment, the operator image and the benches set exactly these
#: (``tests/unit/test_memory.py`` holds them to it). See the module docstring for each.
ALLOCATOR_ENV = {"PYTHONMALLOC": "malloc", "MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": "131072"}

#: ``PDD_MALLOC_TRIM=0`` turns :func:`release` off (to measure what it saves; bench/bench_memory.py).
TRIM = os.environ.get("PDD_MALLOC_TRIM", "1") != "0"


def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def rss_bytes() -> int | None:
    """This process's resident set size (``VmRSS`` of ``/proc/self/status``) in bytes; None without /proc."""
    try:
        for line in open("/proc/self/status", encoding="ascii"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def release() -> int | None:
    """Collect garbage, then hand the heap's free pages back to the kernel (``malloc_trim(0)``).

    Returns the bytes of RSS given back (may be 0), or None when it did nothing (``PDD_MALLOC_TRIM=0``,
    no glibc). Cost: a few milliseconds; other threads' ``malloc`` calls wait meanwhile."""
    trim = _malloc_trim() if TRIM else None
    if trim is None:
        return None
    before = rss_bytes()
    gc.collect()
    trim(0)
    after = rss_bytes()
    freed = (before - after) if before is not None and after is not None else 0
    log.info("released %.1f MB of freed heap to the OS (RSS %.0f MB)", freed / 1e6, (after or 0) / 1e6)
    return freed


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
    return {"traced_bytes": sum(s.size for s in snapshot.statistics("filename")),
            "peak_bytes": tracemalloc.get_traced_memory()[1] if tracemalloc.is_tracing() else None,
            "by_package": shares(snapshot),
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
    peak_out = environ.get("PDD_TRACEMALLOC_PEAK_OUT")
    if peak_out:
        threading.Thread(target=_keep_peak, args=(Path(peak_out),), name="tracemalloc-peak", daemon=True).start()
    return True


def _keep_peak(out: Path, interval: float = 0.5, margin: float = 1.05) -> None:
    """Every ``interval`` seconds, when the traced memory is ``margin`` times the largest seen so far,
    write :func:`report` of a snapshot to ``out``: what was live at (about) the peak
    (``PDD_TRACEMALLOC_PEAK_OUT``)."""
    best = 0
    while True:
        time.sleep(interval)
        current, _ = tracemalloc.get_traced_memory()
        if current > best * margin:
            best = current
            out.write_text(json.dumps(report(tracemalloc.take_snapshot()), indent=1))
