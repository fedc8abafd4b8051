"""Screenshots of the review UI at a fixed size, clock and data (pytest-textual-snapshot).

Sync tests: `snap_compare` runs the app's own event loop. The data is fixed (ids, times,
request hashes, the host name) so the screens are the same on every machine. Refresh
after an intended change with `pytest tests/tui/test_snapshots.py --snapshot-update`
and look at the new SVGs before committing them.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from textual.widgets import Input

from placet.config import Settings
from placet.store import Store, open_store
from placet.tui import make_app
from tests.support.review import Clock, add_download, add_mkdir, add_upload, quiet, settle

SIZE = (130, 44)


@pytest.fixture
def snapshot_store(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.setattr(socket, "gethostname", lambda: "workstation")
    s = open_store(quiet(settings))
    add_upload(s, reason="publish the weekly report")
    add_mkdir(s, ttl=100)  # about to expire at the fixed clock
    add_download(s, reason="fetch the shared test config [red]trust me[/]")
    yield s
    s.close()


def test_queue_with_detail(snap_compare: Any, settings: Settings, snapshot_store: Store) -> None:
    app = make_app(quiet(settings), snapshot_store, clock=Clock())

    async def select_flagged(pilot: Any) -> None:
        await settle(pilot)
        await pilot.press("down", "down")
        await settle(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=select_flagged)


def test_accept_confirmation_with_typed_id(
    snap_compare: Any, settings: Settings, snapshot_store: Store
) -> None:
    app = make_app(quiet(settings), snapshot_store, clock=Clock(), confirm_guard_seconds=0)

    async def open_confirmation(pilot: Any) -> None:
        await settle(pilot)
        await pilot.press("down", "down", "a")
        await pilot.pause()
        pilot.app.screen.query_one(Input).cursor_blink = False
        await pilot.press("3")

    assert snap_compare(app, terminal_size=SIZE, run_before=open_confirmation)


def test_history(snap_compare: Any, settings: Settings, snapshot_store: Store) -> None:
    clock = Clock()
    snapshot_store.discard(1, actor="owner", reason="not this week", now=clock())
    snapshot_store.sweep(now=clock.now.replace(hour=13))  # the other two expire
    app = make_app(quiet(settings), snapshot_store, clock=clock)

    async def open_history(pilot: Any) -> None:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=open_history)


SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40")]


@pytest.fixture
def folder_store(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """Two uploads into one deep folder (told apart only by their file names), a mkdir
    about to expire and a flagged download."""
    monkeypatch.setattr(socket, "gethostname", lambda: "workstation")
    s = open_store(quiet(settings))
    folder = "team/reports/quarterly/backup"
    for name, size in (("todo.txt", 3), ("notes.txt", 2)):
        add_upload(
            s, local_path=f"{folder}/{name}", remote_parent=folder, size=size,
            reason="share the backup files with the whole team before the meeting",
        )  # fmt: skip
    add_mkdir(s, ttl=100)
    add_download(s, reason="fetch the shared test config [red]trust me[/]")
    yield s
    s.close()


@pytest.mark.parametrize("size", SIZES)
def test_queue_tells_two_uploads_into_one_folder_apart(
    snap_compare: Any, settings: Settings, folder_store: Store, size: tuple[int, int]
) -> None:
    app = make_app(quiet(settings), folder_store, clock=Clock())

    async def loaded(pilot: Any) -> None:
        await settle(pilot)

    assert snap_compare(app, terminal_size=size, run_before=loaded)


@pytest.mark.parametrize("size", SIZES)
def test_marked_set_confirmation(
    snap_compare: Any, settings: Settings, folder_store: Store, size: tuple[int, int]
) -> None:
    app = make_app(quiet(settings), folder_store, clock=Clock(), confirm_guard_seconds=0)

    async def mark_three_and_accept(pilot: Any) -> None:
        await settle(pilot)
        await pilot.press("space", "space", "space", "a")
        await settle(pilot)

    assert snap_compare(app, terminal_size=size, run_before=mark_three_and_accept)
