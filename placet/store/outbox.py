"""The notification outbox: events that need the owner, messages made of them, deliveries.

Three tables (migration `notify_outbox`): `notify_event`, written by a trigger on
`audit_event` in the transition's own transaction (a proposal created, failed or
interrupted), or by `add_expiring` once per proposal and expiry time; `notify_message`,
grouped from one or more events (said again from current state at each attempt); and
`notify_delivery`, one per message and channel, `pending` -> `sending` (claimed by
compare-and-set on state and attempt) -> `sent`, back to `pending` after a failed
attempt, `failed`, or `dropped` when every proposal it announced was decided before it
went out (values in `placet.store.outbox_rows`). Every write is one write transaction,
so two processes never group the same events or claim the same delivery; a claim
lapses after `CLAIM_S`, the one way a message can arrive twice
(docs/decisions/0031-notifications.md). Time is injected (`now=`). Its writes are plain
SQL on a driver connection, beside the table models, for `bench/notify.py`."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from sqlalchemy.engine import Engine

from placet.errors import StoreError
from placet.store.db import (
    RawDB,
    as_utc,
    driver_errors,
    dt_text,
    is_busy,
    is_postgres,
    raw_transaction,
    retry_busy,
)
from placet.store.outbox_rows import (
    CLAIM_S,
    EXPIRY_LEAD,
    RETENTION,
    STALE,
    Claim,
    DeliveryLog,
    EventRow,
    Rendered,
    parse_time,
    time_of,
)

T = TypeVar("T")

_EXPIRING = (
    "SELECT p.id, p.run_id, p.expires_at FROM proposal p "
    "WHERE p.status = 'pending' AND p.expires_at > ? AND p.expires_at <= ? "
)
_EXPIRING_SQLITE = (
    _EXPIRING + "AND julianday(p.expires_at) - julianday(p.created_at) > ? "  # noqa: S608
    "AND NOT EXISTS (SELECT 1 FROM notify_event e WHERE e.dedupe = "
    "'expiring:' || p.id || ':' || p.expires_at)"
)
_EXPIRING_PG = (
    _EXPIRING + "AND EXTRACT(EPOCH FROM (p.expires_at - p.created_at)) / 86400 > ? "  # noqa: S608
    "AND NOT EXISTS (SELECT 1 FROM notify_event e WHERE e.dedupe = 'expiring:' || p.id || "
    "':' || to_char(p.expires_at, 'YYYY-MM-DD HH24:MI:SS.US'))"
)
"""Pending proposals near expiry not announced yet; the dedupe key holds `expires_at` in
`dt_text`'s form on both backends (SQLite stores that text; PostgreSQL formats it)."""


def new_uid() -> str:
    """A delivery's id for its receiver: a random UUID, unique across databases."""
    return str(uuid.uuid4())


class _Lost(Exception):
    """A compare-and-set matched fewer rows than it must: undo the transaction."""


# ---- the outbox --------------------------------------------------------------------------


