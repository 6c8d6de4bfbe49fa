"""The CPU sampler behind ``PDD_PROFILE`` (controller/profiling.py): a thread's CPU goes to the functions on its stack."""

from __future__ import annotations

import threading
import time

from pdd_operator.controller import profiling


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(range(200))


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def test_a_thread_s_cpu_is_charged_to_the_functions_on_its_stack_and_waiting_to_none():
    sampler = profiling.Sampler(interval=0.001)
    sampler.start()
    threads = [threading.Thread(target=_spin, args=(0.3,)), threading.Thread(target=_sleep, args=(0.3,))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sampler.stop()
    spun = sum(v for k, v in sampler.inclusive.items() if k.endswith(":_spin"))
    slept = sum(v for k, v in sampler.inclusive.items() if k.endswith(":_sleep"))
    assert spun > 0.1  # most of its 0.3 s of CPU (the first sample of a thread only starts its clock)
    assert slept < 0.05
    assert sampler.total >= spun
    report = sampler.report(top=5)
    assert report.startswith("sampled CPU ") and ":_spin" in report


def test_off_without_the_variable():
    assert profiling.start_from_env({}) is None
