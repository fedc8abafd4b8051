"""The executions `placet web` starts: one daemon thread per accepted proposal, each
through `placet.decisions.run` (which ends the reservation its accept made)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from placet import decisions
from placet.config import Settings
from placet.decisions import Accepted
from placet.errors import PlacetError
from placet.store import Store

__all__ = ["Runs"]


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

    def start(self, accepted: Accepted) -> None:
        """Execute `accepted` in a daemon thread (`decisions.run`, which ends the
        reservation the accept made, so this process's host loop leaves it to this run)."""
        pid = accepted.proposal_id

        def run() -> None:
            try:
                decisions.run(
                    self.store, self.settings, accepted, cancel=self._cancel, execute=self.executor
                )
            except PlacetError as e:
                self.errors[pid] = e

        t = threading.Thread(target=run, name=f"placet-web-run-{pid}", daemon=True)
        self._threads[pid] = t
        t.start()

    def running(self, pid: int) -> bool:
        t = self._threads.get(pid)
        return t is not None and t.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Ask every execution to stop, and wait up to `timeout` s for each."""
        self._cancel.set()
        for t in list(self._threads.values()):
            t.join(timeout)
