"""Sync's tables and their accessors: stored plans, digest caches, baselines, snapshots.

What is kept, and why (DESIGN.md sections 7-9):

- **Plans** (`sync_plan`) are immutable once stored and record both listings'
  fingerprints, the baseline generation they were planned against and the options, so
  `propose_sync(plan_id)` proposes exactly what the agent was shown. The body holds the
  ops and every report except `skip` (the summary counts those); a plan of 100,000
  equal files stays small. What a skip verified by digest would add to the baseline is
  kept beside it (`skips`), to be recorded when the plan is applied. Bodies are zlib'd
  JSON (`PLAN_FORMAT`-tagged inside). Plans and snapshots older than `RETENTION` (7
  days) are pruned whenever a new one is stored.
- **The local digest cache** (`sync_digest_cache`) persists `placet.sync.cache
  .CachedDigest` by (root key, path); rows of another `DIGEST_CACHE_VERSION` are
  dropped on load.
- **The remote digest cache** (`sync_remote_digest`) keeps, for remotes whose digests
  rclone computes by reading the data (local folders, sftp), the last digest of each
  path with the size and mtime it was computed for; it is reused only while both match.
- **Baselines** (`sync_baseline`, one row per path of a pair) say what both sides held
  after the last sync that touched a path. `sync_pair` carries a generation bumped in
  the same transaction as every baseline write, so a process can keep a baseline in
  memory and know exactly when it went out of date.
- **Drive snapshots** (`drive_snapshot`) are the anchors of `drive_changes`.

Each accessor keeps a process-local copy of what it read (digest caches, baselines):
a long-lived `placet serve` then plans warm without reading 100,000 rows again (about
0.9 s for both caches). That copy can only be stale in ways the keys catch (a cached
digest is reused only if size, mtime, inode and ctime still match; a baseline only at
the same generation). A bulk write drops the copy rather than growing it (`_BULK`).
Hot reads and bulk writes go through the driver connection (plain SQL, `executemany`)
because SQLAlchemy's per-row cost dominated at 100,000 rows.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, TypeVar

from sqlalchemy import Index, Integer, LargeBinary, Text
from sqlmodel import Field, SQLModel

from placet.errors import NotFound
from placet.store.db import UTCDateTime, dt_text, is_busy, utcnow
from placet.store.store import Store
from placet.sync.cache import DIGEST_CACHE_VERSION, CachedDigest
from placet.sync.model import BaselineEntry, SyncPlan

T = TypeVar("T")
SkipRow = tuple[str, str | None, str | None, str | None, int | None, str | None]
"""A baseline entry as a row: (path, sha256, remote digest type, remote digest, size,
mtime), the order of `BaselineEntry`'s fields."""

RETENTION = timedelta(days=7)
"""Stored plans and drive snapshots older than this are pruned (DESIGN.md section 9)."""
REUSE_WITHIN = timedelta(hours=1)
"""A new plan identical to one stored this recently reuses its id instead of a new row."""
_RETRIES = 3
_NO_DIGESTS: Mapping[str, str] = MappingProxyType({})
_BULK = 1000
"""A cache write of more rows than this drops the in-memory copy instead of updating it:
the copy is then read back in one burst, its objects side by side, rather than kept
interleaved with a cold plan's garbage (which holds the memory of a whole plan)."""


# ---- tables (migration 3 in placet.store.migrations builds exactly these) --------------


