"""The executor of one host: runs the approved proposals made on this host until stopped.

A proposal's files live on the host it was made on, so only that host runs it (issue 16;
`placet.store.host`); the owner may accept it from any host sharing the database. This
loop is what `placet executor` runs on a host where no other placet process is running:
it recovers this host's interrupted executions whose holder died (`Store.sweep`, at
start and then at most every `idle_seconds`), claims
each approved proposal of this host in id order (`Store.approved_here`, then `execute`,
whose claim is a compare-and-set: two executors on one host never run one proposal
twice), then sleeps until the store changes (`Store.change_waiter`: LISTEN/NOTIFY on
PostgreSQL, the data version polled on SQLite) or `idle_seconds` pass.

Setting `stop` ends the loop: a running proposal is cancelled through `execute`'s
`cancel` (its transfer aborted, its temporary object removed, the proposal marked
`interrupted`; the owner accepts it again to resume).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from placet.config import Settings
from placet.errors import PlacetError, WrongState
from placet.executor.run import ProgressCallback, execute
from placet.store import ProposalRecord, Store

log = logging.getLogger(__name__)

IDLE_SECONDS = 30.0
"""Longest the loop sleeps without a wake-up before looking again (a missed NOTIFY, a
lease that lapsed on another host's clock)."""


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
    on_start: Callable[[int], None] | None = None,
    on_done: Callable[[Ran], None] | None = None,
    progress: ProgressCallback | None = None,
) -> list[Ran]:
    """Run this host's approved proposals until `stop` is set (or, with `once`, until
    none is left). Returns what it ran, in order.

    `on_start(pid)` is called just before a proposal is executed, `on_done(ran)` after.
    A proposal another process claimed first is skipped silently; any other domain
    error is reported through `on_done` and the loop goes on. StoreError from the loop's
    own reads propagates (the database is gone: the caller decides).
    """
    ran: list[Ran] = []
    swept = -idle_seconds
    with store.change_waiter() as waiter:
        while not stop.is_set():
            if time.monotonic() - swept >= idle_seconds:  # not at every wake-up: its writes
                store.sweep()  # would delay the claim the wake-up is for
                swept = time.monotonic()
            for pid in store.approved_here():
                if stop.is_set():
                    break
                if on_start is not None:
                    on_start(pid)
                try:
                    done = Ran(
                        pid, execute(store, settings, pid, cancel=stop, progress=progress), None
                    )
                except WrongState:
                    continue  # claimed by another executor of this host first
                except PlacetError as e:
                    log.warning("proposal %s: %s", pid, e)
                    done = Ran(pid, None, e)
                ran.append(done)
                if on_done is not None:
                    on_done(done)
            if once:
                break
            waiter.wait(idle_seconds, stop)
    return ran
