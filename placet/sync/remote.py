"""Listing the remote side of a sync with digests, hashing as little as possible.

On remotes whose digests rclone computes by reading (`Capabilities.hashes_on_demand`),
a digest comes from the one persistent remote digest cache while size and mtime match,
and only misses are hashed, per file (checked against a stat) or by one hashed listing
(docs/design.md section 9, "Digest choice"; docs/decisions/0025-digest-caches.md). The
folder is listed in pieces (its own entries, then each top-level subfolder), a few ahead
of the one the planning thread decodes (`PendingListing`, `_pieces`), so rclone lists
while placet decodes and the tree is never held whole; cold pieces are hashed up to
`_THREADS` at once, since rclone hashes one listing's files one at a time. Rows arrive as
tuples (`ListRow`) and become `RemoteEntry`s directly. A name placet refuses gets no
digest and its subfolder is listed within its parent's listing
(docs/decisions/0026-plan-memory.md). Other remotes list stored digests at no cost."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections import deque
from collections.abc import Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import islice
from typing import Any

from placet.drive.base import DigestRow, Drive, ListRow, preferred_digest
from placet.errors import NotFound, PathRefused
from placet.sync.cache import NO_DIGESTS, OwnedRows
from placet.sync.entries import LocalEntry, OneDigest, RemoteEntry, new_remote_entry
from placet.sync.jobs import Progress
from placet.sync.stored import SyncData
from placet.text import inert

BULK_MISSES = 256
"""More remote digest misses than this (and a tenth of the files): one hashed listing."""
_THREADS = 4
"""Concurrent listings when rclone hashes (cold); warm listings run 2 at a time."""
_QUEUED = 2
"""Listed pieces (each a top-level subfolder's tree) waiting to be decoded, at most."""


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
        is missing (an empty side): `begin(...).finish()`.

        Raises:
            PathRefused (`not_a_directory`): `folder` is a file. DriveUnavailable /
                DriveError: rclone failed.
        """
        return self.begin(drive, folder, progress).finish()

    def begin(self, drive: Drive, folder: str, progress: Progress | None = None) -> PendingListing:
        """Start listing remote `folder` (see `PendingListing`)."""
        return PendingListing(self, drive, folder, progress)

    def _missing(self, drive: Drive, folder: str) -> tuple[list[RemoteEntry], bool]:
        found = drive.stat(folder) if folder else None
        if found is not None and not found.is_dir:
            raise PathRefused(
                f"refusing remote {inert(folder)!r}: it is a file, not a folder; name a "
                "folder of the drive",
                code="not_a_directory",
                details={"remote_path": folder},
            ) from None
        return [], True

    def _hash_remote(
        self, drive: Drive, folder: str, dtype: str, misses: list[ListRow], total: int
    ) -> dict[str, str]:
        """Digests of `misses` (of `total` listed), computed by rclone; a file changed
        meanwhile gets none."""
        out: dict[str, str] = {}
        if len(misses) > BULK_MISSES and len(misses) > total // 10:
            want = {r[0]: r for r in misses}
            for _, _, rows in _pieces(drive, folder, dtype, _THREADS):
                for p, _, size, mtime, d in rows:
                    r = want.get(p)
                    if r is not None and d and (r[2], r[3]) == (size, mtime):
                        out[p] = d
            return out

        def one(r: ListRow) -> tuple[str, str | None]:
            try:
                d = drive.digest_of(r[0], dtype)
                after = drive.stat(r[0])  # computed for the listed version only
            except (PathRefused, NotFound):  # a name placet cannot use (the plan says
                return r[0], None  # why), or a file removed since the listing: no digest
            size = -1 if after is None or after.size is None else after.size
            same = after is not None and (size, after.mtime) == (r[2], r[3])
            return r[0], d if same else None

        with ThreadPoolExecutor(_THREADS, thread_name_prefix="placet-rhash") as ex:
            for path, d in ex.map(one, misses):
                if d:
                    out[path] = d
        return out


_DONE = object()


class PendingListing:
    """A remote listing under way (`RemoteLister.begin`).

    A background thread loads the remote digest cache, then fetches the listing in
    pieces (rclone does the work, in its own process; the thread mostly waits on the
    socket) and queues them. Entries are built in the caller's thread: by `pump` (which
    takes what has arrived and returns at once; the local index calls it between
    folders, so the remote is decoded while rclone still lists) and by `finish` (which
    waits for the rest, hashes the cache misses and returns the listing). Python work
    in a second thread would make each of the index's `lstat` calls wait for the
    interpreter lock (measured: the index took twice as long). `finish` must be called
    once, or `abandon` when the caller gives up, so the thread is waited for.
    """

    def __init__(
        self, lister: RemoteLister, drive: Drive, folder: str, progress: Progress | None
    ) -> None:
        self.lister, self.drive, self.folder, self.progress = lister, drive, folder, progress
        caps = drive.capabilities()
        self.dtype = preferred_digest(caps)
        self.on_demand = self.dtype is not None and caps.hashes_on_demand
        self.prefix = f"{folder}/" if folder else ""
        self.cut = len(self.prefix)
        self.entries: list[RemoteEntry] = []
        self.misses: list[ListRow] = []
        self.cache: Mapping[str, tuple[int, str, str]] | None = {}
        self.cold = False
        self.ready = False  # the cache is loaded and the mode known
        # The local walk's top-level folders so far (on-disk name -> entries), and the
        # last name it is past: a piece is decoded once the walk is past its folder, so
        # its files take their local entries' equal strings (below).
        self.local: dict[str, list[LocalEntry]] = {}
        self.passed: str | None = None
        self.walked = False  # the walk is over: every piece may be decoded
        self.held: Any = None  # a piece taken from the queue before the walk reached it
        self.failed: BaseException | None = None
        # Bounded: a warm listing outruns the index, and pieces waiting undecoded cost
        # ~250 bytes a file (50 MB at 200,000 files); rclone waits instead.
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=_QUEUED)
        if progress is not None:
            progress.phase = "listing the remote"
        self.worker = threading.Thread(target=self._fetch, name="placet-list", daemon=True)
        self.worker.start()

    def _fetch(self) -> None:
        try:
            dtype, cold = self.dtype, False
            data, spec = self.lister.data, self.drive.spec
            cache: Mapping[str, tuple[int, str, str]] | None = {}
            if self.on_demand:
                assert dtype is not None
                # The in-memory copy, or None when the cache is too big to keep: then
                # each piece reads the rows beneath it (`remote_digests_under`), so the
                # rows of the pieces not yet listed are not held meanwhile.
                cache = data.remote_digest_copy(spec, dtype)
                if cache is not None:
                    cold = not any(p.startswith(self.prefix) for p in cache)
                else:
                    cold = not data.has_remote_digests_under(spec, dtype, self.folder)
            self.queue.put((cache, cold))
            lazy = self.on_demand and not cold and cache is None
            listed = dtype if not self.on_demand or cold else None
            pieces = _pieces(self.drive, self.folder, listed, _THREADS if cold else 2)
            for where, recursive, rows in pieces:
                part = None
                if lazy:
                    assert dtype is not None
                    part = data.remote_digests_under(spec, dtype, where, recursive=recursive)
                self.queue.put((where, rows, part))
                del rows, part
            self.queue.put(_DONE)
        except BaseException as e:  # handed to `finish`
            self.queue.put(e)

    def _take(self, item: Any) -> bool:
        """Decode one queued item; False at the end (or a failure, kept for `finish`)."""
        if item is _DONE:
            return False
        if isinstance(item, BaseException):
            self.failed = item
            return False
        if not self.ready:
            self.cache, self.cold = item
            self.ready = True
            return True
        where, rows, part = item
        local = self._local_files(where)
        if not self.on_demand:
            _stored_digests(rows, self.cut, self.dtype, self.entries, local)
        elif self.cold:
            _stored_digests(rows, self.cut, self.dtype, self.entries, local)
            self.lister.files_hashed += sum(1 for r in rows if not r[1])
        else:
            self._warm(rows, part if part is not None else self.cache or {}, local)
        return True

    def local_done(self, name: str, entries: list[LocalEntry]) -> None:
        """The local walk is past its top-level folder `name` (on-disk), whose entries
        are `entries` (called from the walking thread, as `pump` is)."""
        self.local[name] = entries
        self.passed = name

    def _local_files(self, where: str) -> dict[str, LocalEntry] | None:
        """The local files beneath the top-level folder a piece lists, by on-disk path
        (None: not walked, or the folder's own piece)."""
        walked = self.local.pop(where[self.cut :], None) if where != self.folder else None
        return {e.raw_path: e for e in walked if e.kind == "file"} if walked else None

    def _decodable(self, item: Any) -> bool:
        """Whether `item` may be decoded now: anything but a piece of a top-level
        folder the walk has not passed yet (its files would find no local entry)."""
        if self.walked or not self.ready or type(item) is not tuple:
            return True
        where = item[0]
        if where == self.folder:
            return True
        return self.passed is not None and where[self.cut :] <= self.passed

    def pump(self) -> None:
        """Decode the pieces that have arrived, up to the first whose top-level folder
        the local walk has not passed; never waits."""
        while self.failed is None:
            if self.held is not None:
                item, self.held = self.held, None
            else:
                try:
                    item = self.queue.get_nowait()
                except queue.Empty:
                    return
            if not self._decodable(item) or not self._take(item):
                self.held = item  # taken again later (`finish` sees the end or failure)
                return

    def abandon(self) -> None:
        """Wait for the fetching thread and drop what it listed (the caller failed)."""
        while self.worker.is_alive():  # it may wait to queue a piece: take them
            with contextlib.suppress(queue.Empty):
                self.queue.get(timeout=0.05)
        self.worker.join()
        self.entries, self.misses, self.local, self.held = [], [], {}, None

    def finish(self) -> tuple[list[RemoteEntry], bool]:
        """Wait for the rest and return the listing and whether the folder is missing.

        Raises what `RemoteLister.remote_listing` raises.
        """
        self.walked = True
        while self.failed is None:
            if self.held is not None:
                item, self.held = self.held, None
            else:
                item = self.queue.get()
            if not self._take(item):
                break
        self.local = {}
        self.worker.join()
        if isinstance(self.failed, NotFound):
            return self.lister._missing(self.drive, self.folder)
        if self.failed is not None:
            raise self.failed
        dtype = self.dtype
        if self.on_demand and self.cold:
            assert dtype is not None
            # Written from the entries (no row tuples held while listing: ~80 bytes a file).
            cold_rows = _EntryRows(self.prefix, self.entries)
            self.lister.data.put_remote_digests(self.drive.spec, dtype, cold_rows)
            del cold_rows
        elif self.misses:
            assert dtype is not None
            self._hash_misses(dtype)
        if self.progress is not None:
            self.progress.remote_entries = len(self.entries)
        # Only the entries leave; the rows gathered on the way are dropped now, not when
        # the caller lets go of this object (at 1,000,000 files they are ~90 MB).
        entries, self.entries, self.misses = self.entries, [], []
        self.cache = {}
        return entries, False

    def _warm(
        self,
        rows: list[ListRow],
        cache: Mapping[str, tuple[int, str, str]],
        local: dict[str, LocalEntry] | None,
    ) -> None:
        """Digests from the remote digest cache (`cache`: its rows for these `rows`, or
        all of it) while size and mtime match; the rest are misses, hashed by `finish`.
        `local`: the walked local files beneath the same folder (`_shared`)."""
        # Rows loaded for this listing alone are taken as they are read (see `OwnedRows`).
        get = cache.pop if type(cache) is OwnedRows else cache.get
        dtype, cut = self.dtype, self.cut
        assert dtype is not None
        append, miss = self.entries.append, self.misses.append
        find = local.get if local else None
        for row in rows:
            p, is_dir, size, mtime, _ = row
            rel = p[cut:]
            if not rel:
                continue
            if is_dir:
                append(new_remote_entry(rel, "dir", 0, mtime, NO_DIGESTS))
                continue
            c = get(p, None)
            if c is not None and c[0] == size and c[1] == mtime:
                digest = c[2]
                lo = find(rel) if find is not None else None
                if lo is not None:
                    rel, size, digest = _shared(lo, size, dtype, digest)
                # The cache's mtime string, not the listing's: one copy kept.
                append(new_remote_entry(rel, "file", size, c[1], OneDigest(dtype, digest)))
            else:
                miss(row)

    def _hash_misses(self, dtype: str) -> None:
        misses, out = self.misses, self.entries
        if self.progress is not None:
            self.progress.phase = f"hashing {len(misses)} remote files"
        got = self.lister._hash_remote(
            self.drive, self.folder, dtype, misses, len(out) + len(misses)
        )
        fresh: list[DigestRow] = []
        for p, _, size, mtime, _ in misses:
            digest = got.get(p)
            if digest is not None and size >= 0 and mtime is not None:
                fresh.append((p, size, mtime, digest))
            digests = OneDigest(dtype, digest) if digest else NO_DIGESTS
            out.append(new_remote_entry(p[self.cut :], "file", size, mtime, digests))
        self.lister.files_hashed += len(misses)
        self.lister.data.put_remote_digests(self.drive.spec, dtype, fresh)


class _EntryRows(Collection[DigestRow]):
    """The digest rows of a cold listing's entries, (path under the drive, size, mtime,
    digest) for each file listed with a digest, size and mtime; iterable again (a
    retried write starts over)."""

    def __init__(self, prefix: str, entries: list[RemoteEntry]) -> None:
        self.prefix, self.entries = prefix, entries
        self.count = sum(1 for _ in self)

    def __iter__(self) -> Iterator[DigestRow]:
        prefix, one = self.prefix, OneDigest
        for e in self.entries:
            d, m = e.digests, e.mtime
            if type(d) is one and m and e.size >= 0:
                yield prefix + e.path, e.size, m, d.value

    def __len__(self) -> int:
        return self.count

    def __contains__(self, row: object) -> bool:
        return any(r == row for r in self)


def _shared(
    lo: LocalEntry, size: int, dtype: str | None, digest: str | None
) -> tuple[str, int, str | None]:
    """A remote file's (path, size, digest) with the local entry `lo` of the same
    on-disk path: its path string, and its size int and digest string where equal
    (`placet.sync.sharing`, done here so the remote's copies never outlive the row
    they were decoded in: about 200 bytes a file that a plan of 1,000,000 files would
    otherwise hold until its listings are keyed)."""
    if size == lo.size:
        size = lo.size
    if digest:
        mine = lo.sha256 if dtype == "sha256" else lo.digest if dtype == lo.digest_type else None
        if mine is not None and digest == mine:
            digest = mine
    return lo.raw_path, size, digest


def _stored_digests(
    rows: Sequence[ListRow],
    cut: int,
    dtype: str | None,
    out: list[RemoteEntry],
    local: dict[str, LocalEntry] | None = None,
) -> None:
    """Append `rows` (digests as listed) to `out` as `RemoteEntry`s relative to the
    folder (`cut` characters of prefix), leaving out the folder itself. `local`: the
    walked local files beneath the same folder, by on-disk path (`_shared`)."""
    append = out.append
    find = local.get if local else None
    for p, is_dir, size, mtime, d in rows:
        rel = p[cut:]
        if not rel:
            continue
        if is_dir:
            append(new_remote_entry(rel, "dir", 0, mtime, NO_DIGESTS))
        else:
            lo = find(rel) if find is not None else None
            if lo is not None:
                rel, size, d = _shared(lo, size, dtype, d)
            digests = OneDigest(dtype, d) if d and dtype else NO_DIGESTS
            append(new_remote_entry(rel, "file", size, mtime, digests))


def _pieces(
    drive: Drive, folder: str, dtype: str | None, threads: int
) -> Iterator[tuple[str, bool, list[ListRow]]]:
    """The recursive listing of `folder` in pieces (see the module docstring), each as
    (the folder it lists, whether beneath it all or only its own entries, the rows):
    first `folder`'s own entries, then each top-level subfolder's tree, listed `threads`
    at a time and yielded in order. A subfolder gone meanwhile yields nothing; the trees
    of subfolders whose names the drive refuses on their own come last, cut from one
    recursive listing of `folder`."""
    top = drive.list_rows(folder, recurse=False, digest_type=dtype)
    subs = [r[0] for r in top if r[1]]
    yield folder, False, top
    del top
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
    todo = iter(subs)
    # At most `threads` pieces listed ahead of the one yielded, each dropped once taken:
    # a future keeps its result, so futures of the whole tree held to the end kept every
    # piece's rows (~250 bytes a file) until the listing was done, and rclone listed on
    # whatever the consumer's bounded queue said.
    ahead: deque[tuple[str, Future[list[ListRow] | None]]] = deque()
    with ThreadPoolExecutor(min(threads, len(subs)), thread_name_prefix="placet-rlist") as ex:
        try:
            for d in islice(todo, threads):
                ahead.append((d, ex.submit(tree, d)))
            while ahead:
                d, fut = ahead.popleft()
                if (nxt := next(todo, None)) is not None:
                    ahead.append((nxt, ex.submit(tree, nxt)))
                rows = fut.result()
                del fut  # its result is `rows`, which the consumer lets go
                if rows is None:
                    refused.append(d)
                else:
                    yield d, True, rows
                del rows
        finally:
            for _, f in ahead:
                f.cancel()
    if refused:
        below = tuple(f"{d}/" for d in refused)
        rest = drive.list_rows(folder, recurse=True, digest_type=dtype)
        yield folder, True, [r for r in rest if r[0].startswith(below)]