class SyncPlanRow(SQLModel, table=True):
    """One stored, immutable sync plan (see the module docstring)."""

    __tablename__ = "sync_plan"
    __table_args__ = (
        Index("ix_sync_plan_created", "created_at"),
        Index("ix_sync_plan_pair", "pair_key", "created_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    pair_key: str = Field(sa_type=Text, nullable=False)
    root_name: str = Field(sa_type=Text, nullable=False)
    root_path: str = Field(sa_type=Text, nullable=False)
    local_path: str = Field(sa_type=Text, nullable=False)
    drive_spec: str = Field(sa_type=Text, nullable=False)
    remote_path: str = Field(sa_type=Text, nullable=False)
    options: str = Field(sa_type=Text, nullable=False)
    local_fingerprint: str = Field(sa_type=Text, nullable=False)
    remote_fingerprint: str = Field(sa_type=Text, nullable=False)
    baseline_generation: int = Field(sa_type=Integer, nullable=False)
    summary: str = Field(sa_type=Text, nullable=False)
    meta: str = Field(sa_type=Text, nullable=False)
    body: bytes = Field(sa_type=LargeBinary, nullable=False)
    skips: bytes = Field(sa_type=LargeBinary, nullable=False)
    created_at: datetime = Field(sa_type=UTCDateTime, nullable=False)


class SyncDigestRow(SQLModel, table=True):
    """A local file's cached digests (`placet.sync.cache.CachedDigest`)."""

    __tablename__ = "sync_digest_cache"

    root_key: str = Field(sa_type=Text, primary_key=True)
    path: str = Field(sa_type=Text, primary_key=True)
    size: int = Field(sa_type=Integer, nullable=False)
    mtime_ns: int = Field(sa_type=Integer, nullable=False)
    inode: int = Field(sa_type=Integer, nullable=False)
    ctime_ns: int = Field(sa_type=Integer, nullable=False)
    sha256: str = Field(sa_type=Text, nullable=False)
    sha1: str | None = Field(default=None, sa_type=Text)
    md5: str | None = Field(default=None, sa_type=Text)
    verified: int = Field(sa_type=Integer, nullable=False)
    version: int = Field(sa_type=Integer, nullable=False)


class RemoteDigestRow(SQLModel, table=True):
    """A remote file's digest as rclone computed it for (size, mtime)."""

    __tablename__ = "sync_remote_digest"

    drive_spec: str = Field(sa_type=Text, primary_key=True)
    path: str = Field(sa_type=Text, primary_key=True)
    size: int = Field(sa_type=Integer, nullable=False)
    mtime: str = Field(sa_type=Text, nullable=False)
    digest_type: str = Field(sa_type=Text, nullable=False)
    digest: str = Field(sa_type=Text, nullable=False)


class SyncPairRow(SQLModel, table=True):
    """A synced pair (local folder, remote folder) and its baseline's generation."""

    __tablename__ = "sync_pair"

    pair_key: str = Field(sa_type=Text, primary_key=True)
    root_path: str = Field(sa_type=Text, nullable=False)
    local_path: str = Field(sa_type=Text, nullable=False)
    drive_spec: str = Field(sa_type=Text, nullable=False)
    remote_path: str = Field(sa_type=Text, nullable=False)
    generation: int = Field(sa_type=Integer, nullable=False)
    updated_at: datetime = Field(sa_type=UTCDateTime, nullable=False)


class SyncBaselineRow(SQLModel, table=True):
    """What one path of a pair held on both sides after the last sync that touched it."""

    __tablename__ = "sync_baseline"

    pair_key: str = Field(sa_type=Text, primary_key=True)
    path: str = Field(sa_type=Text, primary_key=True)
    sha256: str | None = Field(default=None, sa_type=Text)
    remote_digest_type: str | None = Field(default=None, sa_type=Text)
    remote_digest: str | None = Field(default=None, sa_type=Text)
    size: int | None = Field(default=None, sa_type=Integer)
    mtime: str | None = Field(default=None, sa_type=Text)
    updated_at: datetime = Field(sa_type=UTCDateTime, nullable=False)


class DriveSnapshotRow(SQLModel, table=True):
    """A remote folder's listing, kept as the anchor of `drive_changes`."""

    __tablename__ = "drive_snapshot"
    __table_args__ = (Index("ix_drive_snapshot_created", "created_at"),)

    id: int | None = Field(default=None, primary_key=True)
    drive_spec: str = Field(sa_type=Text, nullable=False)
    path: str = Field(sa_type=Text, nullable=False)
    entry_count: int = Field(sa_type=Integer, nullable=False)
    body: bytes = Field(sa_type=LargeBinary, nullable=False)
    created_at: datetime = Field(sa_type=UTCDateTime, nullable=False)


# ---- values -------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    """A synced pair: a folder under a local root and a folder of a drive.

    `root_path` absolute; `local_path` relative to the root ("" = the root); `remote_path`
    relative to the drive root. `key` identifies the pair's baseline.
    """

    root_path: str
    local_path: str
    drive_spec: str
    remote_path: str

    @property
    def key(self) -> str:
        body = json.dumps([self.root_path, self.local_path, self.drive_spec, self.remote_path])
        return hashlib.sha256(body.encode("utf-8", "surrogateescape")).hexdigest()


@dataclass(frozen=True)
class StoredPlan:
    """A plan as stored: `plan` holds its ops and every report but `skip` (counted in
    `summary`). `meta`: what the service recorded beside it (digest type, whether the
    remote folder was missing, ...). `reused`: an identical plan was returned."""

    id: int
    pair: Pair
    root_name: str
    options: dict[str, Any]
    local_fingerprint: str
    remote_fingerprint: str
    baseline_generation: int
    summary: dict[str, int]
    meta: dict[str, Any]
    created_at: datetime
    plan: SyncPlan
    reused: bool = False

    @property
    def expires_at(self) -> datetime:
        """When this plan is pruned (and `propose_sync` can no longer use it)."""
        return self.created_at + RETENTION


@dataclass(frozen=True)
class Snapshot:
    """A stored listing: `entries` maps path (relative to `path`) to [kind, size, mtime,
    digest] (kind "d"/"f"; digest "" when none was listed)."""

    id: int
    drive_spec: str
    path: str
    created_at: datetime
    entries: dict[str, list[Any]]


def _dt(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _pack(value: Any) -> bytes:
    # ensure_ascii: a name that is not valid UTF-8 is carried as a lone surrogate, which
    # only the escaped form survives; the C encoder is also fastest in this mode.
    return zlib.compress(json.dumps(value, separators=(",", ":")).encode("ascii"), 1)


def _pack_rows(rows: Sequence[Any]) -> bytes:
    """`_pack(list(rows))`, encoded and compressed 4,096 rows at a time, so 100,000 rows
    never exist as one JSON string."""
    z = zlib.compressobj(1)
    parts = [z.compress(b"[")]
    for i in range(0, len(rows), 4096):
        chunk = json.dumps(rows[i : i + 4096], separators=(",", ":"))[1:-1]
        parts.append(z.compress((b"," if i else b"") + chunk.encode("ascii")))
    parts.append(z.compress(b"]"))
    parts.append(z.flush())
    return b"".join(parts)


def _unpack(blob: bytes) -> Any:
    return json.loads(zlib.decompress(blob))


def _baseline_row(b: BaselineEntry) -> list[Any]:
    return [b.path, b.sha256, b.remote_digest_type, b.remote_digest, b.size, b.mtime]


class SyncData:
    """Accessors for sync's tables over an open `Store` (thread-safe; one per process).

    Raises `StoreError` (retryable when the database stayed locked) from any method.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._local: dict[str, dict[str, CachedDigest]] = {}
        self._remote: dict[str, dict[str, tuple[int, str, str]]] = {}
        self._baselines: dict[str, tuple[int, dict[str, BaselineEntry]]] = {}

    # ---- plumbing -------------------------------------------------------------------

    def _read(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        for attempt in range(_RETRIES + 1):
            pooled = self.store.engine.raw_connection()
            try:
                db = pooled.driver_connection
                assert isinstance(db, sqlite3.Connection)
                return fn(db)
            except sqlite3.OperationalError as e:
                if is_busy(e) and attempt < _RETRIES:
                    time.sleep(random.uniform(0.01, 0.05) * (2**attempt))
                    continue
                raise self.store._store_error(what, e) from e
            except sqlite3.Error as e:
                raise self.store._store_error(what, e) from e
            finally:
                pooled.close()
        raise AssertionError("unreachable")  # pragma: no cover

    def _write(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self.store._write_raw(what, lambda db, _heads: fn(db))

    # ---- plans ----------------------------------------------------------------------

    def find_plan(
        self,
        *,
        pair: Pair,
        options: Mapping[str, Any],
        fingerprints: tuple[str, str],
        baseline_generation: int,
        meta: Mapping[str, Any],
        now: datetime | None = None,
    ) -> StoredPlan | None:
        """An identical plan (same pair, options, (local, remote) listing fingerprints,
        baseline generation and meta) stored within `REUSE_WITHIN`, marked `reused`;
        None if there is none.

        The planner is a pure function, so the same inputs give the same plan: handing
        out the stored one saves storing 100,000 paths again on every warm re-plan.
        """
        now = utcnow() if now is None else now
        opts, meta_text = json.dumps(dict(options), sort_keys=True), json.dumps(dict(meta))
        found = self._read(
            "looking for an identical sync plan",
            lambda db: db.execute(
                "SELECT id FROM sync_plan WHERE pair_key = ? AND options = ? AND "
                "local_fingerprint = ? AND remote_fingerprint = ? AND baseline_generation = ? "
                "AND meta = ? AND created_at > ? ORDER BY id DESC LIMIT 1",
                (pair.key, opts, *fingerprints, baseline_generation, meta_text,
                 dt_text(now - REUSE_WITHIN)),
            ).fetchone(),
        )  # fmt: skip
        if found is None:
            return None
        stored = self.load_plan(int(found[0]))
        return StoredPlan(**{**stored.__dict__, "reused": True})

    def save_plan(
        self,
        *,
        pair: Pair,
        root_name: str,
        options: Mapping[str, Any],
        plan: SyncPlan,
        baseline_generation: int,
        meta: Mapping[str, Any],
        skips: Sequence[SkipRow],
        now: datetime | None = None,
    ) -> StoredPlan:
        """Store `plan` as a new immutable row (callers try `find_plan` first).

        `skips`: baseline rows to record if the plan is applied (skips verified by
        digest whose baseline would change). Prunes plans and snapshots past `RETENTION`.
        """
        now = utcnow() if now is None else now
        opts, meta_text = json.dumps(dict(options), sort_keys=True), json.dumps(dict(meta))
        kept = SyncPlan(
            plan.ops,
            tuple(r for r in plan.reports if r.kind != "skip"),
            plan.summary,
            plan.local_fingerprint,
            plan.remote_fingerprint,
        )
        body, skip_blob = _pack(kept.to_dict()), _pack_rows(skips)
        summary = json.dumps(dict(plan.summary))

        def tx(db: sqlite3.Connection) -> int:
            self._prune(db, now)
            cur = db.execute(
                "INSERT INTO sync_plan (pair_key, root_name, root_path, local_path, drive_spec, "
                "remote_path, options, local_fingerprint, remote_fingerprint, "
                "baseline_generation, summary, meta, body, skips, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (pair.key, root_name, pair.root_path, pair.local_path, pair.drive_spec,
                 pair.remote_path, opts, plan.local_fingerprint, plan.remote_fingerprint,
                 baseline_generation, summary, meta_text, body, skip_blob, dt_text(now)),
            )  # fmt: skip
            assert cur.lastrowid is not None
            return cur.lastrowid

        pid = self._write("storing a sync plan", tx)
        return StoredPlan(
            pid, pair, root_name, dict(options), plan.local_fingerprint,
            plan.remote_fingerprint, baseline_generation, dict(plan.summary), dict(meta),
            datetime.fromisoformat(dt_text(now)).replace(tzinfo=UTC), kept,
        )  # fmt: skip

    def load_plan(self, plan_id: int) -> StoredPlan:
        """The stored plan `plan_id`.

        Raises:
            NotFound: no such plan (never made, or pruned after `RETENTION`).
        """
        row = self._read(
            "reading a sync plan",
            lambda db: db.execute(
                "SELECT id, root_path, local_path, drive_spec, remote_path, root_name, options, "
                "local_fingerprint, remote_fingerprint, baseline_generation, summary, meta, "
                "created_at, body FROM sync_plan WHERE id = ?",
                (plan_id,),
            ).fetchone(),
        )
        if row is None:
            raise NotFound(
                f"sync plan {plan_id} does not exist (plans are kept {RETENTION.days} days); "
                "call sync_plan again for a fresh plan",
                details={"plan_id": plan_id},
            )
        return StoredPlan(
            int(row[0]), Pair(row[1], row[2], row[3], row[4]), row[5], json.loads(row[6]),
            row[7], row[8], int(row[9]), json.loads(row[10]), json.loads(row[11]),
            _dt(row[12]), SyncPlan.from_dict(_unpack(row[13])),
        )  # fmt: skip

    def plan_skips(self, plan_id: int) -> list[BaselineEntry]:
        """The baseline entries plan `plan_id` records when applied ([] if pruned)."""
        row = self._read(
            "reading a sync plan's verified skips",
            lambda db: db.execute(
                "SELECT skips FROM sync_plan WHERE id = ?", (plan_id,)
            ).fetchone(),
        )
        return [] if row is None else [BaselineEntry(*r) for r in _unpack(row[0])]

    @staticmethod
    def _prune(db: sqlite3.Connection, now: datetime) -> None:
        cutoff = dt_text(now - RETENTION)
        db.execute("DELETE FROM sync_plan WHERE created_at < ?", (cutoff,))
        db.execute("DELETE FROM drive_snapshot WHERE created_at < ?", (cutoff,))

    def prune(self, now: datetime | None = None) -> None:
        """Delete plans and snapshots older than `RETENTION`."""
        now = utcnow() if now is None else now
        self._write("pruning old sync plans and snapshots", lambda db: self._prune(db, now))

    # ---- local digest cache (placet.sync.cache.DigestCache) -------------------------

    def _local_rows(self, root_key: str) -> dict[str, CachedDigest]:
        with self._lock:
            mem = self._local.get(root_key)
        if mem is not None:
            return mem

        def rd(db: sqlite3.Connection) -> list[Any]:
            return db.execute(
                "SELECT path, size, mtime_ns, inode, ctime_ns, sha256, sha1, md5, verified "
                "FROM sync_digest_cache WHERE root_key = ? AND version = ?",
                (root_key, DIGEST_CACHE_VERSION),
            ).fetchall()

        rows = self._read("reading the digest cache", rd)
        loaded: dict[str, CachedDigest] = {}
        for path, size, mtime, ino, ctime, sha256, sha1, md5, verified in rows:
            if sha1 or md5:
                digests: Mapping[str, str] = {t: v for t, v in (("sha1", sha1), ("md5", md5)) if v}
            else:
                digests = _NO_DIGESTS  # most rows: one shared empty mapping, not 100,000
            loaded[path] = CachedDigest(
                path, size, mtime, ino, ctime, sha256, digests, bool(verified)
            )
        del rows
        with self._lock:
            return self._local.setdefault(root_key, loaded)

    def loaded_local_paths(self, root_key: str) -> list[str] | None:
        """The paths of a root's digest cache when it is in memory, else None."""
        with self._lock:
            mem = self._local.get(root_key)
            return None if mem is None else list(mem)

    def get(self, root_key: str, path: str) -> CachedDigest | None:
        return self._local_rows(root_key).get(path)

    def get_under(self, root_key: str, prefix: str) -> Mapping[str, CachedDigest]:
        """Cached entries at or under `prefix` ("" = all of the root), by path."""
        rows = self._local_rows(root_key)
        if not prefix:
            return rows  # read with .get() only, which a concurrent update cannot upset
        below = prefix + "/"
        with self._lock:  # iterating while another thread updates would raise
            return {p: c for p, c in rows.items() if p == prefix or p.startswith(below)}

    def put_many(self, root_key: str, entries: Iterable[CachedDigest]) -> None:
        batch = list(entries)
        if not batch:
            return
        rows = [
            (root_key, c.path, c.size, c.mtime_ns, c.inode, c.ctime_ns, c.sha256,
             c.digests.get("sha1"), c.digests.get("md5"), int(c.verified), DIGEST_CACHE_VERSION)
            for c in batch
        ]  # fmt: skip
        self._write(
            "writing the digest cache",
            lambda db: db.executemany(
                "INSERT OR REPLACE INTO sync_digest_cache (root_key, path, size, mtime_ns, "
                "inode, ctime_ns, sha256, sha1, md5, verified, version) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            ),
        )
        with self._lock:
            if len(batch) > _BULK:
                self._local.pop(root_key, None)  # reloaded compactly on the next read
            elif (mem := self._local.get(root_key)) is not None:
                mem.update((c.path, c) for c in batch)

    def forget_local(self, root_key: str, paths: Collection[str]) -> None:
        """Drop cached digests of files that are gone."""
        if not paths:
            return
        self._write(
            "pruning the digest cache",
            lambda db: db.executemany(
                "DELETE FROM sync_digest_cache WHERE root_key = ? AND path = ?",
                [(root_key, p) for p in paths],
            ),
        )
        with self._lock:
            if (mem := self._local.get(root_key)) is not None:
                for p in paths:
                    mem.pop(p, None)

    # ---- remote digest cache (DESIGN.md section 9, "Digest choice") ------------------

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

        def rd(db: sqlite3.Connection) -> dict[str, tuple[int, str, str]]:
            cur = db.execute(
                "SELECT path, size, mtime, digest FROM sync_remote_digest "
                "WHERE drive_spec = ? AND digest_type = ?",
                (drive_spec, digest_type),
            )
            return {r[0]: (r[1], r[2], r[3]) for r in cur}

        loaded = self._read("reading the remote digest cache", rd)
        with self._lock:
            return self._remote.setdefault(key, loaded)

    def put_remote_digests(
        self, drive_spec: str, digest_type: str, rows: Sequence[tuple[str, int, str, str]]
    ) -> None:
        """Remember (path, size, mtime, digest) rows of `drive_spec` for `digest_type`."""
        if not rows:
            return
        self._write(
            "writing the remote digest cache",
            lambda db: db.executemany(
                "INSERT OR REPLACE INTO sync_remote_digest (drive_spec, path, size, mtime, "
                "digest_type, digest) VALUES (?, ?, ?, ?, ?, ?)",
                [(drive_spec, p, size, mtime, digest_type, d) for p, size, mtime, d in rows],
            ),
        )
        key = f"{drive_spec}\0{digest_type}"
        with self._lock:
            if len(rows) > _BULK:
                self._remote.pop(key, None)  # reloaded compactly on the next read
            elif (mem := self._remote.get(key)) is not None:
                for path, size, mtime, digest in rows:
                    mem[path] = (size, mtime, digest)

    # ---- baselines ------------------------------------------------------------------

    def baseline(self, pair: Pair) -> tuple[dict[str, BaselineEntry], int]:
        """The pair's baseline (NFC path -> entry) and its generation (0: none yet)."""
        key = pair.key

        def gen(db: sqlite3.Connection) -> int:
            row = db.execute(
                "SELECT generation FROM sync_pair WHERE pair_key = ?", (key,)
            ).fetchone()
            return int(row[0]) if row else 0

        generation = self._read("reading a sync baseline's generation", gen)
        with self._lock:
            cached = self._baselines.get(key)
        if cached is not None and cached[0] == generation:
            return cached[1], generation

        def rd(db: sqlite3.Connection) -> tuple[int, list[Any]]:
            db.execute("BEGIN")
            try:
                g = gen(db)
                rows = db.execute(
                    "SELECT path, sha256, remote_digest_type, remote_digest, size, mtime "
                    "FROM sync_baseline WHERE pair_key = ?",
                    (key,),
                ).fetchall()
            finally:
                db.execute("COMMIT")
            return g, rows

        generation, rows = self._read("reading a sync baseline", rd)
        entries = {r[0]: BaselineEntry(*r) for r in rows}
        with self._lock:
            self._baselines[key] = (generation, entries)
        return entries, generation

    def record_baseline(
        self, pair: Pair, entries: Sequence[BaselineEntry], now: datetime | None = None
    ) -> int:
        """Upsert baseline entries of `pair` and bump its generation; returns it."""
        if not entries:
            return self.baseline(pair)[1]
        now_text = dt_text(utcnow() if now is None else now)
        key = pair.key

        def tx(db: sqlite3.Connection) -> int:
            db.execute(
                "INSERT INTO sync_pair (pair_key, root_path, local_path, drive_spec, "
                "remote_path, generation, updated_at) VALUES (?, ?, ?, ?, ?, 1, ?) "
                "ON CONFLICT (pair_key) DO UPDATE SET generation = generation + 1, "
                "updated_at = excluded.updated_at",
                (key, pair.root_path, pair.local_path, pair.drive_spec, pair.remote_path,
                 now_text),
            )  # fmt: skip
            db.executemany(
                "INSERT OR REPLACE INTO sync_baseline (pair_key, path, sha256, "
                "remote_digest_type, remote_digest, size, mtime, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(key, *_baseline_row(b), now_text) for b in entries],
            )
            row = db.execute(
                "SELECT generation FROM sync_pair WHERE pair_key = ?", (key,)
            ).fetchone()
            return int(row[0])

        return self._write("recording a sync baseline", tx)

    # ---- drive snapshots ------------------------------------------------------------

    def save_snapshot(
        self,
        drive_spec: str,
        path: str,
        entries: Mapping[str, list[Any]],
        now: datetime | None = None,
    ) -> Snapshot:
        """Store a listing of `path` (see `Snapshot`); prunes old plans and snapshots."""
        now = utcnow() if now is None else now
        body = _pack(entries)

        def tx(db: sqlite3.Connection) -> int:
            self._prune(db, now)
            cur = db.execute(
                "INSERT INTO drive_snapshot (drive_spec, path, entry_count, body, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (drive_spec, path, len(entries), body, dt_text(now)),
            )
            assert cur.lastrowid is not None
            return cur.lastrowid

        sid = self._write("storing a drive snapshot", tx)
        return Snapshot(sid, drive_spec, path, _dt(dt_text(now)), dict(entries))

    def load_snapshot(self, snapshot_id: int) -> Snapshot | None:
        """The stored snapshot, or None (never made, or pruned after `RETENTION`)."""
        row = self._read(
            "reading a drive snapshot",
            lambda db: db.execute(
                "SELECT id, drive_spec, path, created_at, body FROM drive_snapshot WHERE id = ?",
                (snapshot_id,),
            ).fetchone(),
        )
        if row is None:
            return None
        return Snapshot(int(row[0]), row[1], row[2], _dt(row[3]), _unpack(row[4]))
