"""The real executor with its run held at a chosen progress event, so that a test reads
a front end's progress line mid-run without sleeping: `HeldRun` is handed to a front end
as its executor (`make_app(executor=...)`, `Runs.executor`); at the first event naming an
op in flight, after the front end's own callback saw it, the run waits until the test
calls `release()`."""

from __future__ import annotations

import threading
from typing import Any

from placet.config import Settings
from placet.executor import ProgressCallback, ProgressEvent, execute
from placet.store import ProposalRecord, Store


class HeldRun:
    """`execute`, held at the first event whose `current` is set (module docstring)."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.event: ProgressEvent | None = None
        self._go = threading.Event()

    def release(self) -> None:
        self._go.set()

    def __call__(
        self,
        store: Store,
        settings: Settings,
        proposal_id: int,
        *,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        **kw: Any,
    ) -> ProposalRecord:
        def hold(ev: ProgressEvent) -> None:
            if progress is not None:
                progress(ev)
            if ev.current is not None and not self.held.is_set():
                self.event = ev
                self.held.set()
                self._go.wait(120)

        return execute(store, settings, proposal_id, progress=hold, cancel=cancel, **kw)
