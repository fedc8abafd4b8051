"""Read tools cannot grow the database without bound (docs/decisions/0024-sync-plans.md).

`sync_plan` stores every plan and `drive_changes` every listing. A looping agent planning
new remote paths through a real `placet serve` leaves at most `stored_per_session` plans
of its session and `stored_total` in all, and the database file (after a checkpoint)
stops growing; a plan a pending proposal was made from is kept however many plans
follow. Through the real store: the byte caps, snapshots alike, and which rows go first
(replaced ones, then the oldest; never the one just stored).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from placet.config import Settings
from placet.store import open_store
from placet.sync.stored import SyncData
from placet.sync.tables import cap_victims
from tests.support.mcp import Workspace, connect, ok

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def capped_ws(ws: Workspace) -> Workspace:
    """`ws` storing at most 5 plans per session and 8 in all, over a tree of 200 files."""
    ws.write_config(stored_per_session=5, stored_total=8)
    for i in range(200):  # long names: each plan body is a few KB
        (ws.root / "tree").mkdir(exist_ok=True)
        (ws.root / "tree" / f"{i:03d}-{'x' * 150}.txt").write_text(f"{i}\n")
    return ws


def _plans(db: Path) -> tuple[list[int], int]:
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT id, length(body) + length(skips) FROM sync_plan ORDER BY id")
        got = rows.fetchall()
    return [r[0] for r in got], sum(r[1] for r in got)


def _checkpointed_size(db: Path) -> int:
    with sqlite3.connect(db) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return os.path.getsize(db)


async def _plan_loop(ws: Workspace, first: int, n: int) -> list[int]:
    ids = []
    async with connect(ws) as client:
        for i in range(first, first + n):
            plan = ok(await client.call_tool("sync_plan", {"local_path": "tree",
                                                           "remote_path": f"new{i}"}))  # fmt: skip
            ids.append(plan["plan_id"])
    return ids


@pytest.mark.anyio
async def test_looping_sync_plan_over_new_remote_paths_stays_under_the_caps(
    capped_ws: Workspace,
) -> None:
    db = capped_ws.home / "placet.db"
    ids = await _plan_loop(capped_ws, 0, 12)
    kept, size = _plans(db)
    assert kept == ids[-5:]  # this session's newest 5: the per-session cap
    size_after_12 = _checkpointed_size(db)

    more = await _plan_loop(capped_ws, 12, 30)  # a second session: 5 of its own, 8 in all
    kept, _ = _plans(db)
    assert kept == ids[-3:] + more[-5:]
    third = await _plan_loop(capped_ws, 42, 30)
    kept, size = _plans(db)
    assert len(kept) == 8  # the total cap: 3 of the second session, 5 of the third
    assert kept == more[-3:] + third[-5:]
    # Freed pages are reused: 60 more plans (~15 KB each, 900 KB) grew the file by less
    # than two caps' worth of plans.
    assert _checkpointed_size(db) <= size_after_12 + 2 * size


@pytest.mark.anyio
async def test_a_plan_a_pending_proposal_was_made_from_is_kept(capped_ws: Workspace) -> None:
    db = capped_ws.home / "placet.db"
    async with connect(capped_ws) as client:
        plan = ok(await client.call_tool("sync_plan", {"local_path": "tree",
                                                       "remote_path": "kept"}))  # fmt: skip
        prop = ok(await client.call_tool("propose_sync", {"plan_id": plan["plan_id"],
                                                          "reason": "keep"}))  # fmt: skip
    await _plan_loop(capped_ws, 0, 12)
    kept, _ = _plans(db)
    assert plan["plan_id"] in kept and len(kept) == 6  # over the cap only by the kept one
    r = capped_ws.placet("discard", str(prop["proposal"]["id"]))
    assert r.returncode == 0, r.stderr
    await _plan_loop(capped_ws, 12, 3)  # 9 plans: over the total cap of 8, and 1 is not kept
    kept, _ = _plans(db)
    assert plan["plan_id"] not in kept and len(kept) == 8


def test_snapshots_are_capped_in_bytes_per_session_and_in_total(settings: Settings) -> None:
    capped = settings.model_copy(
        update={"stored_bytes_per_session": 1024**2, "stored_bytes_total": 2 * 1024**2}
    )
    store = open_store(capped)
    one, two = SyncData(store), SyncData(store)  # two sessions
    body = {f"f{i}": ["f", i, "2026-01-01T00:00:00Z", os.urandom(32).hex()] for i in range(6000)}
    mine = [one.save_snapshot("spec:", f"p{i}", body).id for i in range(6)]
    with sqlite3.connect(capped.db_path) as c:
        rows = c.execute("SELECT id, length(body) FROM drive_snapshot ORDER BY id").fetchall()
    per = rows[0][1]
    assert 200_000 < per < 1024**2 // 2  # several fit a session's MiB, six do not
    assert [r[0] for r in rows] == mine[-(1024**2 // per) :]
    theirs = [two.save_snapshot("spec:", f"q{i}", body).id for i in range(6)]
    with sqlite3.connect(capped.db_path) as c:
        left = [r[0] for r in c.execute("SELECT id FROM drive_snapshot ORDER BY id")]
        total = c.execute("SELECT sum(length(body)) FROM drive_snapshot").fetchone()[0]
    assert total <= 2 * 1024**2 and left[-(1024**2 // per) :] == theirs[-(1024**2 // per) :]


def test_replaced_rows_go_first_then_the_oldest_never_a_kept_one() -> None:
    rows = [(1, "a", 10), (2, "b", 10), (3, "a", 10), (4, "c", 10), (5, "d", 10)]
    # 1 was replaced by 3 (same key): it goes before the older-but-newest 2.
    assert cap_victims(rows, 3, 10**9, frozenset({5})) == [1, 2]
    assert cap_victims(rows, 10, 25, frozenset({5})) == [1, 2, 3]  # bytes: 50 -> 20
    assert cap_victims(rows, 1, 10**9, frozenset({1, 2, 3, 4, 5})) == []  # all kept
    assert cap_victims(rows, 5, 50, frozenset()) == []
