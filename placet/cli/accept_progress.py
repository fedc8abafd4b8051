"""What `placet accept` prints while it reads and runs a proposal: progress people can read.

While the ops run (`RunProgress`), stderr holds one live line on a terminal, redrawn at
most 10 times a second and cut to its width (bar, ops ended, bytes, rate, time left, the
op running by inert name: `placet.executor.progress.Figures.line`); elsewhere that line
as plain text every `LOG_EVERY` seconds; a line per op only for an op that did not end
as chosen, or for every op with ``--verbose``; and at the end the summary on stdout
(`summary_line`). A long step before the transfers shows its own progress
(`StepProgress`). `placet.cli.accept` decides; this module only shows
(docs/decisions/0034-cli.md).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from typing import TextIO

from placet.executor.progress import QUIET_OUTCOMES, Figures, ProgressEvent, Tracker
from placet.store import OpResultRecord
from placet.text import inert

TTY_EVERY = 0.1
"""Seconds between redraws of the terminal line (at most 10 a second)."""
LOG_EVERY = 5.0
"""Seconds between status lines when stderr is not a terminal."""
LOG_COLS = 160
"""Width of a status line written to a file or pipe."""
PHASE_QUIET = 1.0
"""Seconds a step before the transfers (`StepProgress`) runs before its progress is shown."""


class StepProgress:
    """Progress of a long step before the transfers (reading a big sync's ops, checking
    them for risk flags) on stderr: silent for a step that ends within `PHASE_QUIET`
    seconds; after that ``what: N/M ops`` redrawn in place on a terminal (at most every
    `TTY_EVERY` s) or a plain line every `LOG_EVERY` s elsewhere, and a last line with
    the time taken. Call it with (done, total) as the step goes; `done(total)` ends it."""

    def __init__(self, what: str, out: TextIO | None = None) -> None:
        self.what, self.out = what, out or sys.stderr
        self.tty = self.out.isatty()
        self._start = self._last = time.monotonic()
        self._shown = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._start < PHASE_QUIET:
            return
        if self._shown and now - self._last < (TTY_EVERY if self.tty else LOG_EVERY):
            return
        self._line(f"{self.what}: {done:,}/{total:,} ops", end="\r" if self.tty else "\n")
        self._last, self._shown = now, True

    def done(self, total: int) -> None:
        """End the step: one line with its time, if it took long enough to be shown."""
        took = time.monotonic() - self._start
        if took >= PHASE_QUIET:
            self._line(f"{self.what}: {total:,} ops in {took:.1f} s", end="\n")

    def _line(self, text: str, end: str) -> None:
        self.out.write(("\r\x1b[K" if self.tty else "") + text + (end if self.tty else "\n"))
        self.out.flush()


def result_line(r: OpResultRecord) -> str:
    """One op's result for people: ``#5 done: a/b.txt (sha256)``, or its failure."""
    d = r.detail
    what = inert(str(r.op.get("remote_path") or r.op.get("local_path") or ""))
    if r.outcome in ("done", "already_done"):
        how = d.get("verification")
        extra = f" ({inert(str(how))}" + (f", {d['path_taken']}" if d.get("path_taken") else "")
        return f"#{r.op_index} {r.outcome}: {what}" + (extra + ")" if how else "")
    return f"#{r.op_index} {r.outcome}: {what}: {inert(str(d.get('message', '')))}"


def summary_line(pid: int, status: str, counts: dict[str, int], figures: Figures | None) -> str:
    """``proposal 7 succeeded: 6746 done (313.0 MiB in 1m02s, 5.0 MiB/s)``."""
    said = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no ops journaled"
    moved = "" if figures is None else f" ({figures.moved()})"
    return f"proposal {pid} {status}: {said}{moved}"


def _bar(f: Figures) -> str:
    frac = f.bytes_done / f.bytes_total if f.bytes_total else f.ops_done / max(1, f.op_count)
    return f"[{'#' * int(min(1.0, frac) * 20):.<20}] "


class RunProgress:
    """Execution progress on stderr (module docstring): a `progress` callback for
    `execute`, then `finish()`. Lines are written in one go at most every `TTY_EVERY` s
    when stderr is not a terminal (a 100,000-op sync is not 100,000 writes)."""

    def __init__(
        self,
        out: TextIO | None = None,
        *,
        verbose: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out = out or sys.stderr
        self.tty = self.out.isatty()
        self.verbose = verbose
        self.tracker = Tracker(clock)
        self._clock = clock
        self._last = self._flushed = float("-inf")
        self._drawn = False  # a live line is on the terminal
        self._held: list[str] = []  # lines not yet written (not a terminal)

    def __call__(self, ev: ProgressEvent) -> None:
        self.tracker(ev)
        now = self._clock()
        r = ev.op_result
        if r is not None and (self.verbose or r.outcome not in QUIET_OUTCOMES or ev.op_count == 1):
            self._clear()
            count = f"[{ev.ops_done}/{ev.op_count}] " if ev.op_count > 1 else ""
            self._write(f"  {count}{result_line(r)}\n")
        if now - self._last >= (TTY_EVERY if self.tty else LOG_EVERY):
            self._draw(now)
        if self.tty or now - self._flushed >= TTY_EVERY:
            self._flush(now)

    def finish(self) -> Figures | None:
        """Write the last figures (the rate over the whole run) and everything held; the
        figures, for the summary (None: no event came)."""
        figures = self.tracker.figures(final=True)
        if figures is not None:
            self._draw(self._clock(), figures)
        self._flush(self._clock())
        return figures

    def _cols(self) -> int:
        if self.tty:
            with contextlib.suppress(OSError, ValueError):
                return os.get_terminal_size(self.out.fileno()).columns - 1
        return LOG_COLS

    def _draw(self, now: float, final: Figures | None = None) -> None:
        figures = final or self.tracker.figures()
        if figures is None:
            return
        cols = self._cols()
        if self.tty:
            bar = _bar(figures) if cols >= 60 else ""
            line = bar + figures.line(cols - len(bar))
            self.out.write("\r" + line + "\x1b[K" + ("\n" if final else ""))
            self._drawn = final is None
        else:
            self._write(figures.line(cols) + "\n")
        self._last = now

    def _clear(self) -> None:
        if self._drawn:
            self.out.write("\r\x1b[K")
            self._drawn = False

    def _write(self, text: str) -> None:
        if self.tty:
            self.out.write(text)
        else:
            self._held.append(text)

    def _flush(self, now: float) -> None:
        if self._held:
            self.out.write("".join(self._held))
            self._held.clear()
        self.out.flush()
        self._flushed = now


__all__ = [
    "LOG_EVERY",
    "PHASE_QUIET",
    "TTY_EVERY",
    "RunProgress",
    "StepProgress",
    "result_line",
    "summary_line",
]
