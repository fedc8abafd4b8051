"""Temporary objects and backups on the drive: their names, and how they go away.

An upload writes to a temporary name (`TEMP_PREFIX`) and a replaced object waits under
a backup name (`BACKUP_PREFIX`) until the replacement is proven (docs/design.md section 3).
Only names of the exact shape placet generates count (`placet.names`), so an owner's
object that merely starts with the prefix is never deleted or moved.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from placet.drive.calls import RcloneCalls
from placet.drive.listing import Listing
from placet.drive.spec import check_drive_path, split_path
from placet.errors import NotFound, PlacetError, UsageError
from placet.names import BACKUP_PREFIX, TEMP_PREFIX, is_placet_backup, is_placet_temp

__all__ = ["Temps", "backup_name", "temp_name"]


def temp_name(name: str, prefix: str = TEMP_PREFIX) -> str:
    """A fresh temporary name for `name`: `prefix`, 12 random hex digits, a dash, then
    as much of `name` as fits in 255 bytes."""
    head = f"{prefix}{secrets.token_hex(6)}-"
    room = 255 - len(head.encode())
    return head + name.encode()[:room].decode("utf-8", "ignore")


def backup_name(name: str) -> str:
    """A fresh name for the previous content of replaced object `name` (`BACKUP_PREFIX`)."""
    return temp_name(name, BACKUP_PREFIX)


def _own(path: str, shape: Callable[[str], bool], verb: str, what: str) -> str:
    """`path` checked (`check_drive_path`), its name of the `shape` placet gives `what`.

    Raises:
        PathRefused: a path placet refuses to pass on. UsageError: another name.
    """
    path = check_drive_path(path)
    if not shape(split_path(path)[1]):
        raise UsageError(f"refusing to {verb} {path!r}: it is not {what}")
    return path


class Temps:
    """Deletes and restores placet's own objects (the ``temps`` part of `RcloneDrive`)."""

    def __init__(self, calls: RcloneCalls, listing: Listing) -> None:
        self._calls = calls
        self._listing = listing

    def remove_temp(self, path: str, *, quiet: bool = False) -> bool:
        """Delete temporary object `path` (its name must have the shape of a name placet
        made, `placet.names`).

        Returns True if it existed. With `quiet`, rclone failures are swallowed (used on
        the way out of a failed upload, where the first error is the one to report).
        """
        path = _own(path, is_placet_temp, "delete", "a placet temp object")
        try:
            self._calls.delete(path, "delete temp")
        except NotFound:
            return False
        except PlacetError:
            if quiet:
                return False
            raise
        return True

    def restore_backup(self, backup: str, target: str) -> bool:
        """Put back a replaced object's previous content that a stopped upload left at
        `backup` (a name of `placet.names.is_placet_backup` shape): moved onto `target`
        when nothing is there; left in place (listed, for the owner to look at) when
        something is, because that may be newer content this process cannot judge.

        Returns True when nothing more is to be done (restored, left for the owner, or
        no backup there), False when the drive failed (the caller retries later). A
        replacement proven complete deletes its backup instead (`discard_backup`).
        """
        backup = _own(backup, is_placet_backup, "restore", "a placet backup")
        target = check_drive_path(target)
        try:
            if self._listing.fresh_stat(backup, ()) is None:
                return True
            if self._listing.fresh_stat(target, ()) is None:
                self._calls.move(backup, target)
        except PlacetError:
            return False
        return True

    def discard_backup(self, backup: str) -> bool:
        """Delete a replaced object's previous content left at `backup` (a name of
        `placet.names.is_placet_backup` shape), once the caller has proven that the
        replacement it belongs to is complete (`placet.executor.temps.remove_temp`).

        Returns True when it is gone (or was never there), False when the drive failed.

        Raises:
            UsageError: `backup` is not of the backup shape.
        """
        backup = _own(backup, is_placet_backup, "delete", "a placet backup")
        try:
            self._calls.delete(backup, "delete backup")
        except NotFound:
            pass  # gone, or never there: the same
        except PlacetError:
            return False
        return True

    def cleanup_temps(
        self,
        folder: str,
        *,
        older_than: timedelta = timedelta(minutes=15),
        now: datetime | None = None,
    ) -> list[str]:
        """Delete temp objects directly in `folder` last modified before now - `older_than`.

        Only names of the exact shape placet generates count (`placet.names`): an
        owner's object that merely starts with ``.placet-tmp-`` is never deleted. A younger
        temp may belong to an upload still running in another placet process.
        Returns the deleted paths.
        """
        folder = check_drive_path(folder)
        cutoff = (now or datetime.now(UTC)) - older_than
        opt = {"recurse": False, "noMimeType": True, "filesOnly": True}
        params = {"fs": self._calls.fs().raw, "remote": folder, "opt": opt}
        items = self._calls.rc("operations/list", params, action="list", target=folder).get("list")
        removed = []
        for item in items or []:
            e = self._calls.entry(item)
            if not is_placet_temp(e.name) or not e.mtime:
                continue
            stale = datetime.fromisoformat(e.mtime.replace("Z", "+00:00")) <= cutoff
            if stale and self.remove_temp(e.path):
                removed.append(e.path)
        return removed
