"""A plan's verified skips live in `sync_plan_skips`, the blob its row's last column (so
SQLite reserves it without building it in memory and takes it a piece at a time), on
both stores: they read back as written, count in the stored-plan caps, go with their
plan when it is pruned; a plan stored with its skips in `sync_plan.skips` still reads."""

from __future__ import annotations

from datetime import timedelta

import pytest

from placet.config import Settings
from placet.store import open_store
from placet.store.db import utcnow
from placet.sync.entries import BaselineEntry
from placet.sync.model import SyncPlan
from placet.sync.stored import SyncData
from placet.sync.tables import RETENTION, Pair, RowPacker, pack_rows
from tests.support.db import raw_db

pytestmark = pytest.mark.usefixtures("store_backend")

PAIR = Pair("/root", "", "spec:", "")
EMPTY = SyncPlan((), (), {"skip": 5000}, "l", "r")


def _rows(n: int) -> list[tuple[str, str, str, str, int, None]]:
    return [(f"d/f{i}", f"{i:064x}", "sha256", f"{i:064x}", i, None) for i in range(n)]


def _save(data: SyncData, n: int, **kw: object) -> int:
    packer = RowPacker()
    for r in _rows(n):
        packer.add(r)
    stored = data.save_plan(pair=PAIR, root_name="r", options={}, plan=EMPTY,
                            baseline_generation=0, meta={}, skips=packer, **kw)  # type: ignore[arg-type]  # fmt: skip
    return stored.id


def test_skips_read_back_from_their_own_table(settings: Settings) -> None:
    data = SyncData(open_store(settings))
    pid = _save(data, 5000)
    assert data.plan_skips(pid) == [BaselineEntry(*r) for r in _rows(5000)]
    with raw_db(settings) as db:
        (inline,) = db.execute(
            "SELECT length(skips) FROM sync_plan WHERE id = ?", (pid,)
        ).fetchone()
        (apart,) = db.execute(
            "SELECT length(skips) FROM sync_plan_skips WHERE plan_id = ?", (pid,)
        ).fetchone()
    assert inline == 0 and apart == len(pack_rows(_rows(5000)))


def test_skips_count_in_the_caps_and_go_with_their_plan(settings: Settings) -> None:
    store = open_store(settings)
    data = SyncData(store)
    _save(data, 10, now=utcnow() - RETENTION - timedelta(minutes=1))
    pid = _save(data, 5000)  # stored after the first expired: it goes with its skips
    with raw_db(settings) as db:
        rows = list(db.execute("SELECT plan_id, length(skips) FROM sync_plan_skips"))
    assert [tuple(r) for r in rows] == [(pid, len(pack_rows(_rows(5000))))]
    # The skips' bytes count: a session cap below them drops the plan stored before.
    small = store.settings.model_copy(update={"stored_bytes_per_session": 1000})
    capped = SyncData(open_store(small))
    first = _save(capped, 5000)
    _save(capped, 5000)
    with raw_db(settings) as db:
        left = {i for (i,) in db.execute("SELECT plan_id FROM sync_plan_skips")}
    assert first not in left


def test_a_plan_with_its_skips_inline_still_reads(settings: Settings) -> None:
    data = SyncData(open_store(settings))
    pid = _save(data, 0)
    with raw_db(settings) as db:
        db.execute("DELETE FROM sync_plan_skips WHERE plan_id = ?", (pid,))
        db.execute("UPDATE sync_plan SET skips = ? WHERE id = ?", (bytes(pack_rows(_rows(3))), pid))
    assert data.plan_skips(pid) == [BaselineEntry(*r) for r in _rows(3)]
