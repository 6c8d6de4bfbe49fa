"""The tracemalloc report of ``pdd run``: live memory charged to the package that allocated it."""

from __future__ import annotations

import os
import re
import tracemalloc
from pathlib import Path

import pytest

from pdd_operator.controller import memory
from pdd_operator.controller.cache import pack


def test_an_allocation_is_charged_to_the_innermost_known_package():
    assert memory.package_of(["/x/json/decoder.py", "/venv/kopf/_core/a.py", "/w/pdd_operator/cache.py"]) == "kopf"
    assert memory.package_of(["/usr/lib/python3.11/json/decoder.py"]) == "other"


def test_what_the_caches_keep_counts_for_pdd_operator():
    tracemalloc.start(25)
    try:
        # Data that does not compress (the cache keeps objects compressed: cache.pack).
        kept = [pack({"metadata": {"name": f"o-{i}", "resourceVersion": str(i)}, "data": os.urandom(1000).hex()})
                for i in range(500)]
        report = memory.report(tracemalloc.take_snapshot())
    finally:
        tracemalloc.stop()
    assert report["by_package"]["pdd_operator"] >= 500 * 1000  # 2,000 hex digits hold 1,000 random bytes
    assert report["traced_bytes"] >= sum(report["by_package"].values()) * 0.99
    assert len(kept) == 500


def test_only_a_positive_frame_count_starts_tracing():
    assert memory.start_from_env({}) is False
    with pytest.raises(ValueError):
        memory.start_from_env({"PDD_TRACEMALLOC": "0"})


def test_release_hands_a_fragmented_heap_back_to_the_os(monkeypatch):
    """The shape of a restart's peak: many objects freed, a few kept between them, so the heap cannot
    shrink from its top. ``release`` gives the free pages back; with ``PDD_MALLOC_TRIM=0`` it does not."""
    monkeypatch.setattr(memory, "TRIM", True)
    if memory._malloc_trim() is None or memory.rss_bytes() is None:
        pytest.skip("no glibc malloc_trim or no /proc here")
    memory.release()  # start from a trimmed heap
    chunks = [bytes(4000) + i.to_bytes(4, "little") for i in range(40_000)]  # ~160 MB, malloc'd (> 512 B)
    kept = chunks[::50]  # every 50th stays: the heap's top is never free
    peak = memory.rss_bytes()
    del chunks
    freed = memory.release()
    assert freed is not None and freed > 0.5 * 160e6, (freed, peak)
    assert memory.rss_bytes() < peak - 0.5 * 160e6
    assert len(kept) == 800

    monkeypatch.setattr(memory, "TRIM", False)
    assert memory.release() is None


ROOT = Path(__file__).resolve().parents[2]


def chart_env(text: str) -> dict[str, str]:
    """The literal ``- name: X`` / ``value: Y`` pairs of a Deployment template's ``env``."""
    return dict(re.findall(r"- name: (\w+)\n\s+value: \"?([^\"\n]*)\"?", text))


def dockerfile_env(text: str) -> dict[str, str]:
    """The ``KEY=value`` pairs of a Dockerfile's ``ENV`` lines."""
    return dict(pair.split("=", 1) for line in text.splitlines() if line.startswith("ENV ")
                for pair in line.split()[1:])


@pytest.mark.parametrize("where, read", [
    ("charts/pdd-operator/templates/deployment.yaml", chart_env),
    ("images/operator/Dockerfile", dockerfile_env),
])
def test_the_operator_is_started_with_the_allocator_settings(where, read):
    """The chart, the image and the benches (``bench_scale.Operator``: ``ALLOCATOR_ENV`` itself) start
    ``pdd run`` with the same C allocator settings: the RSS measured is the RSS deployed."""
    found = read((ROOT / where).read_text())
    assert {k: found.get(k) for k in memory.ALLOCATOR_ENV} == memory.ALLOCATOR_ENV


def test_the_readers_of_the_settings_read_them():
    assert chart_env('- name: A\n  value: "2"\n- name: B\n  valueFrom: {}\n- name: C\n  value: x\n') == {
        "A": "2", "C": "x"}
    assert dockerfile_env("FROM x\nENV A=1 B=two\nRUN y\n") == {"A": "1", "B": "two"}
