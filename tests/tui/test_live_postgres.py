"""On PostgreSQL the review UI waits on `Store.change_waiter()` (LISTEN/NOTIFY) instead of
polling: a proposal made by another process on another host (its own
data directory) reaches the queue while the SQLite poll is set to an hour, so only the
NOTIFY can have brought it. PostgreSQL only; SQLite's poll: tests/tui/test_queue.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from placet.config import Settings
from placet.store import Store
from placet.tui import app as review_app
from placet.tui import make_app
from tests.support.notify import wait_until
from tests.support.review import Clock, Recorder, quiet, settle, until

pytestmark = [
    pytest.mark.usefixtures("store_backend"),
    pytest.mark.parametrize("store_backend", ["postgresql"], indirect=True),
]

_PROPOSE = textwrap.dedent(
    """
    import sys
    from placet.config import load_settings
    from placet.store import open_store
    from tests.support.proposals import propose_folder

    with open_store(load_settings()) as store:
        rec, _ = propose_folder(store, sys.argv[1], run_id="run-other-host", ttl=1800)
        print(rec.id, store.host_id)
    """
)


def _propose_elsewhere(home: Path, name: str) -> tuple[int, str]:
    """Propose `name` from a separate process on host `home`; (its id, that host's id)."""
    env = {**os.environ, "PLACET_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-c", _PROPOSE, name],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    pid, host = done.stdout.split()
    return int(pid), host


@pytest.mark.asyncio
@pytest.mark.timeout(120)
async def test_a_proposal_from_another_host_reaches_the_queue_by_notify(
    store_backend: str,
    settings: Settings,
    quiet_store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(review_app, "POLL_SECONDS", 3600.0)  # a poll would never come
    other = tmp_path / "other-host"
    other.mkdir(mode=0o700)
    events = Recorder()
    app = make_app(quiet(settings), quiet_store, clock=Clock())
    async with app.run_test(size=(160, 48), message_hook=events) as pilot:
        await settle(pilot)
        assert app.queue_table.order == []
        # The worker is listening once its waiter's connection ran LISTEN: a change
        # committed before that would be missed, so wait for the session to show.
        assert await until(pilot, lambda: _listening(quiet_store) >= 1, 30)
        pid, host = _propose_elsewhere(other, "from-host-b")
        committed = time.monotonic()  # the other process has committed and ended
        assert host != quiet_store.host_id
        assert await until(pilot, lambda: pid in app.queue_table.order, 30)
        print(f"in the queue {time.monotonic() - committed:.3f} s after the other process ended")
        assert await until(pilot, lambda: "New proposal" in " ".join(events.titles()), 10)

        # A decision made through another connection (the owner on the CLI) leaves the queue.
        quiet_store.discard(pid, reason="decided elsewhere")
        assert await until(pilot, lambda: pid not in app.queue_table.order, 30)
    # The waiter's connection closed with the app (the server ends its session a moment later).
    assert wait_until(lambda: _listening(quiet_store) == 0, 30)


def _listening(store: Store) -> int:
    """Sessions of this database that ran LISTEN (waiting in the change waiter)."""
    from sqlalchemy import text

    with store.engine.connect() as conn:
        n = conn.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND query ILIKE 'LISTEN %'"
            )
        ).scalar_one()
    return int(n)
