"""The content previews stored with a proposal: the first bytes of the files its ops write
or replace, as captured when it was made (`placet.preview` decides what to capture).

A preview is shown to the owner, never executed or trusted: the executor re-checks the
evidence, not these bytes. They are written once, right after the proposal row (a crash
in between leaves a proposal without stored previews, which are then read when opened
and checked against the evidence's digest). One proposal stores at most
`Settings.preview_proposal_bytes` of them, whatever the caller hands in; the previews
of proposals decided more than `RETENTION` ago are dropped (looked for at most once an
hour per store), so the table holds what the owner may still review.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, insert, select
from sqlalchemy.engine import Connection

from placet.store.base import Heads, StoreBase, now_or_utcnow
from placet.store.models import PROPOSAL, PROPOSAL_PREVIEW

__all__ = ["RETENTION", "Previews", "StoredPreview"]

RETENTION = timedelta(days=7)
"""Previews of a proposal decided (or expired) longer ago than this are dropped."""
_PRUNE_EVERY = 3600.0
"""Seconds between two looks for previews past `RETENTION`, per store."""

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


class Previews(StoreBase):
    """Storing and reading content previews (mixed into `Store`)."""

    _previews_pruned = 0.0

    def save_previews(
        self, pid: int, previews: Sequence[StoredPreview], *, now: datetime | None = None
    ) -> int:
        """Store `previews` of proposal `pid` (a side already stored is kept as it is),
        cut to what is left of the proposal's `preview_proposal_bytes`; returns the bytes
        stored. Also drops previews past `RETENTION` (at most once an hour).

        Raises:
            StoreError.
        """
        now = now_or_utcnow(now)
        budget = self.settings.preview_proposal_bytes
        prune = time.monotonic() - self._previews_pruned > _PRUNE_EVERY

        def tx(conn: Connection, heads: Heads) -> int:
            if prune:
                _prune(conn, now - RETENTION)
            rows = conn.execute(
                select(V.op_index, V.side, func.length(V.content)).where(V.proposal_id == pid)
            ).all()
            have = {(r[0], r[1]) for r in rows}
            left = budget - sum(int(r[2] or 0) for r in rows)
            stored = 0
            for p in previews:
                if (p.op_index, p.side) in have or left <= 0:
                    continue
                content = p.content[:left]
                conn.execute(
                    insert(PROPOSAL_PREVIEW).values(
                        proposal_id=pid, op_index=p.op_index, side=p.side, size=p.size,
                        binding=p.binding, content=content, captured_at=p.captured_at,
                    )
                )  # fmt: skip
                have.add((p.op_index, p.side))
                left -= len(content)
                stored += len(content)
            return stored

        stored = self._write(f"storing the previews of proposal {pid}", tx)
        if prune:
            self._previews_pruned = time.monotonic()
        return stored

    def previews_of(self, pid: int, op_index: int) -> dict[str, StoredPreview]:
        """The stored previews of op `op_index` of proposal `pid`, by side (maybe none)."""
        q = select(PROPOSAL_PREVIEW).where(V.proposal_id == pid, V.op_index == op_index)
        rows = self._read(f"reading the previews of proposal {pid}", lambda c: c.execute(q).all())
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
        return int(self._read("measuring previews", lambda c: c.execute(q).scalar_one()))


def _prune(conn: Connection, cutoff: datetime) -> None:
    """Drop the previews of proposals resolved before `cutoff`."""
    old = (
        select(PROPOSAL.c.id)
        .where(PROPOSAL.c.id.in_(select(V.proposal_id).distinct()))
        .where(PROPOSAL.c.resolved_at < cutoff)
    )
    conn.execute(delete(PROPOSAL_PREVIEW).where(V.proposal_id.in_(old)))
