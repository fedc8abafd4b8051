"""`drive_changes`: what was added, changed or removed under a remote folder since an
anchor, on demand (docs/design.md section 5: no timer, no background polling).

Each call lists the folder once and stores the listing as a snapshot; its id, in an
opaque anchor, is the next call's `since_anchor`. The difference is computed between two
stored snapshots, so its pages never list the remote again. A path only in the new
listing is `added`, only in the old `removed`; a file whose size, mtime or digest (when
both carry one) differs, or that turned into a folder or back, is `changed`; a folder's
own mtime is ignored. Digests are listed only where the remote stores them, so a rewrite
keeping size and mtime on a local or sftp remote is not seen here (the planner sees it).
An anchor of another folder or drive is refused (docs/decisions/0024-sync-plans.md)."""

from __future__ import annotations

import base64
import binascii
import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from placet.drive.base import Drive, preferred_digest
from placet.errors import LimitExceeded, NotFound, PlacetError, UsageError
from placet.sync.stored import SyncData
from placet.sync.tables import RETENTION, Snapshot
from placet.text import inert

ChangeKind = Literal["added", "changed", "removed"]
CHANGE_KINDS: tuple[ChangeKind, ...] = ("added", "changed", "removed")
log = logging.getLogger(__name__)

_ANCHOR_V = "a1"
_CURSOR_V = "c1"


@dataclass(frozen=True)
class Change:
    """One path under the folder (relative to it) and how it changed.

    `before` / `after`: {kind: file|dir, size, mtime, digest} as listed (None when absent).
    """

    path: str
    change: ChangeKind
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass(frozen=True)
class ChangeSet:
    """The changes between two snapshots of `path`, in path order.

    `since`: when the anchor's listing was taken (None: no anchor given, so nothing is
    reported and the call only sets an anchor). `anchor`: pass it as `since_anchor`
    next time. `old_id` / `new_id`: the snapshots compared (for paging).
    """

    path: str
    anchor: str
    taken_at: datetime
    since: datetime | None
    entry_count: int
    changes: list[Change]
    old_id: int | None
    new_id: int


def _b64(obj: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def _unb64(token: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))


def make_anchor(snap: Snapshot) -> str:
    """The opaque anchor naming snapshot `snap`."""
    return f"{_ANCHOR_V}.{_b64({'id': snap.id, 'p': snap.path})}"


def read_anchor(anchor: str) -> int:
    """The snapshot id in `anchor`. Raises UsageError (`invalid_anchor`) if malformed."""
    head, _, body = anchor.partition(".")
    try:
        data = _unb64(body) if head == _ANCHOR_V else None
        ok = isinstance(data, dict) and isinstance(data.get("id"), int)
    except (ValueError, binascii.Error):
        ok = False
    if not ok:
        raise UsageError(
            "since_anchor is not an anchor placet gave; call drive_changes without "
            "since_anchor to get a fresh one",
            code="invalid_anchor",
        )
    return int(data["id"])  # type: ignore[index]


def make_cursor(old_id: int, new_id: int, offset: int, kind: str = "all") -> str:
    """The opaque cursor of the changes of `kind` ("all": every kind) between two
    snapshots, from position `offset` of those changes."""
    return f"{_CURSOR_V}.{_b64([old_id, new_id, offset, kind])}"


def read_cursor(cursor: str) -> tuple[int, int, int, str]:
    """(old snapshot id, new snapshot id, offset, kind listed). Raises UsageError if
    malformed."""
    head, _, body = cursor.partition(".")
    try:
        data = _unb64(body) if head == _CURSOR_V else None
        ok = (
            isinstance(data, list)
            and len(data) == 4
            and all(isinstance(x, int) for x in data[:3])
            and isinstance(data[3], str)
        )
    except (ValueError, binascii.Error):
        ok = False
    if not ok:
        raise UsageError(
            "the cursor is not one drive_changes gave; call drive_changes again without a "
            "cursor to restart paging",
            code="invalid_cursor",
        )
    return data[0], data[1], data[2], data[3]  # type: ignore[index]


def _view(v: list[Any]) -> dict[str, Any]:
    kind, size, mtime, digest = v
    return {"kind": "dir" if kind == "d" else "file", "size": size, "mtime": mtime,
            "digest": digest or None}  # fmt: skip


