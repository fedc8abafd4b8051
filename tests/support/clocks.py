"""A scan clock for `SyncService(clock_ns=...)`: tests advance it past the racily-clean
window instead of waiting for their files to age (placet.sync.index_file)."""

from __future__ import annotations

import time

from placet.sync.index_file import RACY_WINDOW_NS


class ScanClock:
    """The real time in nanoseconds plus what `settle` added."""

    def __init__(self) -> None:
        self.ahead_ns = 0

    def __call__(self) -> int:
        return time.time_ns() + self.ahead_ns

    def settle(self) -> None:
        """Every file written so far is past the racily-clean window at every later
        index, as if the test had waited the window out (2 s, and 0.1 s to spare)."""
        self.ahead_ns += RACY_WINDOW_NS + 100_000_000
