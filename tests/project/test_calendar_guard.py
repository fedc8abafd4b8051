"""The calendar guard's own check: under `make calendar` the clock really stands ahead.

`make test` runs the in-process tests that check time a second time under `faketime` with
the clock 5 years ahead (docs/decisions/0032-test-suite.md).
If faketime silently failed to load, that run would prove nothing; this test, run in it,
compares the process clock with the kernel's time of a file it just wrote, which faketime
does not shift. Outside the guard it is skipped.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

YEAR_S = 365 * 24 * 3600


@pytest.mark.skipif(
    os.environ.get("PLACET_CALENDAR_GUARD") != "1", reason="runs only under make calendar"
)
def test_the_clock_stands_years_ahead_of_the_kernel(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    probe.write_bytes(b"")
    ahead = time.time() - probe.stat().st_mtime
    assert ahead > 4 * YEAR_S, f"the process clock is only {ahead:.0f} s ahead: faketime not loaded"
