"""The `Sweeper` part of the store: expiring due proposals, recovering lost executions.

Pending proposals past `expires_at` move to expired in batches of `SWEEP_BATCH` per
write transaction (no write lock when nothing is due); executing ones whose lease lapsed,
or whose holder on this host is gone, move to interrupted. `sweep` does both at one
`now`, then drops old content previews.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection, Row

from placet.errors import WrongState
from placet.store import lifecycle as lc
from placet.store.base import Database, Heads, P, now_or_utcnow
from placet.store.models import PROPOSAL, ProposalRecord
from placet.store.previews import Previews
from placet.store.records import LeaseHolder, SweepResult, holder_dict

SWEEP_BATCH = 500
"""Proposals expired per write transaction, so a sweep never holds the lock for long."""


class Sweeper:
    """Expiring due proposals and recovering lost executions (a part of `Store`)."""

    def __init__(self, db: Database, previews: Previews) -> None:
        self.db = db
        self.previews = previews

    def expire(self, pid: int, *, now: datetime | None = None) -> ProposalRecord:
        """pending -> expired for one proposal whose `expires_at <= now` (the sweeper's
        step). Raises NotFound, WrongState (not pending, or not yet due)."""
        now = now_or_utcnow(now)

        def tx(conn: Connection, heads: Heads) -> ProposalRecord:
            cur = self.db.row(conn, pid)
            if cur.status == lc.PENDING and cur.expires_at > now:
                raise WrongState(
                    f"cannot expire proposal {pid}: it is due at {cur.expires_at.isoformat()}",
                    details={"proposal_id": pid, "expires_at": cur.expires_at.isoformat()},
                )
            return self.db.expire_row(conn, heads, cur, now)

        return self.db.write(f"expiring proposal {pid}", tx)

    def expire_due(self, now: datetime | None = None) -> list[int]:
        """Expire every pending proposal with `expires_at <= now`; returns their ids.

        Works in batches of SWEEP_BATCH per transaction; takes no write lock when
        nothing is due.
        """
        now = now_or_utcnow(now)
        due_q = (
            select(PROPOSAL)
            .where(P.status == lc.PENDING, P.expires_at <= now)
            .order_by(P.id)
            .limit(SWEEP_BATCH)
        )
        done: list[int] = []
        while self.db.read("finding due proposals", lambda c: c.execute(due_q).first()):

            def tx(conn: Connection, heads: Heads) -> list[int]:
                return [
                    self.db.expire_row(conn, heads, r, now).id for r in conn.execute(due_q).all()
                ]

            batch = self.db.write("expiring due proposals", tx)
            done.extend(batch)
            if not batch:
                break
        return done

    def recover_interrupted(self, now: datetime | None = None) -> list[int]:
        """executing -> interrupted for each proposal whose lease lapsed (`lease_expires_at
        <= now`) or whose holder is on this host and dead (pid gone or reused)."""
        now = now_or_utcnow(now)
        q = select(PROPOSAL).where(P.status == lc.EXECUTING).order_by(P.id)

        def lost(r: Row[Any]) -> str | None:
            if r.lease_expires_at is None or r.lease_expires_at <= now:
                return "lease lapsed"
            try:
                holder = LeaseHolder.parse(r.lease_holder or "")
            except ValueError:
                return "unreadable lease holder"
            return "holder process is gone" if holder.is_dead_here() else None

        if not any(
            lost(r)
            for r in self.db.read("finding executing proposals", lambda c: c.execute(q).all())
        ):
            return []

        def tx(conn: Connection, heads: Heads) -> list[int]:
            out = []
            for r in conn.execute(q).all():
                why = lost(r)
                if why:
                    self.db.cas(
                        conn,
                        heads,
                        r,
                        transition="interrupt",
                        actor=lc.SWEEPER,
                        now=now,
                        guard=(P.lease_holder.is_not_distinct_from(r.lease_holder),),
                        values={"lease_holder": None, "lease_expires_at": None},
                        detail={"holder": holder_dict(r.lease_holder), "why": why},
                    )
                    out.append(r.id)
            return out

        return self.db.write("recovering interrupted proposals", tx)

    def sweep(self, now: datetime | None = None) -> SweepResult:
        """`expire_due` then `recover_interrupted`, at one `now`; then old content previews
        are dropped (`prune_previews`, at most once an hour)."""
        now = now_or_utcnow(now)
        result = SweepResult(
            expired=self.expire_due(now), interrupted=self.recover_interrupted(now)
        )
        self.previews.prune_previews(now)
        return result
