"""A plan's id and a drive snapshot's id name one plan (snapshot) for good: pruning
what is older than `RETENTION` happens once the new row is in and keeps the newest row,
so SQLite, which numbers a new row after the largest id left, never gives a pruned id
again. A proposal made from a
pruned plan (its skips read when it is applied) or an expired anchor would otherwise
name a newer, unrelated plan or listing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from placet.config import Settings
from placet.errors import NotFound
from placet.store import open_store
from placet.store.db import utcnow
from placet.sync.model import SyncPlan
from placet.sync.stored import SyncData
from placet.sync.tables import RETENTION, Pair

pytestmark = pytest.mark.usefixtures("store_backend")

PAIR = Pair("/root", "", "spec:", "")


def _save(data: SyncData, skips: int, **kw: object) -> int:
    plan = SyncPlan((), (), {"skip": skips}, "l", "r")
    stored = data.save_plan(pair=PAIR, root_name="r", options={}, plan=plan,
                            baseline_generation=0, meta={}, skips=[], **kw)  # type: ignore[arg-type]  # fmt: skip
    return stored.id


def test_a_pruned_plan_id_is_never_given_to_a_new_plan(settings: Settings) -> None:
    data = SyncData(open_store(settings))
    old = utcnow() - RETENTION - timedelta(days=1)
    first = [_save(data, 1, now=old), _save(data, 2, now=old)]
    later = _save(data, 3)  # every plan before it is past RETENTION
    assert later not in first and later > max(first)
    for pruned in first:
        with pytest.raises(NotFound):
            data.load_plan(pruned)
    assert data.load_plan(later).summary == {"skip": 3}


def test_a_pruned_snapshot_id_is_never_given_to_a_new_snapshot(settings: Settings) -> None:
    data = SyncData(open_store(settings))
    old = utcnow() - RETENTION - timedelta(days=1)
    first = [data.save_snapshot("spec:", "", {"a": ["f", 1, None, ""]}, now=old).id
             for _ in range(2)]  # fmt: skip
    later = data.save_snapshot("spec:", "", {"b": ["f", 2, None, ""]}).id
    assert later not in first and later > max(first)
    assert data.load_snapshot(first[0]) is None and data.load_snapshot(first[1]) is None
