"""One PostgreSQL database, two hosts on one machine (two data
directories, so two host ids). Host A's agent proposes (the proposing core the MCP tools
use); the owner accepts from host B's review UI (Textual Pilot); host A's executor runs it
and host B's executor never touches it. Then host A's executor (`placet executor`) is
killed with -9 mid-transfer: it recovers as the SQLite crash suite does (tests/executor/
test_crash.py: the holder is dead, the proposal interrupted at once, accepted again,
finished under a new lease) and host B never claims it.

Host B's executor is `run_host_executor` in this process; host A's runs in its own
processes, so every claim's holder pid says which host ran it."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from placet.config import Settings, load_settings
from placet.executor.service import run_host_executor
from placet.store import Store, open_store
from placet.store.host import host_label
from placet.tui import make_app
from tests.support.review import Recorder, settle, until
from tests.support.rig import Rig, placet_cli, sha256, start_executor, temp_files

pytestmark = pytest.mark.usefixtures("store_backend")
postgresql_only = pytest.mark.parametrize("store_backend", ["postgresql"], indirect=True)

SIZE = 200 * 1024 * 1024


def _host_b(rig: Rig, tmp_path: Path) -> tuple[Settings, dict[str, str]]:
    """Host B: its own data directory (its own host id) on host A's database, a drive of
    its own, `--yes` allowed. Returns its settings and the environment of its CLI."""
    home_b = tmp_path / "host-b"
    home_b.mkdir(mode=0o700)
    (home_b / "config.toml").write_text("allow_yes = true\n")
    db = rig.settings.database or str(rig.settings.db_path)
    env = {**os.environ, "PLACET_HOME": str(home_b), "PLACET_DB": db}
    settings = load_settings({"PLACET_HOME": str(home_b), "PLACET_DB": db})
    own_drive = tmp_path / "host-b-drive"
    own_drive.mkdir()
    return settings.model_copy(update={"drive": str(own_drive), "sweep_seconds": 3600.0}), env


def _claim_pids(store: Store, pid: int) -> list[int]:
    """The holder pid of each claim (approved -> executing) of proposal `pid`."""
    events = store.audit_events(proposal_id=pid)
    return [int(e.detail["holder"]["pid"]) for e in events if e.to_status == "executing"]


@postgresql_only
@pytest.mark.asyncio
@pytest.mark.timeout(120)
async def test_accepted_in_host_bs_review_ui_runs_on_host_a_only(
    store_backend: str, rig: Rig, tmp_path: Path
) -> None:
    rig.write("report.txt", b"made on host A\n")
    rec = rig.upload("report.txt")
    settings_b, _ = _host_b(rig, tmp_path)
    with open_store(settings_b) as store_b:
        assert store_b.host_id != rig.store.host_id == rec.host_id
        events = Recorder()
        app = make_app(settings_b, store_b, confirm_guard_seconds=0)
        async with app.run_test(size=(160, 48), message_hook=events) as pilot:
            await settle(pilot)
            assert app.queue_table.order[0] == rec.id  # host A's proposal in B's queue
            await pilot.press("a")
            await pilot.pause()
            await pilot.press("y")
            assert await until(pilot, lambda: "Approved" in events.titles(), 30), events.text()
            await settle(pilot)
        note = f"waiting for host {host_label(rec.host, rec.host_id)}"
        assert any(note in message for _, message, _ in events.notifications), events.text()
        assert rig.store.get(rec.id).status == "approved"

        ran_b = run_host_executor(store_b, settings_b, stop=threading.Event(), once=True)
        assert ran_b == [] and store_b.approved_here() == []
        assert rig.store.get(rec.id).status == "approved"

        ran_a = run_host_executor(rig.store, rig.settings, stop=threading.Event(), once=True)
        assert [(r.proposal_id, r.final.status if r.final else r.error) for r in ran_a] == [
            (rec.id, "succeeded")
        ]
    assert (rig.remote_dir or Path()).joinpath("report.txt").read_bytes() == b"made on host A\n"
    approved = [e for e in rig.store.audit_events(proposal_id=rec.id) if e.to_status == "approved"]
    assert [e.detail["via"] for e in approved] == ["tui"]
    assert [e.to_status for e in rig.store.audit_events(proposal_id=rec.id)] == [
        "pending",
        "approved",
        "executing",
        "succeeded",
    ]
    assert rig.store.verify_audit().ok


def _kill_when_a_temp_holds(proc: subprocess.Popen[str], folder: Path, size: int) -> Path:
    """kill -9 `proc` once a temporary name in `folder` holds `size` bytes; that temp."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        for t in temp_files(folder):
            try:
                if t.stat().st_size >= size:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()
                    return t
            except FileNotFoundError:
                continue
        assert proc.poll() is None, "host A's executor ended before the kill"
        time.sleep(0.002)
    pytest.fail("no temporary name appeared")


