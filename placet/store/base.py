"""The store's plumbing and reads; `decisions` and `store` add the transitions on top.

Each write is one `BEGIN IMMEDIATE` transaction holding the write lock from its first
read, so "read the row, decide, compare-and-set it, append the audit event" is atomic
across threads and processes; the CAS (`UPDATE ... WHERE id = ? AND status = <seen>` plus
the transition's own guard, e.g. `expires_at > now` for accept) is the statement that
decides, and its audit event commits with it or not at all. A lock that SQLite's busy
timeout does not resolve is retried a few times with jittered backoff and then raised as
a retryable `StoreError`; a raw "database is locked" never reaches a caller.

Reads are deferred transactions (a consistent WAL snapshot, never blocking writers).
Queries use SQLAlchemy Core against the tables of `placet.store.models` and return frozen
records.
Time is injectable (`now=`) everywhere, aware UTC.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import logging
import socket
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Self, TypeVar

from sqlalchemy import ColumnElement, cast, func, or_, select, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from placet.config import Settings
from placet.config.pins import Pins, read_pins
from placet.errors import (
    NotFound,
    PolicyRefused,
    StoreError,
    WrongState,
)
from placet.schema import is_by_reference
from placet.store import lifecycle as lc
from placet.store.audit import (
    append_anchor,
    append_event,
    create_anchor,
    verify_chain,
)
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
    qmark,
    raw,
    raw_transaction,
    retry_busy,
    utcnow,
)
from placet.store.host import host_id
from placet.store.models import (
    AUDIT_EVENT,
    OP_RESULT,
    PROPOSAL,
    AuditRecord,
    OpResultRecord,
    ProposalRecord,
)
from placet.store.reconnect import riding_out
from placet.store.records import AuditVerification, EventFacts

log = logging.getLogger(__name__)

T = TypeVar("T")
Heads = list[tuple[int, str]]

SWEEP_BATCH = 500
"""Proposals expired per write transaction, so a sweep never holds the lock for long."""

P = PROPOSAL.c

NO_LIMIT = 2**62
"""A LIMIT that limits nothing (SQLite has no OFFSET without LIMIT; PostgreSQL no -1)."""

OPS_PAGE = 1000
"""Ops read per store read when streaming a sync proposal's ops (`Store.iter_ops`)."""

_OPS_SQL = "SELECT op FROM proposal_op WHERE proposal_id = ? ORDER BY op_index LIMIT ? OFFSET ?"
_OP_PAGE_SQL = (
    "SELECT op_index, op FROM proposal_op WHERE proposal_id = ? AND op_index > ? "
    "ORDER BY op_index LIMIT ?"
)
_PG_VERSION_SQL = "SELECT coalesce(max(id), 0) FROM audit_event"


def proposal_of_row(row: Row[Any]) -> ProposalRecord:
    """The typed row of a proposal row read through Core."""
    return ProposalRecord.of(row._mapping)


def now_or_utcnow(now: datetime | None) -> datetime:
    return utcnow() if now is None else as_utc(now)


def _altered(pid: int, what: str, details: dict[str, Any]) -> PolicyRefused:
    return PolicyRefused(
        f"refusing to use proposal {pid}: {what}; its ops were altered in the database: discard it",
        code="request_altered",
        details={"proposal_id": pid, **details},
    )


def _same(op: dict[str, Any]) -> dict[str, Any]:
    return op


def _op_json(pid: int, text: str) -> dict[str, Any]:
    """One stored op row as its JSON object. Raises PolicyRefused (``request_altered``)."""
    try:
        op = json.loads(text)
    except ValueError:
        op = None
    if not isinstance(op, dict):
        raise _altered(pid, "an op row is not a JSON object", {"row": text[:80]})
    return op


