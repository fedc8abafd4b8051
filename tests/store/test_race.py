"""Cross-process race: 4 OS processes, released together by a barrier, each try to accept,
discard or expire the same 500 pending proposals (200 on PostgreSQL), in the same order so
they collide.

Each proposal must end with exactly one winning transition and exactly one audit event
for it; every loser gets a domain refusal (WrongState), never a "database is locked" or
any other error; each process loses some races; the audit chain verifies afterwards.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from placet.config import load_settings
from placet.store import open_store
from tests.support.proposals import propose_folder

pytestmark = pytest.mark.usefixtures("store_backend")

N = 500
N_PG = 200
"""Proposals raced on PostgreSQL: each transition there is ~5 round trips under one
advisory lock, and 200 collisions per process prove the same as 500 at less than half
the suite's time."""
PROCS = 4
T0 = datetime(2030, 1, 1, tzinfo=UTC)
TTL = 600
BEFORE = T0 + timedelta(seconds=TTL - 1)  # accept/discard are valid at this time
AFTER = T0 + timedelta(seconds=TTL + 1)  # expire is valid at this time


def _env(home: str) -> dict[str, str]:
    """The settings' environment: the home, and the backend `store_backend` chose (the
    workers inherit `PGPASSWORD`)."""
    db = os.environ.get("PLACET_DB")
    return {"PLACET_HOME": home, **({"PLACET_DB": db} if db else {})}


def _worker(home: str, who: int, barrier: object, out: str) -> None:
    from placet.errors import WrongState

    store = open_store(load_settings(_env(home)))
    ids = [p.id for p in store.list(["pending"], limit=N + 1)]
    rng = random.Random(who)
    wins: list[tuple[int, str]] = []
    lost = 0
    errors: list[str] = []
    barrier.wait(timeout=60)  # type: ignore[attr-defined]
    for pid in ids:
        action = rng.choice(["accept", "discard", "expire"])
        try:
            if action == "accept":
                store.accept(pid, now=BEFORE)
            elif action == "discard":
                store.discard(pid, now=BEFORE, reason=f"worker {who}")
            else:
                store.expire(pid, now=AFTER)
            wins.append((pid, action))
        except WrongState:
            lost += 1
        except Exception as e:  # anything else is a failure of the test
            errors.append(f"{type(e).__name__}: {e}")
    store.close()
    Path(out).write_text(json.dumps({"wins": wins, "lost": lost, "errors": errors}))


@pytest.mark.timeout(90)
def test_four_processes_race_on_the_same_500_proposals(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text("pending_per_session = 1000\n")
    settings = load_settings(_env(str(home)))
    assert (settings.database is not None) == ("PLACET_DB" in os.environ)
    n = N if settings.database is None else N_PG
    with open_store(settings) as store:
        for i in range(n):
            propose_folder(
                store, f"d{i}", parent="race", reason="race", run_id="racer", ttl=TTL, now=T0
            )

    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCS)
    outs = [tmp_path / f"out{w}.json" for w in range(PROCS)]
    procs = [
        ctx.Process(target=_worker, args=(str(home), w, barrier, str(outs[w])))
        for w in range(PROCS)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=80)
        assert p.exitcode == 0, f"worker exited with {p.exitcode}"
    results = [json.loads(o.read_text()) for o in outs]

    assert [r["errors"] for r in results] == [[]] * PROCS  # no locked/other error escaped
    # The processes really raced: all but at most one lost races (tried a transition
    # another process had made first). SQLite's lock is not fair and a loaded box may run
    # one process ahead of the rest, so which one wins, and how often, is not asserted.
    losers = [r["lost"] > 0 for r in results]
    assert sum(losers) >= PROCS - 1, [r["lost"] for r in results]
    winners: dict[int, list[str]] = {}
    for r in results:
        for pid, action in r["wins"]:
            winners.setdefault(pid, []).append(action)
    assert len(winners) == n and all(len(a) == 1 for a in winners.values())

    final = {"accept": "approved", "discard": "discarded", "expire": "expired"}
    with open_store(settings) as store:
        proposals = {p.id: p for p in store.list(limit=N + 1)}
        events = store.audit_events()
        per_pid = Counter(e.proposal_id for e in events)
        assert set(per_pid.values()) == {2}  # creation + the one winning transition
        transitions = {e.proposal_id: e for e in events if e.from_status is not None}
        for pid, (action,) in winners.items():
            assert proposals[pid].status == final[action]
            assert (transitions[pid].from_status, transitions[pid].to_status) == (
                "pending",
                final[action],
            )
        verification = store.verify_audit()
        assert verification.ok and verification.count == 2 * n, verification.message
    # Each worker's share of wins, and of each action, is visible in a failure message.
    assert sum(len(r["wins"]) for r in results) + sum(r["lost"] for r in results) == PROCS * n
