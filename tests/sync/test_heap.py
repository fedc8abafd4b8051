"""Returning the heap's free pages between a plan's big steps (placet.sync.heap): on
glibc the pages of freed blocks inside the heap leave the process's RSS; elsewhere it is
a no-op. And `read_listings` calls its hook once, between the two sides."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from placet.sync.heap import release_free_heap
from placet.sync.listings import read_listings
from tests.support.listings import SHA1, L, R

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's")
def test_freed_blocks_inside_the_heap_leave_the_rss() -> None:
    # 100,000 blocks of 2 KiB (above pymalloc's 512 bytes: glibc's heap), all but the
    # last 1,000 freed, so the free space is inside the heap, not at its top.
    blocks = [bytes(2048) for _ in range(100_000)]
    del blocks[:-1000]
    before = _rss_mib()
    assert release_free_heap() is True
    after = _rss_mib()
    assert before - after > 40, (before, after)  # ~194 MiB freed, most of it returned
    del blocks


@pytest.mark.skipif(GLIBC, reason="glibc has malloc_trim")
def test_without_glibc_it_does_nothing() -> None:
    assert release_free_heap() is False


def test_read_listings_calls_between_sides_once_the_local_side_is_keyed() -> None:
    calls: list[int] = []
    got = read_listings(
        [L("a.txt", "a")], [R("a.txt", "a")], SHA1, between_sides=lambda: calls.append(1)
    )
    assert calls == [1]
    assert [(lo.path, r.path) for lo, r in got.both_files()] == [("a.txt", "a.txt")]
