"""Running a sync's file transfers N at a time, after its folders exist (issue 6).

A sync of many small files spends most of its time per op (an rclone process per
transfer, a few rcd calls, a journal commit), not moving bytes, so ops run on
`Settings.transfers` worker threads (default 4, rclone's own `--transfers` default).
What this module decides, and why:

- **Only transfers.** The runner creates the folders first, one at a time (parents
  before children), so every upload finds its folder; only then do the file ops start
  here. Single-op proposals never come here.
- **Each op stays whole on one worker.** Its evidence re-check, its transfer and its
  verification run on the worker, exactly as they do one at a time; an op ending badly
  is one result, never a reason to stop the others. A unit of work is one op, or a
  batch of small new files of one folder that share their round trips
  (`placet.executor.batch`); each op of a batch still gets its own result.
- **Journaling.** A worker journals an op's temporary names itself, synchronously and
  before the first byte (the crash trail must be durable before it is needed); the op's
  result goes back to the coordinating thread (the caller of `execute`) through a queue,
  which journals it (results in batches, docs/decisions/0027-sync-execution.md), records
  the sync baseline and sends the progress event. A worker that returns says so through
  the same queue, so the run ends with the last result, not at the next `TICK` (up to 100
  ms per sync). All journal writes of a run go through one lock in the runner.
- **Stopping.** The coordinator looks at the owner's cancel and the lease every 100 ms
  (`TICK`) and after each result. On either it starts no further op and kills every
  rclone child the workers started (`placet.drive.proc.Children`), so a transfer blocked
  in a pipe write stops at once instead of at its next progress callback; the killed
  uploads delete their temporary objects on the way out, as any failed upload does. It
  then waits for the workers, and hands back the ops that were cut short.
- **Threads, not processes**: the bytes move in rclone and hashing in hashlib, both
  outside the GIL; the workers only wait on pipes and sockets.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from placet.drive.proc import Children
from placet.errors import PlacetError
from placet.executor.progress import Aborted, OpOutcome
from placet.executor.steps import failed
from placet.schema import Op

log = logging.getLogger(__name__)

TICK = 0.1
"""Seconds between the coordinator's looks at cancel/lease and its progress events."""
QUIT_JOIN_SECONDS = 2.0
"""After a second Ctrl-C, how long `run_transfers` waits for its workers before it lets
the `KeyboardInterrupt` end placet (its daemon threads die with the process)."""