class StoreBase:
    """Transactions with retry, the CAS helper, and reads (see `Store`)."""

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
        self._host = socket.gethostname()
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

    def _write(self, what: str, fn: Callable[[Connection, Heads], T]) -> T:
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

        return self._retrying(what, attempt, OperationalError, SQLAlchemyError)

    def _write_raw(self, what: str, fn: Callable[[RawDB, Heads], T]) -> T:
        """`_write` on a pooled driver connection, for the hot path (plain SQL only): a
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

        return self._retrying(what, attempt, driver_errors(), driver_errors())

    def _write_statement(
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

        return self._retrying(what, attempt, driver_errors(), driver_errors())

    def _read(self, what: str, fn: Callable[[Connection], T]) -> T:
        def attempt() -> T:
            with self.engine.connect() as conn:
                return fn(conn)

        return self._retrying(what, attempt, OperationalError, SQLAlchemyError)

    def _retrying(
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
            return retry_busy(attempt, busy_type, error_type, lambda e: self._store_error(what, e))

        return riding_out(once, what=f"{what}: the database server") if self.postgres else once()

    def _store_error(self, what: str, e: Exception) -> StoreError:
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
    def _row(conn: Connection, pid: int) -> Row[Any]:
        # An id beyond SQLite's 64-bit integers names no proposal (and would not bind).
        in_range = -(1 << 63) <= pid < (1 << 63)
        row = conn.execute(select(PROPOSAL).where(P.id == pid)).first() if in_range else None
        if row is None:
            raise NotFound(
                f"proposal {pid} does not exist; `placet list` shows the proposals",
                details={"proposal_id": pid},
            )
        return row

    def _cas(
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
            raise self._wrong_state(cur.id, transition, old)
        row = conn.execute(
            update(PROPOSAL)
            .where(P.id == cur.id, P.status == old, *guard)
            .values(status=to, **values)
            .returning(*PROPOSAL.c)
        ).first()
        if row is None:
            raise self._wrong_state(cur.id, transition, old)
        heads.append(
            append_event(
                conn, EventFacts(cur.id, cur.request_hash, actor, old, to, now), detail=detail
            )
        )
        return proposal_of_row(row)

    def _expire_row(
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
        return self._cas(
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
    def _wrong_state(pid: int, transition: str, status: str) -> WrongState:
        allowed = " or ".join(lc.sources_of(transition))
        return WrongState(
            f"cannot {transition} proposal {pid}: it is {status}, and only a {allowed} "
            f"proposal can be {'extended' if transition == 'extend' else transition + 'ed'}",
            details={"proposal_id": pid, "status": status, "transition": transition},
        )

    # ---- reads ---------------------------------------------------------------------

    def get(self, proposal_id: int) -> ProposalRecord:
        """The proposal with this id. Raises NotFound."""
        return proposal_of_row(
            self._read("reading a proposal", lambda c: self._row(c, proposal_id))
        )

    def list(
        self,
        statuses: Collection[str] | None = None,
        *,
        run_id: str | None = None,
        limit: int = 100,
        after_id: int | None = None,
        newest_first: bool = False,
    ) -> list[ProposalRecord]:
        """Proposals by id (ascending, or descending with newest_first), at most `limit`.

        `after_id` pages: the next page starts after that id in the chosen order.
        """
        q = select(PROPOSAL)
        if statuses is not None:
            q = q.where(P.status.in_(list(statuses)))
        if run_id is not None:
            q = q.where(P.run_id == run_id)
        if after_id is not None:
            q = q.where(P.id < after_id if newest_first else P.id > after_id)
        q = q.order_by(P.id.desc() if newest_first else P.id).limit(limit)
        rows = self._read("listing proposals", lambda c: c.execute(q).all())
        return [proposal_of_row(r) for r in rows]

    def approved_here(self, *, limit: int = 100) -> builtins.list[int]:
        """Ids of the approved proposals this host runs (its own, and any made before host
        ids were recorded), oldest first, at most `limit` (`placet.store.host`)."""
        q = (
            select(P.id)
            .where(P.status == "approved", or_(P.host_id == self.host_id, P.host_id.is_(None)))
            .order_by(P.id)
            .limit(limit)
        )
        return [
            int(r[0])
            for r in self._read("listing approved proposals", lambda c: c.execute(q).all())
        ]

    def approvals_here(
        self, *, limit: int = 100
    ) -> builtins.list[tuple[int, str, dict[str, Any] | None]]:
        """`approved_here` with what a host loop decides on, in one read: each approved
        proposal's (id, drive spec, the approving process its approval recorded:
        ``detail["process"]`` of its last audit event, None before placet recorded it)."""
        A = AUDIT_EVENT.c
        E = AUDIT_EVENT.alias("latest").c
        last = (
            select(func.max(E.id)).where(E.proposal_id == P.id).correlate(PROPOSAL)
        ).scalar_subquery()
        q = (
            select(P.id, P.drive_spec, A.detail)
            .select_from(PROPOSAL.join(AUDIT_EVENT, A.id == last))
            .where(P.status == "approved", or_(P.host_id == self.host_id, P.host_id.is_(None)))
            .order_by(P.id)
            .limit(limit)
        )
        rows = self._read("listing approved proposals", lambda c: c.execute(q).all())
        out: builtins.list[tuple[int, str, dict[str, Any] | None]] = []
        for pid, spec, detail in rows:
            process = json.loads(detail).get("process") if detail else None
            out.append((int(pid), str(spec), process if isinstance(process, dict) else None))
        return out

    def counts(self) -> dict[str, int]:
        """Number of proposals per status (statuses with none are 0)."""
        q = select(P.status, func.count()).group_by(P.status)
        rows = self._read("counting proposals", lambda c: c.execute(q).all())
        out = dict.fromkeys(lc.STATUSES, 0)
        out.update({str(s): int(n) for s, n in rows})
        return out

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

        conn = self._retrying("listening for changes", listen, driver_errors(), driver_errors())
        return ChangeWaiter(
            listener=conn,
            close=conn.close,
            failed=lambda e: self._store_error("waiting for changes", e),
        )

    def data_version(self) -> int:
        """SQLite's `PRAGMA data_version` on a private connection that never writes: it
        changes whenever any connection or process commits. For cheap change polling.
        On PostgreSQL: the audit chain's head id, which moves with every transition (a
        lease renewal, which changes no status, does not move it)."""
        if self.postgres:
            return self._read(
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

    # ---- a sync proposal's ops (the one way to read them) ---------------------------

    def _request(self, conn: Connection, pid: int) -> tuple[str, dict[str, Any]]:
        # Through SQLAlchemy, so the read transaction (one snapshot) begins here and the
        # op rows read next on the same driver connection belong to it.
        found = conn.exec_driver_sql(
            qmark(conn, "SELECT kind, request FROM proposal WHERE id = ?"), (pid,)
        ).fetchone()
        if found is None:
            self._row(conn, pid)  # raises NotFound
            raise AssertionError("unreachable")  # pragma: no cover
        return str(found[0]), json.loads(found[1])

    def op_count(self, pid: int) -> int:
        """How many ops the sync proposal `pid` holds, whichever way they are stored
        (docs/decisions/0023-ops-by-reference.md); 0 for the
        other kinds, whose one op `placet.executor.plan_for` derives from the request.

        Raises NotFound.
        """

        def rd(conn: Connection) -> int:
            kind, request = self._request(conn, pid)
            if is_by_reference(kind, request):
                return int(request.get("op_count") or 0)
            ops = request.get("ops") if kind == "sync" else None
            return len(ops) if isinstance(ops, list) else 0

        return self._read(f"counting the ops of proposal {pid}", rd)

    def ops(
        self, pid: int, *, start: int = 0, limit: int | None = None
    ) -> builtins.list[dict[str, Any]]:
        """The stored ops (JSON objects, as `placet.schema.Op` dumps them) of the sync
        proposal `pid`, in index order, from position `start` (0-based: the op count
        before it) on, at most `limit` of them; [] for the other kinds. Pages: the next
        page starts at `start + len(page)` (stored ops never change). Unverified (a
        display read): the executor reads them with `checked_ops`.

        Raises NotFound; PolicyRefused (``request_altered``): a row is not a JSON object.
        """

        def rd(conn: Connection) -> builtins.list[dict[str, Any]]:
            kind, request = self._request(conn, pid)
            if is_by_reference(kind, request):
                rows = raw(conn).execute(
                    _OPS_SQL, (pid, NO_LIMIT if limit is None else limit, start)
                )
                return [_op_json(pid, t) for (t,) in rows]
            ops = request.get("ops") if kind == "sync" else None
            inline = [o for o in (ops if isinstance(ops, list) else []) if isinstance(o, dict)]
            return inline[start:] if limit is None else inline[start : start + limit]

        return self._read(f"reading the ops of proposal {pid}", rd)

    def iter_ops(self, pid: int, *, page: int = OPS_PAGE) -> Iterator[dict[str, Any]]:
        """Every op of `ops(pid)`, read `page` at a time (stored ops never change), so a
        100,000-op sync is streamed, never held whole. Raises NotFound."""
        start = 0
        while True:
            batch = self.ops(pid, start=start, limit=page)
            yield from batch
            if len(batch) < page:
                return
            start += len(batch)

    def checked_ops(self, pid: int, request: Mapping[str, Any]) -> builtins.list[dict[str, Any]]:
        """Every op of the sync proposal `pid`, verified against `request`: the request the
        caller holds and has already bound (its hash checked against the approval, or the
        one the owner is shown), never one read again here, so a row or request rewritten
        in the database after that check cannot slip in (docs/design.md section 4). By
        reference, the op rows must be exactly `request["op_count"]`, valid JSON objects
        numbered as stored, and hash to `request["ops_digest"]` (`placet.schema.ops_digest`);
        inline, the ops are the request's own, which its hash covers. What
        `placet accept` shows and the review UI reads. [] for a request with neither.
        `checked_parsed` is the same read, each op parsed as it comes.

        Raises:
            NotFound.
            PolicyRefused (``request_altered``): the stored ops no longer match `request`.
        """
        return self.checked_parsed(pid, request, _same)

    def checked_parsed(
        self,
        pid: int,
        request: Mapping[str, Any],
        parse: Callable[[dict[str, Any]], T],
        *,
        page: int = OPS_PAGE,
        on_page: Callable[[int, int], None] | None = None,
    ) -> builtins.list[T]:
        """`checked_ops` streamed: the op rows are read `page` at a time (by index, each
        row once), hashed and handed to `parse` as they come, and only `parse`'s results
        are kept, so a 100,000-op sync is never held as rows, JSON objects and parsed ops
        at once. Nothing is returned before the last row was read and the whole sequence
        checked against `request` (the digest covers exactly the rows parsed, whichever
        read transaction each page came from). `on_page(ops read, op count)` is called
        after each page (progress for a long read). An exception from `parse` is raised
        after that check (an altered row is reported as altered, not as unparseable).

        Raises:
            NotFound.
            PolicyRefused (``request_altered``): as `checked_ops`.
        """
        if "ops_digest" not in request:
            ops = request.get("ops")
            inline = [o for o in ops if isinstance(o, dict)] if isinstance(ops, list) else []
            return [parse(o) for o in inline]
        parsed: builtins.list[T] = []
        numbered, failure = True, None
        for rows in self._op_pages(pid, request, page, on_page):
            for i, text in rows:
                op = _op_json(pid, text)
                numbered = numbered and op.get("index") == i
                if failure is None:
                    try:
                        parsed.append(parse(op))
                    except Exception as e:  # raised once the digest is known to match
                        failure, parsed = e, []
        if not numbered:
            raise _altered(pid, "its stored ops are not numbered as stored", {})
        if failure is not None:
            raise failure
        return parsed

    def check_ops(self, pid: int, request: Mapping[str, Any], *, page: int = OPS_PAGE) -> None:
        """Check that the op rows of the sync proposal `pid` still hash to `request`'s
        `ops_digest` and count `op_count`, reading and hashing them a page at a time
        without parsing any (the executor's check before it runs ops it parsed when
        they were shown: rows rewritten since are refused). Nothing to check for
        inline ops (the request's hash covers them).

        Raises:
            NotFound.
            PolicyRefused (``request_altered``): as `checked_ops`.
        """
        if "ops_digest" in request:
            for _ in self._op_pages(pid, request, page, None):
                pass

    def _op_pages(
        self,
        pid: int,
        request: Mapping[str, Any],
        page: int,
        on_page: Callable[[int, int], None] | None,
    ) -> Iterator[builtins.list[tuple[int, str]]]:
        """The op rows of `pid` as (op_index, canonical JSON), a page at a time, each row
        once (by index). After the last page, raises PolicyRefused (``request_altered``)
        unless the rows hash to `request["ops_digest"]` (what `placet.schema.ops_digest`
        computes) and number `request["op_count"]`: a caller keeps what it made of
        the pages only when the iteration ends without raising."""
        bound, count = str(request["ops_digest"]), request.get("op_count")
        total = count if isinstance(count, int) else 0
        digest = hashlib.sha256()
        seen, after = 0, None
        while True:

            def rd(conn: Connection, after: int | None = after) -> builtins.list[tuple[int, str]]:
                if after is None:
                    self._row(conn, pid)  # raises NotFound
                args = (pid, -1 if after is None else after, page)
                return [(int(i), str(t)) for i, t in raw(conn).execute(_OP_PAGE_SQL, args)]

            rows = self._read(f"reading the ops of proposal {pid}", rd)
            for _, text in rows:
                digest.update(text.encode("utf-8"))
                digest.update(b"\n")
            seen += len(rows)
            yield rows
            if on_page is not None:
                on_page(seen, total)
            if len(rows) < page:
                break
            after = rows[-1][0]
        now = digest.hexdigest()
        if now != bound or seen != count:
            raise _altered(
                pid,
                f"its {seen} stored ops hash to {now[:16]}..., not to the {bound[:16]}... "
                "its request binds",
                {"stored": bound, "now": now},
            )

    def _detail_has(self, key: str) -> ColumnElement[bool]:
        """An op result's `detail` holds `key` with a non-null value: SQLite's
        `json_extract`, PostgreSQL's `->>` on the text cast to jsonb (it has no
        `json_extract`). `key` is a plain name (checked by the caller)."""
        if self.postgres:
            return cast(OP_RESULT.c.detail, JSONB).op("->>")(key).isnot(None)
        return func.json_extract(OP_RESULT.c.detail, f"$.{key}").isnot(None)

    def op_results(
        self,
        pid: int,
        *,
        start: int = 0,
        stop: int | None = None,
        having: str | None = None,
        outcomes: Collection[str] | None = None,
    ) -> builtins.list[OpResultRecord]:
        """The journal of the proposal's latest attempt, by op index; only ops with
        `start <= op_index < stop` when given (one page of ops), only results whose
        detail has the key `having` (e.g. ``"temps"``: the few a crashed run left, not
        the whole journal of a 100,000-op sync), only results with an outcome in
        `outcomes`. Raises NotFound; ValueError: `having` is not a plain name."""
        if having is not None and not having.isidentifier():
            raise ValueError(f"not a detail key: {having!r}")

        def rd(conn: Connection) -> builtins.list[Row[Any]]:
            cur = self._row(conn, pid)
            q = select(OP_RESULT).where(
                OP_RESULT.c.proposal_id == pid, OP_RESULT.c.attempt == cur.attempt
            )
            if start:
                q = q.where(OP_RESULT.c.op_index >= start)
            if stop is not None:
                q = q.where(OP_RESULT.c.op_index < stop)
            if having is not None:
                q = q.where(self._detail_has(having))
            if outcomes is not None:
                q = q.where(OP_RESULT.c.outcome.in_(sorted(outcomes)))
            return list(conn.execute(q.order_by(OP_RESULT.c.op_index)).all())

        rows = self._read(f"reading op results of proposal {pid}", rd)
        return [OpResultRecord.of(r._mapping) for r in rows]

    def outcome_counts(self, pid: int) -> dict[str, int]:
        """How many ops of the proposal's latest attempt ended with each outcome (its
        journal counted in SQL, never read whole). Raises NotFound."""

        def rd(conn: Connection) -> dict[str, int]:
            cur = self._row(conn, pid)
            R = OP_RESULT.c
            q = (
                select(R.outcome, func.count())
                .where(R.proposal_id == pid, R.attempt == cur.attempt)
                .group_by(R.outcome)
            )
            return {str(o): int(n) for o, n in conn.execute(q).all()}

        return self._read(f"counting op results of proposal {pid}", rd)

    def audit_events(
        self,
        *,
        since: datetime | None = None,
        proposal_id: int | None = None,
        after_id: int | None = None,
        limit: int | None = None,
    ) -> builtins.list[AuditRecord]:
        """Audit events in chain order, filtered by time (`at >= since`), proposal, id."""
        A = AUDIT_EVENT.c
        q = select(AUDIT_EVENT).order_by(A.id)
        if since is not None:
            q = q.where(A.at >= as_utc(since))
        if proposal_id is not None:
            q = q.where(A.proposal_id == proposal_id)
        if after_id is not None:
            q = q.where(A.id > after_id)
        if limit is not None:
            q = q.limit(limit)
        rows = self._read("reading the audit log", lambda c: c.execute(q).all())
        return [AuditRecord.of(r._mapping) for r in rows]

    def verify_audit(self) -> AuditVerification:
        """Walk the chain and the anchor file (`placet.store.audit.verify_chain`), and check
        every signed approval's passkey against the owner's pins (`placet.config.pins`).

        Raises:
            ConfigError: the pins file is malformed (read only if an approval is signed).
        """

        def pins() -> Pins:
            return read_pins(self.settings.config_file)

        return self._read(
            "verifying the audit log", lambda c: verify_chain(c, self.anchor_path, pins)
        )
