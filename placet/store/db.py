"""SQLite engine setup: the database file, its pragmas, and how transactions begin.

Decided once, so every connection behaves the same (docs/design.md sections 2 and 9):
the file is created 0600 in the 0700 data folder; each connection gets `busy_timeout`,
`foreign_keys=ON`, `synchronous=NORMAL` and WAL (refused on network filesystems);
placet emits `BEGIN` itself, `BEGIN IMMEDIATE` for writes (the lock taken before reading
what changes) and deferred `BEGIN` for reads. Datetimes are stored naive UTC and come
back aware (`UTCDateTime`); naive input is refused. On PostgreSQL (`make_server_engine`)
a write takes one advisory lock first (`WRITE_LOCK_KEY`), at READ COMMITTED, reads at
REPEATABLE READ, and a creation is one server-side call (`call_statement`)
(docs/decisions/0019-postgresql-writes.md). Hot-path SQL is written once with `?`
markers; `RawDB` runs it on either driver (docs/decisions/0017-store-writes.md)."""

from __future__ import annotations

import os
import random
import sqlite3
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sqlalchemy import DateTime, Table, TypeDecorator, create_engine, event
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Dialect, Engine, make_url
from sqlalchemy.exc import DisconnectionError

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


WRITE_LOCK_KEY = 0x706C61636574
"""PostgreSQL advisory lock key ("placet" in ASCII) every write transaction takes first."""


def driver_errors() -> tuple[type[Exception], ...]:
    """What the two drivers raise (the store's raw paths catch these). psycopg counts
    only once loaded, by a PostgreSQL engine: importing it costs ~90 ms at every start,
    and without it no psycopg error can occur."""
    pg = sys.modules.get("psycopg")
    return (sqlite3.Error,) if pg is None else (sqlite3.Error, pg.Error)


def driver_integrity_errors() -> tuple[type[Exception], ...]:
    """A constraint refused the write, on either driver (see `driver_errors`)."""
    pg = sys.modules.get("psycopg")
    return (sqlite3.IntegrityError,) if pg is None else (sqlite3.IntegrityError, pg.IntegrityError)


_PG_BUSY_STATES = frozenset({"55P03", "40001", "40P01"})
"""lock_not_available, serialization_failure, deadlock_detected: retryable."""


