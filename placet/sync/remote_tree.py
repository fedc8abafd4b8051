"""The remote folder as the merge reads it: listed folder by folder, a batch ahead.

rclone lists each folder on its own (`Drive.list_folders_rows`, one `job/batch` of
non-recursive listings per request), so neither rcd nor placet ever holds more than a
few batches of a tree (docs/decisions/0026-plan-memory.md). A fetching thread lists the
folders in the order the merge enters them (`placet.sync.march.subfolders`: the sorted
order of key + "/"), the smallest known ones first, up to `AHEAD_ROWS` rows ahead of the
merge; the merge's thread turns rows into entries as it asks for each folder
(`RemoteSide.listing`). Digests come as `placet.sync.remote.RemoteLister` says. A folder
whose name placet refuses to pass on is read from its parent's recursive listing; one
removed meanwhile lists empty."""

from __future__ import annotations

import heapq
import threading
from collections.abc import Sequence

from placet.drive.base import Drive, ListRow
from placet.drive.spec import check_drive_path
from placet.errors import NotFound, PathRefused, PlacetError
from placet.sync.entries import RemoteEntry
from placet.sync.jobs import Progress
from placet.sync.march import subfolders
from placet.sync.remote import RemoteLister, RowDigests

AHEAD_ROWS = 20_000
"""Rows listed ahead of the merge, at most (beyond the folder it waits for)."""
BATCH_ROWS = 4_000
"""Rows one request aims at: folders per batch = this / the folder size seen so far."""
BATCH_FOLDERS = 64
"""Folders one request lists, at most."""

_Node = tuple[str, tuple[str, ...]]
"""A folder as the merge enters it: (its key + "/", "" for the synced folder; the drive
paths listed under that key)."""


