"""Content previews in the store: written by the transaction that creates the proposal,
cut to the proposal's cap, never for an identical pending one, dropped a week after the
proposal was decided. On SQLite and on a real PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from placet.config import Settings
from placet.store import open_store
from placet.store.db import utcnow
from placet.store.previews import RETENTION, StoredPreview
from tests.support.proposals import propose_folder

pytestmark = pytest.mark.usefixtures("store_backend")


def _preview(side: str, content: bytes, size: int | None = None) -> StoredPreview:
    return StoredPreview(0, side, len(content) if size is None else size, "same_read", content,
                         utcnow())  # fmt: skip


def test_previews_are_stored_with_the_proposal_within_its_cap(settings: Settings) -> None:
    with open_store(settings.model_copy(update={"preview_proposal_bytes": 10})) as store:
        rec, created = propose_folder(
            store,
            "a",
            ttl=600,
            previews=[_preview("new", b"\x00\xffbinary"), _preview("current", b"0123")],
        )
        assert created
        got = store.previews_of(rec.id, 0)
        assert got["new"].content == b"\x00\xffbinary" and not got["new"].partial
        assert (got["current"].content, got["current"].size) == (b"01", 4)
        assert got["current"].partial and store.preview_bytes(rec.id) == 10
        again, created = propose_folder(store, "a", ttl=600, previews=[_preview("other", b"x")])
        assert (again.id, created) == (rec.id, False)
        assert set(store.previews_of(rec.id, 0)) == {"new", "current"}


def test_previews_of_decided_proposals_are_dropped_after_a_week(settings: Settings) -> None:
    with open_store(settings) as store:
        old, _ = propose_folder(store, "old", ttl=600, previews=[_preview("new", b"old")])
        live, _ = propose_folder(store, "live", ttl=600, previews=[_preview("new", b"live")])
        store.discard(old.id, actor="owner", reason="no")
        store.sweep(now=utcnow() + RETENTION - timedelta(minutes=1))
        assert store.preview_bytes(old.id) == 3
        store.previews._previews_pruned = -1e9  # the hourly look is due again
        store.sweep(now=utcnow() + RETENTION + timedelta(minutes=1))
        assert store.preview_bytes(old.id) == 0
        assert store.previews_of(live.id, 0)["new"].content == b"live"
