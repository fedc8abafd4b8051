"""The review UI's queue: rows, live countdown, detail, live reload, sweeping, paging."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.text import Text

from placet.config import Settings
from placet.store import LeaseHolder, Store
from placet.tui import make_app
from placet.tui.detail import DetailPane
from placet.tui.queue import PAGE, QueueTable
from tests.support import REPO
from tests.support.review import (
    Clock,
    Recorder,
    add_download,
    add_mkdir,
    add_upload,
    plain,
    quiet,
    screen_text,
    settle,
    until,
)


def cell_text(table: QueueTable, pid: int, column: str) -> str:
    value = table.get_cell(str(pid), column)
    return value.plain if isinstance(value, Text) else str(value)


def detail_text(app) -> str:
    pane = app.query_one("#queue-detail", DetailPane)
    return f"{pane.query('.detail-head').first().render()}\n{plain(pane.body)}"


@pytest.mark.asyncio
async def test_queue_rows_countdown_and_expiring_soon_mark(settings: Settings, quiet_store: Store):
    clock = Clock()
    up = add_upload(quiet_store, reason="publish the weekly report")
    short = add_mkdir(quiet_store, ttl=300)
    app = make_app(quiet(settings), quiet_store, clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.queue_table
        assert table.order == [up.id, short.id]
        assert [cell_text(table, up.id, c) for c in ("id", "kind", "target", "size", "agent")] == [
            str(up.id),
            "upload",
            "docs/report.md",
            "12.1 KiB",
            "claude-code",
        ]
        assert cell_text(table, up.id, "reason") == "publish the weekly report"
        assert cell_text(table, up.id, "expires") == "30m00s"
        assert cell_text(table, short.id, "expires") == "5m00s"

        clock.advance(181)  # the mkdir now has 1:59 left: marked as about to expire
        table.tick()
        await pilot.pause()
        assert cell_text(table, up.id, "expires") == "26m59s"
        assert cell_text(table, short.id, "expires") == "! 1m59s"

        clock.advance(120)  # past its expiry, before any sweep: shown as expired
        table.tick()
        assert cell_text(table, short.id, "expires") == "expired"


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_queue_reason_takes_the_free_width_and_expiry_comes_first(
    settings: Settings, quiet_store: Store, size: tuple[int, int]
):
    reason = "publish the weekly report for the whole team, with the appendix and figures"
    up = add_upload(quiet_store, reason=reason, name="r\u00e9sum\u00e9.md")
    app = make_app(quiet(settings), quiet_store, clock=Clock())
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        table = app.queue_table
        keys = [str(c.key.value) for c in table.ordered_columns]
        assert keys.index("expires") < keys.index("reason") == len(keys) - 1
        # the target keeps its inert form only; the ASCII form is for the detail pane
        assert cell_text(table, up.id, "target") == "docs/r\u00e9sum\u00e9.md"
        widths = sum(c.get_render_width(table) for c in table.ordered_columns)
        room = table.scrollable_content_region.width
        assert widths == room  # the reason column fills the rest, no more
        assert table.max_scroll_x == 0  # expires-in is on screen at this width
        reason_width = table.columns[table.ordered_columns[-1].key].width
        if size[0] >= 160:
            assert reason_width >= 60  # was a fixed 32 however wide the screen


@pytest.mark.asyncio
async def test_detail_shows_effect_flags_above_the_boxed_reason(
    settings: Settings, quiet_store: Store
):
    rec = add_download(quiet_store, reason="trust me, this is harmless")
    app = make_app(quiet(settings), quiet_store, clock=Clock())
    async with app.run_test(size=(160, 60)) as pilot:
        await settle(pilot)
        shown = detail_text(app)
        assert f"#{rec.id} download pending" in shown
        for fact in (
            "shared/conftest.py",  # remote source
            "/home/owner/proj/conftest.py",  # local target
            "2048 bytes",
            "cd" * 20,  # remote digest seen at proposal time
            rec.request_hash,
            "codex",
        ):
            assert fact in shown, fact
        flags_at = shown.index("placet risk flags")
        assert flags_at < shown.index("the agent's claim") < shown.index("trust me")
        assert "!" in cell_text(app.queue_table, rec.id, "kind")  # flagged row marked


@pytest.mark.asyncio
async def test_proposal_from_another_process_appears_and_selection_follows_id(
    settings: Settings, quiet_store: Store, placet_home: Path
):
    # Real clock throughout: the other process uses it too, so the proposals are made now.
    now = datetime.now(UTC)
    first = add_upload(quiet_store, local_path="a.txt", now=now)
    second = add_upload(quiet_store, local_path="b.txt", now=now)
    third = add_upload(quiet_store, local_path="c.txt", now=now)
    rec = Recorder()
    app = make_app(quiet(settings), quiet_store)
    async with app.run_test(size=(160, 48), message_hook=rec) as pilot:
        await settle(pilot)
        table = app.queue_table
        await pilot.press("down")  # select the second proposal
        await pilot.pause()
        assert table.selected_id() == second.id

        script = (
            "import sys; sys.path.insert(0, sys.argv[1])\n"
            "from datetime import UTC, datetime\n"
            "from placet.config import load_settings\n"
            "from placet.store import open_store\n"
            "from tests.support.review import add_upload\n"
            "s = open_store(load_settings())\n"
            "r = add_upload(s, local_path='from-elsewhere.txt', now=datetime.now(UTC))\n"
            f"s.discard({first.id}, actor='owner', reason='not needed')\n"
            "print(r.id)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", script, str(REPO)],
            env=dict(os.environ, PLACET_HOME=str(placet_home)),
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        new_id = int(out.stdout.strip())
        # No key is pressed from here on: the poll timer must notice the change.
        assert await until(pilot, lambda: new_id in table.order and first.id not in table.order)
        assert table.order == [second.id, third.id, new_id]
        # The row above the selection left: the cursor moved up a row, onto the same id.
        assert table.selected_id() == second.id
        assert table.cursor_row == 0
        await settle(pilot)
        assert any(
            t == "New proposal" and f"#{new_id} upload docs/from-elsewhere.txt" in m
            for t, m, _ in rec.notifications
        ), rec.text()


@pytest.mark.asyncio
async def test_sweep_removes_expired_and_reports_recovered_interruption(
    settings: Settings, quiet_store: Store
):
    clock = Clock()
    keep = add_upload(quiet_store, local_path="keep.txt")
    short = add_mkdir(quiet_store, ttl=300)
    running = add_upload(quiet_store, local_path="running.txt")
    quiet_store.accept(running.id, actor="owner", now=clock())
    # An executor that died: a real process that has exited, on this host.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    holder = LeaseHolder(socket.gethostname(), dead.pid, 1)
    quiet_store.claim(running.id, holder=holder, now=clock())
    rec = Recorder()
    app = make_app(quiet(settings), quiet_store, clock=clock)
    async with app.run_test(size=(160, 48), message_hook=rec) as pilot:
        await settle(pilot)
        assert "Interrupted execution found" in rec.titles()
        assert quiet_store.get(running.id).status == "interrupted"
        table = app.queue_table
        assert table.order == [keep.id, short.id]

        clock.advance(301)
        app.run_sweep()
        await settle(pilot)
        assert table.order == [keep.id]
        assert quiet_store.get(short.id).status == "expired"
        assert any(t == "Expired" and f"#{short.id}" in m for t, m, _ in rec.notifications)

        await pilot.press("2")  # history shows the interrupted execution as such
        await settle(pilot)
        history = app.history_pane
        statuses = {r.id: r.status for r in history.records}
        assert statuses[running.id] == "interrupted"
        assert statuses[short.id] == "expired"


@pytest.mark.asyncio
@pytest.mark.timeout(300)
async def test_large_queue_loads_in_pages(settings: Settings, quiet_store: Store):
    n = PAGE * 2 + 37
    ids = [add_upload(quiet_store, local_path=f"f{i:05d}.txt").id for i in range(n)]
    app = make_app(quiet(settings), quiet_store, clock=Clock())
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.queue_table
        assert table.order == ids[:PAGE]
        assert not table.exhausted
        assert f"{n} pending" in screen_text(app)
        for _ in range(3):
            await pilot.press("end")  # the cursor nears the end: the next page loads
            await settle(pilot)
        assert table.order == ids
        assert table.exhausted
        assert table.selected_id() == ids[PAGE * 2 - 1] or table.selected_id() == ids[-1]
