"""Handing the heap's free pages back to the system between a plan's big steps, so a
plan of 1,000,000 files stays within 1 GiB of RSS (docs/decisions/0026-plan-memory.md).

Keying a listing grows a dict of 1,000,000 entries by doubling: each resize frees the
old table (up to ~15 MiB) to the C heap, where glibc keeps it resident; the next big
table does not fit in those holes, so the process's RSS carries them beside the two
keyed dicts, the plan's high-water mark (about 30 MiB measured at 1,000,000 entries,
docs/performance.md). `release_free_heap` asks glibc to return free pages
(`malloc_trim(0)`, which also releases free pages inside the heap); other C libraries
(macOS, musl) keep their own policy and it does nothing there. Nothing is moved or
freed that is in use, so no result changes.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

_trim: Callable[[int], int] | None
try:
    _trim = ctypes.CDLL(None).malloc_trim
except (AttributeError, OSError):  # not glibc: no malloc_trim
    _trim = None


def release_free_heap() -> bool:
    """Return the C heap's free pages to the system (glibc's `malloc_trim(0)`); a few
    milliseconds on a 1 GiB heap. Returns whether this C library can (False: a no-op)."""
    if _trim is None:
        return False
    _trim(0)
    return True