class Outbox:
    """The outbox of the database under `engine` (the store's engine may be shared)."""

    def __init__(self, engine: Engine, *, db_label: str = "the database") -> None:
        self.engine = engine
        self.db_label = db_label

    def _tx(self, what: str, fn: Callable[[RawDB], T], *, write: bool) -> T:
        """Run `fn` on a pooled driver connection in one transaction (the write lock first
        for writes, `RawDB.begin`), retrying a lock that outlasted the busy timeout.
        Raises StoreError."""

        def error(e: Exception) -> StoreError:
            busy = is_busy(e)
            return StoreError(
                f"{what}: {self.db_label} failed: {e}",
                code="store_busy" if busy else None,
                retryable=busy,
            )

        errors = driver_errors()
        return retry_busy(
            lambda: raw_transaction(self.engine, fn, write=write), errors, errors, error
        )

    # ---- events ---------------------------------------------------------------------

    def add_expiring(self, now: datetime, *, lead: timedelta = EXPIRY_LEAD) -> int:
        """Insert an `expiring` event for each pending proposal whose TTL ends within
        `lead` of `now` and that was created before that window opened (a proposal made
        with a shorter TTL was just announced); once per proposal and expiry time.
        Returns how many were inserted. A read first, so no work takes no write lock."""
        n, soon = dt_text(now), dt_text(now + lead)
        find = _EXPIRING_PG if is_postgres(self.engine) else _EXPIRING_SQLITE
        args = (n, soon, lead.total_seconds() / 86400)
        due = self._tx(
            "finding proposals near expiry",
            lambda db: db.execute(find, args).fetchall(),
            write=False,
        )
        if not due:
            return 0

        def tx(db: RawDB) -> int:
            added = 0
            for pid, run_id, expires in db.execute(find, args).fetchall():
                at = expires if isinstance(expires, str) else dt_text(expires.replace(tzinfo=UTC))
                cur = db.execute(
                    "INSERT INTO notify_event (kind, proposal_id, run_id, dedupe, "
                    "state, created_at) VALUES ('expiring', ?, ?, ?, 'new', ?) "
                    "ON CONFLICT DO NOTHING",
                    (pid, run_id, f"expiring:{pid}:{at}", n),
                )
                added += cur.rowcount
            return added

        return self._tx("recording proposals near expiry", tx, write=True)

    def new_events(self) -> list[EventRow]:
        """Events not grouped yet, oldest first (a read)."""
        rows = self._tx(
            "reading notification events",
            lambda db: db.execute(
                "SELECT id, kind, proposal_id, run_id, created_at FROM notify_event "
                "WHERE state = 'new' ORDER BY id"
            ).fetchall(),
            write=False,
        )
        return [
            EventRow(r[0], r[1], r[2], r[3], parse_time(r[4]) or as_utc(datetime.min)) for r in rows
        ]

    def skip(self, event_ids: Sequence[int]) -> int:
        """Mark still-new events `skipped` (no channel, or too old); returns how many."""
        if not event_ids:
            return 0
        marks = ",".join("?" * len(event_ids))

        def tx(db: RawDB) -> int:
            return db.execute(
                f"UPDATE notify_event SET state = 'skipped' WHERE state = 'new' "  # noqa: S608
                f"AND id IN ({marks})",
                tuple(event_ids),
            ).rowcount

        return self._tx("skipping notification events", tx, write=True)

    def make_message(
        self,
        event_ids: Sequence[int],
        *,
        kind: str,
        run_id: str,
        content: Rendered,
        channels: Sequence[str],
        now: datetime,
    ) -> int | None:
        """Group the still-new `event_ids` into one message with one pending delivery per
        channel; compare-and-set on the events' state, so when another process grouped
        any of them first nothing is written and None is returned."""
        marks = ",".join("?" * len(event_ids))
        n = dt_text(now)

        def tx(db: RawDB) -> int | None:
            cur = db.execute(
                "INSERT INTO notify_message (kind, run_id, title, body, payload, priority, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    kind,
                    run_id,
                    content.title,
                    content.body,
                    json.dumps(content.payload, ensure_ascii=False, sort_keys=True),
                    content.priority,
                    n,
                ),
            )
            mid = int(cur.fetchone()[0])
            grouped = db.execute(
                f"UPDATE notify_event SET state = 'grouped', message_id = ? "  # noqa: S608
                f"WHERE state = 'new' AND id IN ({marks})",
                (mid, *event_ids),
            ).rowcount
            if grouped != len(event_ids):
                raise _Lost  # rolls the message back; another process grouped them
            db.executemany(
                "INSERT INTO notify_delivery (message_id, channel, state, attempts, next_at, "
                "created_at, uid) VALUES (?, ?, 'pending', 0, ?, ?, ?)",
                [(mid, ch, n, n, new_uid()) for ch in channels],
            )
            return mid

        try:
            return self._tx("grouping notification events", tx, write=True)
        except _Lost:
            return None

    # ---- deliveries -------------------------------------------------------------------

    def claim(
        self, *, holder: str, channels: Sequence[str], now: datetime, limit: int = 8
    ) -> list[Claim]:
        """Claim up to `limit` deliveries of `channels` that are due (pending with
        `next_at <= now`, or sending under a lapsed claim). A read first: nothing due
        takes no write lock."""
        if not channels:
            return []
        n = dt_text(now)
        marks = ",".join("?" * len(channels))
        due_sql = (
            "SELECT d.id, d.state, d.attempts FROM notify_delivery d "  # noqa: S608
            f"WHERE d.channel IN ({marks}) AND ((d.state = 'pending' AND d.next_at <= ?) "
            "OR (d.state = 'sending' AND d.claim_until <= ?)) ORDER BY d.id LIMIT ?"
        )
        args = (*channels, n, n, limit)
        if not self._tx(
            "reading due deliveries", lambda db: db.execute(due_sql, args).fetchall(), write=False
        ):
            return []
        until = dt_text(now + timedelta(seconds=CLAIM_S))

        def tx(db: RawDB) -> list[Claim]:
            out: list[Claim] = []
            for did, state, attempts in db.execute(due_sql, args).fetchall():
                won = db.execute(
                    "UPDATE notify_delivery SET state = 'sending', attempts = attempts + 1, "
                    "claimed_by = ?, claim_until = ?, uid = coalesce(uid, ?) "
                    "WHERE id = ? AND state = ? AND attempts = ?",
                    (holder, until, new_uid(), did, state, attempts),
                ).rowcount
                if not won:
                    continue
                m = db.execute(
                    "SELECT m.id, d.channel, m.title, m.body, m.payload, m.priority, m.kind, "
                    "d.uid FROM notify_delivery d JOIN notify_message m ON m.id = d.message_id "
                    "WHERE d.id = ?",
                    (did,),
                ).fetchone()
                about = db.execute(
                    "SELECT DISTINCT proposal_id FROM notify_event WHERE message_id = ? "
                    "ORDER BY proposal_id",
                    (m[0],),
                ).fetchall()
                content = Rendered(m[2], m[3], json.loads(m[4]), m[5])
                about_ids = tuple(r[0] for r in about)
                out.append(Claim(did, m[0], m[1], attempts + 1, content, m[6], about_ids, m[7]))
            return out

        return self._tx("claiming deliveries", tx, write=True)

    def due_channels(
        self, channels: Sequence[str], *, now: datetime, holder: str | None = None
    ) -> set[str]:
        """Which of `channels` have deliveries to claim at `now` (as `claim` finds them)
        or, with `holder`, being sent under that holder's claim (a read)."""
        if not channels:
            return set()
        n = dt_text(now)
        marks = ",".join("?" * len(channels))
        mine = " OR (d.state = 'sending' AND d.claimed_by = ?)" if holder else ""
        sql = (
            "SELECT DISTINCT d.channel FROM notify_delivery d "  # noqa: S608
            f"WHERE d.channel IN ({marks}) AND ((d.state = 'pending' AND d.next_at <= ?) "
            f"OR (d.state = 'sending' AND d.claim_until <= ?){mine})"
        )
        args = (*channels, n, n, *((holder,) if holder else ()))
        rows = self._tx(
            "reading due deliveries", lambda db: db.execute(sql, args).fetchall(), write=False
        )
        return {str(r[0]) for r in rows}

    def sent(self, claim: Claim, *, holder: str, now: datetime) -> bool:
        """Record `claim` as sent; False when the claim was lost meanwhile."""

        def tx(db: RawDB) -> bool:
            return bool(
                db.execute(
                    "UPDATE notify_delivery SET state = 'sent', sent_at = ?, last_error = NULL, "
                    "claim_until = NULL WHERE id = ? AND state = 'sending' AND claimed_by = ? "
                    "AND attempts = ?",
                    (dt_text(now), claim.delivery_id, holder, claim.attempt),
                ).rowcount
            )

        return self._tx("recording a delivery", tx, write=True)

    def attempt_failed(
        self,
        claim: Claim,
        *,
        holder: str,
        error: str,
        retry_at: datetime | None,
        now: datetime,
    ) -> bool:
        """Record a failed attempt: pending again from `retry_at`, or `failed` for good
        when `retry_at` is None. False when the claim was lost meanwhile."""

        def tx(db: RawDB) -> bool:
            state = "failed" if retry_at is None else "pending"
            return bool(
                db.execute(
                    "UPDATE notify_delivery SET state = ?, next_at = ?, last_error = ?, "
                    "claim_until = NULL WHERE id = ? AND state = 'sending' AND claimed_by = ? "
                    "AND attempts = ?",
                    (
                        state,
                        dt_text(retry_at or now),
                        error[:500],
                        claim.delivery_id,
                        holder,
                        claim.attempt,
                    ),
                ).rowcount
            )

        return self._tx("recording a failed delivery", tx, write=True)

    def dropped(self, claim: Claim, *, holder: str, reason: str, now: datetime) -> bool:
        """Record `claim` as `dropped`: not sent, since what it said is no longer so (every
        proposal it announced was decided meanwhile). False when the claim was lost."""

        def tx(db: RawDB) -> bool:
            return bool(
                db.execute(
                    "UPDATE notify_delivery SET state = 'dropped', next_at = ?, last_error = ?, "
                    "claim_until = NULL WHERE id = ? AND state = 'sending' AND claimed_by = ? "
                    "AND attempts = ?",
                    (dt_text(now), reason[:500], claim.delivery_id, holder, claim.attempt),
                ).rowcount
            )

        return self._tx("recording a dropped delivery", tx, write=True)

    def give_up_stale(self, now: datetime, *, stale: timedelta = STALE) -> int:
        """Fail deliveries still pending `stale` after they were made (no process could
        send them: e.g. a desktop channel and no process with a desktop session)."""
        cutoff = dt_text(now - stale)

        def tx(db: RawDB) -> int:
            return db.execute(
                "UPDATE notify_delivery SET state = 'failed', last_error = coalesce("
                "last_error, '') || ' (not sent within the hour; given up)' "
                "WHERE state = 'pending' AND created_at < ?",
                (cutoff,),
            ).rowcount

        return self._tx("giving up stale deliveries", tx, write=True)

    def prune(self, now: datetime, *, keep: timedelta = RETENTION) -> int:
        """Delete events, messages and finished deliveries older than `keep`."""
        cutoff = dt_text(now - keep)

        def tx(db: RawDB) -> int:
            gone = db.execute(
                "DELETE FROM notify_delivery WHERE created_at < ? "
                "AND state IN ('sent', 'failed', 'dropped')",
                (cutoff,),
            ).rowcount
            db.execute(
                "DELETE FROM notify_event WHERE created_at < ? AND state <> 'new' AND ("
                "message_id IS NULL OR NOT EXISTS (SELECT 1 FROM notify_delivery d "
                "WHERE d.message_id = notify_event.message_id))",
                (cutoff,),
            )
            db.execute(
                "DELETE FROM notify_message WHERE created_at < ? AND NOT EXISTS (SELECT 1 FROM "
                "notify_delivery d WHERE d.message_id = notify_message.id)",
                (cutoff,),
            )
            return gone

        return self._tx("pruning notifications", tx, write=True)

    # ---- reads ----------------------------------------------------------------------

    def log(self, *, limit: int = 50) -> list[DeliveryLog]:
        """The newest `limit` deliveries, newest first."""
        rows = self._tx(
            "reading the notification log",
            lambda db: db.execute(
                "SELECT d.id, d.message_id, d.channel, d.state, d.attempts, m.title, "
                "d.created_at, d.sent_at, d.next_at, d.last_error, d.uid FROM notify_delivery d "
                "JOIN notify_message m ON m.id = d.message_id ORDER BY d.id DESC LIMIT ?",
                (limit,),
            ).fetchall(),
            write=False,
        )
        return [
            DeliveryLog(
                did,
                mid,
                ch,
                state,
                tries,
                title,
                time_of(made),
                parse_time(sent),
                time_of(due),
                error,
                uid,
            )
            for did, mid, ch, state, tries, title, made, sent, due, error, uid in rows
        ]

    def sent_for(self, proposal_id: int) -> list[tuple[str, datetime]]:
        """(channel, sent at) of every message about `proposal_id` that was sent, oldest
        first (for the agent's status line)."""
        rows = self._tx(
            "reading deliveries of a proposal",
            lambda db: db.execute(
                "SELECT d.channel, d.sent_at FROM notify_event e JOIN notify_delivery d "
                "ON d.message_id = e.message_id WHERE e.proposal_id = ? AND d.state = 'sent' "
                "ORDER BY d.sent_at",
                (proposal_id,),
            ).fetchall(),
            write=False,
        )
        return [(str(c), t) for c, s in rows if (t := parse_time(s)) is not None]

    def counts(self) -> dict[str, int]:
        """Deliveries per state (for `placet doctor`)."""
        rows = self._tx(
            "counting deliveries",
            lambda db: db.execute(
                "SELECT state, count(*) FROM notify_delivery GROUP BY state"
            ).fetchall(),
            write=False,
        )
        return {str(s): int(n) for s, n in rows}
