"""The drive an accept runs on, opened (its `rclone rcd` started) while the owner decides.

Starting rcd and its first `operations/fsinfo` takes 0.3-0.7 s on a busy box; done after
the decision it delays the first op by as much (bench/first_op.py). So every front end
starts a `WarmDrive` as an accept's confirmation is prepared (`warm_for`: only when one of
the proposals runs here, on the configured drive), hands `WarmDrive.drive()` to each run
the decision starts (`decisions.run`) and closes it when they end, or as soon as the
confirmation is cancelled, refused or left: no rcd keeps running when nobody accepted.
The executor checks the drive it is given as it checks its own (the proposal's drive
must be this one) and clears rclone's caches as a run starts, so warming changes no
safety check and nothing is answered from before the decision.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable
from typing import Self

from placet.config import Settings
from placet.drive import configured_spec, drive_for
from placet.drive.base import Drive
from placet.errors import PlacetError
from placet.store import ProposalRecord
from placet.store.host import runs_elsewhere

__all__ = ["WarmDrive", "warm_for", "warms"]


class WarmDrive:
    """The configured drive of `settings`, opened and asked its capabilities (which starts
    its rcd) in a thread from construction; `close` stops it, or has the thread stop it if
    the rcd is still starting. With `settings` None, nothing is opened (`drive()` is
    None). Thread-safe."""

    def __init__(self, settings: Settings | None) -> None:
        self.opens = settings is not None
        """Whether this opens a drive (settings given)."""
        self._lock = threading.Lock()
        self._drive: Drive | None = None
        self._closed = False
        self._ready = threading.Event()
        if settings is None:
            self._ready.set()
            return
        threading.Thread(
            target=self._warm, args=(settings,), name="placet-warm-drive", daemon=True
        ).start()

    def _warm(self, settings: Settings) -> None:
        try:
            with self._lock:
                if self._closed:
                    return
            try:
                drive = drive_for(settings)
            except PlacetError:
                return  # the run opens its own and reports why it cannot
            with contextlib.suppress(PlacetError):  # the run meets it again and says so
                drive.capabilities()
            with self._lock:
                if not self._closed:
                    self._drive = drive
                    return
            drive.close()  # closed while its rcd started
        finally:
            self._ready.set()

    @property
    def ready(self) -> bool:
        """Whether the warming ended (the drive opened, or not)."""
        return self._ready.is_set()

    def drive(self) -> Drive | None:
        """The warmed drive, once warming ended (waits for it); None when it could not be
        opened or this was closed. It stays this object's to close."""
        self._ready.wait()
        with self._lock:
            return self._drive

    def close(self) -> None:
        """Stop the drive's rcd (at once, or as its start ends). Idempotent."""
        with self._lock:
            self._closed = True
            drive, self._drive = self._drive, None
        if drive is not None:
            drive.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def warms(settings: Settings, here: str, records: Iterable[ProposalRecord]) -> bool:
    """Whether accepting `records` on host `here` runs one on the configured drive (none
    does when another host runs each, or the executor refuses it as ``drive_changed``)."""
    spec = configured_spec(settings)
    return any(not runs_elsewhere(r.host_id, here) and r.drive_spec == spec for r in records)


def warm_for(settings: Settings, here: str, records: Iterable[ProposalRecord]) -> WarmDrive:
    """The `WarmDrive` for accepting `records` on host `here`: one that opens nothing
    unless one of them runs here on the configured drive (`warms`)."""
    return WarmDrive(settings if warms(settings, here, records) else None)
