"""What the store keeps for standing rules: each approval a rule made, and resumes.

Two limits must hold across every `placet serve` sharing the store, so they are counted
there, never in a process's memory (docs/decisions/0038-standing-rules.md):
`max_per_hour` (`claim` counts the rule's uses in the hour before now and adds this one
in one write transaction: 200 proposals from four processes against a 50-per-hour rule
make exactly 50 uses) and the pause (a rule whose approved proposal's run ended `failed`
approves nothing until the owner resumes it, `placet rules resume`).

A use is recorded before the approval and given back when the approval is refused
(`release`); a crash in between leaves a use that counts and approved nothing, the safe
side. One use per proposal: claiming again for it counts nothing new.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.engine import Connection

from placet.store import Store
from placet.store.db import as_utc, upsert
from placet.store.models import AUDIT_EVENT, PROPOSAL, RULE_RESUME, RULE_USE

__all__ = ["HOUR", "Claim", "RuleLedger"]

HOUR = timedelta(hours=1)
U = RULE_USE.c
E = AUDIT_EVENT.c


@dataclass(frozen=True)
class Claim:
    """What `RuleLedger.claim` found: `ok` (the use is recorded), or why not."""

    ok: bool
    why: str = ""
    failed_proposal: int | None = None
    """The proposal whose failed run paused the rule, when that is why."""


class RuleLedger:
    """The rule tables of one store (module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _resumed_at(self, conn: Connection, rule_id: str) -> datetime | None:
        q = select(RULE_RESUME.c.resumed_at).where(RULE_RESUME.c.rule_id == rule_id)
        return conn.execute(q).scalar()

    def _failed_since(self, conn: Connection, rule_id: str) -> int | None:
        """A proposal rule `rule_id` approved (since its last resume) whose run failed."""
        q = (
            select(U.proposal_id)
            .join(AUDIT_EVENT, E.proposal_id == U.proposal_id)
            .where(U.rule_id == rule_id, E.to_status == "failed", E.at >= U.at)
            .order_by(U.proposal_id)
            .limit(1)
        )
        resumed = self._resumed_at(conn, rule_id)
        if resumed is not None:
            q = q.where(U.at > resumed)
        return conn.execute(q).scalar()

    def paused_by(self, rule_id: str) -> int | None:
        """The proposal whose failed run pauses rule `rule_id`, or None (not paused)."""
        return self.store._read(
            f"reading rule {rule_id}'s runs", lambda c: self._failed_since(c, rule_id)
        )

    def claim(
        self,
        rule_id: str,
        proposal_id: int,
        rules_sha256: str,
        *,
        max_per_hour: int | None,
        now: datetime,
    ) -> Claim:
        """Record that rule `rule_id` approves `proposal_id`, unless the rule is paused
        or has made `max_per_hour` uses in the hour before `now`, all in one write
        transaction (module docstring)."""
        now = as_utc(now)

        def tx(conn: Connection, _heads: object) -> Claim:
            held = conn.execute(select(U.rule_id).where(U.proposal_id == proposal_id)).scalar()
            if held is not None:
                return Claim(held == rule_id, "" if held == rule_id else f"rule {held} holds it")
            failed = self._failed_since(conn, rule_id)
            if failed is not None:
                return Claim(
                    False,
                    f"paused: the run of proposal {failed}, which it approved, failed; "
                    f"`placet rules resume {rule_id}` resumes it",
                    failed,
                )
            if max_per_hour is not None:
                used = conn.execute(
                    select(func.count())
                    .select_from(RULE_USE)
                    .where(U.rule_id == rule_id, U.at > now - HOUR)
                ).scalar_one()
                if used >= max_per_hour:
                    return Claim(
                        False, f"it approved {used} proposals in the last hour (max_per_hour)"
                    )
            conn.execute(
                RULE_USE.insert().values(
                    rule_id=rule_id, proposal_id=proposal_id, rules_sha256=rules_sha256, at=now
                )
            )
            return Claim(True)

        return self.store._write(f"counting rule {rule_id}'s approvals", tx)

    def release(self, rule_id: str, proposal_id: int) -> None:
        """Forget the use of `proposal_id` by `rule_id` (its approval was refused)."""
        self.store._write(
            f"releasing rule {rule_id}'s use",
            lambda c, _h: c.execute(
                delete(RULE_USE).where(U.rule_id == rule_id, U.proposal_id == proposal_id)
            ),
        )

    def resume(self, rule_id: str, *, now: datetime) -> None:
        """Resume rule `rule_id`: failed runs of what it approved until `now` no longer
        pause it."""

        def tx(conn: Connection, _heads: object) -> None:
            stmt = upsert(conn, RULE_RESUME).values(rule_id=rule_id, resumed_at=as_utc(now))
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["rule_id"], set_={"resumed_at": stmt.excluded.resumed_at}
                )
            )

        self.store._write(f"resuming rule {rule_id}", tx)

    def uses_in_hour(self, rule_id: str, now: datetime) -> int:
        """Uses of rule `rule_id` in the hour before `now` (what `claim` counts)."""
        q = (
            select(func.count())
            .select_from(RULE_USE)
            .where(U.rule_id == rule_id, U.at > as_utc(now) - HOUR)
        )
        return int(self.store._read("counting rule approvals", lambda c: c.execute(q).scalar_one()))

    def uses_since(self, since: datetime) -> dict[str, int]:
        """Uses per rule id since `since`."""
        q = select(U.rule_id, func.count()).where(U.at >= as_utc(since)).group_by(U.rule_id)
        rows = self.store._read("counting rule approvals", lambda c: c.execute(q).all())
        return {str(r): int(n) for r, n in rows}

    def used_by(self, proposal_ids: Iterable[int]) -> dict[int, str]:
        """The rule that approved each of `proposal_ids` (those a rule approved)."""
        ids = sorted(set(proposal_ids))
        if not ids:
            return {}
        q = select(U.proposal_id, U.rule_id).where(U.proposal_id.in_(ids))
        rows = self.store._read("reading rule approvals", lambda c: c.execute(q).all())
        return {int(p): str(r) for p, r in rows}

    def recent_roots(self, limit: int = 1000) -> list[str]:
        """The local roots the latest `limit` proposals named (their request's root
        path): the roots an agent used, for the owner's commands to keep the rules file
        outside."""
        q = select(PROPOSAL.c.request).order_by(PROPOSAL.c.id.desc()).limit(limit)
        rows = self.store._read("reading recent roots", lambda c: c.execute(q).all())
        found: dict[str, None] = {}
        for (text,) in rows:
            root = json.loads(text).get("root")
            path = root.get("path") if isinstance(root, dict) else None
            if isinstance(path, str):
                found.setdefault(path, None)
        return list(found)
