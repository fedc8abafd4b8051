"""The executor across a PostgreSQL restart (placet.store.reconnect): `placet executor`
keeps running, says what it does on stderr, and runs what is approved afterwards; an
approval whose NOTIFY reached no listener (made while the executor's LISTEN session was
gone) runs once it reconnected, found by its rescan, never by the idle wake-up; and no
transaction stays open across a transfer, which the server's
idle_in_transaction_session_timeout would otherwise end mid-run."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from placet.config import Settings
from placet.drive import RcloneDrive
from placet.executor import execute
from placet.executor.service import Ran, run_host_executor
from placet.store import open_store
from placet.store.reconnect import Backoff
from tests.support.db import sql
from tests.support.postgres import PgServer, listening, restart_pg_server, terminate_listeners
from tests.support.rig import Rig, host_b_settings, make_rig, sha256, start_executor

pytestmark = pytest.mark.usefixtures("store_backend")
postgresql_only = pytest.mark.parametrize("store_backend", ["postgresql"], indirect=True)


def _until(what: str, done: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.05)


def _claims(rig: Rig, pid: int) -> list[int]:
    """The holder pid of each claim of proposal `pid`."""
    events = rig.store.audit_events(proposal_id=pid)
    return [int(e.detail["holder"]["pid"]) for e in events if e.to_status == "executing"]


@postgresql_only
@pytest.mark.timeout(120)
def test_placet_executor_reconnects_after_a_restart_and_runs_what_is_approved_then(
    store_backend: str, configured_rig: Rig, pg_server: PgServer, tmp_path: Path
) -> None:
    """Approved from another host (an approval made on this host by a live process is
    left to that process to run: placet.executor.service)."""
    rig = configured_rig
    url = rig.settings.database
    assert url is not None
    rig.write("after.txt", b"approved after the restart\n")
    proc = start_executor()
    try:
        _until("the executor listens", lambda: len(listening(pg_server, url)) == 1)
        restart_pg_server(pg_server)
        rec = rig.upload("after.txt")
        with open_store(host_b_settings(rig.settings, tmp_path)) as store_b:
            store_b.accept(rec.id, detail={"request_hash": rec.request_hash, "via": "test"})
        _until(
            "the proposal ran",
            lambda: proc.poll() is not None or rig.store.get(rec.id).status == "succeeded",
        )
        assert proc.poll() is None, f"placet executor ended: {proc.communicate()}"
        assert _claims(rig, rec.id) == [proc.pid]
        _until("the executor listens again", lambda: len(listening(pg_server, url)) == 1)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"proposal {rec.id} succeeded" in out
    assert "Traceback" not in err, err
    lines = err.splitlines()
    lost = [n for n, line in enumerate(lines) if line.startswith("database connection lost: ")]
    back = [n for n, line in enumerate(lines) if line == "reconnected; rescanning"]
    assert lost and back and lost[0] < back[0], err
    assert "; reconnecting in " in lines[lost[0]], err
    assert (rig.remote_dir or Path()).joinpath("after.txt").read_bytes() == (
        b"approved after the restart\n"
    )
    assert rig.store.verify_audit().ok


@postgresql_only
@pytest.mark.timeout(120)
def test_an_approval_that_woke_no_listener_runs_after_the_reconnect(
    store_backend: str, rig: Rig, pg_server: PgServer
) -> None:
    """The executor's LISTEN session is ended (the server stays up) and the proposal is
    approved at once, while the executor waits out its backoff: its NOTIFY reaches no
    listener of this executor, whose idle wake-up is an hour away. Only the rescan
    after the reconnect can find it."""
    url = rig.settings.database
    assert url is not None
    rec = rig.mkdir("", "made-after-the-loss")
    said: list[str] = []
    ran: list[Ran] = []
    failed: list[BaseException] = []
    stop = threading.Event()

    def loop() -> None:
        try:
            ran.extend(
                run_host_executor(
                    rig.store,
                    rig.settings,
                    stop=stop,
                    idle_seconds=3600,
                    say=said.append,
                    backoff=Backoff(1.0, 1.0, rand=lambda: 1.0),
                )
            )
        except BaseException as e:
            failed.append(e)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        _until("the executor listens", lambda: len(listening(pg_server, url)) == 1)
        [gone] = terminate_listeners(pg_server, url)
        rig.accept(rec)
        _until(
            "the proposal ran",
            lambda: bool(failed) or rig.store.get(rec.id).status == "succeeded",
            seconds=20,
        )
        assert not failed, failed
        _until("the executor listens again", lambda: len(listening(pg_server, url)) == 1)
        assert listening(pg_server, url) != [gone]
    finally:
        stop.set()
        thread.join(30)
    assert not failed, failed
    assert [(r.proposal_id, r.final and r.final.status) for r in ran] == [(rec.id, "succeeded")]
    assert len(said) == 2, said
    assert said[0].startswith("database connection lost: "), said
    assert said[0].endswith("; reconnecting in 1.0s"), said
    assert said[1] == "reconnected; rescanning"
    assert (rig.remote_dir or Path()).joinpath("made-after-the-loss").is_dir()


@postgresql_only
@pytest.mark.timeout(120)
def test_no_transaction_stays_open_across_a_transfer(
    store_backend: str,
    settings: Settings,
    tmp_path: Path,
    make_drive: Callable[..., RcloneDrive],
) -> None:
    """The server ends any session idle in a transaction for 1 s (shown first on a
    transaction left open); an upload that takes ~3 s (rclone's --bwlimit), its lease
    renewed every 0.3 s, still succeeds: the claim, the lease, the journal and the
    finish are each a transaction of their own, none held while bytes move."""
    url = settings.database
    assert url is not None
    database = url.rsplit("/", 1)[1]
    sql(settings, f"ALTER DATABASE \"{database}\" SET idle_in_transaction_session_timeout = '1s'")
    remote = tmp_path / "drive"
    remote.mkdir()
    slow = make_drive(str(remote), flags=("--bwlimit", "1M"))
    rig = make_rig(settings.model_copy(update={"heartbeat_seconds": 0.3}), slow, tmp_path, remote)

    with rig.store.engine.connect() as conn:  # the setting bites: an open transaction ends
        assert conn.execute(text("SHOW idle_in_transaction_session_timeout")).scalar() == "1s"
        conn.execute(text("SELECT 1"))
        time.sleep(1.5)
        with pytest.raises(DBAPIError, match="idle-in-transaction timeout"):
            conn.execute(text("SELECT 1"))
            conn.commit()

    data = os.urandom(3 * 1024 * 1024)
    rig.write("slow.bin", data)
    rec = rig.upload("slow.bin")
    rig.accept(rec)
    started = time.monotonic()
    final = execute(rig.store, rig.settings, rec.id, drive=slow)
    took = time.monotonic() - started
    assert final.status == "succeeded", final.summary
    assert took > 1.5, f"the transfer took {took:.1f} s: too fast to show anything"
    assert sha256((remote / "slow.bin").read_bytes()) == sha256(data)
    renewals = rig.store.audit_events(proposal_id=rec.id)
    assert [e.to_status for e in renewals] == ["pending", "approved", "executing", "succeeded"]
    assert rig.store.verify_audit().ok
