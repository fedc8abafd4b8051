"""Running a sync's file transfers N at a time, after its folders exist.

Ops run on `Settings.transfers` worker threads (threads suffice: bytes move in rclone and
hashing in hashlib, outside the GIL). A unit is one op or a batch of small new files of
one folder (`placet.executor.batch`); each op stays whole on one worker, and ends as its
own result. A worker journals its temporary names before its first byte; results go
back through a queue to the coordinating thread, which journals them in batches, records
the baseline and sends progress; each worker's end marker ends the run with its last
result. On the owner's cancel or a lost lease no further op starts and every rclone child
the workers started is killed at once (`Children`). An unexpected error is that op's
`internal_error`, never a cancel (docs/decisions/0027-sync-execution.md)."""

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
        self._names: dict[int, str] = {}  # drive (else local) path of each op started
        self._total = 0  # sum of self._bytes
        self._running: tuple[int, ...] | None = ()  # cached; None: to recompute
        self.version = 0

    def start(self, op: Op) -> None:
        with self._lock:
            self._total -= self._bytes.get(op.index, 0)
            self._bytes[op.index] = 0
            self._sizes[op.index] = op.size or 0
            self._names[op.index] = op.remote_path or op.local_path or ""
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
            self._names.pop(op.index, None)
            if op.index in self._landed:
                self._landed.discard(op.index)
            else:
                self._running = None
            self.version += 1

    def name(self, index: int) -> str | None:
        """The drive (else local) path of op `index` while it is not ended."""
        with self._lock:
            return self._names.get(index)

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
