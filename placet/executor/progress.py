"""The values the executor hands back while it runs: progress events, the figures every
front end shows, and op outcomes.

`ProgressEvent` is what a `progress` callback receives: cumulative byte counts over the
whole proposal, an `op_result` once per op right after it was journaled, always from the
thread that called `execute`. `Tracker` turns the events into `Figures` (ops ended,
bytes, rate, time left, the op running), one model so that `placet accept`, the review UI
and `placet web` show the same numbers in the same words (`Figures.line` while it runs,
`Figures.moved` in its summary). `OpOutcome` is one op's end state before it is
journaled (docs/design.md section 9, "Op results"); a failure's detail has the
typed-error shape of docs/design.md section 5.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from placet.display import duration, human_bytes
from placet.errors import PlacetError
from placet.store import OpResultRecord
from placet.text import fit_cells, inert

Outcome = Literal["done", "already_done", "stale", "failed", "skipped"]


@dataclass(frozen=True)
class ProgressEvent:
    """One progress report of `placet.executor.execute`.

    Attributes:
        op_index: index of the op running (or just journaled), 0-based.
        op_count: number of ops in the proposal.
        bytes_done: bytes moved so far over the whole proposal (ops that ended without a
            transfer count their full size, so the bar reaches the end).
        bytes_total: bytes every transfer op of the proposal moves (0 for a mkdir).
        op_result: the journaled result, on the one event sent when an op ends; else None.
        ops_done: ops journaled so far (any outcome, `op_result`'s op included).
        in_flight: indexes of the ops running when the event was made, ascending (a
            sync runs up to `Settings.transfers` file ops at once; then `op_index` of an
            event without `op_result` is the lowest of them).
        current: the name (drive path, else local path) of the lowest op in flight, as
            stored: agent text, to show through `placet.text.inert`; None: none runs.
    """

    op_index: int
    op_count: int
    bytes_done: int
    bytes_total: int
    op_result: OpResultRecord | None = None
    ops_done: int = 0
    in_flight: tuple[int, ...] = ()
    current: str | None = None


@dataclass
class OpOutcome:
    """How one op ended, before it is journaled (`Store.record_op_result`).

    `remote_mtime` is not journaled: the uploaded object's mtime as the upload's check
    after the move read it, handed to the sync baseline so that it does not stat again.
    """

    outcome: Outcome
    detail: dict[str, Any] = field(default_factory=dict)
    remote_mtime: str | None = None

    @classmethod
    def error(cls, outcome: Outcome, e: PlacetError, **extra: Any) -> OpOutcome:
        """A `stale` or `failed` outcome whose detail is the error's wire shape + `extra`."""
        return cls(outcome, {**e.to_dict(), **extra})


class Aborted(Exception):
    """Raised from inside a transfer's progress callback to stop it: the owner cancelled,
    or this process lost its lease. The drive kills rclone and removes its temp object."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


RATE_WINDOW = 5.0
"""Seconds of events the rate is measured over (and the time left estimated from)."""
QUIET_OUTCOMES = frozenset({"done", "already_done", "skipped"})
"""Outcomes of an op that ended as the owner chose; the others (stale, failed) are told."""


@dataclass(frozen=True)
class Figures:
    """Where a running proposal stands, as every front end shows it.

    `rate`: bytes a second over the last `RATE_WINDOW` s (None until measured);
    `seconds_left`: the larger of the estimates from the byte rate and from the op rate
    (many small files are slower than their bytes say), None until measured; `current`:
    the op running (inert, or None); `not_done`: ops that ended stale or failed so far.
    """

    ops_done: int
    op_count: int
    bytes_done: int
    bytes_total: int
    rate: float | None
    seconds_left: float | None
    current: str | None
    in_flight: int
    not_done: int
    elapsed: float

    def line(self, cols: int = 160) -> str:
        """One line of at most `cols` cells: ``1,234/6,746 ops · 120.0 MiB/313.0 MiB
        (38%) · 12.3 MiB/s · 15s left · now a/b.txt`` (what is not measured yet is left
        out; the name is cut first)."""
        parts = [f"{self.ops_done:,}/{self.op_count:,} ops"]
        if self.bytes_total:
            pct = min(100, self.bytes_done * 100 // self.bytes_total)
            parts.append(f"{human_bytes(self.bytes_done)}/{human_bytes(self.bytes_total)} "
                         f"({pct}%)")  # fmt: skip
        if self.not_done:
            parts.append(f"{self.not_done:,} not done")
        if self.rate is not None:
            parts.append(f"{human_bytes(self.rate)}/s")
        if self.seconds_left is not None and self.ops_done < self.op_count:
            parts.append(f"{duration(self.seconds_left)} left")
        head = " · ".join(parts)
        if self.current is None:
            return fit_cells(head, cols, "...")
        return fit_cells(f"{head} · now {self.current}", cols, "...")

    def moved(self) -> str:
        """What the run moved, as its summary says it: ``313.0 MiB in 1m02s, 5.0 MiB/s``
        (the rate left out until measured)."""
        rate = f", {human_bytes(self.rate)}/s" if self.rate is not None else ""
        return f"{human_bytes(self.bytes_done)} in {duration(self.elapsed)}{rate}"

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON (the web page's), with `line` as the other front ends say it."""
        return {
            "ops_done": self.ops_done,
            "op_count": self.op_count,
            "bytes_done": self.bytes_done,
            "bytes_total": self.bytes_total,
            "rate": self.rate,
            "seconds_left": self.seconds_left,
            "current": self.current,
            "in_flight": self.in_flight,
            "not_done": self.not_done,
            "elapsed": round(self.elapsed, 3),
            "line": self.line(),
            "moved": self.moved(),
        }


class Tracker:
    """The figures of one run, fed its `ProgressEvent`s (a `progress` callback); any
    thread may read `figures()` meanwhile (the web page's status answers from another)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._start: float | None = None
        self._samples: deque[tuple[float, int, int]] = deque()  # (time, bytes, ops ended)
        self._event: ProgressEvent | None = None
        self._outcomes: Counter[str] = Counter()

    def __call__(self, ev: ProgressEvent) -> None:
        now = self._clock()
        with self._lock:
            if self._start is None:
                self._start = now
            self._event = ev
            if ev.op_result is not None:
                self._outcomes[ev.op_result.outcome] += 1
            self._samples.append((now, ev.bytes_done, ev.ops_done))
            while len(self._samples) > 2 and now - self._samples[1][0] > RATE_WINDOW:
                self._samples.popleft()

    @property
    def outcomes(self) -> dict[str, int]:
        """Ops ended so far, per outcome."""
        with self._lock:
            return dict(self._outcomes)

    def figures(self, *, final: bool = False) -> Figures | None:
        """The figures now (None before the first event); `final`: the rate over the
        whole run rather than the last few seconds."""
        now = self._clock()
        with self._lock:
            ev, start = self._event, self._start
            if ev is None or start is None:
                return None
            t0, b0, o0 = (start, 0, 0) if final else self._samples[0]
            not_done = sum(n for k, n in self._outcomes.items() if k not in QUIET_OUTCOMES)
        span = now - t0
        rate = (ev.bytes_done - b0) / span if span >= 0.5 else None
        ops_rate = (ev.ops_done - o0) / span if span >= 0.5 else None
        left: list[float] = []
        if rate and ev.bytes_total:
            left.append(max(0, ev.bytes_total - ev.bytes_done) / rate)
        if ops_rate:
            left.append(max(0, ev.op_count - ev.ops_done) / ops_rate)
        return Figures(
            ops_done=ev.ops_done,
            op_count=ev.op_count,
            bytes_done=ev.bytes_done,
            bytes_total=ev.bytes_total,
            rate=None if rate is None else max(0.0, rate),
            seconds_left=max(left) if left else None,
            current=None if ev.current is None or final else inert(ev.current),
            in_flight=len(ev.in_flight),
            not_done=not_done,
            elapsed=now - start,
        )