@lru_cache(maxsize=256)
def _pg_sql(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


class Cursor(Protocol):
    """What `RawDB.execute` returns, the part of a DB-API cursor both drivers share."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class RawDB:
    """A driver connection (sqlite3 or psycopg) for plain SQL written with `?` markers.

    `execute` returns the driver's cursor (fetchone, fetchall, iteration, rowcount); use
    `RETURNING` rather than `lastrowid`, which psycopg lacks.
    """

    def __init__(self, driver: Any) -> None:
        self.driver = driver
        self.postgres = not isinstance(driver, sqlite3.Connection)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        cur: Cursor = self.driver.execute(_pg_sql(sql) if self.postgres else sql, params)
        return cur

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        if self.postgres:
            with self.driver.cursor() as cur:
                cur.executemany(_pg_sql(sql), rows)
        else:
            self.driver.executemany(sql, rows)

    def begin(self, *, write: bool) -> None:
        """Begin a transaction: the write lock first for a write (module docstring)."""
        if not self.postgres:
            self.driver.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        elif write:
            self.driver.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
        else:
            self.driver.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")

    def commit(self) -> None:
        if self.postgres:
            self.driver.commit()
        else:
            self.driver.execute("COMMIT")

    def rollback(self) -> None:
        if self.postgres:
            self.driver.rollback()
        elif self.driver.in_transaction:
            self.driver.execute("ROLLBACK")


def raw(conn: Connection) -> RawDB:
    """The driver connection under a SQLAlchemy connection (same transaction)."""
    return RawDB(conn.connection.driver_connection)


def qmark(conn: Connection, sql: str) -> str:
    """`sql` written with `?` markers, as `conn.exec_driver_sql` takes it on its dialect."""
    return _pg_sql(sql) if is_postgres(conn) else sql


def upsert(conn: Connection, table: Table) -> Any:
    """`INSERT` on `table` for `conn`'s dialect, with `on_conflict_do_update` and
    `excluded` (SQLite's and PostgreSQL's spell them alike)."""
    if is_postgres(conn):
        from sqlalchemy.dialects.postgresql import insert as pg_insert  # only when in use

        return pg_insert(table)
    return sqlite_insert(table)


def is_postgres(engine: Engine | Connection) -> bool:
    """True when `engine` talks to PostgreSQL (else SQLite)."""
    return engine.dialect.name == "postgresql"


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


def _on_begin_pg(conn: Connection) -> None:
    if conn.get_execution_options().get(BEGIN_OPTION, "DEFERRED") == "IMMEDIATE":
        conn.exec_driver_sql("SELECT pg_advisory_xact_lock(%(k)s)", {"k": WRITE_LOCK_KEY})
    else:
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")


PING_IDLE_SECONDS = 1.0
"""A pooled PostgreSQL connection idle longer than this is pinged before it is handed
out (`_ping_when_idle`); one in use all along is not (a round trip per transaction)."""

_LAST_USED = "placet_last_used"


def _ping_when_idle(engine: Engine) -> None:
    """Hand out no dead pooled connection: one the driver knows is closed or broken, or
    one idle past `PING_IDLE_SECONDS` that fails a ping, is replaced by a new one
    (`DisconnectionError` in the checkout event: the pool reconnects). SQLAlchemy's
    `pool_pre_ping` pings at every checkout: a round trip per transaction, ~15% of the
    client's CPU per proposal at ingest (docs/performance.md)."""

    def checkin(_dbapi_conn: Any, record: Any) -> None:
        record.info[_LAST_USED] = time.monotonic()

    def checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        if dbapi_conn.closed or dbapi_conn.broken:
            raise DisconnectionError("the pooled connection was lost")
        last = record.info.get(_LAST_USED)
        if last is None or time.monotonic() - last <= PING_IDLE_SECONDS:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except Exception as e:  # any failure: the connection is not fit for use
            raise DisconnectionError(f"the pooled connection failed a ping: {e}") from e

    event.listen(engine, "checkin", checkin)
    event.listen(engine, "checkout", checkout)


def make_server_engine(url: str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> Engine:
    """An engine on the PostgreSQL server at `url` (psycopg 3), with the same BEGIN
    handling as `make_engine` (module docstring). The URL holds no password
    (`placet.config.check_database_url`): libpq reads `PGPASSWORD` or `~/.pgpass`.
    Sessions run in UTC with `lock_timeout` = `busy_timeout_ms`, UTF-8 as the client
    encoding and READ COMMITTED as their default isolation, whatever the server's or the
    database's defaults (every text placet stores and hashes is UTF-8; a write
    transaction's statements must each take their snapshot after the write lock is
    granted; a read sets REPEATABLE READ itself); a pooled connection is pinged only
    after `PING_IDLE_SECONDS` idle (`_ping_when_idle`).
    """
    engine = create_engine(
        make_url(url).set(drivername="postgresql+psycopg"),
        connect_args={
            "application_name": "placet",
            "options": (
                f"-c timezone=UTC -c lock_timeout={int(busy_timeout_ms)} "
                "-c default_transaction_isolation=read\\ committed -c client_encoding=UTF8"
            ),
        },
        pool_size=8,
        max_overflow=8,
    )
    _ping_when_idle(engine)
    event.listen(engine, "begin", _on_begin_pg)
    return engine


def is_busy(exc: BaseException) -> bool:
    """True for SQLITE_BUSY / SQLITE_LOCKED (and their extended codes) from the driver, or
    PostgreSQL's lock timeout, serialization failure and deadlock (`_PG_BUSY_STATES`)."""
    orig = getattr(exc, "orig", exc)
    if getattr(orig, "sqlstate", None) in _PG_BUSY_STATES:
        return True
    code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(orig).lower()
    return "database is locked" in text or "database is busy" in text


PG_GONE_STATES = frozenset({"57P01", "57P02", "57P03"})
"""admin_shutdown, crash_shutdown, cannot_connect_now: the server ended or refuses the
session (a restart); with class 08 (connection exception), the connection is lost."""


def is_disconnect(exc: BaseException) -> bool:
    """True when `exc` (a driver error, or SQLAlchemy's wrapping one) means the connection
    to the PostgreSQL server was lost or refused: the server restarted or went away
    (`PG_GONE_STATES`, SQLSTATE class 08, or psycopg's OperationalError with no SQLSTATE:
    "server closed the connection unexpectedly", "the connection is closed"). Never true
    on SQLite, whose errors carry no SQLSTATE."""
    if getattr(exc, "connection_invalidated", False):
        return True
    orig = getattr(exc, "orig", exc)
    state = getattr(orig, "sqlstate", None)
    if state is not None:
        return state in PG_GONE_STATES or str(state).startswith("08")
    pg = sys.modules.get("psycopg")
    return pg is not None and isinstance(orig, pg.OperationalError)


def retry_busy(
    attempt: Callable[[], T],
    busy_type: type[BaseException] | tuple[type[BaseException], ...],
    error_type: type[BaseException] | tuple[type[BaseException], ...],
    to_error: Callable[[Any], StoreError],
) -> T:
    """`attempt()`, run again after a jittered back-off (10-50 ms, doubling) while the
    database stays busy past its own lock timeout, at most `WRITE_RETRIES` times.

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


def call_statement(engine: Engine, sql: str, params: Sequence[Any]) -> Any:
    """The single statement `sql` (`?` markers) as a transaction of its own on PostgreSQL
    (the connection in autocommit for the while): one round trip, nothing held between
    round trips. For a server-side function that takes the write lock itself
    (`placet_create_proposal`, `placet.store.migrations`). Returns the first row (a
    tuple) or None; on an error the server has rolled the statement back and the
    driver's error is raised (`is_busy` tells a lock timeout)."""
    pooled = engine.raw_connection()
    try:
        conn: Any = pooled.driver_connection
        conn.autocommit = True
        try:
            return conn.execute(_pg_sql(sql), params).fetchone()
        finally:
            if not conn.closed:
                conn.autocommit = False
    finally:
        pooled.close()


def raw_transaction(engine: Engine, fn: Callable[[RawDB], T], *, write: bool) -> T:
    """`fn` on a pooled driver connection in one transaction (`RawDB.begin`: the write
    lock first for a write) and COMMIT; on any exception ROLLBACK and re-raise. For the
    hot paths that run plain SQL, below SQLAlchemy's per-statement cost."""
    pooled = engine.raw_connection()
    try:
        db = RawDB(pooled.driver_connection)
        db.begin(write=write)
        try:
            result = fn(db)
            db.commit()
        except BaseException:
            db.rollback()
            raise
    finally:
        pooled.close()
    return result
