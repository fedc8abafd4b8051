"""Listing the remote side of a sync with digests, hashing as little as possible.

DESIGN.md section 9 ("Digest choice"): on remotes whose digests rclone computes by
reading the data (local folders, sftp: `Capabilities.hashes_on_demand`), a digest is
reused from the persistent remote digest cache (`SyncData.remote_digests`) while the
file's size and mtime match; only the misses are hashed, one `digest_of` each (checked
against a stat afterwards, so a file that changed meanwhile gets none) or, when many
miss, by one hashed listing. That cache is the only one: the drive is handed it as its
`DigestStore` (`use_digest_store`), and the planner's listing (`Drive.list_rows`) caches
nothing itself.

What else it decides, and why (docs/performance.md, "Plan"):

- **Listed in pieces.** The folder's own entries come from one non-recursive listing,
  each top-level subfolder from a recursive listing of its own, a few at a time. rclone
  answers a listing only once it is complete, as one JSON document; in pieces, this
  thread turns one piece into entries while rclone lists the next, and the decoded
  JSON of only a few pieces is alive at once rather than the whole tree's.
- **Cold hashing in parallel.** With nothing cached under the folder, the pieces are
  listed with digests, up to `_THREADS` at once, because rclone computes one listing's
  digests one file at a time (measured: 7.1 s for 100,000 files in one listing, 5.3 s
  by subfolders).
- **Lean entries.** Listings arrive as tuples (`ListRow`) and become `RemoteEntry`s
  directly, sharing the cache's mtime and digest strings.
- **Names placet refuses** (a `:`, a leading `-`...) cannot be passed to the drive on
  their own: such a file gets no digest instead of failing the listing, and a subfolder
  so named is listed within its parent's listing. The planner reports them.

Other remotes report stored digests with the listing at no extra cost, so they are
listed in pieces with digests, and nothing is cached.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import MappingProxyType
from typing import Any

from placet.drive.base import DigestRow, Drive, ListRow, preferred_digest
from placet.errors import NotFound, PathRefused
from placet.store.sync_data import SyncData
from placet.sync.jobs import Progress
from placet.sync.model import OneDigest, RemoteEntry, new_remote_entry
from placet.text import inert

BULK_MISSES = 256
"""More remote digest misses than this (and a tenth of the files): one hashed listing."""
_NONE: Mapping[str, str] = MappingProxyType({})
"""The digests of a folder or an undigested file: one shared empty mapping."""
_THREADS = 4
"""Concurrent listings when rclone hashes (cold); warm listings run 2 at a time."""


class SyncDigestStore:
    """`SyncData`'s remote digest cache for one drive, as the drive's `DigestStore`."""

    def __init__(self, data: SyncData, drive_spec: str) -> None:
        self.data, self.spec = data, drive_spec

    def cached(self, digest_type: str) -> Mapping[str, tuple[int, str, str]]:
        return self.data.remote_digests(self.spec, digest_type)

    def remember(self, digest_type: str, rows: Sequence[DigestRow]) -> None:
        self.data.put_remote_digests(self.spec, digest_type, rows)


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
        is missing (an empty side): `begin(...)()`.

        Raises:
            PathRefused (`not_a_directory`): `folder` is a file. DriveUnavailable /
                DriveError: rclone failed.
        """
        return self.begin(drive, folder, progress)()

    def begin(
        self, drive: Drive, folder: str, progress: Progress | None = None
    ) -> Callable[[], tuple[list[RemoteEntry], bool]]:
        """Start listing remote `folder`; the returned function finishes the listing.

        A background thread loads the remote digest cache and fetches the pieces (rclone
        does the work, in its own process; this thread mostly waits on the socket). The
        returned function waits for them and builds the entries in the calling thread,
        so that whatever the caller does meanwhile (the local index: one `lstat` per
        file) does not take turns with Python work here for the interpreter lock:
        measured, that contention made each `lstat` wait for the other thread's switch
        interval and doubled the index's time. Call the function exactly once; it
        returns or raises what `remote_listing` does.
        """
        caps = drive.capabilities()
        dtype = preferred_digest(caps)
        on_demand = dtype is not None and caps.hashes_on_demand
        prefix = f"{folder}/" if folder else ""
        box: list[Any] = []

        def fetch() -> None:
            try:
                cache: Mapping[str, tuple[int, str, str]] = {}
                cold = False
                if on_demand:
                    assert dtype is not None
                    cache = self.data.remote_digests(drive.spec, dtype)
                    cold = not any(p.startswith(prefix) for p in cache)
                listed = dtype if not on_demand or cold else None
                threads = _THREADS if cold else 2
                box.append((list(_pieces(drive, folder, listed, threads)), cache, cold))
            except BaseException as e:  # handed to the finishing thread
                box.append(e)

        if progress is not None:
            progress.phase = "listing the remote"
        worker = threading.Thread(target=fetch, name="placet-list", daemon=True)
        worker.start()

        def finish() -> tuple[list[RemoteEntry], bool]:
            worker.join()
            got = box[0]
            if isinstance(got, NotFound):
                return self._missing(drive, folder)
            if isinstance(got, BaseException):
                raise got
            pieces, cache, cold = got
            box.clear()
            cut = len(prefix)
            entries: list[RemoteEntry] = []
            if not on_demand:
                while pieces:
                    _stored_digests(pieces.pop(0), cut, dtype, entries)
            elif cold:
                assert dtype is not None
                self._cold(drive, pieces, cut, dtype, entries)
            else:
                assert dtype is not None
                self._warm(drive, folder, pieces, cache, cut, dtype, entries, progress)
            if progress is not None:
                progress.remote_entries = len(entries)
            return entries, False

        return finish

    @staticmethod
    def _missing(drive: Drive, folder: str) -> tuple[list[RemoteEntry], bool]:
        found = drive.stat(folder) if folder else None
        if found is not None and not found.is_dir:
            raise PathRefused(
                f"refusing remote {inert(folder)!r}: it is a file, not a folder; name a "
                "folder of the drive",
                code="not_a_directory",
                details={"remote_path": folder},
            ) from None
        return [], True

    def _cold(
        self, drive: Drive, pieces: list[list[ListRow]], cut: int, dtype: str,
        out: list[RemoteEntry],
    ) -> None:  # fmt: skip
        """Nothing was cached under the folder, so it was listed with digests: keep
        them all in the remote digest cache."""
        fresh: list[DigestRow] = []
        while pieces:
            rows = pieces.pop(0)
            _stored_digests(rows, cut, dtype, out)
            fresh += [(p, s, m, d) for p, _, s, m, d in rows if d and m and s >= 0]
            self.files_hashed += sum(1 for r in rows if not r[1])
        self.data.put_remote_digests(drive.spec, dtype, fresh)

    def _warm(
        self,
        drive: Drive,
        folder: str,
        pieces: list[list[ListRow]],
        cache: Mapping[str, tuple[int, str, str]],
        cut: int,
        dtype: str,
        out: list[RemoteEntry],
        progress: Progress | None,
    ) -> None:
        """Digests from the remote digest cache while size and mtime match; the misses
        hashed by rclone and remembered (see the module docstring)."""
        misses: list[ListRow] = []
        get = cache.get
        append = out.append
        while pieces:
            for row in pieces.pop(0):
                p, is_dir, size, mtime, _ = row
                rel = p[cut:]
                if not rel:
                    continue
                if is_dir:
                    append(new_remote_entry(rel, "dir", 0, mtime, _NONE))
                    continue
                c = get(p)
                if c is not None and c[0] == size and c[1] == mtime:
                    # The cache's mtime string, not the listing's: one copy kept.
                    append(new_remote_entry(rel, "file", size, c[1], OneDigest(dtype, c[2])))
                else:
                    misses.append(row)
        if not misses:
            return
        if progress is not None:
            progress.phase = f"hashing {len(misses)} remote files"
        got = self._hash_remote(drive, folder, dtype, misses, len(out) + len(misses))
        fresh: list[DigestRow] = []
        for p, _, size, mtime, _ in misses:
            digest = got.get(p)
            if digest is not None and size >= 0 and mtime is not None:
                fresh.append((p, size, mtime, digest))
            digests = OneDigest(dtype, digest) if digest else _NONE
            append(new_remote_entry(p[cut:], "file", size, mtime, digests))
        self.files_hashed += len(misses)
        self.data.put_remote_digests(drive.spec, dtype, fresh)

    def _hash_remote(
        self, drive: Drive, folder: str, dtype: str, misses: list[ListRow], total: int
    ) -> dict[str, str]:
        """Digests of `misses` (of `total` listed), computed by rclone; a file changed
        meanwhile gets none."""
        out: dict[str, str] = {}
        if len(misses) > BULK_MISSES and len(misses) > total // 10:
            want = {r[0]: r for r in misses}
            for rows in _pieces(drive, folder, dtype, _THREADS):
                for p, _, size, mtime, d in rows:
                    r = want.get(p)
                    if r is not None and d and (r[2], r[3]) == (size, mtime):
                        out[p] = d
            return out

        def one(r: ListRow) -> tuple[str, str | None]:
            try:
                d = drive.digest_of(r[0], dtype)
                after = drive.stat(r[0])  # computed for the listed version only
            except PathRefused:  # a name placet cannot use: no digest (the plan says why)
                return r[0], None
            size = -1 if after is None or after.size is None else after.size
            same = after is not None and (size, after.mtime) == (r[2], r[3])
            return r[0], d if same else None

        with ThreadPoolExecutor(_THREADS, thread_name_prefix="placet-rhash") as ex:
            for path, d in ex.map(one, misses):
                if d:
                    out[path] = d
        return out


