"""Keeping the executor's lease alive while it works (docs/design.md section 9, "Lease and
recovery").

A claimed proposal carries a lease of `lease_seconds` (30 s by default). A background
thread renews it every `heartbeat_seconds` (10 s); if a renewal reports the lease lost
(recovery marked the proposal interrupted, e.g. after this process stalled past its
lease), `lost` is set and the runner stops before its next write, because another
executor may by then own the proposal. A renewal that fails for a database reason is
logged and retried at the next beat: the lease has two more beats of slack.
"""

from __future__ import annotations

import logging
import threading

from placet.errors import PlacetError
from placet.store import LeaseHolder, Store

log = logging.getLogger(__name__)


class Heartbeat:
    """Renews `holder`'s lease on proposal `pid` every `interval` seconds until stopped."""

    def __init__(self, store: Store, pid: int, holder: LeaseHolder, interval: float) -> None:
        self.store = store
        self.pid = pid
        self.holder = holder
        self.interval = interval
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"placet-lease-{pid}", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                held = self.store.heartbeat(self.pid, holder=self.holder)
            except PlacetError as e:
                log.warning("renewing the lease on proposal %s failed: %s", self.pid, e.message)
                continue
            if not held:
                if self._stop.is_set():  # the run finished (and released it) meanwhile
                    return
                log.warning("lost the lease on proposal %s; stopping its execution", self.pid)
                self.lost.set()
                return

    def stop(self) -> None:
        """Stop renewing (idempotent); waits for the thread to end."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
