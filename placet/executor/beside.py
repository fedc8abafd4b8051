"""The checks a sync needs over every op, run beside its transfers rather than before the
first one, so the first op starts within 1 s of the accept (docs/design.md section 8;
docs/decisions/0027-sync-execution.md).

- Own folders (`placet.proposals.vetting.OwnPaths`): each op is checked right before it
  acts, on its own thread; one refused fails `placet_own_path` and writes nothing (the
  front ends still refuse such a proposal whole before the decision).
- Old temporary names (`Drive.cleanup_temps`): a folder's names older than 15 minutes
  are removed before the first transfer into it, once (not in a folder the run created);
  the run's own are younger.
- The stored rows (`Store.check_ops`): when the executor runs the ops the owner was
  shown, the rows are hashed again on a thread of their own; rows rewritten since stop
  the run (`request_altered`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

from placet.drive.base import Drive
from placet.errors import PlacetError, PolicyRefused
from placet.proposals.vetting import OwnPaths
from placet.schema import Op
from placet.store import ProposalRecord, Store

log = logging.getLogger(__name__)


def for_execution(e: PolicyRefused) -> PolicyRefused:
    """A `placet_own_path` refusal worded for execution rather than for accepting."""
    message = e.message.replace("refusing to accept", "refusing to execute", 1)
    return PolicyRefused(message, code=e.error_code, details=e.details)


class Beside:
    """The checks of one sync's run that go beside its transfers (module docstring)."""

    def __init__(self, store: Store, record: ProposalRecord, drive: Drive, own: OwnPaths) -> None:
        self.store, self.record, self.drive, self.own = store, record, drive, own
        self.removed: list[str] = []  # old temporary names removed, "remote:<path>"
        self.altered: PlacetError | None = None  # why the rows no longer match
        self._swept: set[str] = set()
        self._lock = threading.Lock()
        self._rows: threading.Thread | None = None

    def refusal(self, op: Op) -> PlacetError | None:
        """Why `op` must not run (it writes into placet's own folders), or None."""
        try:
            self.own(op)
        except PolicyRefused as e:
            return for_execution(e)
        return None

    def sweep(self, op: Op) -> None:
        """Remove old temporary names in upload `op`'s target folder, the first time a
        transfer goes there (failures are logged, as the sweep is best effort)."""
        if op.kind not in ("upload", "upload_revision"):
            return
        folder = (op.remote_path or "").rpartition("/")[0]
        with self._lock:
            if folder in self._swept:
                return
            self._swept.add(folder)
        with contextlib.suppress(PlacetError):
            gone = self.drive.cleanup_temps(folder)
            with self._lock:
                self.removed += [f"remote:{p}" for p in gone]

    def created(self, folders: list[str]) -> None:
        """Folders this run created (absent at its stat): none needs a sweep, as every
        temporary name in them is this run's own, younger than the sweep's cut-off."""
        with self._lock:
            self._swept.update(folders)

    def check_rows(self, on_altered: Callable[[PlacetError], None]) -> None:
        """Hash the stored rows on a thread; `on_altered(error)` when they no longer match
        the request (called from that thread)."""

        def run() -> None:
            try:
                self.store.check_ops(self.record.id, self.record.request)
            except PlacetError as e:
                log.warning("proposal %s: %s", self.record.id, e.message)
                self.altered = e
                on_altered(e)

        self._rows = threading.Thread(target=run, name="placet-rows-check", daemon=True)
        self._rows.start()

    def rows_checked(self) -> PlacetError | None:
        """Wait for the rows check, if one runs; why they no longer match, or None."""
        if self._rows is not None:
            self._rows.join()
        return self.altered


__all__ = ["Beside", "for_execution"]
