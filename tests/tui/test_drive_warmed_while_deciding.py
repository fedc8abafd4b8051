"""The review UI starts the drive's rclone rcd while the owner decides (as the accept's
checks start) and runs the accepted sync on that drive; a confirmation cancelled, or
left open when the app ends, leaves no rcd running and nothing approved.

Everything is real: a sync planned and proposed by `placet.sync` over a real root and
the default local-folder drive, the review app driven by Pilot, `placet.executor`."""

from __future__ import annotations

import os
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from placet.config import Settings
from placet.decisions import WarmDrive
from placet.drive import RcloneDrive
from placet.executor import execute
from placet.store import ProposalRecord, Store
from placet.store.db import utcnow
from placet.tui import make_app
from placet.tui.confirm import AcceptScreen
from placet.tui.set_confirm import AcceptSetScreen
from tests.support.mcp import rclone_children
from tests.support.processes import alive
from tests.support.review import confirm_accept, quiet, settle, until
from tests.support.rig import Rig
from tests.tui.test_sync import propose, sync_settings, sync_store

__all__ = ["sync_settings", "sync_store"]  # fixtures imported for this module


def _sync(settings: Settings, store: Store, tmp_path: Path) -> ProposalRecord:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.txt").write_bytes(b"alpha\n")
    settings.default_drive_dir.mkdir(parents=True, mode=0o700)
    return propose(settings, store, root, decisions={})


def _warmed_rcd(app: Any) -> tuple[WarmDrive, RcloneDrive, int]:
    """The one drive warmed for the confirmation on screen, and its rcd's pid."""
    [warm] = app.warming
    drive = warm.drive()
    assert isinstance(drive, RcloneDrive)
    pid = drive.rcd_pid
    assert pid is not None and alive(pid)
    return warm, drive, pid


@pytest.mark.asyncio
@pytest.mark.timeout(120)
@pytest.mark.parametrize("ending", ["cancel", "exit"])
async def test_a_confirmation_cancelled_or_left_open_at_exit_leaves_no_rcd(
    sync_settings: Settings, sync_store: Store, tmp_path: Path, ending: str
) -> None:
    rec = _sync(sync_settings, sync_store, tmp_path)
    app = make_app(sync_settings, sync_store, confirm_guard_seconds=0)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await confirm_accept(pilot, rec.id, decide=False)
        assert await until(pilot, lambda: all(w.ready for w in app.warming), 60)
        _, _, pid = _warmed_rcd(app)
        if ending == "cancel":
            await pilot.press("escape")
            assert await until(pilot, lambda: not isinstance(app.screen, AcceptScreen))
            assert await until(pilot, lambda: not alive(pid), 30)
            assert app.warming == set()
    assert not alive(pid)
    assert sync_store.get(rec.id).status == "pending"


@pytest.mark.transfers
@pytest.mark.asyncio
@pytest.mark.timeout(180)
async def test_the_accepted_sync_runs_on_the_drive_warmed_for_it(
    sync_settings: Settings, sync_store: Store, tmp_path: Path
) -> None:
    rec = _sync(sync_settings, sync_store, tmp_path)
    ran_on: list[object] = []

    def executor(store: Store, settings: Settings, proposal_id: int, **kw: Any) -> ProposalRecord:
        ran_on.append(kw.get("drive"))
        return execute(store, settings, proposal_id, **kw)

    app = make_app(sync_settings, sync_store, confirm_guard_seconds=0, executor=executor)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await confirm_accept(pilot, rec.id, decide=False)
        assert await until(pilot, lambda: all(w.ready for w in app.warming), 60)
        warm, drive, pid = _warmed_rcd(app)
        await pilot.press("enter" if app.screen.typed_required else "y")
        assert await until(pilot, lambda: app.transfer is None and ran_on != [], 120)
        assert ran_on == [drive]
        assert await until(pilot, lambda: not alive(pid), 30)  # closed once the run ended
        assert warm.drive() is None and app.warming == set()
    assert sync_store.get(rec.id).status == "succeeded"
    assert (sync_settings.default_drive_dir / "a.txt").read_bytes() == b"alpha\n"


@pytest.mark.asyncio
@pytest.mark.timeout(120)
async def test_checks_failing_unexpectedly_leave_no_rcd_while_the_app_runs(rig: Rig) -> None:
    """The worker checking a marked set fails with an error placet does not expect (here
    its clock): the drive warmed for the set's confirmation is closed at once, not when
    the app ends."""
    recs = []
    for name in ("a.txt", "b.txt"):
        rig.write(name, b"bytes")
        recs.append(rig.upload(name))
    failing = threading.Event()

    def clock() -> datetime:
        if failing.is_set() and threading.current_thread() is not threading.main_thread():
            raise RuntimeError("the clock failed")
        return utcnow()

    settings = quiet(rig.settings, drive=rig.drive.spec)
    app = make_app(settings, rig.store, clock=clock, confirm_guard_seconds=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        before = set(rclone_children(os.getpid()))
        await pilot.press("space", "space")
        failing.set()
        await pilot.press("a")  # warms the drive, then the checks' worker fails
        assert await until(
            pilot,
            lambda: app.warming == set() and set(rclone_children(os.getpid())) <= before,
            30,
        )
        assert not isinstance(app.screen, AcceptSetScreen)
    assert all(rig.store.get(r.id).status == "pending" for r in recs)
