"""SQLite engine setup: the database file, its pragmas, and how transactions begin.

Decided here, once, so every connection behaves the same (docs/design.md sections 2 and 9):

- The database file is created 0600 before SQLite opens it (SQLite gives its `-wal` and
  `-shm` files the mode of the database), inside the 0700 data directory.
- Every new connection gets `busy_timeout`, `foreign_keys=ON`, `synchronous=NORMAL`
  (safe with WAL: a power cut may lose the last commits, never corrupt) and WAL mode
  (persistent in the file; set once). WAL is refused on network filesystems, where its
  shared-memory index does not work.
- The driver's own transaction handling is turned off (`isolation_level=None`) and
  placet emits `BEGIN` itself: `BEGIN IMMEDIATE` for write transactions, so a writer
  takes the write lock before reading what it will change and never fails a lock
  upgrade half way; plain deferred `BEGIN` for reads, which in WAL never block writers.
- Datetimes are stored naive UTC (SQLite has no zone type; `DateTime(timezone=True)`
  silently drops the offset) and come back aware UTC
  (`UTCDateTime`). Naive input is refused rather than guessed.
"""

from __future__ import annotations

import os
import random
import sqlite3
import stat
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import DateTime, TypeDecorator, create_engine, event
from sqlalchemy.engine import Connection, Dialect, Engine

from placet.errors import StoreError

BUSY_TIMEOUT_MS = 5000
"""How long SQLite's own busy handler waits for a lock before a statement fails."""

WRITE_RETRIES = 3
"""Attempts after SQLITE_BUSY outlasted the busy timeout, before StoreError."""

BEGIN_OPTION = "placet_begin"
"""Connection execution option naming the BEGIN flavour: "IMMEDIATE" or "DEFERRED"."""

T = TypeVar("T")

_NETWORK_FS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "afs", "ceph", "glusterfs", "9p"}
)


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """Return `value` in UTC; a naive datetime is refused (ValueError), never guessed."""
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}: pass a timezone-aware datetime")
    return value.astimezone(UTC)


def dt_text(value: datetime) -> str:
    """`value` in the exact text form `UTCDateTime` stores (naive UTC, microseconds), for
    the few hot-path statements that bypass SQLAlchemy's type processing."""
    return as_utc(value).strftime("%Y-%m-%d %H:%M:%S.%f")


def raw(conn: Connection) -> sqlite3.Connection:
    """The driver connection under a SQLAlchemy connection (same transaction)."""
    driver = conn.connection.driver_connection
    assert isinstance(driver, sqlite3.Connection)
    return driver


class UTCDateTime(TypeDecorator[datetime]):
    """Store aware datetimes as naive UTC text; always return aware UTC."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return as_utc(value).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


def _fs_type(path: Path) -> str | None:
    """The filesystem type of the mount holding `path`, from /proc/self/mounts (Linux)."""
    try:
        lines = Path("/proc/self/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    target = str(path.resolve())
    best, best_type = "", None
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        mount = parts[1].replace("\\040", " ")
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, best_type = mount, parts[2]
    return best_type


def prepare_db_file(db_path: Path) -> None:
    """Create the database file 0600 if absent; tighten an existing one to 0600.

    Raises:
        StoreError: the path exists but is not a regular file, or lies on a network
            filesystem (WAL needs shared memory that NFS/SMB do not provide).
    """
    fs = _fs_type(db_path.parent)
    if fs in _NETWORK_FS:
        raise StoreError(
            f"refusing to open the database {db_path}: it is on a {fs} filesystem, where "
            "SQLite's WAL mode is unsafe; set PLACET_DB to a path on a local disk",
            details={"path": str(db_path), "fs_type": fs},
        )
    try:
        fd = os.open(db_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        os.close(fd)
    except FileExistsError:
        st = os.lstat(db_path)
        if not stat.S_ISREG(st.st_mode):
            raise StoreError(
                f"refusing to open the database {db_path}: it is not a regular file; "
                "move it away or set PLACET_DB to another path",
                details={"path": str(db_path)},
            ) from None
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(db_path, 0o600)
    for suffix in ("-wal", "-shm"):
        side = Path(str(db_path) + suffix)
        try:
            if stat.S_IMODE(side.lstat().st_mode) & 0o077:
                side.chmod(0o600)
        except FileNotFoundError:
            pass


def _pragmas(busy_timeout_ms: int) -> Callable[[sqlite3.Connection, Any], None]:
    def on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
        _on_connect(dbapi_conn, busy_timeout_ms)

    return on_connect


def _on_connect(dbapi_conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
    # Our own BEGINs (see _on_begin); the driver must not open transactions implicitly.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    try:
        # busy_timeout first, so the journal-mode switch below waits instead of failing.
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
        mode = cur.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() != "wal":
            cur.execute("PRAGMA journal_mode=WAL")
    finally:
        cur.close()


def _on_begin(conn: Connection) -> None:
    mode = conn.get_execution_options().get(BEGIN_OPTION, "DEFERRED")
    conn.exec_driver_sql(f"BEGIN {mode}")


def make_engine(db_path: Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> Engine:
    """An engine on `db_path` with placet's pragmas and BEGIN handling.

    Write transactions: `engine.connect().execution_options(placet_begin="IMMEDIATE")`
    then `conn.begin()`. Anything else begins deferred. The pool hands one connection to
    one thread at a time, so the store may be shared across threads.
    """
    engine = create_engine(
        f"sqlite:///{db_path}",
        connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000},
        pool_size=8,
        max_overflow=8,
    )
    event.listen(engine, "connect", _pragmas(busy_timeout_ms))
    event.listen(engine, "begin", _on_begin)
    return engine


def is_busy(exc: BaseException) -> bool:
    """True for SQLITE_BUSY / SQLITE_LOCKED (and their extended codes) from the driver."""
    orig = getattr(exc, "orig", exc)
    code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(orig).lower()
    return "database is locked" in text or "database is busy" in text


def retry_busy(
    attempt: Callable[[], T],
    busy_type: type[BaseException],
    error_type: type[BaseException],
    to_error: Callable[[Any], StoreError],
) -> T:
    """`attempt()`, run again after a jittered back-off (10-50 ms, doubling) while SQLite
    stays busy past its own busy timeout, at most `WRITE_RETRIES` times.

    Raises:
        StoreError: `to_error(e)` of a `busy_type` error once the retries are spent (or
            that is not busy at all), or of any `error_type` error.
    """
    for n in range(WRITE_RETRIES + 1):
        try:
            return attempt()
        except busy_type as e:
            if is_busy(e) and n < WRITE_RETRIES:
                time.sleep(random.uniform(0.01, 0.05) * (2**n))
                continue
            raise to_error(e) from e
        except error_type as e:
            raise to_error(e) from e
    raise AssertionError("unreachable")  # pragma: no cover


def raw_transaction(engine: Engine, begin: str, fn: Callable[[sqlite3.Connection], T]) -> T:
    """`fn` on a pooled driver connection inside `begin` ("BEGIN IMMEDIATE" for writes,
    "BEGIN" for reads) and COMMIT; on any exception ROLLBACK and re-raise. For the hot
    paths that run plain SQL, below SQLAlchemy's per-statement cost."""
    pooled = engine.raw_connection()
    try:
        db = pooled.driver_connection
        assert isinstance(db, sqlite3.Connection)
        db.execute(begin)
        try:
            result = fn(db)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
    finally:
        pooled.close()
    return result
