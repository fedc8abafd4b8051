"""The `Store`: every lifecycle transition of docs/design.md section 4, the sweeper, op results
and the audit log, over one SQLite file.

Each transition reads the row under `BEGIN IMMEDIATE`, refuses with the precise domain
error (NotFound, WrongState, Expired, PolicyRefused, LimitExceeded), then makes one
compare-and-set UPDATE guarded by the status it saw and the transition's own condition
(`expires_at > now` for pending -> approved, the lease holder for executor steps) and
appends its audit event in the same transaction. The rules of which arrow exists and
who may draw it are `placet.store.lifecycle`'s.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import select, update
from sqlalchemy.engine import Connection, Row

from placet.errors import PolicyRefused, UsageError, WrongState
from placet.schema import canonical_json
from placet.store import lifecycle as lc
from placet.store.base import SWEEP_BATCH, Heads, P, now_or_utcnow
from placet.store.db import upsert
from placet.store.decisions import Decisions
from placet.store.host import host_label, runs_elsewhere
from placet.store.models import (
    AUDIT_EVENT,
    OP_RESULT,
    PROPOSAL,
    SPENT_SIGNATURE,
    ProposalRecord,
    SpentSignature,
)
from placet.store.passkeys import Passkeys
from placet.store.previews import Previews
from placet.store.records import LeaseHolder, SweepResult
from placet.store.signatures import signature_id


class Store(Decisions, Passkeys, Previews):
    """Proposals, op results and the audit chain in one SQLite database.

    Build with `placet.store.open_store(settings)`. Safe to share between threads; each
    process opens its own. Besides the domain errors each method names, any database
    failure is a `StoreError` (retryable when the database stayed locked).
    """

    # ---- execution ------------------------------------------------------------------

    def claim(
        self, pid: int, *, holder: LeaseHolder, now: datetime | None = None
    ) -> ProposalRecord:
        """approved -> executing under `holder`'s lease (`lease_seconds`); attempt += 1.
        Only a proposal whose last audit event is its approval is claimed; nothing is
        written otherwise.

        Only this host's proposals are claimed (`placet.store.host.runs_elsewhere`): a
        proposal's files live on the host it was made on. An approval signed with a
        passkey is spent in the same transaction (table `spent_signature`, read by every
        host: `spent`), and the claim's audit event names it (``detail["signature"]``); a
        signature some other claim spent first stays that claim's (the executor's
        binding refuses the run in signed mode).

        Raises NotFound, WrongState (not approved, e.g. another executor claimed it),
        PolicyRefused (``not_approved_as_shown``: approved, but its last audit event is
        no approval, so the status was set outside the store; ``other_host``: made on
        another host, which runs it).
        """
        now = now_or_utcnow(now)
        lease = now + timedelta(seconds=self.settings.lease_seconds)

        def tx(conn: Connection, heads: Heads) -> ProposalRecord:
            cur = self._row(conn, pid)
            approval: dict[str, Any] = {}
            if runs_elsewhere(cur.host_id, self.host_id):
                raise PolicyRefused(
                    f"cannot run proposal {pid} here: it was made on host "
                    f"{host_label(cur.host, cur.host_id)}, where its files are; that host's "
                    f"placet runs it (`placet executor`, or `placet accept {pid}` there)",
                    code="other_host",
                    details={"proposal_id": pid, "host_id": cur.host_id, "host": cur.host},
                )
            if cur.status == lc.APPROVED:
                approval = _require_approval_event(conn, pid)
            signature = _signature_of(approval, pid)
            detail: dict[str, Any] = {"holder": holder.to_dict(), "attempt": cur.attempt + 1}
            if signature is not None:
                detail["signature"] = signature
            claimed = self._cas(
                conn,
                heads,
                cur,
                transition="claim",
                actor=lc.EXECUTOR,
                now=now,
                values={
                    "attempt": P.attempt + 1,
                    "lease_holder": str(holder),
                    "lease_expires_at": lease,
                },
                detail=detail,
            )
            if signature is not None:  # the first claim keeps it; `spent` tells the others
                row = {"signature": signature, "proposal_id": pid, "claim_hash": heads[-1][1],
                       "host_id": self.host_id, "spent_at": now}  # fmt: skip
                conn.execute(
                    upsert(conn, SPENT_SIGNATURE)
                    .values(**row)
                    .on_conflict_do_nothing(index_elements=["signature"])
                )
            return claimed

        return self._write(f"claiming proposal {pid}", tx)

    def spent(self, signature: str) -> SpentSignature | None:
        """The claim that spent the signed approval `signature`
        (`placet.store.signatures.signature_id` of its nonce), on any host; None if no
        claim did."""
        S = SPENT_SIGNATURE.c
        q = select(SPENT_SIGNATURE).where(S.signature == signature)
        row = self._read("reading a spent signature", lambda c: c.execute(q).first())
        if row is None:
            return None
        return SpentSignature.of(row._mapping)

    def heartbeat(self, pid: int, *, holder: LeaseHolder, now: datetime | None = None) -> bool:
        """Renew `holder`'s lease for another `lease_seconds`; False if it no longer holds it
        (the proposal was marked interrupted, or is held by someone else)."""
        now = now_or_utcnow(now)
        lease = now + timedelta(seconds=self.settings.lease_seconds)

        def tx(conn: Connection, heads: Heads) -> bool:
            res = conn.execute(
                update(PROPOSAL)
                .where(P.id == pid, P.status == lc.EXECUTING, P.lease_holder == str(holder))
                .values(lease_expires_at=lease)
            )
            return bool(res.rowcount == 1)

        return self._write(f"renewing the lease on proposal {pid}", tx)

    def _held(
        self, conn: Connection, pid: int, holder: LeaseHolder, what: str, *, lean: bool = False
    ) -> Row[Any]:
        """The proposal's row if `holder` holds its lease, else WrongState; `lean`: only
        status, lease_holder and attempt (a sync's request can be megabytes, and the
        journal asks this at every commit)."""
        cur: Row[Any] | None = None
        if lean:
            query = select(P.status, P.lease_holder, P.attempt).where(P.id == pid)
            cur = cast("Row[Any] | None", conn.execute(query).first())
        if cur is None:
            cur = self._row(conn, pid)  # raises NotFound when there is none
        if cur.status != lc.EXECUTING or cur.lease_holder != str(holder):
            raise WrongState(
                f"cannot {what} for proposal {pid}: this process no longer holds its lease "
                f"(status {cur.status}); stop executing it",
                details={"proposal_id": pid, "status": cur.status},
            )
        return cur

    def record_op_result(
        self,
        pid: int,
        *,
        op_index: int,
        op: dict[str, Any],
        outcome: str,
        detail: dict[str, Any],
        holder: LeaseHolder,
        now: datetime | None = None,
    ) -> None:
        """Journal one op of the current attempt (a repeat of the same index replaces it).

        Raises UsageError (unknown outcome), NotFound, WrongState (lease not held).
        """
        now = now_or_utcnow(now)
        if outcome not in lc.OP_OUTCOMES:
            raise UsageError(f"unknown op outcome {outcome!r}; expected one of {lc.OP_OUTCOMES}")

        def tx(conn: Connection, heads: Heads) -> None:
            cur = self._held(conn, pid, holder, f"record op {op_index}", lean=True)
            values = {
                "op": canonical_json(op),
                "outcome": outcome,
                "detail": canonical_json(detail),
                "recorded_at": now,
            }
            conn.execute(
                upsert(conn, OP_RESULT)
                .values(proposal_id=pid, attempt=cur.attempt, op_index=op_index, **values)
                .on_conflict_do_update(
                    index_elements=["proposal_id", "attempt", "op_index"], set_=values
                )
            )

        self._write(f"recording op {op_index} of proposal {pid}", tx)

    def record_op_results(
        self,
        pid: int,
        rows: Sequence[tuple[int, dict[str, Any], str, dict[str, Any]]],
        *,
        holder: LeaseHolder,
        now: datetime | None = None,
    ) -> None:
        """`record_op_result` of several ops in one transaction: `rows` are
        (op_index, op, outcome, detail); a repeat of an index replaces it. The executor
        commits a sync's results in batches (docs/decisions/0027-sync-execution.md).

        Raises UsageError (unknown outcome), NotFound, WrongState (lease not held).
        """
        if not rows:
            return
        now = now_or_utcnow(now)
        for _, _, outcome, _ in rows:
            if outcome not in lc.OP_OUTCOMES:
                raise UsageError(
                    f"unknown op outcome {outcome!r}; expected one of {lc.OP_OUTCOMES}"
                )

        def tx(conn: Connection, heads: Heads) -> None:
            cur = self._held(conn, pid, holder, f"record {len(rows)} ops", lean=True)
            stmt = upsert(conn, OP_RESULT)
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["proposal_id", "attempt", "op_index"],
                    set_={
                        "op": stmt.excluded.op,
                        "outcome": stmt.excluded.outcome,
                        "detail": stmt.excluded.detail,
                        "recorded_at": stmt.excluded.recorded_at,
                    },
                ),
                [
                    {"proposal_id": pid, "attempt": cur.attempt, "op_index": i,
                     "op": canonical_json(op), "outcome": outcome,
                     "detail": canonical_json(detail), "recorded_at": now}
                    for i, op, outcome, detail in rows
                ],
            )  # fmt: skip

        self._write(f"recording {len(rows)} ops of proposal {pid}", tx)

    def finish(
        self,
        pid: int,
        *,
        holder: LeaseHolder,
        now: datetime | None = None,
        summary: dict[str, Any] | None = None,
        expected_ops: int | None = None,
    ) -> ProposalRecord:
        """executing -> succeeded when every journaled op of this attempt is done or
        already_done, or `skipped` and unticked by the owner in the latest approval
        (`skip_ops` of its audit event), and, if given, at least `expected_ops` were
        journaled; else failed.

        Raises NotFound, WrongState (lease not held).
        """
        now = now_or_utcnow(now)

        def tx(conn: Connection, heads: Heads) -> ProposalRecord:
            cur = self._held(conn, pid, holder, "finish")
            results = [
                (int(i), str(o))
                for i, o in conn.execute(
                    select(OP_RESULT.c.op_index, OP_RESULT.c.outcome).where(
                        OP_RESULT.c.proposal_id == pid, OP_RESULT.c.attempt == cur.attempt
                    )
                ).all()
            ]
            outcomes = [o for _, o in results]
            skips = self._owner_skips(conn, pid)
            to = lc.finish_status(results, skips)
            if expected_ops is not None and len(outcomes) < expected_ops:
                to = lc.FAILED
            return self._cas(
                conn,
                heads,
                cur,
                transition="finish",
                to=to,
                actor=lc.EXECUTOR,
                now=now,
                guard=(P.lease_holder == str(holder),),
                values={
                    "lease_holder": None,
                    "lease_expires_at": None,
                    "summary": None if summary is None else canonical_json(summary),
                },
                detail={
                    "attempt": cur.attempt,
                    "outcomes": dict(Counter(outcomes)),
                    "expected_ops": expected_ops,
                    **({"skip_ops": sorted(skips)} if skips else {}),
                },
            )

        return self._write(f"finishing proposal {pid}", tx)

    @staticmethod
    def _owner_skips(conn: Connection, pid: int) -> frozenset[int]:
        """The ops the owner unticked, from the latest approval event (its `skip_ops`)."""
        detail = conn.execute(
            select(AUDIT_EVENT.c.detail)
            .where(AUDIT_EVENT.c.proposal_id == pid, AUDIT_EVENT.c.to_status == lc.APPROVED)
            .order_by(AUDIT_EVENT.c.id.desc())
            .limit(1)
        ).scalar()
        return lc.owner_skips(json.loads(detail)) if detail else frozenset()

    def mark_interrupted(
        self, pid: int, *, actor: str, now: datetime | None = None, why: str | None = None
    ) -> ProposalRecord:
        """executing -> interrupted (owner quit mid-transfer, executor gave up, recovery)."""
        now = now_or_utcnow(now)

        def tx(conn: Connection, heads: Heads) -> ProposalRecord:
            cur = self._row(conn, pid)
            return self._cas(
                conn,
                heads,
                cur,
                transition="interrupt",
                actor=actor,
                now=now,
                values={"lease_holder": None, "lease_expires_at": None},
                detail={"holder": _holder_dict(cur.lease_holder), "why": why},
            )

        return self._write(f"marking proposal {pid} interrupted", tx)

    # ---- sweeper --------------------------------------------------------------------

    def expire(self, pid: int, *, now: datetime | None = None) -> ProposalRecord:
        """pending -> expired for one proposal whose `expires_at <= now` (the sweeper's
        step). Raises NotFound, WrongState (not pending, or not yet due)."""
        now = now_or_utcnow(now)

        def tx(conn: Connection, heads: Heads) -> ProposalRecord:
            cur = self._row(conn, pid)
            if cur.status == lc.PENDING and cur.expires_at > now:
                raise WrongState(
                    f"cannot expire proposal {pid}: it is due at {cur.expires_at.isoformat()}",
                    details={"proposal_id": pid, "expires_at": cur.expires_at.isoformat()},
                )
            return self._expire_row(conn, heads, cur, now)

        return self._write(f"expiring proposal {pid}", tx)

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
        while self._read("finding due proposals", lambda c: c.execute(due_q).first()):

            def tx(conn: Connection, heads: Heads) -> list[int]:
                return [self._expire_row(conn, heads, r, now).id for r in conn.execute(due_q).all()]

            batch = self._write("expiring due proposals", tx)
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
            lost(r) for r in self._read("finding executing proposals", lambda c: c.execute(q).all())
        ):
            return []

        def tx(conn: Connection, heads: Heads) -> list[int]:
            out = []
            for r in conn.execute(q).all():
                why = lost(r)
                if why:
                    self._cas(
                        conn,
                        heads,
                        r,
                        transition="interrupt",
                        actor=lc.SWEEPER,
                        now=now,
                        guard=(P.lease_holder.is_not_distinct_from(r.lease_holder),),
                        values={"lease_holder": None, "lease_expires_at": None},
                        detail={"holder": _holder_dict(r.lease_holder), "why": why},
                    )
                    out.append(r.id)
            return out

        return self._write("recovering interrupted proposals", tx)

    def sweep(self, now: datetime | None = None) -> SweepResult:
        """`expire_due` then `recover_interrupted`, at one `now`; then old content previews
        are dropped (`prune_previews`, at most once an hour)."""
        now = now_or_utcnow(now)
        result = SweepResult(
            expired=self.expire_due(now), interrupted=self.recover_interrupted(now)
        )
        self.prune_previews(now)
        return result


def _holder_dict(value: str | None) -> dict[str, Any] | None:
    try:
        return None if value is None else LeaseHolder.parse(value).to_dict()
    except ValueError:
        return {"unreadable": value}


def _signature_of(approval: dict[str, Any], pid: int) -> str | None:
    """`signature_id` of the passkey assertion an approval's detail carries (per proposal
    for an assertion over a set), or None."""
    passkey = approval.get("passkey")
    nonce = passkey.get("nonce") if isinstance(passkey, dict) else None
    if not isinstance(nonce, str):
        return None
    return signature_id(nonce, pid if "set" in approval else None)


def _require_approval_event(conn: Connection, pid: int) -> dict[str, Any]:
    """The detail of proposal `pid`'s last audit event when it moved it to approved (the
    owner's accept), else PolicyRefused (``not_approved_as_shown``)."""
    last = conn.execute(
        select(AUDIT_EVENT.c.id, AUDIT_EVENT.c.to_status, AUDIT_EVENT.c.detail)
        .where(AUDIT_EVENT.c.proposal_id == pid)
        .order_by(AUDIT_EVENT.c.id.desc())
        .limit(1)
    ).first()
    if last is not None and last.to_status == lc.APPROVED:
        try:
            detail = json.loads(last.detail)
        except ValueError:  # edited in the database: the binding refuses what it lacks
            return {}
        return detail if isinstance(detail, dict) else {}
    said = f"event {last.id} says {last.to_status!r}" if last is not None else "there is none"
    raise PolicyRefused(
        f"refusing to execute proposal {pid}: it is approved, but no approval by the owner "
        f"is recorded (its last audit event: {said}); its status was changed outside the "
        "store. Run `placet audit --verify`, and do not execute it",
        code="not_approved_as_shown",
        details={"proposal_id": pid, "last_event_id": None if last is None else last.id},
    )
