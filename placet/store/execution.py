"""The `Execution` part of the store: running an approved proposal.

`claim` moves it approved -> executing under a lease held by one process (host, pid,
start time), spending its passkey signature once; `heartbeat` renews the lease; the op
journal (`record_op_result(s)`) is written only while the lease is held; `finish` decides
succeeded or failed from the journal and the ops the owner unticked. Each step is one
write transaction with its compare-and-set and audit event (`Database.cas`).
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
from placet.store.base import Database, Heads, P, now_or_utcnow
from placet.store.db import upsert
from placet.store.host import host_label, runs_elsewhere
from placet.store.models import (
    AUDIT_EVENT,
    OP_RESULT,
    PROPOSAL,
    SPENT_SIGNATURE,
    ProposalRecord,
    SpentSignature,
)
from placet.store.records import LeaseHolder, holder_dict
from placet.store.signatures import signature_id


class Execution:
    """A run of an approved proposal: claim, lease, op journal, finish (a part of `Store`)."""

    def __init__(self, db: Database) -> None:
        self.db = db

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
        lease = now + timedelta(seconds=self.db.settings.lease_seconds)

        def tx(conn: Connection, heads: Heads) -> ProposalRecord:
            cur = self.db.row(conn, pid)
            approval: dict[str, Any] = {}
            if runs_elsewhere(cur.host_id, self.db.host_id):
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
            claimed = self.db.cas(
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
                       "host_id": self.db.host_id, "spent_at": now}  # fmt: skip
                conn.execute(
                    upsert(conn, SPENT_SIGNATURE)
                    .values(**row)
                    .on_conflict_do_nothing(index_elements=["signature"])
                )
            return claimed

        return self.db.write(f"claiming proposal {pid}", tx)

    def spent(self, signature: str) -> SpentSignature | None:
        """The claim that spent the signed approval `signature`
        (`placet.store.signatures.signature_id` of its nonce), on any host; None if no
        claim did."""
        S = SPENT_SIGNATURE.c
        q = select(SPENT_SIGNATURE).where(S.signature == signature)
        row = self.db.read("reading a spent signature", lambda c: c.execute(q).first())
        if row is None:
            return None
        return SpentSignature.of(row._mapping)

    def heartbeat(self, pid: int, *, holder: LeaseHolder, now: datetime | None = None) -> bool:
        """Renew `holder`'s lease for another `lease_seconds`; False if it no longer holds it
        (the proposal was marked interrupted, or is held by someone else)."""
        now = now_or_utcnow(now)
        lease = now + timedelta(seconds=self.db.settings.lease_seconds)

        def tx(conn: Connection, heads: Heads) -> bool:
            res = conn.execute(
                update(PROPOSAL)
                .where(P.id == pid, P.status == lc.EXECUTING, P.lease_holder == str(holder))
                .values(lease_expires_at=lease)
            )
            return bool(res.rowcount == 1)

        return self.db.write(f"renewing the lease on proposal {pid}", tx)

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
            cur = self.db.row(conn, pid)  # raises NotFound when there is none
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

        self.db.write(f"recording op {op_index} of proposal {pid}", tx)

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

        self.db.write(f"recording {len(rows)} ops of proposal {pid}", tx)

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
        journaled, and `summary` names no ``error`` (the run was stopped: its binding
        refused, or its stored rows were found rewritten after its last op); else failed.

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
            if summary is not None and "error" in summary:
                to = lc.FAILED
            return self.db.cas(
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

        return self.db.write(f"finishing proposal {pid}", tx)

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
            cur = self.db.row(conn, pid)
            return self.db.cas(
                conn,
                heads,
                cur,
                transition="interrupt",
                actor=actor,
                now=now,
                values={"lease_holder": None, "lease_expires_at": None},
                detail={"holder": holder_dict(cur.lease_holder), "why": why},
            )

        return self.db.write(f"marking proposal {pid} interrupted", tx)


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
