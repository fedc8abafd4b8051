"""The store's `Database` part: the connection, transactions, and the compare-and-set.

Each write is one `BEGIN IMMEDIATE` transaction holding the write lock from its first
read, so "read the row, decide, compare-and-set it, append the audit event" is atomic
across threads and processes; the CAS (`UPDATE ... WHERE id = ? AND status = <seen>` plus
the transition's own guard, e.g. `expires_at > now` for accept) is the statement that
decides, and its audit event commits with it or not at all. A lock that SQLite's busy
timeout does not resolve is retried a few times with jittered backoff and then raised as
a retryable `StoreError`; a raw "database is locked" never reaches a caller.

Reads are deferred transactions (a consistent WAL snapshot, never blocking writers).
Queries use SQLAlchemy Core against the tables of `placet.store.models`. Every other part
of `placet.store.store.Store` works through this one. Time is injectable (`now=`), UTC.
"""

from __future__ import annotations

import socket
import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Self, TypeVar

from sqlalchemy import select, update
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from placet.config import Settings
from placet.errors import NotFound, StoreError, WrongState
from placet.store import lifecycle as lc
from placet.store.audit import append_anchor, append_event, create_anchor
from placet.store.changes import CHANNEL, NOTIFY_SQL, ChangeWaiter
from placet.store.db import (
    BEGIN_OPTION,
    RawDB,
    as_utc,
    call_statement,
    driver_errors,
    is_busy,
    is_disconnect,
    is_postgres,
    raw_transaction,
    retry_busy,
    utcnow,
)
from placet.store.host import host_id
from placet.store.models import PROPOSAL, ProposalRecord
from placet.store.reconnect import riding_out
from placet.store.records import EventFacts

T = TypeVar("T")
Heads = list[tuple[int, str]]

P = PROPOSAL.c

_PG_VERSION_SQL = "SELECT coalesce(max(id), 0) FROM audit_event"


def proposal_of_row(row: Row[Any]) -> ProposalRecord:
    """The typed row of a proposal row read through Core."""
    return ProposalRecord.of(row._mapping)


def now_or_utcnow(now: datetime | None) -> datetime:
    return utcnow() if now is None else as_utc(now)


