"""The remote folder as the merge reads it: listed folder by folder, a batch ahead.

rclone lists each folder on its own (`Drive.list_folders_rows`, one `job/batch` of
non-recursive listings per request), so neither rcd nor placet ever holds more than a
few batches of a tree (docs/decisions/0026-plan-memory.md). Folders are listed in the
order the merge enters them (`placet.sync.march.subfolders`: the sorted order of
key + "/"), the smallest known ones first, up to `AHEAD_ROWS` rows ahead of the merge.
A thread only sends each request and waits for its answer; the merge's thread decodes
answers as they arrive, which tells which folders come next, and turns rows into entries
as it asks for each folder (Python work in a second thread would make the walk's every
`lstat` wait for the interpreter lock). Digests come as `placet.sync.remote.RowDigests`
says. A folder whose name placet refuses to pass on is read from its parent's recursive
listing; one removed meanwhile lists empty."""

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
_Listed = list[ListRow] | BaseException
"""A folder's rows, or the error its listing met."""


class RemoteTree:
    """One listing of remote `folder` (see the module docstring): `listing` for each
    folder in order, then `finish` (also when the caller gives up).

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
        self.known: set[str] = {""}  # keys to list, being listed, or answered undecoded
        # Answers the thread got, undecoded: (the batch, paths sent, answer or error,
        # rows of paths not sent).
        self.arrived: list[
            tuple[list[_Node], list[str], bytes | BaseException, dict[str, _Listed]]
        ] = []
        self.ready: dict[str, tuple[tuple[str, ...], _Listed]] = {}
        self.ahead = 0  # rows ready and not yet taken
        self.stopped = False
        self.waiting = False  # the thread waits for room to send
        self.rows_per_folder = 100.0
        # Folders beneath a folder whose name placet refuses, from its parent's
        # recursive listing (`_refused`): handed out when their turn comes.
        self.extra: dict[str, list[ListRow]] = {}
        if progress is not None:
            progress.phase = "listing the remote"
        self.thread = threading.Thread(target=self._fetch, name="placet-list", daemon=True)
        self.thread.start()

    # ---- the sending thread ---------------------------------------------------------

    def _can_send(self) -> bool:
        """Whether the thread may send its next request now (under the lock)."""
        if not self.todo or len(self.arrived) >= 2:  # at most two answers wait, undecoded
            return False
        needed = not self.ready or self.todo[0][0] < min(self.ready)
        return needed or self.ahead < AHEAD_ROWS

    def _wake(self) -> None:
        """Wake the thread if it waits and may send now (under the lock): each wake-up
        costs both threads a hand-over of the interpreter lock."""
        if self.waiting and self._can_send():
            self.cond.notify_all()

    def _next_batch(self) -> list[_Node] | None:
        """The folders to list next (under the lock), or None to stop."""
        while not self.stopped:
            if self._can_send():
                n = int(max(1, min(BATCH_FOLDERS, BATCH_ROWS // max(self.rows_per_folder, 1))))
                return [heapq.heappop(self.todo) for _ in range(min(n, len(self.todo)))]
            self.waiting = True
            try:
                self.cond.wait()
            finally:
                self.waiting = False
        return None

    def _fetch(self) -> None:
        while True:
            with self.cond:
                batch = self._next_batch()
            if batch is None:
                return
            flat: list[str] = []
            other: dict[str, _Listed] = {}
            answer: bytes | BaseException
            try:
                for _, paths in batch:
                    for p in paths:
                        if p in self.extra:
                            other[p] = self.extra.pop(p)
                        elif _is_refused(p):
                            other[p] = self._refused(p)
                        else:
                            flat.append(p)
                answer = (
                    self.drive.list_folders_raw(flat, digest_type=self.digests.listing_type)
                    if flat
                    else b""
                )
            except BaseException as e:  # handed to the merge's thread, for every folder
                flat, other, answer = [p for _, paths in batch for p in paths], {}, e
            with self.cond:
                self.arrived.append((batch, flat, answer, other))
                self.cond.notify_all()

    def _refused(self, path: str) -> list[ListRow]:
        """The rows of `path` (a name placet refuses to pass on, in a folder it may
        list), from its parent's recursive listing; the rows of every other refused
        folder beneath that parent (its siblings, their subfolders) wait in `extra`, so
        the parent is listed once however many it holds."""
        parent = path.rpartition("/")[0]
        rows = self.drive.list_rows(parent, recurse=True, digest_type=self.digests.listing_type)
        by_folder: dict[str, list[ListRow]] = {path: []}
        refused: dict[str, bool] = {}

        def is_refused(folder: str) -> bool:  # beneath a refused name (the parent is not)
            got = refused.get(folder)
            if got is None:
                got = refused[folder] = _is_refused(folder)
            return got

        for r in rows:
            folder = r[0].rpartition("/")[0]
            if folder != parent and is_refused(folder):
                by_folder.setdefault(folder, []).append(r)
            if r[1] and is_refused(r[0]):
                by_folder.setdefault(r[0], [])  # also when it holds nothing
        mine = by_folder.pop(path)
        self.extra.update(by_folder)
        return mine

    # ---- the merge's thread ---------------------------------------------------------

    def _pump(self) -> None:
        """Decode the answers that arrived (under the lock): each folder's rows ready,
        its subfolders next to list."""
        while self.arrived:
            batch, flat, answer, other = self.arrived.pop(0)
            self.cond.release()
            try:
                got = self._decoded(batch, flat, answer, other)
            finally:
                self.cond.acquire()
            for (key, paths), rows in zip(batch, got, strict=True):
                self.known.discard(key)
                self.ready[key] = (paths, rows)
                if isinstance(rows, list):
                    self.ahead += len(rows)
                    for sub in self._subfolders(rows):
                        heapq.heappush(self.todo, sub)
                        self.known.add(sub[0])
            listed = [len(r) for r in got if isinstance(r, list)]
            if listed:
                avg = sum(listed) / len(listed)
                self.rows_per_folder = 0.8 * self.rows_per_folder + 0.2 * avg
            self._wake()

    def _decoded(
        self,
        batch: list[_Node],
        flat: list[str],
        answer: bytes | BaseException,
        other: dict[str, _Listed],
    ) -> list[_Listed]:
        """Each folder of `batch`: its rows (those of its paths, in order), or the error
        its listing met."""
        by_path: dict[str, list[ListRow] | BaseException] = dict(other)
        if isinstance(answer, BaseException):
            by_path.update(dict.fromkeys(flat, answer))
        elif flat:
            dtype = self.digests.listing_type
            decoded = self.drive.folders_from_raw(answer, flat, digest_type=dtype)
            by_path.update(zip(flat, decoded, strict=True))
        out: list[_Listed] = []
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

    def _subfolders(self, rows: list[ListRow]) -> list[_Node]:
        cut = len(self.prefix)
        found = subfolders(((r[0][cut:], r[0]) for r in rows if r[1]), self.ci, self.include_hidden)
        return [(k + "/", tuple(paths)) for k, paths in found]

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

    def _take(self, want: str, paths: tuple[str, ...]) -> _Listed:
        """The rows listed for `want`, waiting for them."""
        with self.cond:
            # Folders ready before this one are folders the merge went past: let go.
            for k in [k for k in self.ready if k < want]:
                dropped = self.ready.pop(k)[1]
                self.ahead -= len(dropped) if isinstance(dropped, list) else 0
            while True:
                self._pump()
                got = self.ready.pop(want, None)
                if got is not None or want not in self.known:
                    break
                self._wake()
                self.cond.wait()
            if got is not None:
                self.ahead -= len(got[1]) if isinstance(got[1], list) else 0
            self._wake()
        if got is not None and got[0] == paths:
            return got[1]
        # Not the folder the thread listed (never expected): list it here.
        node = (want, paths)
        flat = [p for p in paths if not _is_refused(p)]
        other: dict[str, _Listed] = {p: self._refused(p) for p in paths if _is_refused(p)}
        try:
            answer: bytes | BaseException = self.drive.list_folders_raw(
                flat, digest_type=self.digests.listing_type
            )
        except PlacetError as e:
            answer = e
        return self._decoded([node], flat, answer, other)[0]

    def finish(self) -> None:
        """The merge is done (or gave up): stop the thread, drop what it listed."""
        with self.cond:
            self.stopped = True
            self.ready.clear()
            self.arrived.clear()
            self.cond.notify_all()
        self.thread.join()


def _is_refused(path: str) -> bool:
    """Whether placet refuses to pass `path` on (`check_drive_path`)."""
    try:
        check_drive_path(path)
    except PathRefused:
        return True
    return False


def collect(tree: RemoteTree, ci: bool, include_hidden: bool) -> list[RemoteEntry]:
    """Every entry of `tree`, depth first in the merge's order (tests, `remote_listing`)."""
    out: list[RemoteEntry] = []
    todo: list[tuple[str, Sequence[RemoteEntry]]] = [("", ())]  # a stack: trees run deep
    while todo:
        got = tree.listing(*todo.pop())
        out.extend(got)
        found = subfolders(((e.path, e) for e in got if e.kind == "dir"), ci, include_hidden)
        todo += reversed(found)
    return out


__all__ = ["RemoteTree", "collect"]
