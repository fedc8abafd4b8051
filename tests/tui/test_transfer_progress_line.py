"""The review UI's transfer panel shows the progress line `placet accept` draws (ops
ended, bytes, rate, time left, the op running) from the executor's figures, the running
op's name inert (markup in it shows as typed), and ends with the summary's figures.

A real sync of 41 files (one too big to batch) under names that carry Rich markup,
accepted in the review app (Pilot) and run by the real executor, held mid-run at its
first event naming an op in flight (`tests.support.held_run`) while the title is read.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from textual.widgets import Static

from placet.config import Settings
from placet.executor.progress import Figures
from placet.store import Store
from placet.tui import make_app
from placet.tui.transfer import TransferPanel
from tests.support.held_run import HeldRun
from tests.support.review import confirm_accept, plain, settle, until
from tests.tui.test_sync import propose, sync_settings, sync_store

__all__ = ["sync_settings", "sync_store"]  # fixtures imported for this module

MARKUP = "[reverse]x[bold red]"  # markup, were it read as markup (no slash: a name)


@pytest.mark.transfers
@pytest.mark.asyncio
@pytest.mark.timeout(180)
async def test_the_panel_shows_the_cli_progress_line_with_the_running_name_inert(
    sync_settings: Settings, sync_store: Store, tmp_path: Path
) -> None:
    root = tmp_path / "proj"
    for d in range(4):
        folder = root / f"{MARKUP}d{d}"
        folder.mkdir(parents=True)
        for f in range(10):
            (folder / f"{MARKUP}f{f}.bin").write_bytes(os.urandom(1000 + f))
    # the small files go in one batch, which may start and end between two progress
    # ticks (`executor.pool.TICK`); a file too big to batch is in flight across several
    (root / f"{MARKUP}d0" / f"{MARKUP}big.bin").write_bytes(bytes(48 << 20))
    sync_settings.default_drive_dir.mkdir(parents=True, mode=0o700)
    rec = propose(sync_settings, sync_store, root, decisions={})
    n = sync_store.op_count(rec.id)
    assert n == 45  # 4 folders, 41 uploads
    held = HeldRun()
    app = make_app(sync_settings, sync_store, confirm_guard_seconds=0, executor=held)

    def title() -> str:
        panel = app.query_one(TransferPanel)
        return plain(panel.query_one("#transfer-title", Static).render(), width=300).strip()

    async with app.run_test(size=(200, 48)) as pilot:
        await settle(pilot)
        await confirm_accept(pilot, rec.id)
        try:
            assert await until(pilot, held.held.is_set, 60)
            assert held.event is not None and held.event.current is not None
            running = held.event.current
            assert await until(pilot, lambda: f"now {running}" in title(), 30), title()
            line = title()
            assert line.startswith(f"Executing #{rec.id}: ")
            assert f"/{n} ops · " in line and "B/" in line  # ops, then bytes moved of all
            assert MARKUP in running and MARKUP in line  # shown as typed, not as markup
            figures = app.query_one(TransferPanel).tracker.figures()
            assert isinstance(figures, Figures)  # the one line every front end draws:
            ops_bytes = " · ".join(figures.line().split(" · ")[:2])  # (the rate moves on)
            assert line.startswith(f"Executing #{rec.id}: {ops_bytes} · ")
        finally:
            held.release()
        assert await until(pilot, lambda: app.transfer is None, 120)
        await until(pilot, lambda: app._data_version == sync_store.data_version(), 10)
        await settle(pilot)
        assert sync_store.get(rec.id).status == "succeeded"
        end = title()
        assert end.startswith(f"#{rec.id} succeeded: {n}/{n} ops ended (")
        assert " in " in end and end.endswith(")")