class Flight:
    """Which ops are running and how many bytes each has moved (thread-safe).

    `moved` is clamped to the op's size, so a proposal's byte count never runs past its
    total; `version` changes on every update, so the coordinator emits only on change.
    An op that `landed` (its worker is done with it) is no longer listed as running, but
    its bytes count until it is journaled and `end`ed, so the total never steps back.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bytes: dict[int, int] = {}
        self._sizes: dict[int, int] = {}
        self._landed: set[int] = set()
        self._total = 0  # sum of self._bytes
        self._running: tuple[int, ...] | None = ()  # cached; None: to recompute
        self.version = 0

    def start(self, op: Op) -> None:
        with self._lock:
            self._total -= self._bytes.get(op.index, 0)
            self._bytes[op.index] = 0
            self._sizes[op.index] = op.size or 0
            self._running = None
            self.version += 1

    def moved(self, op: Op, done: int) -> None:
        with self._lock:
            if op.index in self._bytes:
                now = max(0, min(done, self._sizes[op.index]))
                self._total += now - self._bytes[op.index]
                self._bytes[op.index] = now
                self.version += 1

    def landed(self, op: Op) -> None:
        with self._lock:
            self._landed.add(op.index)
            self._running = None
            self.version += 1

    def end(self, op: Op) -> None:
        with self._lock:
            self._total -= self._bytes.pop(op.index, 0)
            self._sizes.pop(op.index, None)
            if op.index in self._landed:
                self._landed.discard(op.index)
            else:
                self._running = None
            self.version += 1

    def snapshot(self) -> tuple[int, tuple[int, ...]]:
        """(bytes moved by the ops not yet journaled, indexes of those still running)."""
        with self._lock:
            if self._running is None:  # a batch puts 100 ops in flight: not per event
                self._running = tuple(sorted(i for i in self._bytes if i not in self._landed))
            return self._total, self._running


@dataclass
class PoolResult:
    """How `run_transfers` ended.

    Attributes:
        stopped: None when every op ran and was handed to `end_op`; else why it stopped
            (``cancelled`` or ``lease lost``).
        cut_short: ops that were running when it stopped and ended aborted or failed
            (not journaled here: the runner journals them as cancelled, or, when the
            lease was lost, writes nothing).
        max_in_flight: the most units that ran at once.
    """

    stopped: str | None = None
    cut_short: list[Op] = field(default_factory=list)
    max_in_flight: int = 0


def run_transfers(
    units: list[list[Op]],
    workers: int,
    *,
    run_unit: Callable[[list[Op]], list[tuple[Op, OpOutcome]]],
    end_op: Callable[[Op, OpOutcome], bool],
    abort_reason: Callable[[], str | None],
    halt: Callable[[str], None],
    tick: Callable[[], None],
) -> PoolResult:
    """Run `units` on up to `workers` threads; see the module docstring.

    Args:
        units: file ops of one sync, in the order to start them, one op or one batch
            per unit.
        workers: most units at once (`Settings.transfers`, 1-32).
        run_unit: runs one unit on a worker (evidence re-check, transfer, verification)
            and returns each op's outcome; raises `Aborted` to say it was stopped (every
            op of the unit is then cut short).
        end_op: called on this thread with each op's outcome, at once: journals it;
            False when the journal refused (lease lost), which stops the run.
        abort_reason: ``cancelled`` / ``lease lost`` / None, looked at every `TICK`.
        halt: called with the reason when `end_op` refused, so that the workers'
            progress callbacks (which ask `abort_reason`) stop their transfers too.
        tick: called on this thread every `TICK` and after each result (progress).

    Returns:
        A `PoolResult`. Nothing is raised for an op; an unexpected error in a worker
        becomes that op's ``internal_error`` failure.
    """
    todo = deque(units)
    lock = threading.Lock()
    stop = threading.Event()
    children = Children()
    # An op's result, or None when a worker has returned (after its last result).
    results: queue.Queue[tuple[Op, OpOutcome | None, str | None] | None] = queue.Queue()
    running = 0
    result = PoolResult()
    quitting = False

    def worker() -> None:
        try:
            work()
        finally:
            results.put(None)  # the coordinator ends as soon as every worker has

    def work() -> None:
        nonlocal running
        while True:
            with lock:
                if stop.is_set() or not todo:
                    return
                unit = todo.popleft()
                running += 1
                result.max_in_flight = max(result.max_in_flight, running)
            outs: list[tuple[Op, OpOutcome | None]] = [(op, None) for op in unit]
            why: str | None = None
            try:
                with children.adopt():
                    got = run_unit(unit)
                ended = {op.index for op, _ in got}
                lost = RuntimeError("the batch gave this op no outcome")
                outs = [*got, *((op, _bug(op, lost)) for op in unit if op.index not in ended)]
            except Aborted as e:
                why = e.why
            except BaseException as e:  # run_unit turns errors into outcomes; a bug
                log.exception("ops %s failed unexpectedly on a transfer worker",
                              [op.index for op in unit])  # fmt: skip
                outs = [(op, _bug(op, e)) for op in unit]
            finally:
                with lock:
                    running -= 1
                for op, out in outs:
                    results.put((op, out, why if out is None else None))

    threads: list[threading.Thread] = []
    for i in range(max(1, min(workers, len(units)))):
        t = threading.Thread(target=worker, name=f"placet-transfer-{i}", daemon=True)
        try:
            t.start()
        except RuntimeError:  # "can't start new thread": run on those that started
            if not threads:
                raise  # nothing runs yet: nothing to stop
            log.warning("started %d of %d transfer workers", len(threads), workers)
            break
        threads.append(t)

    def stopping(why: str) -> None:
        if result.stopped is None:
            result.stopped = why
            log.warning("stopping the transfers: %s", why)
            stop.set()
            children.kill_all()

    returned = 0
    try:
        while returned < len(threads):
            why_now = abort_reason()
            if why_now is not None:
                stopping(why_now)
            try:
                item = results.get(timeout=TICK)
            except queue.Empty:
                tick()
                continue
            if item is None:
                returned += 1
                continue
            op, out, why = item
            if why is not None or out is None:
                stopping(why or "cancelled")  # out is None only when it was aborted
                result.cut_short.append(op)
            elif result.stopped is not None and out.outcome == "failed":
                result.cut_short.append(op)  # most likely our kill; journaled as cancelled
            elif result.stopped == "lease lost":
                pass  # another process may own the proposal: write nothing more
            elif not end_op(op, out):
                halt("lease lost")
                stopping("lease lost")
            tick()
    except BaseException as e:
        # The journal failed (StoreError) or a second Ctrl-C raised KeyboardInterrupt
        # here: no transfer may outlive this call, whatever the caller does next.
        halt("cancelled")
        stop.set()
        children.kill_all()
        # Ctrl-C twice means quit at once: a worker blocked on a stalled remote (a stat
        # or an upload's answer through rcd) must not hold placet; rcd dies with it and
        # the journal has every temporary name.
        quitting = not isinstance(e, Exception)
        raise
    finally:
        for t in threads:
            t.join(QUIT_JOIN_SECONDS if quitting else None)
    return result


def _bug(op: Op, e: BaseException) -> OpOutcome:
    """The op's ``internal_error`` outcome; never raises, even for an error whose text
    cannot be formed (else the op would read as aborted and stop the run as cancelled)."""
    try:
        what = f"{type(e).__name__}: {e}"
    except Exception:
        what = type(e).__name__
    return failed(
        PlacetError(
            f"op {op.index} failed unexpectedly ({what}); this is a placet bug: please report it",
            code="internal_error",
        )
    )
