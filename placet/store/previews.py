"""The content previews stored with a proposal: the first bytes of the files its ops write
or replace, as captured when it was made (`placet.preview` decides what to capture).

A preview is shown to the owner, never executed or trusted: the executor re-checks the
evidence, not these bytes. They are written once, by `insert_previews` in the
transaction that creates the proposal (`Store.create_proposal(previews=...)`; on
PostgreSQL right after its one statement), at most `Settings.preview_proposal_bytes` of
them per proposal, whatever the caller hands in. The previews of proposals decided more
than `RETENTION` ago are dropped by the sweep (`prune_previews`, looked for at most once
an hour per store), so the table holds what the owner may still review.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy import delete, exists, func, select
from sqlalchemy.engine import Connection

from placet.store.base import Database, Heads, now_or_utcnow
from placet.store.db import RawDB, dt_text
from placet.store.models import PROPOSAL, PROPOSAL_PREVIEW

__all__ = ["RETENTION", "Previews", "StoredPreview", "fit_previews", "insert_previews"]

RETENTION = timedelta(days=7)
"""Previews of a proposal decided (or expired) longer ago than this are dropped."""
_PRUNE_EVERY = 3600.0
"""Seconds between two looks for previews past `RETENTION`, per store."""
_INSERT_SQL = (
    "INSERT INTO proposal_preview (proposal_id, op_index, side, size, binding, content, "
    "captured_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
)

V = PROPOSAL_PREVIEW.c


@dataclass(frozen=True)
class StoredPreview:
    """The first bytes of one file of one op.

    Attributes:
        op_index: the op's `index` (0 for a single upload or download).
        side: ``new`` (the bytes the op writes) or ``current`` (the bytes it replaces).
        size: the whole file's size in bytes when read (None: unknown).
        binding: how `content` is tied to the evidence: ``same_read`` (kept by the read
            that computed the digest), ``digest`` (the whole file read, its digest
            matched the evidence's), ``unchecked`` (its first bytes only, read when
            proposed, so no digest could be checked).
        content: at most the per-op cap of bytes from offset 0.
        captured_at: when it was read (aware UTC).
    """

    op_index: int
    side: str
    size: int | None
    binding: str
    content: bytes
    captured_at: datetime

    @property
    def partial(self) -> bool:
        """The file goes on past `content` (or its size is unknown)."""
        return self.size is None or len(self.content) < self.size


def fit_previews(previews: Iterable[StoredPreview], budget: int) -> list[StoredPreview]:
    """`previews` (one per op and side, the first of a repeated one kept) cut to `budget`
    bytes in all, in order: the last one kept may be cut, the ones after it dropped."""
    out: list[StoredPreview] = []
    seen: set[tuple[int, str]] = set()
    left = budget
    for p in previews:
        if left <= 0:
            break
        if (p.op_index, p.side) in seen:
            continue
        seen.add((p.op_index, p.side))
        kept = p if len(p.content) <= left else replace(p, content=p.content[:left])
        out.append(kept)
        left -= len(kept.content)
    return out


def insert_previews(db: RawDB, pid: int, previews: Sequence[StoredPreview], budget: int) -> None:
    """Write `previews` of the new proposal `pid`, cut to `budget` (`fit_previews`), in
    the caller's transaction."""
    rows = [
        (pid, p.op_index, p.side, p.size, p.binding, p.content, dt_text(p.captured_at))
        for p in fit_previews(previews, budget)
    ]
    if rows:
        db.executemany(_INSERT_SQL, rows)


class Previews:
    """Reading content previews and dropping old ones (the ``previews`` part of `Store`)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    _previews_pruned = -_PRUNE_EVERY

    def previews_of(self, pid: int, op_index: int) -> dict[str, StoredPreview]:
        """The stored previews of op `op_index` of proposal `pid`, by side (maybe none)."""
        q = select(PROPOSAL_PREVIEW).where(V.proposal_id == pid, V.op_index == op_index)
        rows = self.db.read(f"reading the previews of proposal {pid}", lambda c: c.execute(q).all())
        return {
            r.side: StoredPreview(
                op_index=r.op_index, side=r.side, size=r.size, binding=r.binding,
                content=bytes(r.content), captured_at=r.captured_at,
            )
            for r in rows
        }  # fmt: skip

    def preview_bytes(self, pid: int) -> int:
        """The bytes of previews stored with proposal `pid`."""
        q = select(func.coalesce(func.sum(func.length(V.content)), 0)).where(V.proposal_id == pid)
        return int(self.db.read("measuring previews", lambda c: c.execute(q).scalar_one()))

    def prune_previews(self, now: datetime | None = None) -> int:
        """Drop the previews of proposals resolved more than `RETENTION` before `now`;
        looks at most once an hour per store (a read, then a write only when some are
        due). Returns the proposals whose previews were dropped."""
        if time.monotonic() - self._previews_pruned < _PRUNE_EVERY:
            return 0
        self._previews_pruned = time.monotonic()
        cutoff = now_or_utcnow(now) - RETENTION
        due = (
            select(PROPOSAL.c.id)
            .where(exists().where(V.proposal_id == PROPOSAL.c.id))
            .where(PROPOSAL.c.resolved_at < cutoff)
        )
        if self.db.read("finding old previews", lambda c: c.execute(due.limit(1)).first()) is None:
            return 0

        def tx(conn: Connection, heads: Heads) -> int:
            ids = [r[0] for r in conn.execute(due).all()]
            conn.execute(delete(PROPOSAL_PREVIEW).where(V.proposal_id.in_(ids)))
            return len(ids)

        return self.db.write("dropping old previews", tx)
