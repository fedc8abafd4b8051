"""Listing the remote side of a sync with digests, hashing as little as possible.

DESIGN.md section 9 ("Digest choice"): on remotes whose digests rclone computes by
reading the data (local folders, sftp: `Capabilities.hashes_on_demand`), a digest is
reused from the persistent remote digest cache (`SyncData.remote_digests`) while the
file's size and mtime match. The drive offers no hook for such a store, so this goes
through the public `Drive` interface: a listing without digests, the cache, then only
the misses hashed, one `digest_of` each (checked against a stat afterwards, so a file
that changed meanwhile gets none) or, when many miss, one hashed listing. A cold
listing (nothing cached under the folder) hashes the top-level subfolders in concurrent
listings, because rclone computes one listing's digests one file at a time.

Other remotes report stored digests with the listing at no extra cost, so they are
listed once with digests.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from placet.drive.base import Drive, Entry, preferred_digest
from placet.errors import NotFound, PathRefused
from placet.store.sync_data import SyncData
from placet.sync.jobs import Progress
from placet.sync.model import OneDigest, RemoteEntry
from placet.sync.ops import remote_entries_from_drive
from placet.text import inert

BULK_MISSES = 256
"""More remote digest misses than this (and a tenth of the files): one hashed listing."""
_THREADS = 4


class RemoteLister:
    """Remote listings with digests for one process; `files_hashed` counts the remote
    files whose digest was computed rather than taken from the cache."""

    def __init__(self, data: SyncData) -> None:
        self.data = data
        self.files_hashed = 0

    def remote_listing(
        self, drive: Drive, folder: str, progress: Progress | None = None
    ) -> tuple[list[RemoteEntry], bool]:
        """The planner's listing of remote `folder` with digests, and whether the folder
        is missing (an empty side).

        Raises:
            PathRefused (`not_a_directory`): `folder` is a file. DriveUnavailable /
                DriveError: rclone failed.
        """
        caps = drive.capabilities()
        dtype = preferred_digest(caps)
        try:
            if dtype is None or not caps.hashes_on_demand:
                listed = drive.list_tree(folder, include_digest=dtype is not None)
                entries = remote_entries_from_drive(listed, folder)
            else:
                entries = self._cached_remote_digests(drive, folder, dtype, progress)
        except NotFound:
            found = drive.stat(folder) if folder else None
            if found is not None and not found.is_dir:
                raise PathRefused(
                    f"refusing remote {inert(folder)!r}: it is a file, not a folder; name a "
                    "folder of the drive",
                    code="not_a_directory",
                    details={"remote_path": folder},
                ) from None
            return [], True
        if progress is not None:
            progress.remote_entries = len(entries)
        return entries, False

    def _cached_remote_digests(
        self, drive: Drive, folder: str, dtype: str, progress: Progress | None
    ) -> list[RemoteEntry]:
        """The listing of an on-demand remote with digests from the remote digest cache;
        misses hashed by rclone and remembered (see the module docstring)."""
        spec = drive.spec
        prefix = f"{folder}/" if folder else ""
        cut = len(prefix)
        cache = self.data.remote_digests(spec, dtype)
        if progress is not None:
            progress.phase = "listing the remote"
        if not any(p.startswith(prefix) for p in cache):
            # Nothing cached under the folder: hashed listings, not a listing first.
            listed = self._hashed_tree(drive, folder, dtype)
            files = [e for e in listed if not e.is_dir]
            self.files_hashed += len(files)
            self.data.put_remote_digests(
                spec,
                dtype,
                [
                    (e.path, e.size, e.mtime, e.digests[dtype])
                    for e in files
                    if e.digests.get(dtype) and e.size is not None and e.mtime
                ],
            )
            return remote_entries_from_drive(listed, folder)
        out: list[RemoteEntry] = []
        misses: list[Entry] = []
        get = cache.get
        for e in drive.list_tree(folder, include_digest=False):
            rel = e.path[cut:]
            if not rel or not e.path.startswith(prefix):
                continue
            if e.is_dir:
                out.append(RemoteEntry(rel, "dir", 0, e.mtime))
                continue
            c = get(e.path)
            if c is not None and c[0] == e.size and c[1] == e.mtime:
                out.append(RemoteEntry(rel, "file", c[0], e.mtime, OneDigest(dtype, c[2])))
            else:
                misses.append(e)
        if misses:
            if progress is not None:
                progress.phase = f"hashing {len(misses)} remote files"
            got = self._hash_remote(drive, folder, dtype, misses, len(out) + len(misses))
            fresh: list[tuple[str, int, str, str]] = []
            for e in misses:
                digest = got.get(e.path)
                if digest is not None and e.size is not None and e.mtime is not None:
                    fresh.append((e.path, e.size, e.mtime, digest))
                size = -1 if e.size is None else e.size
                digests = {dtype: digest} if digest else {}
                out.append(RemoteEntry(e.path[cut:], "file", size, e.mtime, digests))
            self.files_hashed += len(misses)
            self.data.put_remote_digests(spec, dtype, fresh)
        return out

    def _hashed_tree(self, drive: Drive, folder: str, dtype: str) -> list[Entry]:
        """`drive.list_tree(folder, include_digest=True)`, with the subfolders of `folder`
        listed concurrently: rclone computes the digests of one listing one file at a
        time, so on a cold plan its hashing, not the disk, sets the pace (measured: 7.1 s
        for 100,000 files in one listing, 5.3 s in two at once). Files directly in
        `folder` are hashed one call each; if there are many, one listing does it all."""
        top: list[Entry] = []
        cursor: str | None = None
        while True:
            page, cursor = drive.list_folder(folder, include_digest=False, cursor=cursor,
                                             limit=1000)  # fmt: skip
            top += page
            if cursor is None:
                break
        files = [e for e in top if not e.is_dir]
        subs = [e.path for e in top if e.is_dir]
        if len(files) > BULK_MISSES or len(subs) < 2:
            return drive.list_tree(folder, include_digest=True)
        threads = max(2, min(_THREADS, os.cpu_count() or 2))
        try:
            with ThreadPoolExecutor(threads, thread_name_prefix="placet-rlist") as ex:
                trees = list(ex.map(lambda d: drive.list_tree(d, include_digest=True), subs))
        except PathRefused:
            # A subfolder's name cannot be passed to the drive on its own (a ':', a
            # leading '-'...): one listing from `folder` covers it (the planner then
            # reports the name as unusable).
            return drive.list_tree(folder, include_digest=True)
        got = self._hash_remote(drive, folder, dtype, files, len(files)) if files else {}
        out = [e for e in top if e.is_dir]
        out += [replace(e, digests={dtype: got[e.path]} if e.path in got else {}) for e in files]
        for tree in trees:
            out += tree
        return out

    def _hash_remote(
        self, drive: Drive, folder: str, dtype: str, misses: list[Entry], total: int
    ) -> dict[str, str]:
        """Digests of `misses` (of `total` listed), computed by rclone; a file changed
        meanwhile gets none."""
        out: dict[str, str] = {}
        if len(misses) > BULK_MISSES and len(misses) > total // 10:
            listed = {e.path: e for e in drive.list_tree(folder, include_digest=True)}
            for e in misses:
                f = listed.get(e.path)
                same = f is not None and (f.size, f.mtime) == (e.size, e.mtime)
                if same and f is not None and (d := f.digests.get(dtype)):
                    out[e.path] = d
            return out

        def one(e: Entry) -> tuple[str, str | None]:
            try:
                d = drive.digest_of(e.path, dtype)
                after = drive.stat(e.path)  # computed for the listed version only
            except PathRefused:  # a name placet cannot use: no digest (the plan says why)
                return e.path, None
            same = after is not None and (after.size, after.mtime) == (e.size, e.mtime)
            return e.path, d if same else None

        with ThreadPoolExecutor(_THREADS, thread_name_prefix="placet-rhash") as ex:
            for path, d in ex.map(one, misses):
                if d:
                    out[path] = d
        return out
