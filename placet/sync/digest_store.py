"""The digest caches of sync, local and remote, and the raw-SQL plumbing sync's accessors
share (tables in `placet.sync.tables`; `placet.sync.stored.SyncData` builds on this class).

The local cache (`sync_digest_cache`) keeps `CachedDigest` rows by (root key, path), rows
of another `DIGEST_CACHE_VERSION` dropped on load; the remote cache
(`sync_remote_digest`) keeps, for remotes whose digests rclone computes by reading, each
path's digest with the size and mtime it was computed for. Each keeps a process-local
copy up to `MEMORY_ROWS` rows, so a long-lived `placet serve` plans warm without reading
the tables, and every write updates that copy; above, a plan reads the rows a folder
at a time as it walks (`FolderRows`), so it never holds a cache whole
(docs/decisions/0025-digest-caches.md, docs/decisions/0026-plan-memory.md). A copy can
only be stale in ways its keys catch. Hot reads and bulk writes use plain SQL on the
driver connection: SQLAlchemy's per-row cost dominated at 100,000 rows."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from placet.store.db import RawDB, driver_errors, is_busy
from placet.store.store import Store
from placet.sync.cache import (
    DIGEST_CACHE_VERSION,
    NO_DIGESTS,
    CachedDigest,
    FolderRows,
    OwnedRows,
    Ranges,
)

T = TypeVar("T")
_RETRIES = 3
_WRITE_PART = 65_536
"""Rows per transaction when a consumed batch is written in parts."""

MEMORY_ROWS = 250_000
"""Most rows of one cache (a root's local digests, a drive's remote digests of one type)
kept in memory between plans; a bigger cache is read from the database by each plan."""


def _under(folder: str) -> tuple[str, str | None, str | None]:
    """Bounds of the paths beneath `folder` ("" = all), as SQL arguments (low, high,
    high): "folder/" <= path < "folder0" ("0" follows "/"), a range on the primary key."""
    if not folder:
        return "", None, None
    return f"{folder}/", f"{folder}0", f"{folder}0"


_LOCAL_ROWS = (
    "SELECT path, size, mtime_ns, inode, ctime_ns, sha256, sha1, md5, verified "
    "FROM sync_digest_cache WHERE root_key = ? AND version = ?"
)


_REMOTE_ROWS = (
    "SELECT path, size, mtime, digest FROM sync_remote_digest "
    "WHERE drive_spec = ? AND digest_type = ?"
)


def _cached(row: tuple[Any, ...]) -> CachedDigest:
    """A `_LOCAL_ROWS` row as a `CachedDigest`."""
    path, size, mtime, ino, ctime, sha256, sha1, md5, verified = row
    if sha1 is None and md5 is None:
        digests = NO_DIGESTS  # most rows: one shared empty mapping, not 100,000
    else:
        digests = {t: v for t, v in (("sha1", sha1), ("md5", md5)) if v}
    if ctime == mtime:
        ctime = mtime  # one int object when equal (most files): 32 bytes less
    # The named tuple's own __new__ is a Python function; this is the same value
    # without that call (0.25 s of CPU for 100,000 rows, row fetch included).
    return _new_tuple(CachedDigest, (path, size, mtime, ino, ctime, sha256, digests, verified == 1))


_new_tuple = tuple.__new__


def _digest_rows(db: RawDB, root_key: str, ranges: Ranges) -> OwnedRows[CachedDigest]:
    """The local digest cache rows of `root_key` whose path lies in one of `ranges`
    ((low, high) bounds, high None = no bound), by path, for the caller alone."""
    out: OwnedRows[CachedDigest] = OwnedRows()
    for row in in_ranges(db, _LOCAL_ROWS, (root_key, DIGEST_CACHE_VERSION), ranges):
        out[row[0]] = _cached(row)
    return out


def gaps(folder: str, skip: Collection[str]) -> Ranges:
    """The (low, high) path ranges beneath `folder` ("" = all) outside the trees of
    the folders in `skip` (paths beneath `folder`): each tree is the range
    ["sub/", "sub0"), and no two overlap (names hold no "/")."""
    low, high, _ = _under(folder)
    out: Ranges = []
    for sub in sorted(f"{s}/" for s in skip):
        if sub > low:
            out.append((low, sub))
        low = sub[:-1] + "0"
    if high is None or low < high:
        out.append((low, high))
    return out


def in_ranges(db: RawDB, sql: str, params: Sequence[Any], ranges: Ranges) -> Iterator[Any]:
    """The rows of `sql` (a SELECT whose WHERE takes `params`) with paths in each of
    `ranges`, each a range of the primary key: both bounds in the SQL (`path < ?` OR'ed
    with a NULL test would leave the range open above, a scan to the table's end)."""
    for low, high in ranges:
        if high is None:
            yield from db.execute(sql + " AND path >= ?", (*params, low))
        else:
            yield from db.execute(sql + " AND path >= ? AND path < ?", (*params, low, high))


class DigestCaches:
    """The local and remote digest caches over an open `Store` (thread-safe; one per
    process, as part of `SyncData`).

    Raises `StoreError` (retryable when the database stayed locked) from any method.
    """

    def __init__(self, store: Store, *, memory_rows: int = MEMORY_ROWS) -> None:
        self.store = store
        self.memory_rows = memory_rows
        self._lock = threading.Lock()
        self._local: dict[str, dict[str, CachedDigest]] = {}
        self._remote: dict[str, dict[str, tuple[int, str, str]]] = {}

    # ---- plumbing -------------------------------------------------------------------

    def _read(self, what: str, fn: Callable[[RawDB], T]) -> T:
        for attempt in range(_RETRIES + 1):
            pooled = self.store.engine.raw_connection()
            try:
                return fn(RawDB(pooled.driver_connection))
            except driver_errors() as e:
                if is_busy(e) and attempt < _RETRIES:
                    time.sleep(random.uniform(0.01, 0.05) * (2**attempt))
                    continue
                raise self.store._store_error(what, e) from e
            finally:
                pooled.close()
        raise AssertionError("unreachable")  # pragma: no cover

    def _write(self, what: str, fn: Callable[[RawDB], T]) -> T:
        return self.store._write_raw(what, lambda db, _heads: fn(db))

    # ---- local digest cache (placet.sync.cache.DigestCache) -------------------------

    def _local_rows(self, root_key: str) -> dict[str, CachedDigest]:
        with self._lock:
            mem = self._local.get(root_key)
        if mem is not None:
            return mem

        def rd(db: RawDB) -> dict[str, CachedDigest]:
            return _digest_rows(db, root_key, [("", None)])

        loaded = self._read("reading the digest cache", rd)
        if len(loaded) > self.memory_rows:
            return loaded  # the caller's alone (module docstring)
        with self._lock:
            return self._local.setdefault(root_key, dict(loaded))

    def loaded_local(self, root_key: str) -> Mapping[str, CachedDigest] | None:
        """A root's digest cache when it is in memory (by path; read with `in`, `len`
        and `get` only, or copied, since a write may update it meanwhile), else None."""
        with self._lock:
            return self._local.get(root_key)

    def get(self, root_key: str, path: str) -> CachedDigest | None:
        return self._local_rows(root_key).get(path)

    def get_under(self, root_key: str, prefix: str) -> Mapping[str, CachedDigest]:
        """Cached entries at or under `prefix` ("" = all of the root), by path."""
        rows = self._local_rows(root_key)
        if not prefix:
            return rows  # read with .get() only, which a concurrent update cannot upset
        below = prefix + "/"
        with self._lock:  # iterating while another thread updates would raise
            return OwnedRows((p, c) for p, c in rows.items() if p == prefix or p.startswith(below))

    def local_folders(self, root_key: str) -> FolderRows[CachedDigest] | None:
        """The root's rows a folder at a time (`FolderRows`) when its cache is too big
        to keep (more than `memory_rows` rows); None when it is in memory or small
        enough to be (then `get_under` reads it whole and keeps it)."""
        with self._lock:
            if root_key in self._local:
                return None
        if self._count("sync_digest_cache", "root_key = ?", (root_key,)) <= self.memory_rows:
            return None
        return FolderRows(
            lambda ranges: self._read(
                "reading the digest cache", lambda db: _digest_rows(db, root_key, ranges)
            ),
            gaps,
        )

    def _count(self, table: str, where: str, params: Sequence[Any]) -> int:
        return self._read(
            f"counting {table}",
            lambda db: int(
                db.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()[0]  # noqa: S608
            ),
        )

    def put_many(
        self, root_key: str, entries: Iterable[CachedDigest], *, consume: bool = False
    ) -> None:
        """Write `entries` to the cache of `root_key` (and to its in-memory copy while
        that stays within `memory_rows`). `consume`: `entries` is a list the caller
        gives away, emptied as it is written when no copy keeps its rows."""
        batch = entries if consume and type(entries) is list else list(entries)
        if not batch:
            return
        with self._lock:  # a copy not loaded yet is read whole when first needed
            mem = self._local.get(root_key)
            # Rows of paths the copy holds update it; new ones drop it (it is read again
            # when next needed), so a walk never grows it towards `memory_rows` beside
            # everything else it holds.
            keep = mem is not None and all(c.path in mem for c in batch)
            if mem is not None and not keep:
                del self._local[root_key]

        def rows(part: list[CachedDigest]) -> Iterator[tuple[object, ...]]:
            # A generator made afresh by each attempt (a retried write starts over), not
            # a list: executemany takes one row at a time, and a list of 1,000,000
            # eleven-field rows is ~140 MB beside everything a plan holds.
            for c in part:
                yield (root_key, c.path, c.size, c.mtime_ns, c.inode, c.ctime_ns, c.sha256,
                       c.digests.get("sha1"), c.digests.get("md5"), int(c.verified),
                       DIGEST_CACHE_VERSION)  # fmt: skip

        def write(part: list[CachedDigest]) -> None:
            self._write(
                "writing the digest cache",
                lambda db: db.executemany(
                    "INSERT INTO sync_digest_cache (root_key, path, size, mtime_ns, "
                    "inode, ctime_ns, sha256, sha1, md5, verified, version) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (root_key, path) DO "
                    "UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, "
                    "inode = excluded.inode, ctime_ns = excluded.ctime_ns, "
                    "sha256 = excluded.sha256, sha1 = excluded.sha1, md5 = excluded.md5, "
                    "verified = excluded.verified, version = excluded.version",
                    rows(part),
                ),
            )

        if keep or not consume:
            write(batch)
        else:
            # Rows no copy keeps, in a list given away: written in parts, each let go
            # once committed (a cold index of 1,000,000 files holds ~170 MB of them).
            while batch:
                part = batch[-_WRITE_PART:]
                write(part)
                del batch[-_WRITE_PART:], part
        if keep:
            with self._lock:
                if (mem := self._local.get(root_key)) is not None:
                    mem.update((c.path, c) for c in batch)

    def forget_local(self, root_key: str, paths: Collection[str]) -> None:
        """Drop cached digests of files that are gone."""
        if not paths:
            return
        self._write(
            "pruning the digest cache",
            lambda db: db.executemany(
                "DELETE FROM sync_digest_cache WHERE root_key = ? AND path = ?",
                ((root_key, p) for p in paths),
            ),
        )
        with self._lock:
            if (mem := self._local.get(root_key)) is not None:
                for p in paths:
                    mem.pop(p, None)

    # ---- remote digest cache (docs/design.md section 9, "Digest choice") ------------------

    def remote_digests(
        self, drive_spec: str, digest_type: str
    ) -> Mapping[str, tuple[int, str, str]]:
        """Cached `digest_type` digests of `drive_spec`: path -> (size, mtime, digest)."""
        return self._remote_rows(drive_spec, digest_type)

    def _remote_rows(self, drive_spec: str, digest_type: str) -> dict[str, tuple[int, str, str]]:
        key = f"{drive_spec}\0{digest_type}"
        with self._lock:
            mem = self._remote.get(key)
        if mem is not None:
            return mem

        def rd(db: RawDB) -> dict[str, tuple[int, str, str]]:
            cur = db.execute(
                "SELECT path, size, mtime, digest FROM sync_remote_digest "
                "WHERE drive_spec = ? AND digest_type = ?",
                (drive_spec, digest_type),
            )
            return OwnedRows((path, (size, mtime, digest)) for path, size, mtime, digest in cur)

        loaded = self._read("reading the remote digest cache", rd)
        if len(loaded) > self.memory_rows:
            return loaded  # the caller's alone (module docstring)
        with self._lock:
            return self._remote.setdefault(key, dict(loaded))

    def remote_digest_copy(
        self, drive_spec: str, digest_type: str
    ) -> Mapping[str, tuple[int, str, str]] | None:
        """The in-memory copy of `drive_spec`'s `digest_type` digests (loaded now when
        the table holds at most `memory_rows` of them), or None when the cache is too
        big to keep: read it by folder then (`remote_digests_under`)."""
        with self._lock:
            mem = self._remote.get(f"{drive_spec}\0{digest_type}")
        if mem is not None:
            return mem
        where = "drive_spec = ? AND digest_type = ?"
        count = self._count("sync_remote_digest", where, (drive_spec, digest_type))
        return None if count > self.memory_rows else self._remote_rows(drive_spec, digest_type)

    def has_remote_digests_under(self, drive_spec: str, digest_type: str, folder: str) -> bool:
        """Whether any `digest_type` digest of `drive_spec` is cached beneath `folder`
        ("" = anywhere)."""
        return self._read(
            "reading the remote digest cache",
            lambda db: (
                db.execute(
                    "SELECT 1 FROM sync_remote_digest WHERE drive_spec = ? AND digest_type = ? "
                    "AND path >= ? AND (CAST(? AS TEXT) IS NULL OR path < ?) LIMIT 1",
                    (drive_spec, digest_type, *_under(folder)),
                ).fetchone()
                is not None
            ),
        )

    def remote_folders(self, drive_spec: str, digest_type: str) -> FolderRows[tuple[int, str, str]]:
        """Cached `digest_type` digests of `drive_spec`, path -> (size, mtime, digest),
        a folder at a time (`FolderRows`), for a cache too big to keep."""

        def read(db: RawDB, ranges: Ranges) -> OwnedRows[tuple[int, str, str]]:
            return OwnedRows(
                (path, (size, mtime, digest))
                for path, size, mtime, digest in in_ranges(
                    db, _REMOTE_ROWS, (drive_spec, digest_type), ranges
                )
            )

        return FolderRows(
            lambda ranges: self._read(
                "reading the remote digest cache", lambda db: read(db, ranges)
            ),
            gaps,
        )

    def put_remote_digests(
        self, drive_spec: str, digest_type: str, rows: Collection[tuple[str, int, str, str]]
    ) -> None:
        """Remember (path, size, mtime, digest) rows of `drive_spec` for `digest_type`
        (`rows` is iterated once per write attempt, and once more for the in-memory copy
        while that stays within `memory_rows`)."""
        if not rows:
            return
        self._write(
            "writing the remote digest cache",
            lambda db: db.executemany(
                "INSERT INTO sync_remote_digest (drive_spec, path, size, mtime, "
                "digest_type, digest) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (drive_spec, path) "
                "DO UPDATE SET size = excluded.size, mtime = excluded.mtime, "
                "digest_type = excluded.digest_type, digest = excluded.digest",
                ((drive_spec, p, size, mtime, digest_type, d) for p, size, mtime, d in rows),
            ),
        )
        key = f"{drive_spec}\0{digest_type}"
        with self._lock:  # a copy not loaded yet is read whole when first needed
            if (mem := self._remote.get(key)) is None:
                pass
            elif not all(r[0] in mem for r in rows):
                del self._remote[key]  # new paths: read again when next needed (`put_many`)
            else:
                mem.update((path, (size, mtime, digest)) for path, size, mtime, digest in rows)