@postgresql_only
@pytest.mark.timeout(300)
def test_host_a_killed_mid_transfer_recovers_and_host_b_never_claims(
    store_backend: str, configured_rig: Rig, tmp_path: Path
) -> None:
    rig = configured_rig
    assert rig.remote_dir is not None
    block = os.urandom(1024 * 1024)
    data = b"".join(block[i:] + block[:i] for i in range(SIZE // len(block)))
    rig.write("big.bin", data)
    rec = rig.upload("big.bin")
    settings_b, env_b = _host_b(rig, tmp_path)
    with open_store(settings_b) as store_b:
        # host A's executor, asleep until the owner decides
        proc = start_executor(stderr=subprocess.DEVNULL)
        try:
            # Watched from before the approval: host A may finish the upload before the
            # accepting process has even exited (seen under load).
            with ThreadPoolExecutor(1) as pool:
                accepting = pool.submit(placet_cli, "accept", str(rec.id), "--yes", env=env_b)
                temp = _kill_when_a_temp_holds(proc, rig.remote_dir, 4 * 1024 * 1024)
                accepted = accepting.result()
            assert accepted.returncode == 0, accepted.stderr
            assert "that host runs it" in accepted.stdout
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        killed = proc.pid
        assert not (rig.remote_dir / "big.bin").exists()
        # Killed before the move. Under load the stream may have written every byte to
        # the temporary name before the kill landed (seen in CI); the recovery is the same.
        assert temp.exists() and temp.stat().st_size <= SIZE
        held = rig.store.get(rec.id)
        assert held.status == "executing" and _claim_pids(rig.store, rec.id) == [killed]
        assert store_b.approved_here() == []

        # Host A's executor starts again: its sweep finds the holder dead on this host
        # and marks the proposal interrupted at once (the lease need not lapse); nothing
        # is approved, so it runs nothing.
        again = placet_cli("executor", "--once", env=dict(os.environ))
        assert again.returncode == 0, again.stderr
        rec_now = rig.store.get(rec.id)
        assert rec_now.status == "interrupted" and rec_now.lease_holder is None
        [journal] = rig.store.op_results(rec.id)
        assert journal.outcome == "failed" and journal.detail["code"] == "in_progress"
        assert journal.detail["temps"]
        assert run_host_executor(store_b, settings_b, stop=threading.Event(), once=True) == []

        # The owner accepts again on host B; B's executor still runs nothing, A's does.
        accepted = placet_cli("accept", str(rec.id), "--yes", env=env_b)
        assert accepted.returncode == 0, accepted.stderr
        assert run_host_executor(store_b, settings_b, stop=threading.Event(), once=True) == []
        assert rig.store.get(rec.id).status == "approved"
        finished = placet_cli("executor", "--once", env=dict(os.environ))
        assert finished.returncode == 0, finished.stderr
        assert f"proposal {rec.id} succeeded" in finished.stdout, finished.stdout

    final = rig.store.get(rec.id)
    assert final.status == "succeeded" and final.attempt == 2
    assert final.summary is not None and final.summary["temps_removed"]
    assert sha256((rig.remote_dir / "big.bin").read_bytes()) == sha256(data)
    assert temp_files(rig.remote_dir) == []
    claims = _claim_pids(rig.store, rec.id)
    assert len(claims) == 2 and claims[0] == killed and os.getpid() not in claims
    statuses = [e.to_status for e in rig.store.audit_events(proposal_id=rec.id)]
    assert statuses == [
        "pending",
        "approved",
        "executing",
        "interrupted",
        "approved",
        "executing",
        "succeeded",
    ]
    assert rig.store.verify_audit().ok