class RemoteTree:
    """One listing of remote `folder` (see the module docstring): `listing` for each
    folder in order, then `finish`; `abandon` when the caller gives up.

    `missing`: the synced folder does not exist (an empty side).
    """

    def __init__(
        self,
        lister: RemoteLister,
        drive: Drive,
        folder: str,
        *,
        case_insensitive: bool,
        include_hidden: bool,
        progress: Progress | None = None,
    ) -> None:
        self.lister, self.drive, self.folder, self.progress = lister, drive, folder, progress
        self.ci, self.include_hidden = case_insensitive, include_hidden
        self.prefix = f"{folder}/" if folder else ""
        self.digests = RowDigests(lister, drive, folder)
        self.missing = False
        self.entries_seen = 0
        self.cond = threading.Condition()
        self.todo: list[_Node] = [("", (folder,))]  # a heap, smallest first
        self.ready: dict[str, tuple[tuple[str, ...], list[ListRow] | BaseException]] = {}
        self.ahead = 0  # rows ready and not yet taken
        self.busy: set[str] = set()  # keys being listed
        self.known: set[str] = {""}  # keys to list or being listed
        # Folders beneath a folder whose name placet refuses, from its parent's
        # recursive listing (`_refused`): handed out when their turn comes.
        self.extra: dict[str, list[ListRow]] = {}
        self.failed: BaseException | None = None
        self.stopped = False
        self.rows_per_folder = 100.0
        if progress is not None:
            progress.phase = "listing the remote"
        self.thread = threading.Thread(target=self._fetch, name="placet-list", daemon=True)
        self.thread.start()

    # ---- the fetching thread --------------------------------------------------------

    def _next_batch(self) -> list[_Node] | None:
        """The folders to list next (under the lock), or None to stop."""
        while not self.stopped:
            if self.todo:
                needed = not self.ready or self.todo[0][0] < min(self.ready)
                if needed or self.ahead < AHEAD_ROWS:
                    n = int(max(1, min(BATCH_FOLDERS, BATCH_ROWS // max(self.rows_per_folder, 1))))
                    batch = [heapq.heappop(self.todo) for _ in range(min(n, len(self.todo)))]
                    self.busy.update(k for k, _ in batch)
                    return batch
            self.cond.wait()
        return None

    def _fetch(self) -> None:
        try:
            while True:
                with self.cond:
                    batch = self._next_batch()
                if batch is None:
                    return
                got = self._list(batch)
                with self.cond:
                    for (key, paths), rows in zip(batch, got, strict=True):
                        self.busy.discard(key)
                        self.known.discard(key)
                        self.ready[key] = (paths, rows)
                        if isinstance(rows, list):
                            self.ahead += len(rows)
                            for sub in self._subfolders(rows):
                                heapq.heappush(self.todo, sub)
                                self.known.add(sub[0])
                    listed = [len(r) for r in got if isinstance(r, list)]
                    if listed:
                        self.rows_per_folder = 0.8 * self.rows_per_folder + 0.2 * (
                            sum(listed) / len(listed)
                        )
                    self.cond.notify_all()
        except BaseException as e:  # handed to the merge's thread
            with self.cond:
                self.failed = e
                self.cond.notify_all()

    def _list(self, batch: list[_Node]) -> list[list[ListRow] | BaseException]:
        """Each folder of `batch` listed: its rows (those of its paths, in order), or
        the error its listing met."""
        flat: list[str] = []
        refused: set[str] = set()
        by_path: dict[str, list[ListRow] | PlacetError] = {}
        for _, paths in batch:
            for p in paths:
                if p in self.extra:
                    by_path[p] = self.extra.pop(p)
                    continue
                try:
                    check_drive_path(p)
                    flat.append(p)
                except PathRefused:
                    refused.add(p)
        if flat:
            lister = self.digests.listing_type
            for p, r in zip(
                flat, self.drive.list_folders_rows(flat, digest_type=lister), strict=True
            ):
                by_path[p] = r
        for p in refused:
            by_path[p] = self._refused(p)
        out: list[list[ListRow] | BaseException] = []
        for key, paths in batch:
            rows: list[ListRow] = []
            failed: BaseException | None = None
            for p in paths:
                r = by_path[p]
                if isinstance(r, NotFound):
                    if key == "":
                        failed = r  # the synced folder itself: missing, or a file
                    continue  # removed since its parent was listed
                if isinstance(r, BaseException):
                    failed = r
                    break
                rows += r
            out.append(failed if failed is not None else rows)
        if self.digests.cold:
            self.digests.remember_listed(out)
        return out

    def _refused(self, path: str) -> list[ListRow]:
        """The rows of `path` (a name placet refuses to pass on, in a folder it may
        list), from its parent's recursive listing; its subfolders' rows wait in
        `extra`."""
        parent = path.rpartition("/")[0]
        below = path + "/"
        rows = self.drive.list_rows(parent, recurse=True, digest_type=self.digests.listing_type)
        by_folder: dict[str, list[ListRow]] = {path: []}
        for r in rows:
            if r[0].startswith(below):
                by_folder.setdefault(r[0].rpartition("/")[0], []).append(r)
        mine = by_folder.pop(path)
        self.extra.update(by_folder)
        return mine

    def _subfolders(self, rows: list[ListRow]) -> list[_Node]:
        cut = len(self.prefix)
        found = subfolders(((r[0][cut:], r[0]) for r in rows if r[1]), self.ci, self.include_hidden)
        return [(k + "/", tuple(paths)) for k, paths in found]

    # ---- the merge's thread ---------------------------------------------------------

    def listing(self, key: str, folders: Sequence[RemoteEntry]) -> list[RemoteEntry]:
        """The entries directly in `folders` (the synced folder when there are none).

        Raises:
            PathRefused (`not_a_directory`): the synced folder is a file.
            DriveUnavailable / DriveError / StoreError: as listing or hashing failed.
        """
        want = key + "/" if folders else ""
        paths = tuple(self.prefix + f.path for f in folders) if folders else (self.folder,)
        rows = self._take(want, paths)
        if isinstance(rows, NotFound) and not folders:
            self.lister.missing(self.drive, self.folder)
            self.missing = True
            rows = []
        if isinstance(rows, BaseException):
            raise rows
        entries = self.digests.entries(rows, paths)
        self.entries_seen += len(entries)
        if self.progress is not None:
            self.progress.remote_entries = self.entries_seen
        return entries

    def _take(self, want: str, paths: tuple[str, ...]) -> list[ListRow] | BaseException:
        """The rows the fetching thread listed for `want` (waiting for them)."""
        with self.cond:
            # Folders ready before this one are folders the merge went past: let go.
            for k in [k for k in self.ready if k < want]:
                dropped = self.ready.pop(k)[1]
                self.ahead -= len(dropped) if isinstance(dropped, list) else 0
            self.cond.notify_all()
            while True:
                if self.failed is not None:
                    raise self.failed
                got = self.ready.pop(want, None)
                if got is not None or want not in self.known:
                    break
                self.cond.wait()
            if got is not None:
                self.ahead -= len(got[1]) if isinstance(got[1], list) else 0
                self.cond.notify_all()
        if got is not None and got[0] == paths:
            return got[1]
        # Not the folder the thread listed (never expected): list it here.
        return self._list([(want, paths)])[0]

    def finish(self) -> None:
        """The merge is done: stop the fetching thread."""
        self.abandon()

    def abandon(self) -> None:
        """Stop the fetching thread and drop what it listed."""
        with self.cond:
            self.stopped = True
            self.ready.clear()
            self.cond.notify_all()
        self.thread.join()


def collect(tree: RemoteTree, ci: bool, include_hidden: bool) -> list[RemoteEntry]:
    """Every entry of `tree`, depth first in the merge's order (tests, `remote_listing`)."""
    out: list[RemoteEntry] = []

    def walk(key: str, folders: Sequence[RemoteEntry]) -> None:
        got = tree.listing(key, folders)
        out.extend(got)
        for k, sub in subfolders(((e.path, e) for e in got), ci, include_hidden):
            walk(k, sub)

    walk("", ())
    return out


__all__ = ["RemoteTree", "collect"]
