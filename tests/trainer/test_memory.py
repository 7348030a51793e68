"""The learner process's memory: freed heap pages go back to the system between phases
(`trainer.metrics.release_free_memory`), and each phase's peak RSS is its own (`PeakRSS`)."""

import sys

import numpy as np
import pytest

from trainer.metrics import PeakRSS, release_free_memory, resident_gb


def _rss_mb() -> float:
    return resident_gb() * 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim and /proc are Linux's")
def test_freed_heap_pages_go_back_to_the_system():
    # 150k small arrays come from malloc's heap (under its mmap threshold); one allocated after
    # them pins the heap's top, so free() alone cannot hand the pages below it back
    chunks = [np.ones(128) for _ in range(150_000)]  # ~150 MB
    pin = np.ones(128)
    del chunks
    before = _rss_mb()
    assert release_free_memory()
    after = _rss_mb()
    assert before - after > 60, (before, after)
    del pin


def test_each_phase_peak_starts_from_the_reset():
    rss = PeakRSS()
    if not rss.resettable:
        pytest.skip("this kernel does not allow resetting the RSS high-water mark")
    big = np.ones(40_000_000)  # 320 MB, touched
    first = rss.read_gb()
    del big
    rss.reset()
    assert rss.read_gb() < first - 0.2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_resident_memory_follows_what_is_touched():
    before = resident_gb()
    big = np.ones(40_000_000)  # 320 MB, touched
    assert resident_gb() - before > 0.25
    del big
