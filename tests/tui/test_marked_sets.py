"""Several proposals at once in the review UI: space marks, one confirmation lists each id
with its request hash, and the set is accepted exactly as shown or not at all (then
shown again); a sync's picker keeps a folder that ticked ops go into; at 80x24 two
uploads into one folder are told apart by their ends."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import SelectionList

from placet.config import Settings
from placet.store import Store
from placet.tui import make_app
from placet.tui.confirm import AcceptScreen
from placet.tui.set_confirm import AcceptSetScreen
from tests.support.review import Clock, Recorder, add_upload, plain, quiet, settle, until
from tests.support.rig import Rig, mkdir_ops


def _approvals(store: Store, pid: int) -> list[dict[str, Any]]:
    return [e.detail for e in store.audit_events(proposal_id=pid) if e.to_status == "approved"]


def _cell(app: Any, pid: int, column: str) -> str:
    return str(app.queue_table.get_cell(str(pid), column).plain)


@pytest.mark.asyncio
@pytest.mark.timeout(180)
async def test_three_marked_are_accepted_with_one_confirmation_and_run(rig: Rig) -> None:
    assert rig.remote_dir is not None
    recs = []
    for name in ("a.txt", "b.txt", "c.txt"):
        rig.write(name, f"{name} bytes".encode())
        recs.append(rig.upload(name, "team"))
    settings = quiet(rig.settings, drive=rig.drive.spec)
    app = make_app(settings, rig.store, confirm_guard_seconds=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("space", "space", "space")  # each marks and moves down
        assert app.queue_table.marked == {r.id for r in recs}
        assert _cell(app, recs[0].id, "id").startswith("+")
        await pilot.press("a")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, AcceptSetScreen)
        listed = plain(screen.body)
        for r in recs:
            assert f"#{r.id}" in listed and r.request_hash[:12] in listed
        await pilot.press("y")
        assert await until(
            pilot, lambda: all(rig.store.get(r.id).status == "succeeded" for r in recs), 90
        )
        await settle(pilot)
        assert app.queue_table.marked == set()
    assert sorted(p.name for p in (rig.remote_dir / "team").iterdir()) == [
        "a.txt",
        "b.txt",
        "c.txt",
    ]
    for r in recs:
        [detail] = _approvals(rig.store, r.id)
        assert detail["via"] == "tui" and detail["request_hash"] == r.request_hash
        assert [e["proposal_id"] for e in detail["set"]] == [x.id for x in recs]


@pytest.mark.asyncio
async def test_a_set_decided_in_part_since_shown_is_refused_and_shown_again(
    settings: Settings, quiet_store: Store
) -> None:
    a, b, c = (add_upload(quiet_store, local_path=f"notes/{n}.md") for n in "abc")
    events = Recorder()
    app = make_app(quiet(settings), quiet_store, clock=Clock(), confirm_guard_seconds=0)
    async with app.run_test(size=(120, 40), message_hook=events) as pilot:
        await settle(pilot)
        await pilot.press("space", "space", "space", "a")
        await settle(pilot)
        assert isinstance(app.screen, AcceptSetScreen)
        quiet_store.discard(b.id, reason="by another owner's hand")  # while it is open
        await pilot.press("y")
        assert await until(pilot, lambda: "set_refused" in events.titles()), events.text()
        await settle(pilot)
        assert f"#{b.id}" in events.text()
        again = app.screen
        assert isinstance(again, AcceptSetScreen)  # the set is shown again
        assert [r.id for r in again.records] == [a.id, c.id]
        assert again.note is not None and "discarded" in again.note
        assert app.queue_table.marked == {a.id, c.id}
    for r in (a, c):
        assert quiet_store.get(r.id).status == "pending" and _approvals(quiet_store, r.id) == []


@pytest.mark.asyncio
async def test_two_uploads_into_one_folder_differ_by_their_ends_at_80x24(
    settings: Settings, quiet_store: Store
) -> None:
    folder = "team/reports/quarterly/backup"
    one = add_upload(quiet_store, local_path=f"{folder}/todo.txt", remote_parent=folder)
    two = add_upload(quiet_store, local_path=f"{folder}/notes.txt", remote_parent=folder)
    app = make_app(quiet(settings), quiet_store, clock=Clock())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert _cell(app, one.id, "target").endswith("/backup/todo.txt")
        assert _cell(app, two.id, "target").endswith("/backup/notes.txt")
        assert _cell(app, one.id, "target").startswith("\u2026")
        assert app.queue_table.max_scroll_x == 0  # every column on screen


@pytest.mark.asyncio
async def test_unticking_a_folder_unticks_what_goes_into_it_and_says_so(rig: Rig) -> None:
    ops = [*mkdir_ops(["s", "s/sub"]), rig.upload_op(2, "s/sub/a.txt", b"inside")]
    rig.propose_ops(ops)
    events = Recorder()
    app = make_app(quiet(rig.settings, drive=rig.drive.spec), rig.store, confirm_guard_seconds=0)
    async with app.run_test(size=(120, 40), message_hook=events) as pilot:
        await settle(pilot)
        await pilot.press("a")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, AcceptScreen) and screen.picker is not None
        lists = {
            sl.get_option_at_index(i).value: sl
            for sl in screen.query(SelectionList)
            for i in range(sl.option_count)
        }
        lists[1].deselect(1)  # untick `create folder s/sub`
        await settle(pilot)
        assert screen.skip_ops == [1, 2]
        assert "unticked #2 too" in events.text()
        lists[2].select(2)  # tick the upload into it again
        await settle(pilot)
        assert screen.skip_ops == []
        assert "ticked #1 again" in events.text()
