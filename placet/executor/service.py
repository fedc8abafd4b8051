"""The executor of one host: runs the approved proposals made on this host until stopped.

A proposal's files live on the host it was made on, so only that host runs it
(`placet.store.host`; docs/decisions/0021-hosts.md). The loop recovers this host's
executions whose holder died (`Store.sweep`, at start and once per idle period), claims
each approved proposal of this host in id order (`execute`, whose claim is a
compare-and-set), then sleeps in `Store.change_waiter()` until the store changes.
`placet executor` runs it alone; `placet serve`, `review` and `web` run it beside their
work (`HostLoop`). A process that approves a proposal of its own host runs it itself:
the loops leave it to that process while it lives, for at most `HANDOFF_SECONDS`, and
leave proposals of another drive to a process serving that drive. Setting `stop`
cancels a running proposal (it becomes `interrupted`) and ends the loop.
A lost connection to the database server ends no loop: it
reconnects with backoff, LISTENs again and rescans (`placet.store.reconnect`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from placet.config import Settings
from placet.drive import configured_spec
from placet.errors import PlacetError, WrongState
from placet.executor.run import ProgressCallback, execute
from placet.store import LeaseHolder, ProposalRecord, Store
from placet.store.reconnect import Backoff, Reconnecting, connection_lost

log = logging.getLogger(__name__)

IDLE_SECONDS = 30.0
"""Longest the loop sleeps without a wake-up before looking again (a missed NOTIFY, a
lease that lapsed on another host's clock)."""
HANDOFF_SECONDS = 60.0
"""Longest the loops leave a proposal to the live process of this host that approved it
(it claims within milliseconds; only a database failure between its approval and its
claim leaves it approved), counted from when a loop first saw it waiting."""
RECHECK_SECONDS = 1.0
"""How often a loop looks again while it leaves a proposal to its approver: whether that
process ended without claiming it."""

_running_here: dict[int, int] = {}  # proposal -> reservations held by this process
_running_lock = threading.Lock()


def reserve(pid: int) -> None:
    """Say that a decider of this process runs proposal `pid` itself: this process's host
    loop leaves it alone until the matching `release(pid)` (two deciders racing for one
    proposal hold two). Call it before `Store.accept`."""
    with _running_lock:
        _running_here[pid] = _running_here.get(pid, 0) + 1


def release(pid: int) -> None:
    """Undo one `reserve(pid)` (once the decider's `execute` returned or it gave up)."""
    with _running_lock:
        left = _running_here.get(pid, 0) - 1
        if left > 0:
            _running_here[pid] = left
        else:
            _running_here.pop(pid, None)


def reserved(pid: int) -> bool:
    """True while a decider of this process has reserved proposal `pid`."""
    with _running_lock:
        return pid in _running_here


@contextlib.contextmanager
def running_here(pid: int) -> Iterator[None]:
    """`reserve(pid)` for the block: approve and execute inside it."""
    reserve(pid)
    try:
        yield
    finally:
        release(pid)


def left_to_approver(process: dict[str, Any] | None, here: str) -> bool:
    """True when the approval's `process` (``detail["process"]``) is another live
    process of host `here` (a host id), which runs the proposal itself."""
    if process is None or process.get("host_id") != here:
        return False
    try:
        holder = LeaseHolder(str(process["host"]), int(process["pid"]), int(process["start_time"]))
    except (KeyError, TypeError, ValueError):
        return False
    return holder.pid != os.getpid() and not holder.is_dead_here()


@dataclass(frozen=True)
class Ran:
    """One proposal the loop took: its final record, or the error that stopped it."""

    proposal_id: int
    final: ProposalRecord | None
    error: PlacetError | None


def run_host_executor(
    store: Store,
    settings: Settings,
    *,
    stop: threading.Event,
    once: bool = False,
    idle_seconds: float = IDLE_SECONDS,
    handoff_seconds: float = HANDOFF_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    on_start: Callable[[int], None] | None = None,
    on_done: Callable[[Ran], None] | None = None,
    progress: ProgressCallback | None = None,
    say: Callable[[str], None] | None = None,
    backoff: Backoff | None = None,
) -> list[Ran]:
    """Run this host's approved proposals until `stop` is set (or, with `once`, until
    none is left). Returns what it ran, in order.

    `on_start(pid)` is called just before a proposal is executed, `on_done(ran)` after.
    A proposal left to its decider (`running_here`, or its approving process, for at most
    `handoff_seconds` by `clock`, a monotonic clock in seconds: never the wall clock) or
    made against another drive is skipped (module docstring).
    A proposal another process claimed first is skipped silently; any other domain
    error is reported through `on_done` and the loop goes on.

    A lost connection to the database server (a PostgreSQL restart) does not end the
    loop: it says so through `say` (default: logged as a warning), reconnects after
    `backoff` (`placet.store.reconnect`), LISTENs again and rescans the approved
    proposals, since what was approved while it was away woke nobody. With `once` it
    propagates. Any other StoreError from the loop's own reads propagates (the caller
    decides).
    """
    scan = _Scan(store, settings, stop, handoff_seconds, clock, on_start, on_done, progress)
    reconnecting = Reconnecting(stop, say or log.warning, backoff=backoff)
    swept = -idle_seconds

    def session() -> None:
        nonlocal swept
        # LISTEN first, then read: a change committed in between wakes the next wait.
        with store.change_waiter() as waiter:
            reconnecting.connected()
            while not stop.is_set():
                if time.monotonic() - swept >= idle_seconds:  # not at every wake-up: its
                    store.sweep()  # writes would delay the claim the wake-up is for
                    swept = time.monotonic()
                leaving = scan.run_approved()
                if once:
                    return
                waiter.wait(min(idle_seconds, RECHECK_SECONDS) if leaving else idle_seconds, stop)

    if once:
        session()
    else:
        reconnecting.run(session)
    return scan.ran


@dataclass
class _Scan:
    """What `run_host_executor` keeps across its scans (and its reconnections)."""

    store: Store
    settings: Settings
    stop: threading.Event
    handoff_seconds: float
    clock: Callable[[], float]
    on_start: Callable[[int], None] | None
    on_done: Callable[[Ran], None] | None
    progress: ProgressCallback | None
    ran: list[Ran] = field(default_factory=list)
    waiting_since: dict[int, float] = field(default_factory=dict)
    """Proposal -> when this loop first left it to its approver."""

    spec: str = field(init=False)

    def __post_init__(self) -> None:
        self.spec = configured_spec(self.settings)

    def run_approved(self) -> bool:
        """One scan: run each approved proposal of this host, in id order. True when one
        was left to its approver (look again soon). A lost connection raises (the caller
        reconnects and scans again)."""
        leaving = False
        approved = self.store.approvals_here()
        for gone in self.waiting_since.keys() - {pid for pid, _, _ in approved}:
            del self.waiting_since[gone]
        for pid, drive_spec, approver in approved:
            if self.stop.is_set():
                break
            if drive_spec != self.spec:
                continue  # another drive's: the process serving it runs it
            if _leave(self.store, pid, approver, self.waiting_since, self.handoff_seconds,
                      self.clock):  # fmt: skip
                leaving = True
                continue
            if self.on_start is not None:
                self.on_start(pid)
            try:
                final = execute(
                    self.store, self.settings, pid, cancel=self.stop, progress=self.progress
                )
                done = Ran(pid, final, None)
            except WrongState:
                continue  # claimed by another executor of this host first
            except PlacetError as e:
                if connection_lost(e):
                    raise  # not the proposal's doing: reconnect, then scan again
                log.warning("proposal %s: %s", pid, e)
                done = Ran(pid, None, e)
            self.ran.append(done)
            if self.on_done is not None:
                self.on_done(done)
        return leaving


def _leave(
    store: Store, pid: int, approver: dict[str, Any] | None, since: dict[int, float],
    handoff: float, clock: Callable[[], float],
) -> bool:  # fmt: skip
    """True when this loop leaves approved proposal `pid` to a decider: one of this
    process (`reserved`), or the live process of this host that approved it
    (`approver`), for at most `handoff` seconds from when this loop first saw it so
    (`since`)."""
    if reserved(pid):
        return True
    if not left_to_approver(approver, store.host_id):
        return False
    now = clock()
    first = since.setdefault(pid, now)
    return now - first < handoff


RETRY_SECONDS = 5.0
"""How long a `HostLoop` waits before starting its loop again after it failed for another
reason than a lost connection (which the loop rides out itself)."""


class HostLoop:
    """This host's executor loop (`run_host_executor`) in a daemon thread of a placet
    process that runs for a while (`placet serve`, `review`, `web`), from `start()` (or
    entering it) until `stop()` (or leaving it).

    Quiet: it writes nothing to stdout (stdout is `placet serve`'s protocol); what it ran
    is logged at INFO, a refused proposal and a lost database connection at WARNING, to
    the logging setup of the process. The loop itself reconnects after a lost connection
    (`run_host_executor`); any other failure is logged and the loop started again after
    `RETRY_SECONDS`. `stop()` cancels a running proposal (marked `interrupted`, as
    `placet executor` does on Ctrl-C) and waits for the thread at most `timeout` seconds,
    so a process never hangs on exit (a thread still cleaning up then dies with the
    process, and the lease recovery marks its proposal interrupted).
    """

    def __init__(self, store: Store, settings: Settings, *, name: str = "placet-host-loop"):
        self.store = store
        self.settings = settings
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> HostLoop:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                run_host_executor(
                    self.store,
                    self.settings,
                    stop=self.stopping,
                    on_start=lambda pid: log.info("running proposal %s", pid),
                    on_done=lambda ran: log.info(
                        "proposal %s: %s",
                        ran.proposal_id,
                        ran.final.status if ran.final is not None else ran.error,
                    ),
                )
            except Exception:  # a StoreError other than a lost connection, or a bug
                log.warning("the host's executor loop stopped; again in %ss", RETRY_SECONDS,
                            exc_info=True)  # fmt: skip
                self.stopping.wait(RETRY_SECONDS)

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the loop (cancelling what it runs) and wait at most `timeout` seconds."""
        self.stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def __enter__(self) -> HostLoop:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
