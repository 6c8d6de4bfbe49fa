"""``PDD_PROFILE=<path>``: where the operator process's CPU goes, by function, for finding what a burst costs it.

With the variable set, ``pdd run`` starts a sampler thread that every ``PDD_PROFILE_INTERVAL`` seconds
(default 0.005) reads each thread's CPU clock (``pthread_getcpuclockid``) and its Python stack
(``sys._current_frames``) and charges the CPU the thread used since the last sample to every function on
that stack (inclusive) and to the innermost one (self). A thread only changes hands at a switch interval or
when it waits (the GIL), so a sample lands where a thread was stopped: the CPU a thread used since the last
sample is charged to where it stopped, often the blocking call after the work (an SSL read, a zlib call that
releases the GIL). Inclusive shares of the operator's own functions (a reconcile, a request, a watch) are
what to read; self shares of blocking calls are inflated by the work before them. :mod:`cProfile` was tried
first and is misleading here: it slows every Python call several times, deep pure-Python calls most (the
rule checks and rendering looked three times their real share), and its statistics taken while other
threads wait charge their waits with the dumping thread's clock.

The sampler's own thread is not in the report, and it is not free: at a 2 ms interval it used about as much
CPU as the operator it sampled during a burst of 200 PDDeployments (bench/README.md); compare shares within
one report, and CPU per object only from runs without it. :meth:`Sampler.report` is written to ``<path>``
(text: the top functions, inclusive and self, CPU seconds and share of all sampled CPU) at exit and on
``SIGUSR2``. Off by default.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import FrameType


class Sampler:
    """Charges each thread's CPU (its clock since the last sample) to the functions on its stack."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.inclusive: Counter[str] = Counter()
        self.self_: Counter[str] = Counter()
        self.total = 0.0
        self._last: dict[int, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def where(frame: FrameType) -> str:
        """``<module path from the package or site-packages>:<function>`` of ``frame``."""
        path = frame.f_code.co_filename
        for marker in ("site-packages/", "pdd_operator/"):
            if marker in path:
                path = path.split(marker, 1)[1]
                break
        else:
            path = path.rsplit("/", 1)[-1]
        return f"{path}:{frame.f_code.co_name}"

    def sample(self) -> None:
        """Charge every thread's CPU since its last sample to its current stack."""
        me = threading.get_ident()
        frames = sys._current_frames()  # noqa: SLF001  (the documented way to see other threads' stacks)
        with self._lock:
            for ident, frame in frames.items():
                if ident == me:
                    continue
                try:
                    now = time.clock_gettime(time.pthread_getcpuclockid(ident))
                except OSError:  # the thread ended meanwhile
                    continue
                spent = now - self._last.get(ident, now)
                self._last[ident] = now
                if spent <= 0:
                    continue
                self.total += spent
                self.self_[self.where(frame)] += spent
                seen: set[str] = set()
                f: FrameType | None = frame
                while f is not None:
                    name = self.where(f)
                    if name not in seen:
                        seen.add(name)
                        self.inclusive[name] += spent
                    f = f.f_back
            for ident in set(self._last) - set(frames):
                del self._last[ident]

    def run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="cpu-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def report(self, top: int = 80) -> str:
        """The ``top`` functions by inclusive CPU, then by self CPU: seconds and share of :attr:`total`."""
        with self._lock:
            total = self.total or 1e-9
            lines = [f"sampled CPU {self.total:.2f} s", "", "inclusive:"]
            lines += [f"{s:9.3f} s {100 * s / total:5.1f}%  {name}" for name, s in self.inclusive.most_common(top)]
            lines += ["", "self:"]
            lines += [f"{s:9.3f} s {100 * s / total:5.1f}%  {name}" for name, s in self.self_.most_common(top)]
        return "\n".join(lines) + "\n"


def start_from_env(environ: dict[str, str] | os._Environ = os.environ) -> Sampler | None:
    """Start a :class:`Sampler` when ``PDD_PROFILE`` is set (see the module docstring)."""
    path = environ.get("PDD_PROFILE")
    if not path:
        return None
    sampler = Sampler(float(environ.get("PDD_PROFILE_INTERVAL", "0.005")))
    sampler.start()

    def dump(*_args) -> None:
        Path(path).write_text(sampler.report())

    atexit.register(dump)
    signal.signal(signal.SIGUSR2, dump)
    return sampler