class Database:
    """The connection, transactions with retry, and the compare-and-set every transition
    makes: the part every other part of `Store` works through."""

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings
        self.db_path: Path = settings.db_path
        self.postgres = is_postgres(engine)
        self.db_label = (
            engine.url.render_as_string(hide_password=True) if self.postgres else str(self.db_path)
        )
        self.anchor_path: Path = settings.audit_anchor_path
        self._anchor_created = False  # by this store, before its first write
        self.host = socket.gethostname()
        self.host_id = host_id(settings.data_dir)
        self._dv_lock = threading.Lock()
        self._dv_conn: sqlite3.Connection | None = None

    # ---- plumbing -------------------------------------------------------------------

    def close(self) -> None:
        """Release every connection (the store must not be used afterwards)."""
        with self._dv_lock:
            if self._dv_conn is not None:
                self._dv_conn.close()
                self._dv_conn = None
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _before_write(self) -> None:
        """Once per store, before its first write: `placet.store.audit.create_anchor`."""
        if not self._anchor_created:
            create_anchor(self.anchor_path)
            self._anchor_created = True

    def write(self, what: str, fn: Callable[[Connection, Heads], T]) -> T:
        """Run `fn` in one BEGIN IMMEDIATE transaction; anchor its audit heads after commit."""
        self._before_write()

        def attempt() -> T:
            heads: Heads = []
            with self.engine.connect() as conn:
                conn.execution_options(**{BEGIN_OPTION: "IMMEDIATE"})
                with conn.begin():
                    result = fn(conn, heads)
                    if heads and self.postgres:  # delivered at commit (`placet.store.changes`)
                        conn.exec_driver_sql(NOTIFY_SQL)
            append_anchor(self.anchor_path, heads)
            return result

        return self.retrying(what, attempt, OperationalError, SQLAlchemyError)

    def write_raw(self, what: str, fn: Callable[[RawDB, Heads], T]) -> T:
        """`write` on a pooled driver connection, for the hot path (plain SQL only): a
        second write path beside the table models, kept for `bench/ingest.py` (creation)
        and `bench/propose.py` (a sync's op rows)."""
        self._before_write()

        def attempt() -> T:
            heads: Heads = []

            def body(db: RawDB) -> T:
                result = fn(db, heads)
                if heads and db.postgres:  # delivered at commit (`placet.store.changes`)
                    db.execute(NOTIFY_SQL)
                return result

            result = raw_transaction(self.engine, body, write=True)
            append_anchor(self.anchor_path, heads)
            return result

        return self.retrying(what, attempt, driver_errors(), driver_errors())

    def write_statement(
        self, what: str, sql: str, params: Sequence[Any], heads: Callable[[Any], Heads]
    ) -> Any:
        """`placet.store.db.call_statement` (PostgreSQL: one statement, its own
        transaction, one round trip) with the busy retries; returns its row or None, and
        anchors `heads(row)` after the commit when there is a row. The statement takes
        the write lock and notifies itself."""
        self._before_write()

        def attempt() -> Any:
            row = call_statement(self.engine, sql, params)
            if row is not None:
                append_anchor(self.anchor_path, heads(row))
            return row

        return self.retrying(what, attempt, driver_errors(), driver_errors())

    def read(self, what: str, fn: Callable[[Connection], T]) -> T:
        def attempt() -> T:
            with self.engine.connect() as conn:
                return fn(conn)

        return self.retrying(what, attempt, OperationalError, SQLAlchemyError)

    def retrying(
        self,
        what: str,
        attempt: Callable[[], T],
        busy_type: type[Exception] | tuple[type[Exception], ...],
        error_type: type[Exception] | tuple[type[Exception], ...],
    ) -> T:
        """`attempt()` under `placet.store.db.retry_busy`, its errors as `_store_error`; on
        PostgreSQL made again while the server is restarting, for a few seconds
        (`placet.store.reconnect.riding_out`: only when the server refused the connection
        or ended the session in a shutdown, so nothing of it was committed)."""

        def once() -> T:
            return retry_busy(attempt, busy_type, error_type, lambda e: self.store_error(what, e))

        return riding_out(once, what=f"{what}: the database server") if self.postgres else once()

    def store_error(self, what: str, e: Exception) -> StoreError:
        """The StoreError for the driver's error `e`: retryable when the database stayed
        locked, or when the connection to the server was lost (a restart: the pool's
        other connections, as dead, are dropped too, so one call fails, not one per
        pooled connection); otherwise not."""
        orig = getattr(e, "orig", e)
        if self.postgres and is_disconnect(e):
            self.engine.dispose()  # checked-out connections are dropped when returned
            return StoreError(
                f"{what}: the connection to the database server {self.db_label} was lost "
                f"({str(orig).strip()}); it may have restarted: try again",
                retryable=True,
                details={"path": self.db_label},
            )
        if is_busy(e):
            return StoreError(
                f"{what}: the database {self.db_label} stayed locked by another placet "
                "process; try again in a moment",
                code="store_busy",
                retryable=True,
                details={"path": self.db_label},
            )
        return StoreError(
            f"{what}: the database {self.db_label} failed: {orig}; `placet doctor` checks it",
            details={"path": self.db_label},
        )

    @staticmethod
    def row(conn: Connection, pid: int) -> Row[Any]:
        # An id beyond SQLite's 64-bit integers names no proposal (and would not bind).
        in_range = -(1 << 63) <= pid < (1 << 63)
        row = conn.execute(select(PROPOSAL).where(P.id == pid)).first() if in_range else None
        if row is None:
            raise NotFound(
                f"proposal {pid} does not exist; `placet list` shows the proposals",
                details={"proposal_id": pid},
            )
        return row

    def cas(
        self,
        conn: Connection,
        heads: Heads,
        cur: Row[Any],
        *,
        transition: str,
        actor: str,
        now: datetime,
        values: dict[str, Any],
        to: str | None = None,
        guard: tuple[Any, ...] = (),
        detail: dict[str, Any] | None = None,
    ) -> ProposalRecord:
        """Compare-and-set `cur` (read in this transaction) to `to` (default: the one
        status `transition` leads to, `lifecycle.target_of`), plus its audit event."""
        lc.check_actor(transition, actor)
        to = lc.target_of(transition) if to is None else to
        old = cur.status
        if old not in lc.TRANSITIONS[transition].sources or to not in (
            lc.TRANSITIONS[transition].targets
        ):
            raise self.wrong_state(cur.id, transition, old)
        row = conn.execute(
            update(PROPOSAL)
            .where(P.id == cur.id, P.status == old, *guard)
            .values(status=to, **values)
            .returning(*PROPOSAL.c)
        ).first()
        if row is None:
            raise self.wrong_state(cur.id, transition, old)
        heads.append(
            append_event(
                conn, EventFacts(cur.id, cur.request_hash, actor, old, to, now), detail=detail
            )
        )
        return proposal_of_row(row)

    def expire_row(
        self,
        conn: Connection,
        heads: Heads,
        cur: Row[Any],
        now: datetime,
        detail: dict[str, Any] | None = None,
    ) -> ProposalRecord:
        """pending -> expired by the sweeper, only while `expires_at <= now`; the audit
        event's detail is `detail` (default: the due time, `expires_at`). Expiry keeps the
        request and evidence: it is an audited status change only."""
        return self.cas(
            conn,
            heads,
            cur,
            transition="expire",
            actor=lc.SWEEPER,
            now=now,
            guard=(P.expires_at <= now,),
            values={"resolved_at": now, "resolved_by": lc.SWEEPER},
            detail=detail or {"expires_at": cur.expires_at.isoformat()},
        )

    @staticmethod
    def wrong_state(pid: int, transition: str, status: str) -> WrongState:
        allowed = " or ".join(lc.sources_of(transition))
        return WrongState(
            f"cannot {transition} proposal {pid}: it is {status}, and only a {allowed} "
            f"proposal can be {'extended' if transition == 'extend' else transition + 'ed'}",
            details={"proposal_id": pid, "status": status, "transition": transition},
        )

    def change_waiter(self) -> ChangeWaiter:
        """A `ChangeWaiter` on this store: LISTEN on its own connection on PostgreSQL,
        the data version polled on SQLite (`placet.store.changes`). Close it."""
        if not self.postgres:
            return ChangeWaiter(version=self.data_version)

        def listen() -> Any:
            pooled = self.engine.raw_connection()
            conn: Any = pooled.driver_connection
            pooled.detach()  # its own session for as long as the waiter lives
            conn.commit()
            conn.autocommit = True
            conn.execute(f"LISTEN {CHANNEL}")
            return conn

        conn = self.retrying("listening for changes", listen, driver_errors(), driver_errors())
        return ChangeWaiter(
            listener=conn,
            close=conn.close,
            failed=lambda e: self.store_error("waiting for changes", e),
        )

    def data_version(self) -> int:
        """SQLite's `PRAGMA data_version` on a private connection that never writes: it
        changes whenever any connection or process commits. For cheap change polling.
        On PostgreSQL: the audit chain's head id, which moves with every transition (a
        lease renewal, which changes no status, does not move it)."""
        if self.postgres:
            return self.read(
                "reading the data version",
                lambda c: int(c.exec_driver_sql(_PG_VERSION_SQL).scalar_one()),
            )
        with self._dv_lock:
            if self._dv_conn is None:
                self._dv_conn = sqlite3.connect(
                    self.db_path, check_same_thread=False, isolation_level=None
                )
            try:
                return int(self._dv_conn.execute("PRAGMA data_version").fetchone()[0])
            except sqlite3.Error as e:
                raise StoreError(f"reading the data version of {self.db_path} failed: {e}") from e