def diff(old: dict[str, list[Any]], new: dict[str, list[Any]]) -> list[Change]:
    """Changes from listing `old` to listing `new` (see the module docstring)."""
    out: list[Change] = []
    for path in sorted(old.keys() | new.keys()):
        a, b = old.get(path), new.get(path)
        if a is None:
            assert b is not None
            out.append(Change(path, "added", None, _view(b)))
        elif b is None:
            out.append(Change(path, "removed", _view(a), None))
        elif a[0] != b[0] or (
            a[0] == "f" and (a[1] != b[1] or a[2] != b[2] or (a[3] and b[3] and a[3] != b[3]))
        ):
            out.append(Change(path, "changed", _view(a), _view(b)))
    return out


def _load(data: SyncData, snapshot_id: int, spec: str, folder: str) -> Snapshot:
    snap = data.load_snapshot(snapshot_id)
    if snap is None:
        raise NotFound(
            f"the anchor's listing is gone (listings are kept {RETENTION.days} days); call "
            "drive_changes without since_anchor for a fresh anchor",
            code="anchor_expired",
            details={"snapshot_id": snapshot_id},
        )
    if snap.drive_spec != spec or snap.path != folder:
        raise UsageError(
            f"the anchor belongs to remote folder {inert(snap.path)!r} of another call, not "
            f"{inert(folder)!r} on this drive; pass the anchor that drive_changes returned "
            "for this folder",
            code="invalid_anchor",
            details={"anchor_path": snap.path, "path": folder},
        )
    return snap


def take_snapshot(data: SyncData, drive: Drive, folder: str, cap: int) -> Snapshot:
    """List `folder` recursively and store the listing.

    Raises:
        NotFound: no such folder (or it is a file). LimitExceeded: more than `cap`
        files. DriveUnavailable / DriveError.
    """
    caps = drive.capabilities()
    with_digest = preferred_digest(caps) is not None and not caps.hashes_on_demand
    try:
        drive.clear_caches()
    except PlacetError as err:  # only risks a listing from rclone's cache
        log.warning("could not clear rclone's caches before listing: %s", err.message)
    try:
        listed = drive.list_tree(folder, include_digest=with_digest)
    except NotFound as err:
        raise NotFound(
            f"remote folder {inert(folder)!r} does not exist (or is a file); check it with "
            "drive_list",
            details={"remote_path": folder},
        ) from err
    prefix = f"{folder}/" if folder else ""
    entries: dict[str, list[Any]] = {}
    files = 0
    for e in listed:
        rel = e.path[len(prefix) :] if e.path.startswith(prefix) else e.path
        if not rel:
            continue
        if not e.is_dir:
            files += 1
            if files > cap:
                raise LimitExceeded(
                    f"cannot list {inert(folder)!r} for changes: more than {cap} files (the "
                    "plan entry cap); ask about a smaller folder",
                    details={"cap": cap},
                )
        digest = next(iter(e.digests.values()), "") if e.digests else ""
        entries[rel] = ["d" if e.is_dir else "f", e.size, e.mtime, digest]
    return data.save_snapshot(drive.spec, folder, entries)


def drive_changes(
    data: SyncData, drive: Drive, folder: str, since_anchor: str | None, cap: int
) -> ChangeSet:
    """List `folder` now, store the listing, and compare with the anchor's listing.

    Raises:
        UsageError (`invalid_anchor`): malformed, or of another folder or drive.
        NotFound (`anchor_expired`): the anchor's listing was pruned; (`not_found`) no
            such folder. LimitExceeded, DriveUnavailable, DriveError, StoreError.
    """
    old: Snapshot | None = None
    if since_anchor is not None:
        old = _load(data, read_anchor(since_anchor), drive.spec, folder)
    new = take_snapshot(data, drive, folder, cap)
    changes = diff(old.entries, new.entries) if old is not None else []
    return ChangeSet(
        folder, make_anchor(new), new.created_at, old.created_at if old else None,
        len(new.entries), changes, old.id if old else None, new.id,
    )  # fmt: skip


def changes_page(data: SyncData, drive: Drive, folder: str, cursor: str) -> ChangeSet:
    """The change set a `make_cursor` cursor continues (both snapshots re-read, no
    listing). Raises UsageError / NotFound as `drive_changes`."""
    old_id, new_id, _, _ = read_cursor(cursor)
    old = _load(data, old_id, drive.spec, folder)
    new = _load(data, new_id, drive.spec, folder)
    return ChangeSet(
        folder, make_anchor(new), new.created_at, old.created_at, len(new.entries),
        diff(old.entries, new.entries), old.id, new.id,
    )  # fmt: skip