def _stored_digests(
    rows: Sequence[ListRow], cut: int, dtype: str | None, out: list[RemoteEntry]
) -> None:
    """Append `rows` (digests as listed) to `out` as `RemoteEntry`s relative to the
    folder (`cut` characters of prefix), leaving out the folder itself."""
    append = out.append
    for p, is_dir, size, mtime, d in rows:
        rel = p[cut:]
        if not rel:
            continue
        if is_dir:
            append(new_remote_entry(rel, "dir", 0, mtime, _NONE))
        else:
            digests = OneDigest(dtype, d) if d and dtype else _NONE
            append(new_remote_entry(rel, "file", size, mtime, digests))


def _pieces(drive: Drive, folder: str, dtype: str | None, threads: int) -> Iterator[list[ListRow]]:
    """The recursive listing of `folder` in pieces (see the module docstring): first
    its own entries, then each top-level subfolder's tree, listed `threads` at a time
    and yielded in order. A subfolder gone meanwhile yields nothing; the trees of
    subfolders whose names the drive refuses on their own come last, cut from one
    recursive listing of `folder`."""
    top = drive.list_rows(folder, recurse=False, digest_type=dtype)
    subs = [r[0] for r in top if r[1]]
    yield top
    if not subs:
        return

    def tree(d: str) -> list[ListRow] | None:
        try:
            return drive.list_rows(d, recurse=True, digest_type=dtype)
        except NotFound:  # removed since the top level was listed
            return []
        except PathRefused:
            return None

    refused: list[str] = []
    with ThreadPoolExecutor(min(threads, len(subs)), thread_name_prefix="placet-rlist") as ex:
        pending = [ex.submit(tree, d) for d in subs]
        try:
            for d, fut in zip(subs, pending, strict=True):
                rows = fut.result()
                if rows is None:
                    refused.append(d)
                else:
                    yield rows
                del rows
        finally:
            for f in pending:
                f.cancel()
    if refused:
        below = tuple(f"{d}/" for d in refused)
        rest = drive.list_rows(folder, recurse=True, digest_type=dtype)
        yield [r for r in rest if r[0].startswith(below)]
