"""Sync's tables and the values stored in them: plans, digest caches, baselines, snapshots.

The tables below (SQLModel tables on `placet.store.models.Table`) are the schema migration
3 (`placet.store.migrations`) builds exactly (a test compares the two); `placet.sync.stored`
reads and writes them (in SQL of its own). The values (`Pair`, `StoredPlan`, `Snapshot`)
are what its accessors return; `pack` / `unpack` are the zlib'd JSON the plan bodies,
skip rows and snapshots are stored as.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import IO, Any

from sqlalchemy import Index
from sqlmodel import Field

from placet.errors import StoreError
from placet.store.models import NullStr, Str, StrKey, Table, When
from placet.sync.model import SyncPlan

SkipRow = tuple[str, str | None, str | None, str | None, int | None, str | None]
"""A baseline entry as a row: (path, sha256, remote digest type, remote digest, size,
mtime), the order of `BaselineEntry`'s fields."""

RETENTION = timedelta(days=7)
"""Stored plans and drive snapshots older than this are pruned (docs/design.md section 9)."""


# ---- tables (migration 3 in placet.store.migrations builds exactly these) --------------


class SyncPlanRow(Table, table=True):
    """One stored, immutable sync plan (see the module docstring)."""

    __tablename__ = "sync_plan"
    __table_args__ = (
        Index("ix_sync_plan_created", "created_at"),
        Index("ix_sync_plan_pair", "pair_key", "created_at"),
    )

    id: int = Field(primary_key=True)
    pair_key: Str
    root_name: Str
    root_path: Str
    local_path: Str
    drive_spec: Str
    remote_path: Str
    options: Str
    local_fingerprint: Str
    remote_fingerprint: Str
    baseline_generation: int
    summary: Str
    meta: Str
    body: bytes
    skips: bytes
    created_at: When


class SyncPlanSkips(Table, table=True):
    """A plan's verified skips (see `RowPacker`), the blob last: SQLite reserves it without
    building it in memory (`zeroblob`) and takes it a piece at a time."""

    __tablename__ = "sync_plan_skips"

    plan_id: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    skips: bytes


class SyncDigestCache(Table, table=True):
    """A local file's cached digests (`placet.sync.cache.CachedDigest`)."""

    __tablename__ = "sync_digest_cache"

    root_key: StrKey
    path: StrKey
    size: int
    mtime_ns: int
    inode: int
    ctime_ns: int
    sha256: Str
    sha1: NullStr
    md5: NullStr
    verified: int
    version: int


class SyncRemoteDigest(Table, table=True):
    """A remote file's digest as rclone computed it for (size, mtime)."""

    __tablename__ = "sync_remote_digest"

    drive_spec: StrKey
    path: StrKey
    size: int
    mtime: Str
    digest_type: Str
    digest: Str


class SyncPair(Table, table=True):
    """A synced pair (local folder, remote folder) and its baseline's generation."""

    __tablename__ = "sync_pair"

    pair_key: StrKey
    root_path: Str
    local_path: Str
    drive_spec: Str
    remote_path: Str
    generation: int
    updated_at: When


class SyncBaseline(Table, table=True):
    """What one path of a pair held on both sides after the last sync that touched it."""

    __tablename__ = "sync_baseline"

    pair_key: StrKey
    path: StrKey
    sha256: NullStr
    remote_digest_type: NullStr
    remote_digest: NullStr
    size: int | None = None
    mtime: NullStr
    updated_at: When


class DriveSnapshot(Table, table=True):
    """A remote folder's listing, kept as the anchor of `drive_changes`."""

    __tablename__ = "drive_snapshot"
    __table_args__ = (Index("ix_drive_snapshot_created", "created_at"),)

    id: int = Field(primary_key=True)
    drive_spec: Str
    path: Str
    entry_count: int
    body: bytes
    created_at: When


# ---- values -------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredCaps:
    """How many stored plans (and, separately, drive snapshots) are kept, and how many
    bytes of them (their compressed bodies): per `placet serve` session and in all.
    From `Settings.stored_*`."""

    per_session: int
    bytes_per_session: int
    total: int
    bytes_total: int


StoredRow = tuple[int, str, int]
"""A stored plan or snapshot as the caps see it: (id, key, bytes). The key names what a
newer row replaces: a plan's pair, a snapshot's (drive, folder)."""


