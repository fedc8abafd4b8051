"""The executions `placet web` starts: one daemon thread per accepted proposal, each
through `placet.decisions.run` (which ends the reservation its accept made), with the
figures of its progress (`placet.executor.progress.Tracker`: the line `placet accept`
and the review UI show) for the page's status; and the plan each accept's challenge
read, so that the accept runs it rather than reading every op again after the owner's
passkey said yes."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from placet import decisions
from placet.config import Settings
from placet.decisions import Accepted
from placet.errors import PlacetError
from placet.executor import Plan
from placet.executor.progress import Figures, Tracker
from placet.store import Store

__all__ = ["PLANS_KEPT", "Runs"]

PLANS_KEPT = 2
"""Plans kept for the accepts to come, the latest challenges' (a plan of 100,000 ops is
much of the 268 MiB `placet accept` holds for one: docs/performance.md)."""


@dataclass
class Runs:
    """Executions started from the page, one daemon thread each (they die with the
    process; a proposal left `executing` is recovered by the next sweep, its holder
    being gone)."""

    store: Store
    settings: Settings
    executor: decisions.Executor | None = None
    """None: `placet.executor.execute`."""
    _threads: dict[int, threading.Thread] = field(default_factory=dict)
    _cancel: threading.Event = field(default_factory=threading.Event)
    errors: dict[int, PlacetError] = field(default_factory=dict)
    _trackers: dict[int, Tracker] = field(default_factory=dict)
    _plans: OrderedDict[int, Plan] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, accepted: Accepted) -> None:
        """Execute `accepted` in a daemon thread (`decisions.run`, which ends the
        reservation the accept made, so this process's host loop leaves it to this run)."""
        pid = accepted.proposal_id
        tracker = self._trackers[pid] = Tracker()

        def run() -> None:
            try:
                decisions.run(
                    self.store,
                    self.settings,
                    accepted,
                    progress=tracker,
                    cancel=self._cancel,
                    execute=self.executor,
                )
            except PlacetError as e:
                self.errors[pid] = e

        t = threading.Thread(target=run, name=f"placet-web-run-{pid}", daemon=True)
        self._threads[pid] = t
        t.start()

    def running(self, pid: int) -> bool:
        t = self._threads.get(pid)
        return t is not None and t.is_alive()

    def figures(self, pid: int) -> Figures | None:
        """Where this server's run of `pid` stands (its whole run's rate once it ended);
        None before its first event or when this server started none."""
        tracker = self._trackers.get(pid)
        if tracker is None:
            return None
        return tracker.figures(final=not self.running(pid))

    def keep_plan(self, pid: int, plan: Plan) -> None:
        """Keep the plan a challenge's checks read for proposal `pid`, for its accept."""
        with self._lock:
            self._plans.pop(pid, None)
            self._plans[pid] = plan
            while len(self._plans) > PLANS_KEPT:
                self._plans.popitem(last=False)

    def take_plan(self, pid: int) -> Plan | None:
        """The plan kept for `pid` (the accept's checks use it only when it was read for
        the request hash the proposal still has), no longer kept."""
        with self._lock:
            return self._plans.pop(pid, None)

    def stop(self, timeout: float = 10.0) -> None:
        """Ask every execution to stop, and wait up to `timeout` s for each."""
        self._cancel.set()
        for t in list(self._threads.values()):
            t.join(timeout)
