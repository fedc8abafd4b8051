"""The store's plumbing, creation and reads; `placet.store.store.Store` adds the transitions.

Each write is one `BEGIN IMMEDIATE` transaction holding the write lock from its first
read, so "read the row, decide, compare-and-set it, append the audit event" is atomic
across threads and processes; the CAS (`UPDATE ... WHERE id = ? AND status = <seen>` plus
the transition's own guard, e.g. `expires_at > now` for accept) is the statement that
decides, and its audit event commits with it or not at all. A lock that SQLite's busy
timeout does not resolve is retried a few times with jittered backoff and then raised as
a retryable `StoreError`; a raw "database is locked" never reaches a caller.

Reads are deferred transactions (a consistent WAL snapshot, never blocking writers).
Queries use SQLAlchemy Core against the SQLModel tables and return frozen records.
Time is injectable (`now=`) everywhere, aware UTC.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Self, TypeVar

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

from placet.config import Settings
from placet.errors import (
    LimitExceeded,
    NotFound,
    StoreError,
    UsageError,
    WrongState,
)
from placet.requests import canonical_json, request_hash
from placet.store import lifecycle as lc
from placet.store.audit import append_anchor, append_event
from placet.store.db import BEGIN_OPTION, as_utc, is_busy, utcnow
from placet.store.models import PROPOSAL
from placet.store.records import (
    ProposalRecord,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
Heads = list[tuple[int, str]]

WRITE_RETRIES = 6
"""Attempts after SQLITE_BUSY outlasted the busy timeout, before StoreError."""

SWEEP_BATCH = 500
"""Proposals expired per write transaction, so a sweep never holds the lock for long."""

P = PROPOSAL.c


def _proposal(row: Row[Any]) -> ProposalRecord:
    m = row._mapping
    return ProposalRecord(
        id=m["id"],
        kind=m["kind"],
        status=m["status"],
        request=json.loads(m["request"]),
        evidence=json.loads(m["evidence"]),
        request_hash=m["request_hash"],
        reason=m["reason"],
        drive_spec=m["drive_spec"],
        run_id=m["run_id"],
        client_name=m["client_name"],
        client_version=m["client_version"],
        label=m["label"],
        host=m["host"],
        created_at=m["created_at"],
        expires_at=m["expires_at"],
        resolved_at=m["resolved_at"],
        resolved_by=m["resolved_by"],
        attempt=m["attempt"],
        lease_holder=m["lease_holder"],
        lease_expires_at=m["lease_expires_at"],
        summary=None if m["summary"] is None else json.loads(m["summary"]),
    )


def _now(now: datetime | None) -> datetime:
    return utcnow() if now is None else as_utc(now)


class StoreBase:
    """Transactions with retry, the CAS helper, creation and reads (see `Store`)."""

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings
        self.db_path: Path = settings.db_path
        self.anchor_path: Path = settings.audit_anchor_path
        self._host = socket.gethostname()
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

    def _write(self, what: str, fn: Callable[[Connection, Heads], T]) -> T:
        """Run `fn` in one BEGIN IMMEDIATE transaction; anchor its audit heads after commit."""
        for attempt in range(WRITE_RETRIES + 1):
            heads: Heads = []
            try:
                with self.engine.connect() as conn:
                    conn.execution_options(**{BEGIN_OPTION: "IMMEDIATE"})
                    with conn.begin():
                        result = fn(conn, heads)
            except OperationalError as e:
                if is_busy(e) and attempt < WRITE_RETRIES:
                    time.sleep(random.uniform(0.01, 0.05) * (2**attempt))
                    continue
                raise self._store_error(what, e) from e
            except SQLAlchemyError as e:
                raise self._store_error(what, e) from e
            append_anchor(self.anchor_path, heads)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _read(self, what: str, fn: Callable[[Connection], T]) -> T:
        for attempt in range(WRITE_RETRIES + 1):
            try:
                with self.engine.connect() as conn:
                    return fn(conn)
            except OperationalError as e:
                if is_busy(e) and attempt < WRITE_RETRIES:
                    time.sleep(random.uniform(0.01, 0.05) * (2**attempt))
                    continue
                raise self._store_error(what, e) from e
            except SQLAlchemyError as e:
                raise self._store_error(what, e) from e
        raise AssertionError("unreachable")  # pragma: no cover

    def _store_error(self, what: str, e: SQLAlchemyError) -> StoreError:
        orig = getattr(e, "orig", e)
        if is_busy(e):
            return StoreError(
                f"{what}: the database {self.db_path} stayed locked by another placet "
                "process; try again in a moment",
                code="store_busy",
                retryable=True,
                details={"path": str(self.db_path)},
            )
        return StoreError(
            f"{what}: the database {self.db_path} failed: {orig}; `placet doctor` checks it",
            details={"path": str(self.db_path)},
        )

    @staticmethod
    def _row(conn: Connection, pid: int) -> Row[Any]:
        row = conn.execute(select(PROPOSAL).where(P.id == pid)).first()
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
        to: str,
        actor: str,
        now: datetime,
        values: dict[str, Any],
        guard: tuple[Any, ...] = (),
        detail: dict[str, Any] | None = None,
    ) -> ProposalRecord:
        """Compare-and-set `cur` (read in this transaction) to `to`, plus its audit event."""
        lc.check_actor(transition, actor)
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
                conn,
                proposal_id=cur.id,
                request_hash=cur.request_hash,
                actor=actor,
                from_status=old,
                to_status=to,
                at=now,
                detail=detail,
            )
        )
        return _proposal(row)

    @staticmethod
    def _wrong_state(pid: int, transition: str, status: str) -> WrongState:
        allowed = " or ".join(lc.sources_of(transition))
        return WrongState(
            f"cannot {transition} proposal {pid}: it is {status}, and only a {allowed} "
            f"proposal can be {'extended' if transition == 'extend' else transition + 'ed'}",
            details={"proposal_id": pid, "status": status, "transition": transition},
        )

    # ---- create and read -----------------------------------------------------------

    def create_proposal(
        self,
        *,
        kind: str,
        request: dict[str, Any],
        evidence: dict[str, Any],
        reason: str,
        drive_spec: str,
        run_id: str,
        client_name: str | None = None,
        client_version: str | None = None,
        label: str | None = None,
        ttl_seconds: int,
        now: datetime | None = None,
    ) -> tuple[ProposalRecord, bool]:
        """Persist a pending proposal; returns (record, created).

        Idempotent: while a proposal with the same kind and request hash
        (`placet.requests.request_hash`) is pending and unexpired, that one is returned
        with created=False. One whose TTL passed unswept is expired here first.

        Raises:
            UsageError: ttl_seconds is not in 1..max_ttl_minutes*60.
            LimitExceeded: `pending_per_bridge` (per run_id) or `pending_total` reached.
        """
        now = _now(now)
        max_ttl = self.settings.max_ttl_minutes * 60
        if not 0 < ttl_seconds <= max_ttl:
            raise UsageError(
                f"cannot create a proposal with a TTL of {ttl_seconds} s: it must be between "
                f"1 s and {max_ttl} s (max_ttl_minutes)",
                details={"ttl_seconds": ttl_seconds, "max_seconds": max_ttl},
            )
        rh = request_hash(kind, request, evidence)
        expires_at = now + timedelta(seconds=ttl_seconds)
        values: dict[str, Any] = {
            "kind": kind,
            "status": lc.PENDING,
            "request": canonical_json(request),
            "evidence": canonical_json(evidence),
            "request_hash": rh,
            "reason": reason,
            "drive_spec": drive_spec,
            "run_id": run_id,
            "client_name": client_name,
            "client_version": client_version,
            "label": label,
            "host": self._host,
            "created_at": now,
            "expires_at": expires_at,
            "attempt": 0,
        }
        actor = lc.agent_actor(run_id)

        def tx(conn: Connection, heads: Heads) -> tuple[ProposalRecord, bool]:
            same = conn.execute(
                select(PROPOSAL).where(P.kind == kind, P.request_hash == rh, P.status == lc.PENDING)
            ).first()
            if same is not None:
                if same.expires_at > now:
                    return _proposal(same), False
                self._cas(
                    conn,
                    heads,
                    same,
                    transition="expire",
                    to=lc.EXPIRED,
                    actor=lc.SWEEPER,
                    now=now,
                    values={"resolved_at": now, "resolved_by": lc.SWEEPER},
                    guard=(P.expires_at <= now,),
                    detail={"why": "ttl passed; superseded by an identical proposal"},
                )
            self._check_caps(conn, run_id, now)
            row = conn.execute(PROPOSAL.insert().values(**values).returning(*PROPOSAL.c)).one()
            heads.append(
                append_event(
                    conn,
                    proposal_id=row.id,
                    request_hash=rh,
                    actor=actor,
                    from_status=None,
                    to_status=lc.PENDING,
                    at=now,
                    detail={
                        "kind": kind,
                        "expires_at": expires_at.isoformat(),
                        "client_name": client_name,
                        "client_version": client_version,
                    },
                )
            )
            return _proposal(row), True

        try:
            return self._write(f"creating a {kind} proposal", tx)
        except StoreError as e:
            # The partial unique index is the backstop; with BEGIN IMMEDIATE the SELECT
            # above already serialises creators, so this is belt and braces.
            if isinstance(e.__cause__, IntegrityError):
                found = self._read(
                    "reading a proposal",
                    lambda c: c.execute(
                        select(PROPOSAL).where(
                            P.kind == kind, P.request_hash == rh, P.status == lc.PENDING
                        )
                    ).first(),
                )
                if found is not None:
                    return _proposal(found), False
            raise

    def _check_caps(self, conn: Connection, run_id: str, now: datetime) -> None:
        live = (P.status == lc.PENDING, P.expires_at > now)
        caps = (
            ("pending_per_bridge", self.settings.pending_per_bridge, (P.run_id == run_id,)),
            ("pending_total", self.settings.pending_total, ()),
        )
        for name, cap, extra in caps:
            # Count at most `cap` rows: the check costs O(cap), never O(table).
            sub = select(P.id).where(*live, *extra).limit(cap).subquery()
            n = conn.execute(select(func.count()).select_from(sub)).scalar_one()
            if n >= cap:
                scope = f"this bridge (run {run_id})" if extra else "all bridges together"
                raise LimitExceeded(
                    f"cannot create a proposal: {scope} already has {n} pending proposals, "
                    f"the cap ({name} = {cap}); wait for the owner to decide, or withdraw some",
                    details={"cap": name, "limit": cap, "pending": n, "run_id": run_id},
                    retryable=True,
                )

    def get(self, proposal_id: int) -> ProposalRecord:
        """The proposal with this id. Raises NotFound."""
        return _proposal(self._read("reading a proposal", lambda c: self._row(c, proposal_id)))

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
        return [_proposal(r) for r in rows]

    def counts(self) -> dict[str, int]:
        """Number of proposals per status (statuses with none are 0)."""
        q = select(P.status, func.count()).group_by(P.status)
        rows = self._read("counting proposals", lambda c: c.execute(q).all())
        out = dict.fromkeys(lc.STATUSES, 0)
        out.update({str(s): int(n) for s, n in rows})
        return out

    def data_version(self) -> int:
        """SQLite's `PRAGMA data_version` on a private connection that never writes: it
        changes whenever any connection or process commits. For cheap change polling."""
        with self._dv_lock:
            if self._dv_conn is None:
                self._dv_conn = sqlite3.connect(
                    self.db_path, check_same_thread=False, isolation_level=None
                )
            try:
                return int(self._dv_conn.execute("PRAGMA data_version").fetchone()[0])
            except sqlite3.Error as e:
                raise StoreError(f"reading the data version of {self.db_path} failed: {e}") from e
