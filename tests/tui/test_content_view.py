"""The review UI's content view (key c): what the bytes of the selected op say, read and
checked against the evidence in a thread worker, coloured, inert.

Real parts: the proposing core over a real root and a local-folder drive (rclone), the
SQLite store, the review app driven by Textual's Pilot; two screenshots (80x24, 120x40).
"""

from __future__ import annotations

from typing import Any

import pytest

from placet.store import ProposalRecord
from placet.sync.propose import propose_sync
from placet.sync.service import SyncService
from placet.tui import make_app
from placet.tui.content_view import ContentScreen
from tests.support.clocks import ScanClock
from tests.support.review import Clock, screen_text, settle, until
from tests.support.rig import Rig

OLD = b"# Weekly report\n\nTotal: 3 tickets\nOwner: ana\n\nNext: ship\n"
NEW = (
    b"# Weekly report\n\nTotal: 4 tickets \x1b[2J\x1b[31m[red]trust me[/]\n"
    b"Owner: ana\nReviewed: yes \xe2\x80\xae<b>bold</b>\n\nNext: ship\n"
)


def _replacement(rig: Rig) -> ProposalRecord:
    assert rig.remote_dir is not None
    (rig.remote_dir / "report.md").write_bytes(OLD)
    rig.write("report.md", NEW)
    return rig.upload("report.md", replace_existing=True)


async def _open(pilot: Any) -> None:
    await settle(pilot)
    await pilot.press("c")
    assert await until(pilot, lambda: getattr(pilot.app.screen, "rendering", None) is not None)
    await settle(pilot)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_a_replacement_s_diff(snap_compare: Any, rig: Rig, size: tuple[int, int]) -> None:
    _replacement(rig)
    app = make_app(rig.settings, rig.store, clock=Clock())
    assert snap_compare(app, terminal_size=size, run_before=_open)


@pytest.mark.asyncio
async def test_a_file_edited_after_proposing_is_shown_as_changed(rig: Rig) -> None:
    rec = _replacement(rig)
    rig.write("report.md", b"edited after proposing\n")
    app = make_app(rig.settings, rig.store, clock=Clock())
    async with app.run_test(size=(100, 30)) as pilot:
        await _open(pilot)
        shown = screen_text(app)
        assert "changed since proposed" in shown and "edited after" not in shown
        assert isinstance(app.screen, ContentScreen) and app.screen.record.id == rec.id
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, ContentScreen)


@pytest.mark.asyncio
async def test_n_and_p_step_through_a_sync_s_file_ops(rig: Rig) -> None:
    rig.write("a.txt", b"alpha\n")
    rig.write("b.txt", b"bravo\n")
    clock = ScanClock()
    clock.settle()
    svc = SyncService(rig.store, rig.settings, clock_ns=clock)
    plan = svc.make_plan(rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False,
                         allow_empty_side=False)  # fmt: skip
    propose_sync(svc, rig.ctx, plan_id=plan.id, decisions={}, reason="sync")
    app = make_app(rig.settings, rig.store, clock=Clock())
    async with app.run_test(size=(100, 30)) as pilot:
        await _open(pilot)
        assert "alpha" in screen_text(app)
        await pilot.press("n")
        assert await until(pilot, lambda: "bravo" in screen_text(app))
        await pilot.press("p")
        assert await until(pilot, lambda: "alpha" in screen_text(app))