def cap_victims(
    rows: Sequence[StoredRow], count: int, size: int, keep: frozenset[int]
) -> list[int]:
    """The ids to delete so that `rows` hold at most `count` rows and `size` bytes.

    Rows a newer row of the same key replaced go first, oldest first; then the newest
    row of each key, oldest first; ids in `keep` never (the row just stored, a plan a
    live proposal was made from). Kept rows still count, so the caps may stay exceeded
    while only kept rows are left.
    """
    newest: dict[str, int] = {}
    for rid, key, _ in rows:
        newest[key] = max(rid, newest.get(key, rid))
    order = sorted(
        (r for r in rows if r[0] not in keep), key=lambda r: (newest[r[1]] == r[0], r[0])
    )
    n, b = len(rows), sum(r[2] for r in rows)
    out: list[int] = []
    for rid, _, rsize in order:
        if n <= count and b <= size:
            break
        out.append(rid)
        n, b = n - 1, b - rsize
    return out


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


def parse_dt(text: str | datetime) -> datetime:
    """A naive-UTC column as read raw: text on SQLite, a datetime on PostgreSQL."""
    value = text if isinstance(text, datetime) else datetime.fromisoformat(text)
    return value.replace(tzinfo=UTC)


def pack(value: Any) -> bytes:
    # ensure_ascii: a name that is not valid UTF-8 is carried as a lone surrogate, which
    # only the escaped form survives; the C encoder is also fastest in this mode.
    return zlib.compress(json.dumps(value, separators=(",", ":")).encode("ascii"), 1)


PACK_ROWS = 4096
"""Rows a `RowPacker` encodes and compresses at once."""
SPOOL_BYTES = 4 << 20
"""Packed rows a `RowPacker` keeps in memory; beyond this they wait in a temporary file
until `finish`."""


class RowPacker:
    """Rows packed as they come (`add`), into what `pack(list(rows))` would give
    (`finish`): encoded and compressed 4,096 rows at a time, so 100,000 rows never exist
    as one JSON string nor as one list. The compressed parts wait in a temporary file
    once past `SPOOL_BYTES` (in memory below that): `seal` hands over the file for a
    store to copy a piece at a time (SQLite's incremental blob I/O), `finish` reads it
    into one `bytearray` of the exact size. The skips of 1,000,000 files are ~60 MB
    compressed, which a plan would otherwise hold, and SQLite copy, as it stores them."""

    def __init__(self) -> None:
        self.z = zlib.compressobj(1)
        # Closed by `finish` (or when the packer is dropped; an unnamed file on Linux).
        self.out = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115
        self.out.write(self.z.compress(b"["))
        self.batch: list[Any] = []
        self.first = True
        self.count = 0

    def add(self, row: Any) -> None:
        self.batch.append(row)
        if len(self.batch) == PACK_ROWS:
            self._flush()

    def _flush(self) -> None:
        chunk = json.dumps(self.batch, separators=(",", ":"))[1:-1]
        part = self.z.compress((b"" if self.first else b",") + chunk.encode("ascii"))
        try:
            self.out.write(part)
        except OSError as e:
            raise _spool_error(e) from e
        self.count += len(self.batch)
        self.batch, self.first = [], False

    def seal(self) -> tuple[IO[bytes], int]:
        """The file of the packed rows (its caller closes it) and their size (call once;
        nothing may be added after).

        Raises:
            StoreError (retryable): the temporary file could not be written.
        """
        if self.batch:
            self._flush()
        try:
            self.out.write(self.z.compress(b"]"))
            self.out.write(self.z.flush())
            return self.out, self.out.tell()
        except OSError as e:
            raise _spool_error(e) from e

    def finish(self) -> bytearray:
        """The packed rows (call once; nothing may be added after).

        Raises:
            StoreError (retryable): the temporary file could not be written or read.
        """
        f, size = self.seal()
        with f:
            return read_sealed(f, size)


def read_sealed(f: IO[bytes], size: int) -> bytearray:
    """The `size` bytes of a sealed `RowPacker` file, from its start.

    Raises:
        StoreError (retryable): the temporary file could not be read.
    """
    try:
        blob = bytearray(size)
        f.seek(0)
        done = 0
        while done < size and (chunk := f.read(min(1 << 20, size - done))):
            blob[done : done + len(chunk)] = chunk
            done += len(chunk)
    except OSError as e:
        raise _spool_error(e) from e
    return blob


def _spool_error(e: OSError) -> StoreError:
    return StoreError(
        f"could not keep a plan's packed rows in a temporary file ({e.strerror or e}); "
        "free some space in the temporary folder (TMPDIR) and plan again",
        retryable=True,
        details={"temporary_folder": tempfile.gettempdir()},
    )


def pack_rows(rows: Iterable[Any]) -> bytearray:
    """`pack(list(rows))` through a `RowPacker` (an iterator is never listed)."""
    packer = RowPacker()
    add = packer.add
    for row in rows:
        add(row)
    return packer.finish()


def unpack(blob: bytes | bytearray) -> Any:
    return json.loads(zlib.decompress(blob))
